"""The broker's key look-up over the IndexFiles (FORMATS.md §5.5), the client-side collision check, and the
"why can't I find it?" diagnosis.

``IndexService.queryOffset`` and ``DefaultMessageStore.queryMessage`` are reproduced step for step so the
offsets and their order equal what ``mqadmin queryMsgByKey`` would get from that broker. Everything is a pure
function over the store readers returning plain dataclasses; rendering lives in ``cli/lookup.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CorruptDataError, RmqInspectError
from ..formats.constants import PROPERTY_REAL_TOPIC, RMQ_SYS_SCHEDULE_TOPIC
from ..formats.javahash import build_index_key, index_key_hash
from ..formats.msgid import decode_offset_msg_id, decode_uniq_key

if TYPE_CHECKING:
    from ..store.broker_conf import BrokerConf
    from ..store.indexfile import FileLookup, IndexFile

# The index and consume-queue readers (numpy, construct) are imported where a look-up first needs them:
# decoding a message id (msgid without --store) reads no file and should start as fast as --help.

JAVA_LONG_MAX = (1 << 63) - 1
DEFAULT_MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch
QUERY_MESSAGE_ROUNDS = 3
MAX_LOCATED = 1000  # bounded memory for the fall-back scan  # DefaultMessageStore.queryMessage retries


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
        from ..store.indexfile import IndexFile, IndexGeometryError, prove_geometry_of

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


@dataclass(frozen=True)
class RecoveryView:
    """What a query needs of the restart model (``RecoveryPlan``): the truncation offset, the range the recovery
    dispatches again, every range the restart dispatches and the surviving index's endPhyOffset (what
    IndexService.buildIndex indexes again: ``recovery.index``)."""

    truncate_offset: int
    redispatch_first: int | None
    redispatch_last: int | None
    dispatched: tuple[tuple[int, int], ...] = ()
    index_end_phy_offset: int = 0
    index_begin_timestamp: int = 0

    def reindex_ranges(self) -> list[tuple[int, int]]:
        from .recovery.index import reindex_ranges

        return reindex_ranges(list(self.dispatched), self.index_end_phy_offset)

    def reindexes(self, offset: int) -> bool:
        return any(a <= offset < b for a, b in self.reindex_ranges())


_VIEWS: dict[tuple, RecoveryView] = {}  # per process: a key look-up loop pays for the recovery scan once
_VIEWS_MAX = 16


def _store_identity(store) -> tuple:
    """What the recovery's answer depends on, cheaply: every commit-log file's name, size and mtime, the abort
    file and the checkpoint (a store that changes between two look-ups is scanned again)."""
    def stamp(path: str):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    root = store.root
    files = tuple((f.name, f.size, stamp(f.path)) for f in store.commitlog.files)
    return (os.path.realpath(root), files, store.abort_present, stamp(os.path.join(root, "checkpoint")))


def recovery_view(store, cache: bool = True, version=None) -> RecoveryView:
    """Where the broker's recovery of this directory truncates the commit log (analyses.recovery, with the
    store's broker.conf for checkCRCOnRecover / messageIndexSafe): records at or past it are gone after a
    restart, whatever the index files on disk still say. ``version`` (a BrokerVersion): the release whose
    recovery rules apply (None: detected, ``recovery.version``).

    Only the truncation offset and the re-dispatch range are computed (the scan's records are not dispatched
    into queue models: neither depends on them), and the answer is kept per process for an unchanged store."""
    from ..store.broker_conf import configured
    from .recovery.small import small_recovery_scan

    crc, safe = configured(store.conf, "checkCRCOnRecover"), configured(store.conf, "messageIndexSafe")
    check_crc = crc.value if crc else True
    index_safe = safe.value if safe else False
    key = (_store_identity(store), check_crc, index_safe, version) if cache else None
    if key is not None and key in _VIEWS:
        return _VIEWS[key]
    scan = small_recovery_scan(store, check_crc, index_safe, version)
    view = _small_view(store, scan, version) if scan is not None else None
    if view is None:
        from .recovery.plan import RecoveryOptions, plan_recovery

        plan = plan_recovery(store, RecoveryOptions(check_crc=check_crc, index_safe=index_safe, with_salvage=False,
                                                    keep_redispatch=False, model_start=False, dispatch=False,
                                                    version=version))
        # DLedger mode: truncate_offset is the data end (a leader commits everything again, recovery.dledger)
        view = view_of_plan(plan)
    if key is not None:
        if len(_VIEWS) >= _VIEWS_MAX:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[key] = view
    return view


def view_of_plan(plan) -> RecoveryView:
    """The look-up's view of a ``RecoveryPlan`` (the one restart model)."""
    return RecoveryView(plan.truncate_offset, plan.redispatch_first, plan.redispatch_last,
                        tuple(plan.dispatched), plan.index_end_phy_offset, plan.index_begin_timestamp)


