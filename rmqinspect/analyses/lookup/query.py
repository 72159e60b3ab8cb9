"""The broker's key look-up over the IndexFiles (FORMATS.md §5.5) and the client-side collision check.

``IndexService.queryOffset`` and ``DefaultMessageStore.queryMessage`` are reproduced step for step so the
offsets and their order equal what ``mqadmin queryMsgByKey`` would get from that broker. Everything is a pure
function over the store readers returning plain dataclasses; rendering lives in ``cli/lookup.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import RmqInspectError
from ...formats.javahash import build_index_key, index_key_hash

if TYPE_CHECKING:
    from ...store.broker_conf import BrokerConf
    from ...store.indexfile import FileLookup, IndexFile

# The index and consume-queue readers (numpy, construct) are imported where a look-up first needs them:
# decoding a message id (msgid without --store) reads no file and should start as fast as --help.

JAVA_LONG_MAX = (1 << 63) - 1
DEFAULT_MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch
QUERY_MESSAGE_ROUNDS = 3  # DefaultMessageStore.queryMessage retries


@dataclass
class IndexFileInfo:
    name: str
    path: str
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 0
    slots: int = 0
    max_items: int = 0
    size: int = 0
    truncated: bool = False
    # {value, source: flag|config|inferred|ambiguous, candidates, detail} (store.indexfile.IndexGeometry)
    geometry: dict = field(default_factory=dict)
    # IndexService.load(lastExitOK=false): endTimestamp > checkpoint.indexMsgTimestamp -> destroyed at restart
    dropped_on_abnormal_restart: bool = False
    error: str = ""


class IndexService:
    """The index files of a store, in the broker's load order (lexical order of the 17-digit names)."""

    def __init__(self, index_dir: str, slots: int | None = None, max_items: int | None = None,
                 index_msg_timestamp: int | None = None, abort_present: bool = False, conf: BrokerConf | None = None):
        from ...store.indexfile import IndexFile, IndexGeometryError, prove_geometry_of

        self.index_dir = index_dir
        self.abort_present = abort_present
        self.index_msg_timestamp = index_msg_timestamp
        self.files: list[IndexFile] = []
        self.infos: list[IndexFileInfo] = []
        names = sorted(os.listdir(index_dir)) if os.path.isdir(index_dir) else []
        for name in names:
            path = os.path.join(index_dir, name)
            if not os.path.isfile(path):
                continue
            info = IndexFileInfo(name, path, size=os.path.getsize(path))
            try:
                f = IndexFile(path, slots, max_items, conf)
            except IndexGeometryError as e:
                # not read rather than read wrongly: the error names the flag / broker.conf key that settles it
                info.error = str(e)
                info.geometry = prove_geometry_of(path).to_dict()
                self.infos.append(info)
                continue
            except RmqInspectError as e:
                info.error = str(e)
                self.infos.append(info)
                continue
            h = f.header
            info.begin_timestamp, info.end_timestamp = h.begin_timestamp, h.end_timestamp
            info.begin_phy_offset, info.end_phy_offset = h.begin_phy_offset, h.end_phy_offset
            info.hash_slot_count, info.index_count = h.hash_slot_count, h.index_count
            info.slots, info.max_items, info.truncated = f.slots, f.max_items, f.truncated
            info.geometry = f.geometry.to_dict()
            if index_msg_timestamp is not None:
                info.dropped_on_abnormal_restart = h.end_timestamp > index_msg_timestamp
            if f.truncated:
                info.error = f"truncated: {f.mapped.size} of {f.expected_size} bytes"
            self.files.append(f)
            self.infos.append(info)

    @classmethod
    def for_store(cls, store, index_dir: str | None = None, slots: int | None = None,
                  max_items: int | None = None) -> IndexService:
        cp = None
        try:
            cp = store.checkpoint
        except RmqInspectError:
            cp = None
        return cls(index_dir or store.layout.index_dir, slots, max_items,
                   cp.index_msg_timestamp if cp else None, store.abort_present, store.conf)

    def geometry(self) -> dict:
        """The index geometry in one answer: the files' common {value, source, candidates, detail}, or
        ``source="mixed"`` with the distinct ones when files disagree (a broker restarted with a new config)."""
        distinct: list[dict] = []
        for i in self.infos:
            if i.geometry and i.geometry not in distinct:
                distinct.append(i.geometry)
        if len(distinct) == 1:
            return distinct[0]
        if not distinct:
            return {"value": None, "source": "none", "candidates": [], "detail": "no index file"}
        if any(d["source"] == "ambiguous" for d in distinct):
            amb = next(d for d in distinct if d["source"] == "ambiguous")
            return {**amb, "per_file": distinct}
        return {"value": None, "source": "mixed", "candidates": [d["value"] for d in distinct],
                "detail": "index files of different geometries", "per_file": distinct}

    def info_for(self, name: str) -> IndexFileInfo | None:
        for i in self.infos:
            if i.name == name:
                return i
        return None

    def close(self) -> None:
        for f in self.files:
            f.close()


