"""Answers from RIP-82's RocksDB (5.4.0+, ``store.rip82``), each checked against the commit log: key look-ups
from the index column family, pending timers from the timer one, open transactions from the trans one.

Modelled from the change descriptions (VERSIONS.md §1.6), not checked against a broker: every answer says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import RmqInspectError
from ..formats.rip82 import INDEX_KEY_TYPE, INDEX_UNIQUE_TYPE
from ..store import Store
from ..store.rip82 import RIP82Store, rip82_dir

MODELLED = "RocksDBMessageStore/ (RIP-82, 5.4.0+): modelled from the change descriptions, not checked against a broker"


@dataclass
class RocksHit:
    physical_offset: int
    store_time: int
    kind: str  # K (a KEYS token) | U (the UNIQ_KEY)
    uniq_key: str
    record: str  # what the commit log holds there: "message" or why not
    has_key: bool  # the record carries the key under the topic


@dataclass
class RocksIndexAnswer:
    topic: str
    key: str
    hits: list[RocksHit] = field(default_factory=list)
    malformed: int = 0
    note: str = MODELLED

    @property
    def phy_offsets(self) -> list[int]:
        return [h.physical_offset for h in self.hits if h.has_key]

    def to_dict(self) -> dict:
        return {"source": "rip82", "topic": self.topic, "key": self.key, "phy_offsets": self.phy_offsets,
                "hits": [asdict(h) for h in self.hits], "malformed": self.malformed, "note": self.note}


def _check(store: Store, offset: int, topic: str, key: str) -> tuple[str, bool]:
    try:
        m = store.commitlog.read_message(offset)
    except RmqInspectError as e:
        return str(e.message if hasattr(e, "message") else e), False
    keys = (m.properties.get("KEYS") or "").split(" ")
    return "message", m.topic == topic and (key in keys or m.properties.get("UNIQ_KEY") == key)


def query_rip82_index(store: Store, topic: str, key: str, begin: int = 0, end: int = (1 << 63) - 1,
                      max_num: int = 64) -> RocksIndexAnswer | None:
    """The index column family's records of ``topic`` whose key (K) or UNIQ_KEY (U) is ``key``, stored in
    [begin, end], oldest first, at most ``max_num`` that carry the key; each checked against its record. None
    when the store has no RIP-82 database."""
    path = rip82_dir(store.layout.root)
    if path is None:
        return None
    ans = RocksIndexAnswer(topic, key)
    seen: set[int] = set()
    with RIP82Store(path) as db:
        found = sorted((r for r in db.index_records() if r.topic == topic and begin <= r.store_time <= end and
                        ((r.kind == INDEX_KEY_TYPE and r.value == key) or
                         (r.kind == INDEX_UNIQUE_TYPE and r.uniq_key == key))),
                       key=lambda r: (r.store_time, r.offset_py))
        ans.malformed = sum(db.malformed.values())
    for r in found:
        if r.offset_py in seen:
            continue
        seen.add(r.offset_py)
        what, ok = _check(store, r.offset_py, topic, key)
        ans.hits.append(RocksHit(r.offset_py, r.store_time, r.kind, r.uniq_key, what, ok))
        if len(ans.phy_offsets) >= max_num:
            break
    return ans


@dataclass
class RocksTimer:
    delay_time: int
    uniq_key: str
    offset_py: int
    size_py: int
    record: str
    matches: bool  # the record there has that size and UNIQ_KEY


def pending_rip82_timers(store: Store) -> tuple[list[RocksTimer], str] | None:
    """The timer column family's rows (pending timers), each checked against the commit log."""
    path = rip82_dir(store.layout.root)
    if path is None:
        return None
    out = []
    with RIP82Store(path) as db:
        rows = list(db.timer_records())
    for t in rows:
        try:
            m = store.commitlog.read_message(t.offset_py)
            out.append(RocksTimer(t.delay_time, t.uniq_key, t.offset_py, t.size_py, "message",
                                  m.total_size == t.size_py and m.properties.get("UNIQ_KEY") == t.uniq_key))
        except RmqInspectError as e:
            out.append(RocksTimer(t.delay_time, t.uniq_key, t.offset_py, t.size_py, str(e), False))
    return out, MODELLED


@dataclass
class RocksTransaction:
    offset_py: int
    topic: str
    uniq_key: str
    check_times: int
    size_py: int
    record: str
    matches: bool  # a half message of that size and UNIQ_KEY is there


def open_rip82_transactions(store: Store) -> tuple[list[RocksTransaction], str] | None:
    """The trans column family's rows: half messages no op message has deleted yet, checked against the log."""
    path = rip82_dir(store.layout.root)
    if path is None:
        return None
    out = []
    with RIP82Store(path) as db:
        rows = list(db.trans_records())
    for t in rows:
        try:
            m = store.commitlog.read_message(t.offset_py)
            out.append(RocksTransaction(t.offset_py, t.topic, t.uniq_key, t.check_times, t.size_py, "message",
                                        m.total_size == t.size_py and m.properties.get("UNIQ_KEY") == t.uniq_key))
        except RmqInspectError as e:
            out.append(RocksTransaction(t.offset_py, t.topic, t.uniq_key, t.check_times, t.size_py, str(e), False))
    return out, MODELLED


__all__ = ["MODELLED", "RocksHit", "RocksIndexAnswer", "RocksTimer", "RocksTransaction", "open_rip82_transactions",
           "pending_rip82_timers", "query_rip82_index"]