def _small_view(store, scan, version=None) -> RecoveryView | None:
    """The view from ``recovery.small``'s scan: what the restart dispatches is the scan's re-dispatch and start()'s
    reput from the queues' max physical offset (at least the commit log's min offset, at most T: queues past T are
    cut back to it); None when the queues are too large to read here (the plan answers)."""
    from .recovery.index import dispatched_ranges, index_after_load
    from .recovery.small import small_queue_max_phys

    t = scan.truncate_offset
    normal = not store.abort_present
    if normal:
        max_phy = small_queue_max_phys(store, version)
        if max_phy is None:
            return None
        reput_from = min(max(store.commitlog.min_offset, max_phy, scan.last_dispatched_end), t)
    else:
        reput_from = max(store.commitlog.min_offset, scan.last_dispatched_end)
    try:
        cp = store.checkpoint
    except RmqInspectError:
        cp = None
    ia = index_after_load(store.layout.index_dir, normal, cp.index_msg_timestamp if cp else None)
    return RecoveryView(t, scan.redispatch_first, scan.redispatch_last,
                        tuple(dispatched_ranges(scan.redispatch_first, scan.redispatch_last, reput_from, t)),
                        ia.end_phy_offset, ia.begin_timestamp)


def mark_fates(result: QueryMessageResult, view: RecoveryView | None) -> None:
    """Each hit's fate after restart (``Hit.fate``)."""
    if view is None:
        return
    for h in result.hits:
        h.beyond_truncation = h.physical_offset >= view.truncate_offset
        h.redispatched = view.reindexes(h.physical_offset)


FATES_AFTER_RESTART = ("survives", "redispatched", "reindexed")


def reindexed_hits(commitlog, view: RecoveryView, topic: str, key: str, begin: int = 0,
                   end: int = JAVA_LONG_MAX) -> list[Hit]:
    """The index items the restart's IndexService.buildIndex puts whose keyHash is the query's (the broker
    compares hashes only: collisions included), one per item, in put order. An item's time is read back in
    whole seconds after its file's beginTimestamp (``recovery.index.item_time``); the model assumes the last
    index file does not fill up while the restart indexes (a new file would start its own clock).

    The records are walked in bulk (``CommitLog.walk`` runs, every record's key hashes from the rebuild
    dispatcher's ``dispatch_fields``); only the matching ones are decoded."""
    import numpy as np

    from ..store.commitlog import RecordRun
    from .dispatcher import dispatch_fields
    from .recovery.index import item_time

    key_hash = index_key_hash(build_index_key(topic, key))
    out: list[Hit] = []
    base = view.index_begin_timestamp
    for a, b in view.reindex_ranges():
        for ev in commitlog.walk(a, view.truncate_offset, check_crc=False, accept_v2=True, stop_at_end=True):
            if type(ev) is not RecordRun:
                continue
            recs = ev.records
            start = ev.file.start
            pos = recs["position"] + start
            if int(pos[0]) >= b:
                break
            # buildIndex: every dispatched record but ROLLBACK ones (TRANSACTION_ROLLBACK_TYPE = 3 << 2)
            sel = np.flatnonzero((pos < b) & ((recs["sys_flag"] & 0xC) != 0xC))
            if not sel.size:
                continue
            sub = ev if sel.size == len(recs) else ev[sel]
            fields, keyh, _ = dispatch_fields(sub.file.buffer, sub.rows, want_keys=True)
            counts = fields[:, 2]
            if base <= 0:
                have = np.flatnonzero(counts > 0)
                if have.size:  # the first put of an empty file sets its beginTimestamp
                    base = int(sub.records["store_timestamp"][have[0]])
            items = np.flatnonzero(keyh == key_hash)
            if not items.size:
                continue
            rec_of = np.repeat(np.arange(len(counts)), counts)[items]
            for j in rec_of.tolist():
                off = int(sub.records["position"][j]) + start
                time_read, _ = item_time(base, int(sub.records["store_timestamp"][j]))
                if not (begin <= time_read <= end):
                    continue
                msg = commitlog.read_message(off)
                h = Hit(off, "(restart)", message_has_key(msg, topic, key), msg.topic, msg.keys, msg.uniq_key,
                        msg.store_timestamp, message=msg, beyond_truncation=False)
                h.reindexed = True
                out.append(h)
    return out


