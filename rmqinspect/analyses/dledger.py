"""DLedger-only analyses: the entry rules ``verify`` adds in DLedger mode, and peers of one group compared.

``entry_problems``: what DLedger's own reader relies on and the RocketMQ record checks cannot see - header
rules (magic, size, pos = own position, bodySize + 48 = size), consecutive index, term never decreasing, the
index unit agreeing with its entry, blank records covering exactly the rest of their file, the record's
PHYSICALOFFSET = entry pos + 48 and TOTALSIZE = bodySize, stale index units past the last entry, and a
currterm behind the log.

``compare_peers``: members of one DLedger group side by side (``rmqinspect dledger-peers``): last index and
term per peer, the common prefix, the first index where they differ and how, and what a new leader (the peer
DLedger's vote would elect: highest last term, then highest last index) would make each follower truncate.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import numpy as np

from ..formats.commitlog import PHYSICAL_OFFSET_POSITION
from ..formats.dledger import BODY_OFFSET, INDEX_UNIT_SIZE
from ..store import Store
from ..store.dledger import DLedgerLog
from ..store.walk.entries import Entry, entry_events
from ..store.walk.kinds import Damage, DamageKind, EntryKind

_ENTRY_DTYPE = np.dtype([("index", np.int64), ("term", np.int64), ("pos", np.int64), ("size", np.int64),
                         ("crc", np.int64), ("file", np.int64), ("position", np.int64)])


def entry_problems(log: DLedgerLog, counts: dict[str, int] | None = None) -> Iterator[Damage]:
    """Every DLedger entry rule broken in the member's data and index files, in file order; ``counts`` (when
    given) receives the number of entries checked under ``dledger_entries``."""
    files = log.data_files
    last: Entry | None = None
    ended_in: str | None = None
    stopped = False  # a header DLedger rejects: what follows is not its log
    for f in files:
        evs = list(entry_events(f))
        if ended_in is not None and any(ev.kind == EntryKind.ENTRY for ev in evs):
            first = next(ev for ev in evs if ev.kind == EntryKind.ENTRY)
            yield Damage(DamageKind.DLEDGER_ENTRY, first.offset, f.end, f.path, first.position,
                               f"entries after the end of the data in {ended_in}: DLedger's recovery never "
                               "reaches them")
        buf = f.buffer
        for ev in evs:
            if ev.kind == EntryKind.BAD:
                stopped = True
                yield Damage(DamageKind.DLEDGER_ENTRY, ev.offset, f.end, f.path, ev.position,
                                   f"{ev.reason}; DLedger's recovery stops here")
            elif ev.kind == EntryKind.BLANK:
                left = f.size - ev.position
                if ev.size != left:
                    yield Damage(DamageKind.DLEDGER_BLANK, ev.offset, f.end, f.path, ev.position,
                                       f"blank record declares {ev.size} bytes, {left} are left in the file")
            elif ev.kind == EntryKind.FILE_END:
                yield Damage(DamageKind.DLEDGER_ENTRY, ev.offset, ev.offset, f.path, ev.position,
                                   "the file ends without a blank record (an entry always leaves 8 bytes)")
            elif ev.kind == EntryKind.END:
                pass  # where the data stops (checked below: nothing may follow in later files)
            else:
                e = ev.entry
                assert e is not None
                if counts is not None:
                    counts["dledger_entries"] = counts.get("dledger_entries", 0) + 1
                if last is not None and e.index != last.index + 1:
                    yield Damage(DamageKind.DLEDGER_INDEX, e.offset, e.end, f.path, e.position,
                                       f"entry index {e.index} after {last.index} (not consecutive)")
                if last is not None and e.term < last.term:
                    yield Damage(DamageKind.DLEDGER_TERM, e.offset, e.end, f.path, e.position,
                                       f"entry term {e.term} < previous entry's term {last.term}")
                u = log.index.unit(e.index)
                if u is None:
                    yield Damage(DamageKind.DLEDGER_INDEX_UNIT, e.offset, e.end, f.path, e.position,
                                       f"no index unit for entry {e.index} (index files too short)")
                elif (u.magic, u.pos, u.size, u.index, u.term) != (e.magic, e.offset, e.size, e.index, e.term):
                    yield Damage(DamageKind.DLEDGER_INDEX_UNIT, e.offset, e.end, f.path, e.position,
                                       f"index unit (magic {u.magic}, pos {u.pos}, size {u.size}, index {u.index}, "
                                       f"term {u.term}) does not match the entry (magic {e.magic}, pos {e.offset}, "
                                       f"size {e.size}, index {e.index}, term {e.term}); DLedger rewrites the index "
                                       "from here on recovery")
                m = e.position + BODY_OFFSET
                if e.body_size >= PHYSICAL_OFFSET_POSITION + 8:
                    total = int.from_bytes(buf[m:m + 4], "big", signed=True)
                    phys = int.from_bytes(buf[m + PHYSICAL_OFFSET_POSITION:m + PHYSICAL_OFFSET_POSITION + 8], "big",
                                          signed=True)
                    if total != e.body_size:
                        yield Damage(DamageKind.DLEDGER_RECORD, e.physical_offset, e.end, f.path, m,
                                           f"record TOTALSIZE {total} != entry bodySize {e.body_size}")
                    if phys != e.physical_offset:
                        yield Damage(DamageKind.DLEDGER_RECORD, e.physical_offset, e.end, f.path, m,
                                           f"record PHYSICALOFFSET {phys} != entry pos + 48 = {e.physical_offset}")
                last = e
        if ended_in is None and evs and evs[-1].kind != EntryKind.BLANK:
            ended_in = f.name
    if last is not None and not stopped:
        u = log.index.unit(last.index + 1)
        if u is not None and (u.magic or u.size or u.pos):
            at = (last.index + 1) * INDEX_UNIT_SIZE
            yield Damage(DamageKind.DLEDGER_INDEX_UNIT, at, at + INDEX_UNIT_SIZE, log.member.index_dir, at,
                               f"index unit after the last entry {last.index} is not zero (index {u.index}, term "
                               f"{u.term}): left from a longer log; recovery truncates it")
        ct = log.currterm
        if ct.curr_term is not None and ct.curr_term < last.term:
            yield Damage(DamageKind.DLEDGER_TERM, last.offset, last.end, log.member.currterm_path, None,
                               f"currterm {ct.curr_term} < the last entry's term {last.term}")


# --- peers --------------------------------------------------------------------------------------------------


@dataclass
class PeerState:
    label: str
    root: str
    self_id: str
    entries: int
    first_index: int | None
    last_index: int | None
    last_term: int | None
    data_end: int
    committed_index: int | None  # checkpoint
    curr_term: int | None
    vote_leader: str | None
    walk_stop: str
    role: str = ""  # "leader" (would be elected) | "follower"
    matches_leader_to: int | None = None  # last index equal to the new leader's entry
    would_truncate: int = 0  # entries the new leader makes this follower drop
    truncate_from: int | None = None  # first of them
    would_receive: int = 0  # entries the leader then pushes

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Divergence:
    index: int
    how: str  # "term" | "pos" | "size" | "bytes" | "missing"
    detail: str
    per_peer: dict[str, dict | None] = field(default_factory=dict)


@dataclass
class PeersReport:
    peers: list[PeerState]
    common_prefix_last_index: int | None  # last index every peer holds identically (None: not even entry 0)
    first_divergent_index: int | None
    divergence: Divergence | None
    leader: str | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"peers": [p.to_dict() for p in self.peers], "common_prefix_last_index": self.common_prefix_last_index,
                "first_divergent_index": self.first_divergent_index,
                "divergence": asdict(self.divergence) if self.divergence else None, "leader": self.leader,
                "notes": self.notes}


def _entry_table(log: DLedgerLog) -> tuple[np.ndarray, str]:
    """(index, term, pos, size, crc32 of the entry, file number, position) of every entry from file 0 as
    DLedger reads them, and why the walk stopped."""
    rows = []
    stop = ""
    files = {id(f): n for n, f in enumerate(log.data_files)}
    for ev in log.events():
        if ev.kind == EntryKind.ENTRY and ev.entry is not None:
            e = ev.entry
            buf = e.file.buffer
            rows.append((e.index, e.term, e.offset, e.size, zlib.crc32(buf[e.position:e.position + e.size]),
                         files[id(e.file)], e.position))
        elif ev.kind != EntryKind.BLANK:
            stop = f"{ev.kind} at {ev.offset}" + (f": {ev.reason}" if ev.reason else "")
    return np.array(rows, dtype=_ENTRY_DTYPE), stop


def _same_entry(a: tuple[DLedgerLog, np.void], b: tuple[DLedgerLog, np.void]) -> bool:
    (la, ea), (lb, eb) = a, b
    if (ea["term"], ea["pos"], ea["size"], ea["crc"]) != (eb["term"], eb["pos"], eb["size"], eb["crc"]):
        return False
    fa, fb = la.data_files[int(ea["file"])], lb.data_files[int(eb["file"])]
    pa, pb, n = int(ea["position"]), int(eb["position"]), int(ea["size"])
    return bytes(fa.buffer[pa:pa + n]) == bytes(fb.buffer[pb:pb + n])


def compare_peers(stores: list[Store], labels: list[str] | None = None) -> PeersReport:
    """The members of one group side by side (see the module text). Each store must be in DLedger mode."""
    logs: list[DLedgerLog] = []
    for st in stores:
        if st.dledger is None:
            from ..errors import StoreNotFoundError

            raise StoreNotFoundError("not a DLedger-mode store (no dledger-<selfId>/data)", st.root)
        logs.append(st.dledger)
    labels = labels or [f"{lg.self_id}@{st.root}" for lg, st in zip(logs, stores)]
    notes: list[str] = []
    ids = [lg.self_id for lg in logs]
    if len(set(ids)) != len(ids):
        notes.append(f"self ids repeat ({', '.join(ids)}): copies of one member, not peers?")
    tables, peers = [], []
    for lg, st, label in zip(logs, stores, labels):
        t, stop = _entry_table(lg)
        tables.append(t)
        cp, ct = lg.checkpoint, lg.currterm
        peers.append(PeerState(label, st.root, lg.self_id, len(t), int(t["index"][0]) if len(t) else None,
                               int(t["index"][-1]) if len(t) else None, int(t["term"][-1]) if len(t) else None,
                               int(t["pos"][-1] + t["size"][-1]) if len(t) else 0, cp.committed_index,
                               ct.curr_term, ct.vote_leader, stop))
    # entries by index (a peer whose indexes are not consecutive is compared by position in its log)
    first = [int(t["index"][0]) if len(t) else None for t in tables]
    if len({f for f in first if f is not None}) > 1:
        notes.append(f"peers start at different indexes {first} (old entries deleted on some): compared from "
                     f"{max(f for f in first if f is not None)}")
    begin = max((f for f in first if f is not None), default=0)
    ends = [int(t["index"][-1]) if len(t) else -1 for t in tables]

    def entry(k: int, i: int):
        t = tables[k]
        if not len(t):
            return None
        j = i - int(t["index"][0])
        if 0 <= j < len(t) and int(t["index"][j]) == i:
            return t[j]
        return None

    prefix, div = begin - 1, None
    i = begin
    top = max(ends)
    while i <= top:
        rows = [entry(k, i) for k in range(len(tables))]
        ref = rows[0]
        same = ref is not None and all(r is not None and _same_entry((logs[0], ref), (logs[k], r))
                                       for k, r in enumerate(rows) if k)
        if not same:
            div = _describe(i, rows, labels, logs)
            break
        prefix = i
        i += 1
    # the peer DLedger's vote would elect: the highest (last term, last index)
    order = sorted(range(len(peers)), key=lambda k: (peers[k].last_term if peers[k].last_term is not None else -1,
                                                     ends[k]), reverse=True)
    lead = order[0] if peers else None
    if lead is not None:
        peers[lead].role = "leader"
        for k, p in enumerate(peers):
            if k == lead:
                continue
            p.role = "follower"
            match = begin - 1
            for i in range(begin, min(ends[k], ends[lead]) + 1):
                a, b = entry(lead, i), entry(k, i)
                if a is None or b is None or not _same_entry((logs[lead], a), (logs[k], b)):
                    break
                match = i
            p.matches_leader_to = match if match >= begin else None
            p.would_truncate = max(ends[k] - match, 0)
            p.truncate_from = match + 1 if p.would_truncate else None
            p.would_receive = max(ends[lead] - match, 0)
    return PeersReport(peers, prefix if prefix >= begin else None, div.index if div else None, div,
                       labels[lead] if lead is not None else None, notes)


def _describe(i: int, rows, labels, logs) -> Divergence:
    per: dict[str, dict | None] = {}
    for lab, r in zip(labels, rows):
        per[lab] = None if r is None else {"term": int(r["term"]), "pos": int(r["pos"]), "size": int(r["size"]),
                                           "crc32": int(r["crc"])}
    present = [r for r in rows if r is not None]
    if len(present) < len(rows):
        missing = [lab for lab, r in zip(labels, rows) if r is None]
        how, detail = "missing", f"entry {i} is missing on {', '.join(missing)}"
    elif len({int(r["term"]) for r in present}) > 1:
        how, detail = "term", f"entry {i} has terms {sorted({int(r['term']) for r in present})}"
    elif len({int(r["pos"]) for r in present}) > 1:
        how, detail = "pos", f"entry {i} is at positions {sorted({int(r['pos']) for r in present})}"
    elif len({int(r["size"]) for r in present}) > 1:
        how, detail = "size", f"entry {i} has sizes {sorted({int(r['size']) for r in present})}"
    else:
        how, detail = "bytes", f"entry {i}: same term, pos and size, different bytes"
    return Divergence(i, how, detail, per)


__all__ = ["entry_problems", "PeerState", "Divergence", "PeersReport", "compare_peers"]