@dataclass
class FileWalk:
    """One index file as IndexService.queryOffset saw it (newest first)."""

    file: str
    consulted: bool
    why: str
    lookup: FileLookup | None = None


@dataclass
class QueryOffsetResult:
    """IndexService.queryOffset: offsets in hash-chain order, newest file first."""

    key_string: str
    key_hash: int
    max_num: int
    begin: int
    end: int
    offsets: list[int] = field(default_factory=list)
    offset_files: list[str] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0
    walks: list[FileWalk] = field(default_factory=list)


def query_offset(svc: IndexService, topic: str, key: str, max_num: int, begin: int, end: int,
                 max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH, explain: bool = False) -> QueryOffsetResult:
    """IndexService.queryOffset."""
    key_string = build_index_key(topic, key)
    max_num = min(max_num, max_msgs_num_batch)
    res = QueryOffsetResult(key_string, index_key_hash(key_string), max_num, begin, end)
    files = svc.files
    for i in range(len(files), 0, -1):
        f = files[i - 1]
        if i == len(files):
            res.index_last_update_timestamp = f.header.end_timestamp
            res.index_last_update_phy_offset = f.header.end_phy_offset
        if f.is_time_matched(begin, end):
            lk = f.select_phy_offset(key_string, max_num, begin, end, collected=len(res.offsets), explain=explain)
            res.offsets.extend(lk.offsets)
            res.offset_files.extend([f.name] * len(lk.offsets))
            res.walks.append(FileWalk(f.name, True, "time range overlaps the query", lk))
        else:
            res.walks.append(FileWalk(f.name, False, f"time range [{f.header.begin_timestamp}, "
                                                     f"{f.header.end_timestamp}] does not overlap the query"))
        if f.header.begin_timestamp < begin:
            res.walks[-1].why += "; stop: file begins before the query's begin"
            break
        if len(res.offsets) >= max_num:
            res.walks[-1].why += f"; stop: {max_num} results collected"
            break
    return res


@dataclass
class Hit:
    """One offset returned by queryMessage, checked the way a client must (the broker compares only hashes)."""

    physical_offset: int
    index_file: str
    has_key: bool | None  # None: the record could not be read
    topic: str | None = None
    keys: list[str] = field(default_factory=list)
    uniq_key: str | None = None
    store_timestamp: int | None = None
    from_dropped_file: bool = False
    problem: str = ""
    message: object = None  # store.message.Message
    # at or past where the broker's recovery truncates the commit log: gone once it restarts on this directory
    # (None: the recovery was not modelled, ``mark_fates`` had no view)
    beyond_truncation: bool | None = None
    # dispatched again by the restart and indexed again (IndexService.buildIndex past the surviving endPhyOffset)
    redispatched: bool = False
    # not on disk in any index file: an item the restart's buildIndex puts (``restore_as_recovered``)
    reindexed: bool = False

    @property
    def fate(self) -> str | None:
        """What becomes of this hit once the broker has recovered this directory: ``survives``,
        ``beyond_truncation`` (its record is cut), ``redispatched`` (its index file is deleted but the
        restart indexes the record again), ``from_dropped_index_file`` (deleted and not re-indexed) or
        ``reindexed`` (no index file holds it yet: the restart indexes it); None when the recovery was not
        modelled."""
        if self.reindexed:
            return "reindexed"
        if self.beyond_truncation is None:
            return None
        if self.beyond_truncation:
            return "beyond_truncation"
        if self.from_dropped_file:
            return "redispatched" if self.redispatched else "from_dropped_index_file"
        return "survives"