def restore_as_recovered(result: QueryMessageResult, commitlog=None, view: RecoveryView | None = None) -> None:
    """Keep only what the broker returns after recovering the directory (``mark_fates`` first): hits of the kept
    index files before the truncation, and, with ``commitlog`` and ``view``, the items the restart indexes again
    (``reindexed_hits``; a hit of a deleted index file the restart re-indexes comes back as its item). The
    newest ``max_num`` items are kept, in ascending offset order as queryMessage sorts them."""
    gone = {h.physical_offset for h in result.hits if h.fate not in FATES_AFTER_RESTART}
    again: list[Hit] = []
    if commitlog is not None and view is not None:
        again = reindexed_hits(commitlog, view, result.topic, result.key, result.begin, result.end)
        back = {h.physical_offset for h in result.hits if h.fate == "redispatched"}
        for h in again:
            if h.physical_offset in back:
                h.reindexed = False
                h.from_dropped_file = True
                h.redispatched = True
        gone |= back
    dropped = [h for h in result.hits if h.physical_offset in gone]
    kept = [h for h in result.hits if h.physical_offset not in gone]
    if again:
        newest_first = sorted(again, key=lambda h: -h.physical_offset) + sorted(kept, key=lambda h: -h.physical_offset)
        kept = sorted(newest_first[:result.max_num], key=lambda h: h.physical_offset)
    result.hits = kept
    result.phy_offsets = [h.physical_offset for h in kept]
    lost = len({h.physical_offset for h in dropped} - {h.physical_offset for h in again})
    if lost:
        result.notes.append(f"as recovered: {lost} hit(s) dropped (beyond the truncation offset or from a "
                            "deleted index file and not re-dispatched)")
    added = sum(1 for h in kept if h.reindexed)
    if added:
        result.notes.append(f"as recovered: {added} hit(s) the restart indexes (records past the surviving index's "
                            f"endPhyOffset {view.index_end_phy_offset} that the restart dispatches)"  # type: ignore[union-attr]
                            )


def query_as_recovered(svc: IndexService, store, view: RecoveryView, topic: str, key: str, max_num: int,
                       begin: int = 0, end: int = JAVA_LONG_MAX,
                       max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH) -> QueryMessageResult:
    """DefaultMessageStore.queryMessage of the broker once it has recovered this directory."""
    q = query_message(svc, store.commitlog, topic, key, max_num, begin, end, max_msgs_num_batch)
    mark_fates(q, view)
    restore_as_recovered(q, store.commitlog, view)
    return q


# --- message ids ------------------------------------------------------------------------------------------

@dataclass
class MsgIdReport:
    """``find_msg_id``: both readings of a message id, and what the store holds for each."""

    msg_id: str
    interpretations: list[dict] = field(default_factory=list)  # decode_msg_id
    as_offset_msg_id: dict | None = None  # the record at the offset, or {"error": ...}
    as_uniq_key: dict | None = None  # {"topics_searched": [...], "hits": [...]} through the index

    @property
    def found(self) -> bool:
        """A record carries the id: the one at the offset matches, or the index finds the UNIQ_KEY."""
        a, u = self.as_offset_msg_id or {}, self.as_uniq_key or {}
        return bool(a.get("matches")) or bool(u.get("hits"))

    def to_dict(self) -> dict:
        d = {"msg_id": self.msg_id, "interpretations": self.interpretations}
        if self.as_offset_msg_id is not None:
            d["as_offset_msg_id"] = self.as_offset_msg_id
        if self.as_uniq_key is not None:
            d["as_uniq_key"] = self.as_uniq_key
        return d


def decode_msg_id(msg_id: str) -> list[dict]:
    """Both readings of a 32/56-hex id: offsetMsgId (store host + physical offset) and UNIQ_KEY (client id)."""
    out = []
    try:
        o = decode_offset_msg_id(msg_id)
        # a port is 16 bits and offsets stay far below 2**50: a UNIQ_KEY read this way gives absurd values
        out.append({"kind": "offsetMsgId", "store_host": o.store_host, "physical_offset": o.physical_offset,
                    "plausible": 0 < o.store_port <= 65535 and 0 <= o.physical_offset < 1 << 50})
    except ValueError as e:
        out.append({"kind": "offsetMsgId", "error": str(e)})
    try:
        u = decode_uniq_key(msg_id)
        out.append({"kind": "UNIQ_KEY", "ip": u.ip, "pid": u.pid, "class_loader_hash": u.class_loader_hash,
                    "millis_since_month_start": u.millis_since_month_start, "counter": u.counter,
                    # an offsetMsgId read this way has pid 0 (the high half of the port int)
                    "plausible": u.pid != 0 and u.millis_since_month_start < 31 * 86400 * 1000})
    except ValueError as e:
        out.append({"kind": "UNIQ_KEY", "error": str(e)})
    return out


def uniq_key_timestamp(uniq: str, born_timestamp: int) -> dict:
    """The client id stores milliseconds since the start of the producer's month (local time); with the
    record's born time we can tell which month start that was."""
    u = decode_uniq_key(uniq)
    return {"millis_since_month_start": u.millis_since_month_start,
            "implied_month_start": born_timestamp - u.millis_since_month_start}


def offset_fate(offset: int, view: RecoveryView | None) -> str | None:
    """The fate after restart of the record at ``offset`` read directly (an offsetMsgId, a located record): only
    the truncation matters, the index plays no part."""
    if view is None:
        return None
    return "beyond_truncation" if offset >= view.truncate_offset else "survives"


def beyond_truncation_text(offset: int, view: RecoveryView) -> str:
    return (f"offset {offset} is at or past {view.truncate_offset}, where the broker's recovery of this directory "
            "truncates the commit log: the broker no longer has this record once it restarts")


def find_msg_id(store, svc: IndexService, msg_id: str, topic: str | None = None,
                max_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH, view: RecoveryView | None = None,
                as_recovered: bool = False) -> MsgIdReport:
    """Look ``msg_id`` up in ``store`` both ways: as an offsetMsgId (decode the record at its physical offset and
    say whether that record's offsetMsgId is this id) and as a UNIQ_KEY (the index look-up of ``topic#id`` in
    ``topic``, or in every topic that has a consume queue, keeping the hits whose record carries the key).

    With a recovery ``view`` every answer carries its ``fate`` after restart; ``as_recovered`` keeps only what
    the broker serves once it has recovered the directory (the record at the offset must lie before the
    truncation; UNIQ_KEY hits must survive or be re-dispatched, as ``index-lookup --as-recovered``)."""
    from ..store.consumequeue import list_queues

    if as_recovered and view is None:
        raise ValueError("as_recovered needs the recovery view")
    rep = MsgIdReport(msg_id, decode_msg_id(msg_id))
    cl = store.commitlog
    fate = None
    try:
        o = decode_offset_msg_id(msg_id)
        # an offset no commit-log file holds has no fate (a UNIQ_KEY read as an offsetMsgId gives absurd ones)
        fate = offset_fate(o.physical_offset, view) if cl.min_offset <= o.physical_offset < cl.end_offset else None
        if as_recovered and fate == "beyond_truncation":
            assert view is not None
            rep.as_offset_msg_id = {"error": beyond_truncation_text(o.physical_offset, view), "fate": fate}
        else:
            msg = cl.read_message(o.physical_offset)
            rep.as_offset_msg_id = {"record_offset_msg_id": msg.offset_msg_id,
                                    "matches": msg.offset_msg_id == msg_id.strip().upper(), "message": msg.to_dict()}
            if fate is not None:
                rep.as_offset_msg_id["fate"] = fate
    except (ValueError, RmqInspectError) as e:
        rep.as_offset_msg_id = {"error": str(e)} | ({"fate": fate} if fate is not None else {})
    topics = [topic] if topic else sorted({q.topic for q in list_queues(store.layout.consumequeue_dir)})
    hits = []
    for t in topics:
        q = query_message(svc, cl, t, msg_id.strip(), max_batch, 0, JAVA_LONG_MAX, max_batch)
        mark_fates(q, view)
        if as_recovered:
            restore_as_recovered(q, cl, view)
        for h in q.verified:
            d = {"topic": t, "physical_offset": h.physical_offset, "index_file": h.index_file,
                 "message": h.message.to_dict()}
            if view is not None:
                d["fate"] = h.fate
            try:
                d["uniq_key_time"] = uniq_key_timestamp(msg_id.strip(), h.message.born_timestamp)
            except ValueError:
                pass
            hits.append(d)
    rep.as_uniq_key = {"topics_searched": topics, "hits": hits}
    return rep