@dataclass
class QueryMessageResult:
    topic: str
    key: str
    max_num: int
    begin: int
    end: int
    key_string: str
    key_hash: int
    phy_offsets: list[int] = field(default_factory=list)  # what DefaultMessageStore.queryMessage returns
    raw: list[int] = field(default_factory=list)  # IndexService.queryOffset of the first round, chain order
    index_last_update_timestamp: int = 0
    index_last_update_phy_offset: int = 0
    rounds: list[QueryOffsetResult] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unreadable: list[tuple[int, int, str]] = field(default_factory=list)  # (round, offset, index file) skipped

    @property
    def verified(self) -> list[Hit]:
        return [h for h in self.hits if h.has_key]

    @property
    def collisions(self) -> list[Hit]:
        return [h for h in self.hits if h.has_key is False]


def message_has_key(msg, topic: str, key: str) -> bool:
    """The client-side check: same topic, and the key is a KEYS token or the UNIQ_KEY."""
    return msg.topic == topic and (key in msg.keys or msg.uniq_key == key)


def query_message(svc: IndexService, commitlog, topic: str, key: str, max_num: int, begin: int = 0,
                  end: int = JAVA_LONG_MAX, max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH,
                  explain: bool = False) -> QueryMessageResult:
    """DefaultMessageStore.queryMessage: up to 3 rounds; each sorts the offsets ascending and keeps those whose
    record can be read; a round that returns nothing readable moves ``end`` back to the store time of its
    first hit and tries again."""
    key_string = build_index_key(topic, key)
    out = QueryMessageResult(topic, key, min(max_num, max_msgs_num_batch), begin, end, key_string,
                             index_key_hash(key_string))
    last_query_time = end
    dropped = {i.name for i in svc.infos if i.dropped_on_abnormal_restart} if svc.abort_present else set()
    for rnd in range(QUERY_MESSAGE_ROUNDS):
        qr = query_offset(svc, topic, key, max_num, begin, last_query_time, max_msgs_num_batch, explain)
        out.rounds.append(qr)
        if rnd == 0:
            out.raw = list(qr.offsets)
        if not qr.offsets:
            break
        pairs = sorted(zip(qr.offsets, qr.offset_files), key=lambda p: p[0])  # Collections.sort: stable
        out.index_last_update_timestamp = qr.index_last_update_timestamp
        out.index_last_update_phy_offset = qr.index_last_update_phy_offset
        for m, (off, fname) in enumerate(pairs):
            try:
                msg = commitlog.read_message(off)
            except RmqInspectError as e:
                # lookMessageByOffset failed: the broker logs and skips this offset
                out.notes.append(f"round {rnd + 1}: offset {off} (from {fname}) is not readable: {e}")
                out.unreadable.append((rnd + 1, off, fname))
                continue
            if m == 0:
                last_query_time = msg.store_timestamp
            out.phy_offsets.append(off)
            out.hits.append(Hit(off, fname, message_has_key(msg, topic, key), msg.topic, msg.keys, msg.uniq_key,
                                msg.store_timestamp, fname in dropped, message=msg))
        if out.phy_offsets:
            break
        if last_query_time < begin:
            break
        if rnd + 1 < QUERY_MESSAGE_ROUNDS:
            out.notes.append(f"round {rnd + 1} returned nothing readable; retrying with end = {last_query_time}")
    return out