# --- "why can't I find it?" ---------------------------------------------------------------------------------

@dataclass
class Reason:
    code: str
    detail: str


@dataclass
class Located:
    """Where a matching message really is, from the bounded commitlog scan."""

    physical_offset: int
    topic: str
    queue_id: int
    queue_offset: int
    store_timestamp: int
    keys: list[str]
    uniq_key: str | None
    index_items: list[dict] = field(default_factory=list)
    fate: str | None = None  # after restart (offset_fate), with a recovery view


@dataclass
class MissingReport:
    topic: str
    key: str
    kind: str  # key | uniq_key | msg_id
    begin: int
    end: int
    found_by_index: bool = False
    query: QueryMessageResult | None = None
    reasons: list[Reason] = field(default_factory=list)
    located: list[Located] = field(default_factory=list)
    scanned: tuple[int, int] = (0, 0)
    scan_complete: bool = True
    index_files: list[IndexFileInfo] = field(default_factory=list)
    # with a recovery view: the truncation offset, and each broker_result offset's fate after restart
    recovery_truncate_offset: int | None = None
    fates: dict[int, str] = field(default_factory=dict)
    as_recovered: bool = False


def find_index_items(svc: IndexService, key_hash: int, phy_offset: int) -> list[dict]:
    """Every item (any file) whose keyHash and phyOffset are these: vectorised over the item area."""
    import numpy as np

    out = []
    for f in svc.files:
        items = f.items()
        if not len(items):
            continue
        hit = np.flatnonzero((items["key_hash"] == key_hash) & (items["phy_offset"] == phy_offset))
        for i in hit.tolist():
            n = i + 1
            td = int(items["time_diff"][i])
            out.append({"file": f.name, "item": n, "time_diff": td,
                        "time_read": f.header.begin_timestamp + td * 1000,
                        "slot": key_hash % f.slots, "prev_index": int(items["prev_index"][i]),
                        "reachable": _reachable(f, key_hash % f.slots, n)})
    return out


def _reachable(f: IndexFile, slot: int, target: int) -> bool:
    """Whether item ``target`` is on slot ``slot``'s chain (cycle-safe), ignoring time."""
    n = f.slot_value(slot)
    ic = f.header.index_count
    seen = set()
    while n is not None and 0 < n <= ic and n not in seen:
        if n == target:
            return True
        seen.add(n)
        it = f.item(n)
        if it is None or it[2] < 0:
            return False
        n = it[3]
    return False


def explain_missing(store, svc: IndexService, topic: str, key: str, kind: str = "key", begin: int = 0,
                    end: int = JAVA_LONG_MAX, max_num: int = DEFAULT_MAX_MSGS_NUM_BATCH,
                    max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH,
                    scan_bytes: int | None = None, view: RecoveryView | None = None,
                    as_recovered: bool = False) -> MissingReport:
    """Why the broker's look-up does not return a message. With a recovery ``view`` the broker's result carries
    each offset's fate after restart; ``as_recovered`` explains the answer of the broker once it has recovered
    this directory (hits beyond the truncation or from a deleted, not re-dispatched index file are gone, and a
    message found on disk past the truncation is said to be lost to the recovery)."""
    if as_recovered and view is None:
        raise ValueError("as_recovered needs the recovery view")
    cl = store.commitlog
    rep = MissingReport(topic, key, kind, begin, end, index_files=svc.infos, as_recovered=as_recovered,
                        recovery_truncate_offset=view.truncate_offset if view else None)
    if kind == "msg_id":
        return _explain_msg_id(store, rep, view)
    q = query_message(svc, cl, topic, key, max_num, begin, end, max_msgs_num_batch)
    mark_fates(q, view)
    if view is not None:
        rep.fates = {h.physical_offset: h.fate for h in q.hits}
    if as_recovered:
        lost = [h for h in q.hits if h.has_key and h.fate not in FATES_AFTER_RESTART]
        restore_as_recovered(q, cl, view)
        for h in lost:
            rep.reasons.append(Reason("lost_to_recovery", f"on-disk hit {h.physical_offset} ({h.index_file}) is "
                                                          f"{h.fate.replace('_', ' ')}: the recovered broker does "
                                                          "not return it"))
    rep.query = q
    # an unreadable (torn) record the index still points to, past the truncation: the recovery is what removes it
    gone = {off for rnd, off, _ in q.unreadable if view is not None and rnd == 1 and off >= view.truncate_offset}
    for off in sorted(gone):
        assert view is not None
        rep.fates.setdefault(off, "beyond_truncation")
        if as_recovered:
            rep.reasons.append(Reason("beyond_truncation", f"the index points to {off}, whose record is not readable "
                                      "(torn or damaged); " + beyond_truncation_text(off, view)))
    if q.verified:
        rep.found_by_index = True
        if q.collisions:
            rep.reasons.append(Reason("hash_collision", f"{len(q.collisions)} of {len(q.hits)} index hits are other "
                                                        "keys with the same 32-bit hash; drop them client-side"))
        if len(q.raw) < q.max_num:
            return rep
    # The broker found nothing (or only collisions, or hit the result cap). Diagnose.
    if not svc.infos:
        rep.reasons.append(Reason("no_index_files", f"no index files in {svc.index_dir}: messageIndexEnable=false, "
                                                    "or the index directory was deleted"))
    for info in svc.infos:
        if info.error:
            rep.reasons.append(Reason("index_file_damaged", f"{info.name}: {info.error}"))
    if q.collisions:
        rep.reasons.append(Reason("hash_collision", f"all {len(q.collisions)} index hits are other keys with the "
                                                    "same hash (topic#key collision), none is the message"))
    dropped = {i.name for i in svc.infos if i.dropped_on_abnormal_restart}
    for n in q.notes:
        if as_recovered and any(n.startswith(f"round 1: offset {off} ") for off in gone):
            continue  # explained above as the recovery's truncation
        if n.startswith("round 1:") and "not readable" in n:
            extra = ""
            if svc.abort_present and any(d in n for d in dropped):
                extra = ("; the abort file is present and this index file is newer than checkpoint.indexMsgTimestamp: "
                         "the broker deletes it on restart and recovery truncates the damaged record")
            rep.reasons.append(Reason("hit_not_readable", n[len("round 1: "):] + extra))
    # bounded scan of the commitlog for the real message
    start = cl.min_offset
    stop = cl.end_offset if scan_bytes is None else min(cl.end_offset, start + scan_bytes)
    rep.scanned = (start, stop)
    rep.scan_complete = stop >= cl.end_offset
    key_hash = index_key_hash(build_index_key(topic, key))
    for msg in cl.messages(start, stop, keep_going=True):
        if kind == "uniq_key":
            if msg.uniq_key != key:
                continue
        elif key not in msg.keys and msg.uniq_key != key and key not in msg.properties.values():
            # a key put in a user property (or the whole KEYS string) is matched too: it was never indexed
            continue
        if len(rep.located) >= MAX_LOCATED:
            rep.reasons.append(Reason("many_matches", f"more than {MAX_LOCATED} messages match; the rest are not "
                                                      "listed (narrow with --scan-bytes or a rarer key)"))
            break
        loc = Located(msg.physical_offset, msg.topic, msg.queue_id, msg.queue_offset, msg.store_timestamp,
                      msg.keys, msg.uniq_key, fate=offset_fate(msg.physical_offset, view))
        rep.located.append(loc)
        if as_recovered and loc.fate == "beyond_truncation":
            assert view is not None
            rep.reasons.append(Reason("beyond_truncation", f"the message (topic {msg.topic!r}) is on disk, but "
                                      + beyond_truncation_text(msg.physical_offset, view)))
            continue
        _diagnose_located(rep, svc, msg, loc, topic, key, key_hash, q, max_msgs_num_batch)
        if (view is not None and rep.reasons and rep.reasons[-1].code == "index_behind"
                and view.reindexes(msg.physical_offset)):
            rep.reasons[-1].detail += ("; the broker indexes it when it restarts (the restart dispatches it past the "
                                       f"surviving index's endPhyOffset {view.index_end_phy_offset})")
    if not rep.located:
        where = f"[{start}, {stop})"
        rep.reasons.append(Reason("not_on_disk" if rep.scan_complete else "not_in_scanned_range",
                                  f"no message with this {kind.replace('_', ' ')} in the commitlog {where}"
                                  + ("" if rep.scan_complete else "; raise --scan-bytes to look further")
                                  + (f"; the commitlog starts at {start}: older files were deleted (retention)"
                                     if start > 0 else "")))
        expired = [o for o in q.raw if o < cl.min_offset]
        if expired:
            rep.reasons.append(Reason("commitlog_expired", f"the index still points to {expired}, below the first "
                                                           f"commitlog file: the message expired"))
    return rep


def _diagnose_located(rep, svc, msg, loc, topic, key, key_hash, q, max_batch) -> None:
    from .dispatch_rules import goes_to_index, index_keys

    at = f"message at {msg.physical_offset} (topic {msg.topic!r}, store time {msg.store_timestamp})"
    if msg.topic != topic:
        real = msg.properties.get(PROPERTY_REAL_TOPIC)
        if msg.topic == RMQ_SYS_SCHEDULE_TOPIC and real == topic:
            rep.reasons.append(Reason("delayed_message", f"{at} is a delayed message: until delivered it is stored and "
                                                         f"indexed under {RMQ_SYS_SCHEDULE_TOPIC}; query that topic"))
        else:
            rep.reasons.append(Reason("other_topic", f"{at}: the key exists under topic {msg.topic!r}, not {topic!r} "
                                                     f"(the index key is topic#key)"))
        return
    if not goes_to_index(msg.sys_flag):
        rep.reasons.append(Reason("not_indexed_rollback", f"{at} is a ROLLBACK record: never indexed"))
        return
    if key not in index_keys(msg.properties):
        rep.reasons.append(Reason("key_not_in_keys", f"{at}: {key!r} is not a KEYS token nor the UNIQ_KEY "
                                                     f"(KEYS={msg.keys_string!r}); it was never indexed"))
        return
    items = find_index_items(svc, key_hash, msg.physical_offset)
    loc.index_items = items
    if not items:
        covering = [i for i in svc.infos
                    if not i.error and i.begin_phy_offset <= msg.physical_offset <= i.end_phy_offset]
        newest_end = max((i.end_phy_offset for i in svc.infos if not i.error), default=-1)
        if msg.physical_offset > newest_end:
            rep.reasons.append(Reason("index_behind", f"{at} lies after the newest index entry (endPhyOffset "
                                                      f"{newest_end}): not dispatched to the index yet, or the index "
                                                      "file holding it was destroyed (abnormal restart / deleted)"))
        elif not covering:
            spans = ", ".join(f"{i.name} [{i.begin_timestamp}, {i.end_timestamp}]" for i in svc.infos if not i.error)
            in_time = [i.name for i in svc.infos if not i.error and i.begin_timestamp <= msg.store_timestamp
                       <= i.end_timestamp]
            rep.reasons.append(Reason("index_gap", f"{at}: no index file covers its offset"
                                                   + ("" if in_time else " nor its store time")
                                                   + f" (index files cover {spans}): the index file for that period "
                                                   "was destroyed or never written"))
        else:
            rep.reasons.append(Reason("not_indexed", f"{at}: {covering[0].name} covers its offset but holds no item "
                                                     "for it (indexing was off when it was written, or the file is "
                                                     "damaged)"))
        return
    if msg.physical_offset in q.phy_offsets:
        return
    if msg.problems:
        rep.reasons.append(Reason("record_damaged", f"{at} is damaged ({'; '.join(msg.problems)}): the broker "
                                                    "cannot return it (a crash recovery truncates it)"))
        return
    for it in items:
        info = svc.info_for(it["file"])
        if not (rep.begin <= it["time_read"] <= rep.end):
            skew = "" if rep.begin <= msg.store_timestamp <= rep.end else " (its store time is outside the window too)"
            rep.reasons.append(Reason("time_window", f"{at}: the index records time {it['time_read']} (whole seconds "
                                                     f"after the file's beginTimestamp), outside [{rep.begin}, "
                                                     f"{rep.end}]{skew}; clock skew between producer and broker, or "
                                                     "a window narrower than a second"))
        elif not it["reachable"]:
            rep.reasons.append(Reason("chain_broken", f"{at}: item {it['item']} of {it['file']} is not reachable "
                                                      f"from slot {it['slot']} (corrupt prevIndex chain)"))
        elif len(q.raw) >= q.max_num:
            rep.reasons.append(Reason("result_cap", f"{at}: the look-up stopped at {q.max_num} results "
                                                    f"(maxNum capped by maxMsgsNumBatch={max_batch}); newer hits "
                                                    "filled the list; narrow the time window"))
        elif info is not None and not _file_consulted(q, it["file"]):
            rep.reasons.append(Reason("file_not_consulted", f"{at}: {it['file']} was not searched (its time range "
                                                            "does not overlap the window, or an earlier stop)"))
        else:
            rep.reasons.append(Reason("unexplained", f"{at}: indexed at item {it['item']} of {it['file']} but not "
                                                     "returned"))


def _file_consulted(q: QueryMessageResult, name: str) -> bool:
    return any(w.file == name and w.consulted for r in q.rounds for w in r.walks)


def _explain_msg_id(store, rep: MissingReport, view: RecoveryView | None) -> MissingReport:
    cl = store.commitlog
    try:
        o = decode_offset_msg_id(rep.key)
    except ValueError as e:
        rep.reasons.append(Reason("bad_msg_id", str(e)))
        return rep
    off = o.physical_offset
    fate = offset_fate(off, view)
    if fate is not None:
        rep.fates[off] = fate
    if rep.as_recovered and fate == "beyond_truncation" and off < cl.end_offset:
        assert view is not None
        rep.reasons.append(Reason("beyond_truncation", beyond_truncation_text(off, view)))
    elif off < cl.min_offset:
        rep.reasons.append(Reason("commitlog_expired", f"offset {off} is below the first commitlog file "
                                                       f"({cl.files[0].name}): expired and deleted"))
    elif off >= cl.end_offset:
        rep.reasons.append(Reason("beyond_commitlog", f"offset {off} is beyond the end of the commitlog "
                                                      f"({cl.end_offset}): wrong store/broker ({o.store_host}?) or "
                                                      "data lost in a crash"))
    else:
        try:
            msg = cl.read_message(off)
        except CorruptDataError as e:
            rep.reasons.append(Reason("no_record_there", str(e)))
        else:
            rep.located.append(Located(msg.physical_offset, msg.topic, msg.queue_id, msg.queue_offset,
                                       msg.store_timestamp, msg.keys, msg.uniq_key, fate=fate))
            rep.found_by_index = True
            if msg.topic != rep.topic:
                rep.reasons.append(Reason("other_topic", f"the record at {off} belongs to topic {msg.topic!r}"))
            if msg.offset_msg_id != rep.key.upper():
                rep.reasons.append(Reason("msg_id_mismatch", f"the record at {off} has offsetMsgId "
                                                             f"{msg.offset_msg_id} (other store host or a record "
                                                             "moved by a crash)"))
    return rep
