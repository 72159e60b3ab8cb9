"""The recovery plan: DefaultMessageStore.load + start() on a store, step by step, in the broker's order.

1. ``load_consume_queues``: ConsumeQueue.recover for each queue (or the RocksDB offset table), giving
   maxPhyOffsetOfConsumeQueue;
2. ``choose_start_file``: the first commit-log file the recovery scans (normal / abnormal rules by version);
3. ``scan_commitlog``: checkMessageAndReturnSize over the records from there, the stop rule giving the
   truncation point T, and the records the scan re-dispatches (DefaultMessageStore.doDispatch);
4. ``truncate_commitlog``: MappedFileQueue.truncateDirtyFiles(T);
5. ``truncate_dirty_logic_files``: every consume queue's truncateDirtyLogicFiles(T);
6. ``reput_after_start``: start()'s ReputMessageService dispatch up to T;
7. ``index_files_loaded``: IndexService.load(lastExitOK): index files an abnormal start drops;
8. ``messages_lost``: what lies past T (salvage).

Each step reads the store through read-only maps and records what it did in the ``Recovery`` it is given;
nothing is ever written. Both commit-log walks (3 and 6) are ``store.commitlog``'s; the policy (where to stop,
what to dispatch) is decided here.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from ...formats.commitlog import (
    MAGIC_CODE_POSITION,
    PHYSICAL_OFFSET_POSITION,
    SYSFLAG_POSITION,
    store_timestamp_position,
)
from ...formats.constants import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from ...formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE
from ...formats.indexfile import INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_HEADER_TABLE
from ...store import Store
from ...store.commitlog import BLANK, END, FILE_END, ILLEGAL, RecordRun, walk_file
from ...store.consumequeue import ConsumeQueue, list_queues
from ...store.mapped import MappedFile
from ...store.version import BrokerVersion
from ..dispatch import DEFAULT_DELAY_TABLE, DelayTable
from ..parallel import map_files, resolve_jobs
from .batch import BatchQueueModel, batch_queue_topics, load_batch_queues
from .queues import ConsumeQueueModel, QueueRecovery, QueueSet, default_cq_file_size
from .redispatch import (
    GOES_TO_CONSUME_QUEUE,
    SCHEDULE_TOPIC_BYTES,
    RecordBatch,
    Redispatch,
    has_crc32_property,
    records_with_topic,
)
from .rocksdb import (
    RocksDBQueueModel,
    RocksDBQueues,
    has_rocksdb_consume_queue,
    read_rocksdb_queues,
    truncate_rocksdb_queues,
)
from .version import VersionAssumption, assume_version

# records per run of the walks: large runs amortise the per-run numpy work of the dispatch
RUN_BATCH = 65536


@dataclass
class RecoveryOptions:
    """The broker settings and what-ifs a plan runs with (defaults: the broker's defaults, version detected)."""

    version: BrokerVersion | None = None  # None: detected from the files
    check_crc: bool = True  # checkCRCOnRecover
    index_safe: bool = False  # messageIndexSafe (abnormal start-file rule)
    rocksdb_max_phys: int | None = None  # RocksDB consume queue max physical offset, when known from elsewhere
    delay_table: DelayTable = field(default_factory=lambda: DEFAULT_DELAY_TABLE)  # messageDelayLevel
    force_mode: str | None = None  # "normal" | "abnormal": what-if over the abort file
    with_salvage: bool = True  # step 8: classify what lies past T
    keep_redispatch: bool = True  # list every re-dispatched record (else only count them)
    cq_file_size: int | None = None  # mappedFileSizeConsumeQueue for queues the recovery creates
    model_start: bool = True  # step 6: start()'s ReputMessageService
    jobs: int | None = None  # worker processes of the scan and the salvage walk (analyses.parallel.resolve_jobs)
    # re-dispatched records reach the queue models (False: only T and the re-dispatch range are wanted, as by a
    # key look-up's fates; neither depends on the queue models)
    dispatch: bool = True


@dataclass
class RecoveryPlan:
    store: str
    mode: str  # normal | abnormal
    version: VersionAssumption
    check_crc: bool
    start_file: str | None
    start_reason: str
    truncate_offset: int
    stop_kind: str  # message kind that ended the scan: blank(last file), end, illegal, crc, half, file_end
    stop_reason: str
    stop_file: str | None
    stop_position: int | None
    max_phy_offset_of_consume_queue: int
    consume_queue_truncated: bool
    commitlog_files_deleted: list[str]
    commitlog_file_truncated: dict | None
    commitlog_files_after: list[dict]
    queues: list[QueueRecovery]
    consume_queue_max_offsets: dict[str, int]
    consume_queue_max_offsets_before: dict[str, int]
    redispatch: list[Redispatch]
    index_files_dropped: list[str]
    index_files_kept: list[str]
    scanned_bytes: int
    messages_scanned: int
    messages_lost: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    salvage: object = None  # analyses.salvage.SalvageReport when computed
    # after start(): the ReputMessageService has dispatched [reput_from_offset, T)
    consume_queue_max_offsets_after_start: dict[str, int] | None = None
    reput_from_offset: int | None = None
    redispatch_count: int = 0
    redispatch_first: int | None = None
    redispatch_last: int | None = None
    queue_models: dict = field(default_factory=dict, repr=False)  # queue key -> its model after start()
    dledger: object = None  # recovery.dledger.DLedgerRecovery for a DLedger-mode store

    def consume_queue_keys(self) -> list[str]:
        """Every queue the plan modelled (file and RocksDB), sorted."""
        return sorted(self.queue_models)

    def consume_queue_files(self, key: str) -> dict[str, bytes]:
        """The queue's files as the broker holds them after start() (recovery + re-dispatch), file name ->
        bytes up to the write position. Entries written by the model live in memory, never in the store."""
        m = self.queue_models.get(key)
        if not isinstance(m, ConsumeQueueModel):
            return {}  # absent, or a RocksDB queue (no files)
        return m.files()

    def consume_queue_entries(self, key: str) -> list[tuple[int, int, int, int]] | None:
        """(queue offset, physical offset, size, tagsCode) of every entry the broker's queue ``key`` holds after
        load() and start(), in queue order (pre-blank padding skipped); None for a queue the plan does not hold
        as files (absent, RocksDB or BatchCQ: only their bounds are modelled)."""
        m = self.queue_models.get(key)
        if not isinstance(m, ConsumeQueueModel):
            return None
        out = []
        for name, raw in sorted(m.files().items(), key=lambda kv: int(kv[0])):
            arr = np.frombuffer(raw, dtype=CQ_DTYPE)
            base = int(name) // CQ_STORE_UNIT_SIZE
            keep = np.flatnonzero((arr["physical_offset"] >= 0) & (arr["size"] > 0))
            out.extend(zip((keep + base).tolist(), arr["physical_offset"][keep].tolist(), arr["size"][keep].tolist(),
                           arr["tags_code"][keep].tolist(), strict=True))
        return out

    def to_dict(self, with_redispatch: bool = False) -> dict:
        d = {
            "store": self.store, "mode": self.mode, "broker_version": self.version.to_dict(),
            "check_crc": self.check_crc, "start_file": self.start_file, "start_reason": self.start_reason,
            "truncate_offset": self.truncate_offset,
            "stop": {"kind": self.stop_kind, "reason": self.stop_reason, "file": self.stop_file,
                     "position": self.stop_position},
            "max_phy_offset_of_consume_queue": self.max_phy_offset_of_consume_queue,
            "consume_queue_truncated": self.consume_queue_truncated,
            "commitlog_files_deleted": self.commitlog_files_deleted,
            "commitlog_file_truncated": self.commitlog_file_truncated,
            "commitlog_files_after": self.commitlog_files_after,
            "consume_queue_max_offsets": self.consume_queue_max_offsets,
            "consume_queue_max_offsets_before": self.consume_queue_max_offsets_before,
            "reput_from_offset": self.reput_from_offset,
            "consume_queue_max_offsets_after_start": self.consume_queue_max_offsets_after_start,
            "consume_queues": [q.to_dict() for q in self.queues if q.files_deleted or q.entries_cut
                               or q.redispatched or q.notes],
            "redispatched": {"count": self.redispatch_count, "first_offset": self.redispatch_first,
                             "last_offset": self.redispatch_last},
            "index_files_dropped": self.index_files_dropped,
            "index_files_kept": self.index_files_kept,
            "scanned_bytes": self.scanned_bytes, "messages_scanned": self.messages_scanned,
            "messages_lost": self.messages_lost, "notes": self.notes,
        }
        if with_redispatch:
            d["redispatch"] = [r.as_list() for r in self.redispatch]
        if self.dledger is not None:
            d["dledger"] = self.dledger.to_dict()  # type: ignore[attr-defined]
        return d


@dataclass
class Recovery:
    """What the steps share: the store, the settings, the consume queues as they evolve, and the notes."""

    store: Store
    options: RecoveryOptions
    version: VersionAssumption
    normal: bool  # lastExitOK (no abort file, unless forced)
    rocksdb: bool  # the consume queue is a RocksDB database
    queues: QueueSet
    notes: list[str] = field(default_factory=list)
    max_phy_cq: int = -1  # maxPhyOffsetOfConsumeQueue after load()
    rocksdb_max_phys: int | None = None  # the RocksDB store's max physical offset, when known
    rocksdb_table: RocksDBQueues | None = None  # None with a file consume queue or an unreadable database
    max_offsets_before: dict[str, int] = field(default_factory=dict)
    topics: dict[bytes, str] = field(default_factory=dict)  # topic bytes -> name, shared by every batch
    batch_topics: set[str] = field(default_factory=set)  # topics kept as BatchConsumeQueues

    @property
    def bv(self) -> BrokerVersion:
        return self.version.version

    @property
    def files(self) -> list:
        return self.store.commitlog.files

    @property
    def dispatches(self) -> bool:
        """Whether dispatched records reach a queue model (not with an unreadable RocksDB database)."""
        return self.options.dispatch and (not self.rocksdb or self.rocksdb_table is not None)

    def queue(self, topic: str, queue_id: int):
        """findConsumeQueue: the queue's model, created on the first record dispatched to it (an empty file
        queue of mappedFileSizeConsumeQueue, or an empty RocksDB queue)."""
        m = self.queues.find(topic, queue_id)
        if m is not None:
            return m
        if topic in self.batch_topics:
            return self.queues.add(BatchQueueModel(topic, queue_id, None, self.store.commitlog))
        if self.rocksdb:
            return self.queues.add(RocksDBQueueModel(topic, queue_id))
        cq = ConsumeQueue(topic, queue_id, os.path.join(self.store.layout.consumequeue_dir, topic, str(queue_id)))
        size = self.options.cq_file_size or default_cq_file_size(self.queues.models)
        return self.queues.add(ConsumeQueueModel(cq, self.bv, size))


# ---------------------------------------------------------------------------------------------------
# 1. load(): the consume queues


def load_consume_queues(store: Store, options: RecoveryOptions) -> Recovery:
    """The abort-file decision, then ConsumeQueue.recover for each file queue (or the RocksDB offset table)
    and maxPhyOffsetOfConsumeQueue."""
    va = assume_version(store, options.version)
    notes: list[str] = []
    normal = not store.abort_present
    if options.force_mode:
        normal = options.force_mode == "normal"
        notes.append(f"mode forced to {options.force_mode} (abort file "
                     f"{'present' if store.abort_present else 'absent'})")
    cq_dir = store.layout.consumequeue_dir
    rocksdb = os.path.isdir(cq_dir) and has_rocksdb_consume_queue(store)
    models: list = []
    if not rocksdb:
        for q in list_queues(cq_dir):
            cq = ConsumeQueue(q.topic, q.queue_id, q.path, options.cq_file_size)
            m = ConsumeQueueModel(cq, va.version, cq.file_size or options.cq_file_size or default_cq_file_size([]))
            m.recover()
            models.append(m)
    batch = load_batch_queues(store.root, store.commitlog)
    models += batch
    rec = Recovery(store, options, va, normal, rocksdb, QueueSet(models), notes,
                   max_phy_cq=max((m.max_phys for m in models), default=-1),
                   rocksdb_max_phys=options.rocksdb_max_phys, batch_topics=batch_queue_topics(store.root))
    if rocksdb:
        load_rocksdb_queues(rec)
        rec.max_phy_cq = max([rec.max_phy_cq] + [m.max_phys for m in batch])
    rec.max_offsets_before = {m.rec.key: m.rec.max_offset_on_disk for m in rec.queues.models}
    return rec


def load_rocksdb_queues(rec: Recovery) -> None:
    """The RocksDB consume queue's offset table; its CHECKPOINT_TOPIC value is maxPhyOffsetOfConsumeQueue."""
    rq, how = read_rocksdb_queues(rec.store)
    rec.rocksdb_table = rq
    rec.notes.append(how)
    if rq is not None:
        rec.notes.extend(f"RocksDB offset table: {p}" for p in rq.problems[:5])
        for (topic, qid), (mp, mo) in sorted(rq.max.items()):
            rec.queues.add(RocksDBQueueModel(topic, qid, mp, mo))
        if rec.rocksdb_max_phys is None:
            rec.rocksdb_max_phys = rq.checkpoint
            if rq.checkpoint is None:
                rec.notes.append("RocksDB consume queue has no CHECKPOINT_TOPIC max offset")
    if rec.rocksdb_max_phys is not None:
        rec.max_phy_cq = rec.rocksdb_max_phys
        rec.notes.append(f"RocksDB consume queue: maxPhyOffsetOfConsumeQueue = {rec.rocksdb_max_phys} "
                         "(CHECKPOINT_TOPIC max, the dispatch-from offset)")
    else:
        rec.notes.append("RocksDB consume queue: its max physical offset cannot be read here; the start-file rule "
                         "that depends on it is replaced by the file-based fallback")
    if rq is None:
        rec.notes.append("RocksDB consume queue: per-queue results are not computed")


# ---------------------------------------------------------------------------------------------------
# 2. the first commit-log file the recovery scans


def choose_start_file(rec: Recovery) -> tuple[int, str]:
    """(index in the commit log's files, why)."""
    return normal_start_file(rec) if rec.normal else abnormal_start_file(rec)


def normal_start_file(rec: Recovery) -> tuple[int, str]:
    """recoverNormally: third-last file (4.x ... 5.3.1); the newest file starting at or below
    maxPhyOffsetOfConsumeQueue (5.3.2, 5.3.3, and HEAD with a RocksDB queue); the newest file whose first
    record validates (HEAD)."""
    files = rec.files
    n = len(files)
    rule = rec.bv.normal_rule
    if rule == "third-last":
        return max(0, n - 3), f"normal recovery, third-last of {n} file(s)"
    if rule == "cq-max" or (rule == "head" and rec.rocksdb):
        idx = 0
        mp = rec.max_phy_cq
        if rec.rocksdb and rec.rocksdb_max_phys is None:
            mp = files[-1].start  # unknown: assume the queue is caught up
        for i in range(n - 1, 0, -1):
            if files[i].start <= mp:
                idx = i
                break
        return idx, f"normal recovery (5.3.2/5.3.3 rule): newest file starting at or below " \
                    f"maxPhyOffsetOfConsumeQueue {mp}"
    for i in range(n - 1, 0, -1):
        ok, why = head_file_matches(rec, files[i])
        if ok:
            return i, f"normal recovery (HEAD rule): {why}"
    return 0, "normal recovery (HEAD rule): no later file qualifies, first file"


def abnormal_start_file(rec: Recovery) -> tuple[int, str]:
    """recoverAbnormally: the newest file whose first record isMappedFileMatchedRecover accepts."""
    files = rec.files
    idx = -1
    why = ""
    for i in range(len(files) - 1, -1, -1):
        if rec.bv.normal_rule == "head":
            ok, why = head_file_matches(rec, files[i])
        else:
            try:
                ok, why = abnormal_file_matches(rec, files[i])
            except _NeedRocksDB:
                rec.notes.append("abnormal recovery with a RocksDB consume queue needs its max physical offset; "
                                 "fell back to the first file")
                break
        if ok:
            idx = i
            break
    if idx < 0:
        return 0, "abnormal recovery: no file matched the checkpoint, first file"
    return idx, f"abnormal recovery: newest matching file ({why})"


class _NeedRocksDB(Exception):
    pass


# isMappedFileMatchedRecover reads the header up to STORETIMESTAMP of an IPv4 record
_MATCH_HEADER_SIZE = store_timestamp_position(0) + 8


def first_record_store_timestamp(buf, version: BrokerVersion) -> int:
    """STORETIMESTAMP of a file's first record as isMappedFileMatchedRecover reads it (before 4.6.0 at the
    IPv4 position whatever the sysFlag says)."""
    sf = 0 if version.store_ts_fixed_56 else struct.unpack_from(">i", buf, SYSFLAG_POSITION)[0]
    return struct.unpack_from(">q", buf, store_timestamp_position(sf))[0]


def abnormal_file_matches(rec: Recovery, f) -> tuple[bool, str]:
    """CommitLog.isMappedFileMatchedRecover (4.x / 5.0-5.3.3)."""
    version = rec.bv
    if f.size < _MATCH_HEADER_SIZE:
        return False, "file too short for a record header"
    buf = f.buffer
    magic = struct.unpack_from(">i", buf, MAGIC_CODE_POSITION)[0]
    ok_magic = magic == MESSAGE_MAGIC_CODE_V1 or (version.accepts_v2 and magic == MESSAGE_MAGIC_CODE_V2)
    if not ok_magic:
        return False, "first record has no message magic code"
    if version.is_5x and rec.rocksdb:
        phys = struct.unpack_from(">q", buf, PHYSICAL_OFFSET_POSITION)[0]
        if rec.rocksdb_max_phys is None:
            raise _NeedRocksDB()
        return phys <= rec.rocksdb_max_phys, f"first PHYSICALOFFSET {phys} vs RocksDB max {rec.rocksdb_max_phys}"
    ts = first_record_store_timestamp(buf, version)
    if ts == 0:
        return False, "first record STORETIMESTAMP is 0"
    cp = rec.store.checkpoint
    if cp is None:
        return False, "no checkpoint file"
    index_safe = rec.options.index_safe
    limit = cp.min_timestamp_index if index_safe else cp.min_timestamp
    what = "checkpoint minTimestampIndex" if index_safe else "checkpoint minTimestamp"
    return ts <= limit, f"first STORETIMESTAMP {ts} {'<=' if ts <= limit else '>'} {what} {limit}"


def head_file_matches(rec: Recovery, f) -> tuple[bool, str]:
    """The development branch's rule (normal and abnormal): the file's first record must pass the full check,
    then (normal) start at or below maxPhyOffsetOfConsumeQueue / (abnormal) be no newer than the checkpoint."""
    first = next(walk_file(f, 0, f.size, check_crc=rec.options.check_crc, accept_v2=rec.bv.accepts_v2, batch=1),
                 None)
    if type(first) is not RecordRun:
        return False, f"first record does not validate ({first.kind if first is not None else None})"
    ts = int(first.records["store_timestamp"][0])
    if ts == 0:
        return False, "first record STORETIMESTAMP is 0"
    cp = rec.store.checkpoint
    if rec.options.index_safe and cp is not None and ts > cp.index_msg_timestamp:
        return False, "first record newer than checkpoint indexMsgTimestamp"
    if rec.normal:
        phys = int(first.records["physical_offset_field"][0])
        return phys <= rec.max_phy_cq, f"first PHYSICALOFFSET {phys} vs maxPhyOffsetOfConsumeQueue {rec.max_phy_cq}"
    limit = cp.min_timestamp if cp is not None else 0
    return ts <= limit, f"first STORETIMESTAMP {ts} vs checkpoint minTimestamp {limit}"


# ---------------------------------------------------------------------------------------------------
# 3. the scan and its stop rule


@dataclass
class Scan:
    """The recovery's record scan: where it stopped (T = ``truncate_offset``) and what it dispatched."""

    truncate_offset: int
    stop_kind: str = ""
    stop_reason: str = ""
    stop_file: str | None = None
    stop_position: int | None = None
    scanned_bytes: int = 0
    messages: int = 0
    redispatch: list[Redispatch] = field(default_factory=list)
    redispatch_count: int = 0
    redispatch_first: int | None = None
    redispatch_last: int | None = None
    last_dispatched_end: int = -1  # end of the last record the recovery dispatched
    saw_crc32_property: bool = False
    saw_v2: bool = False

    def stop(self, kind: str, reason: str, file: str, position: int) -> None:
        self.stop_kind, self.stop_reason, self.stop_file, self.stop_position = kind, reason, file, position


def scan_commitlog(rec: Recovery, idx: int) -> Scan:
    """checkMessageAndReturnSize from the start file on, file after file (a blank record moves to the next
    file), until the first record that fails; T is where it stopped. Records past the dispatch-from offset
    (every record in abnormal mode) are dispatched during the scan, before truncateDirtyLogicFiles."""
    files = rec.files
    n = len(files)
    start_file = files[idx] if files else None
    scan = Scan(start_file.start if start_file else 0)
    bv = rec.bv
    dispatch_all = not rec.normal
    dispatch_from = rec.max_phy_cq if (rec.normal and bv.is_5x) else None
    if rec.rocksdb and rec.rocksdb_max_phys is None:
        dispatch_from = None
    delay_table = rec.options.delay_table if bv.delay_levels_at_recovery else DelayTable({})
    i = idx
    walks = file_walks(files, idx, rec.options.check_crc, bv.accepts_v2, rec.options.jobs)
    while start_file is not None:
        f = files[i]
        moved = False
        u8 = None
        for ev in next(walks):
            if type(ev) is RecordRun:
                if u8 is None:
                    u8 = np.frombuffer(f.buffer, dtype=np.uint8)
                if scan_run(rec, scan, ev, u8, dispatch_all, dispatch_from, delay_table):
                    break
                continue
            kind, p = ev.kind, ev.position
            if kind == BLANK:
                if i + 1 < n:
                    i += 1
                    moved = True
                    scan.scanned_bytes += f.size - p
                    break
                scan.stop(BLANK, "blank end-of-file record in the last file", f.name, p)
            else:
                why = ev.reason or kind
                if kind == FILE_END:
                    why = "the file ends without a blank record; the broker reads past it and stops"
                scan.stop(kind, why, f.name, p)
            scan.truncate_offset = f.start + p
            break
        else:
            scan.stop(END, "nothing to scan", f.name, 0)
        if not moved:
            break
        if files[i].start != f.start + rec.store.commitlog.file_size:
            rec.notes.append(f"commit-log files are not contiguous after {f.name}: the broker continues with "
                             f"{files[i].name}")
    walks.close()
    if scan.saw_v2 and not bv.accepts_v2:
        rec.notes.append("V2 records exist but this version does not accept them")
    if scan.saw_crc32_property and not bv.writes_crc32_property:
        rec.notes.append("__CRC32# properties found: the store was written by 5.2.0+")
    return scan


class FileStop:
    """What ended one file's walk, as a worker hands it back (a ``Record`` without its map)."""

    __slots__ = ("kind", "position", "reason")

    def __init__(self, kind: str, position: int, reason: str):
        self.kind, self.position, self.reason = kind, position, reason

    def __reduce__(self):
        return FileStop, (self.kind, self.position, self.reason)


# scan_file's ``landed`` besides the chunk's end: the walk ended in the chunk (a record that stops the scan, or
# the file's end), or it went past the chunk's end without a record starting there
WALK_ENDED = -1
WALKED_PAST = -2
_AIM_PROBE = 256  # a chunk walk's first run, before any record size is known


def scan_file(args) -> tuple[int, int, int, list]:
    """checkMessageAndReturnSize over one file or chunk, in a worker: (file start, chunk start, landed, events),
    the events being the record arrays of its runs and what ended the walk. ``args`` = (path, start, check_crc,
    accept_v2[, lo, hi]): the walk from position ``lo`` (default 0) up to the record starting at ``hi`` (None:
    the file's end); ``landed`` is ``hi`` when the walk reached it, else WALK_ENDED or WALKED_PAST. The file is
    mapped here and closed."""
    path, start, check_crc, accept_v2 = args[:4]
    lo, hi = args[4:6] if len(args) > 4 else (0, None)
    f = MappedFile(path, start)
    out: list = []
    try:
        if hi is None:
            out = [ev.records if type(ev) is RecordRun else FileStop(ev.kind, ev.position, ev.reason)
                   for ev in walk_file(f, lo, f.size, check_crc=check_crc, accept_v2=accept_v2, batch=RUN_BATCH)]
            return start, lo, WALK_ENDED, out
        pos, seen_n, seen_bytes = lo, 0, 0  # runs ask for the records of average size that fit before hi
        while True:
            # runs sized to reach hi: the scanner is not asked for records far past the chunk
            batch = min(RUN_BATCH, max(1, (hi - pos) * seen_n // seen_bytes)) if seen_n else _AIM_PROBE
            for ev in walk_file(f, pos, f.size, check_crc=check_crc, accept_v2=accept_v2, batch=batch):
                if type(ev) is RecordRun:
                    r = ev.records
                    k = int(np.searchsorted(r["position"], hi))
                    if k < len(r):
                        if k:
                            out.append(r[:k])
                        return start, lo, hi if int(r["position"][k]) == hi else WALKED_PAST, out
                    out.append(r)
                    pos = ev.end
                    seen_n += len(r)
                    seen_bytes += int(r["total_size"].sum())
                    if pos > hi:
                        return start, lo, WALKED_PAST, out
                    break  # the next run aimed at hi again
                if ev.position >= hi:
                    return start, lo, hi if ev.position == hi else WALKED_PAST, out
                out.append(FileStop(ev.kind, ev.position, ev.reason))
                return start, lo, WALK_ENDED, out  # every record that is not a message ends the scan's file
            else:
                return start, lo, WALK_ENDED, out
            if pos == hi:
                return start, lo, hi, out
    finally:
        f.close()


class _ChunkResults:
    """``scan_file`` results in order, handed out file by file (a file's walk the scan left early leaves results
    behind: they are skipped)."""

    def __init__(self, results):
        self.results = results
        self.head = None

    def next_for(self, start: int):
        while True:
            if self.head is None:
                self.head = next(self.results, None)
                if self.head is None:
                    return None
            if self.head[0] < start:
                self.head = None
                continue
            if self.head[0] > start:
                return None
            r, self.head = self.head, None
            return r


def _chunked_file_walk(f, results: _ChunkResults, check_crc: bool, accept_v2: bool):
    """One file's events from its chunks' results: each chunk that reached the next one's start goes on with it;
    a chunk whose walk went past its end is walked again here from its start to the file's end."""
    while True:
        r = results.next_for(f.start)
        if r is None:
            return
        _, lo, landed, events = r
        if landed == WALKED_PAST:
            yield from walk_file(f, lo, f.size, check_crc=check_crc, accept_v2=accept_v2, batch=RUN_BATCH)
            return
        yield from (RecordRun(f, e) if type(e) is np.ndarray else e for e in events)
        if landed == WALK_ENDED:
            return


def record_chunks(f, start: int, *, accept_v2: bool = True, step: int | None = None) -> list[int]:
    """``salvage.record_chunks``, imported when a multi-process scan first splits a file: a key look-up's recovery
    scan runs in one process and should not import the salvage."""
    from ..salvage import record_chunks as chunks

    return chunks(f, start, accept_v2=accept_v2, step=step)


def file_walks(files: list, idx: int, check_crc: bool, accept_v2: bool, jobs: int | None):
    """The walk of each file from ``files[idx]`` on, in order, one iterator of events per file: ``walk_file``
    in this process, or with ``jobs`` > 1 (``parallel.resolve_jobs``) the files checked by worker processes
    ahead of the scan (``scan_file``), split inside each file at valid records about every
    ``parallel.chunk_bytes()`` (``salvage.record_chunks``), their runs handed over as ``RecordRun``s of this
    process' maps. The scan takes the next file only after a blank record, so files past its stop are checked
    in vain but never looked at."""
    if resolve_jobs(jobs) > 1:
        args = []
        for f in files[idx:]:
            starts = record_chunks(f, 0, accept_v2=accept_v2)
            args += [(f.path, f.start, check_crc, accept_v2, lo, starts[k + 1] if k + 1 < len(starts) else None)
                     for k, lo in enumerate(starts)]
        if len(args) > 1:
            results = _ChunkResults(map_files(scan_file, args, jobs))
            for f in files[idx:]:
                yield _chunked_file_walk(f, results, check_crc, accept_v2)
            return
    for f in files[idx:]:
        yield walk_file(f, 0, f.size, check_crc=check_crc, accept_v2=accept_v2, batch=RUN_BATCH)


def scan_run(rec: Recovery, scan: Scan, run: RecordRun, u8: np.ndarray, dispatch_all: bool,
             dispatch_from: int | None, delay_table: DelayTable) -> bool:
    """A run of records that passed the check: dispatch the ones past the dispatch-from offset, parse the
    DELAY of SCHEDULE_TOPIC_XXXX records (a failing Integer.parseInt makes the record illegal and ends the
    scan there). Returns whether the scan stopped in this run."""
    recs = run.records
    base = run.base
    # only the records the recovery dispatches, or whose delay level it parses, need their fields
    if dispatch_all:
        want = np.ones(len(recs), dtype=bool)
    elif dispatch_from is not None:
        want = recs["position"] + base > dispatch_from  # CommitLog.recoverNormally: commitLogOffset > max
    else:
        want = np.zeros(len(recs), dtype=bool)
    slow = want | records_with_topic(u8, recs, SCHEDULE_TOPIC_BYTES)
    stop_at = None
    sl = np.flatnonzero(slow)
    if sl.size:
        b = RecordBatch(run[sl], rec.topics)
        # checkMessageAndReturnSize parses DELAY of SCHEDULE_TOPIC_XXXX records (Integer.parseInt)
        err = b.schedule_codes(delay_table)
        w = want[sl]
        if err is not None:
            j, e = err
            scan.stop(ILLEGAL, f"{e} (Integer.parseInt fails: illegal record)", run.file.name,
                      int(b.records["position"][j]))
            stop_at = int(sl[j])
            w = w.copy()
            w[j:] = False
        wi = np.flatnonzero(w)
        if wi.size:
            redispatch_during_scan(rec, scan, base, b, wi)
    k = len(recs) if stop_at is None else stop_at
    if k:
        done = recs[:k]
        if not scan.saw_v2 and bool((done["magic_version"] == 2).any()):
            scan.saw_v2 = True
        scan.messages += k
        scan.scanned_bytes += int(done["total_size"].sum())
        scan.truncate_offset = base + int(done["position"][-1] + done["total_size"][-1])
    if stop_at is not None:
        scan.truncate_offset = base + int(recs["position"][stop_at])
        return True
    return False


def redispatch_during_scan(rec: Recovery, scan: Scan, base: int, b: RecordBatch, wi: np.ndarray) -> None:
    """DefaultMessageStore.doDispatch during the scan, before truncateDirtyLogicFiles."""
    sent = b.records if wi.size == len(b.records) else b.records[wi]  # wi is increasing: all = no copy
    if not scan.saw_crc32_property and has_crc32_property(b.buf, sent):
        scan.saw_crc32_property = True
    offs = sent["position"] + base
    if rec.options.keep_redispatch:
        scan.redispatch.extend(b.redispatch_records(wi, base))
    scan.redispatch_count += int(wi.size)
    if scan.redispatch_first is None:
        scan.redispatch_first = int(offs[0])
    scan.redispatch_last = int(offs[-1])
    scan.last_dispatched_end = int(offs[-1] + sent["total_size"][-1])
    if rec.dispatches:
        b.dispatch_to_queues(wi, base, rec.queue)


# ---------------------------------------------------------------------------------------------------
# 4. the commit log: truncateDirtyFiles(T)


@dataclass
class CommitLogTruncation:
    deleted: list[str]
    truncated: dict | None  # {"name", "position"} of the file T falls in
    after: list[dict]  # the files left: name, file_from_offset, wrote_position


def truncate_commitlog(files: list, file_size: int, t: int) -> CommitLogTruncation:
    """MappedFileQueue.truncateDirtyFiles(T): files starting after T are deleted, the one holding T is cut."""
    deleted: list[str] = []
    truncated = None
    after: list[dict] = []
    for f in files:
        if f.start + file_size > t:
            if t >= f.start:
                truncated = {"name": f.name, "position": t - f.start}
                after.append({"name": f.name, "file_from_offset": f.start, "wrote_position": t - f.start})
            else:
                deleted.append(f.name)
        else:
            after.append({"name": f.name, "file_from_offset": f.start, "wrote_position": file_size})
    return CommitLogTruncation(deleted, truncated, after)


# ---------------------------------------------------------------------------------------------------
# 5. the consume queues: truncateDirtyLogicFiles(T)


def truncate_dirty_logic_files(rec: Recovery, t: int) -> bool:
    """Run whenever maxPhyOffsetOfConsumeQueue >= T (RocksDB too), after the scan's re-dispatch as in
    recoverAbnormally. Returns whether it ran. Leaves the queue models sorted by (topic, queueId)."""
    models = rec.queues.models
    ran = rec.max_phy_cq >= t
    if ran:
        if rec.rocksdb:
            why = truncate_rocksdb_queues(rec.store, [m for m in models if isinstance(m, RocksDBQueueModel)], t)
            if why:
                rec.notes.append(why)
        for m in models:
            if not rec.rocksdb or isinstance(m, BatchQueueModel):
                m.truncate_dirty(t)
            elif not m.rec.entries_cut:
                m.rec.max_offset_after_truncate = m.max_offset()
    else:
        for m in models:
            m.rec.max_offset_after_truncate = m.max_offset()
    for m in models:
        m.rec.max_offset = m.max_offset()
    models.sort(key=lambda m: (m.cq.topic, m.cq.queue_id))
    return ran


# ---------------------------------------------------------------------------------------------------
# 6. start(): the ReputMessageService


def reput_after_start(rec: Recovery, t: int, last_dispatched_end: int) -> tuple[int | None, dict[str, int] | None]:
    """DefaultMessageStore.start: the ReputMessageService dispatches from the largest queue maxPhysicOffset
    (at least the commit log's min offset) up to T, with checkCRC=false. Returns (the offset it starts from,
    every queue's max offset afterwards); (None, None) when not modelled."""
    cl = rec.store.commitlog
    if not (rec.dispatches and rec.files and rec.options.model_start):
        return None, None
    models = rec.queues.models
    if rec.rocksdb:
        # the RocksDB store's max physical offset: CHECKPOINT_TOPIC, advanced by the recovery's dispatch
        reput_from = max(cl.min_offset, rec.rocksdb_max_phys if rec.rocksdb_max_phys is not None else -1,
                         last_dispatched_end)
    else:
        reput_from = max([cl.min_offset] + [m.max_phys for m in models])
    for ev in cl.walk(reput_from, t, check_crc=False, accept_v2=rec.bv.accepts_v2, stop_at_end=True,
                      batch=RUN_BATCH):
        if type(ev) is not RecordRun:
            continue
        sel = np.flatnonzero(GOES_TO_CONSUME_QUEUE[ev.records["sys_flag"] & 0xF])
        if not sel.size:
            continue
        b = RecordBatch(ev[sel], rec.topics)
        err = b.schedule_codes(rec.options.delay_table)
        k = len(sel) if err is None else err[0]
        if k:
            b.dispatch_to_queues(np.arange(k), ev.base, rec.queue, count=False)
        if err is not None:
            rec.queue(b.topics[int(b.tid[k])], int(b.records["queue_id"][k]))
            break  # the dispatcher's check fails (-1): ReputMessageService stops
    return reput_from, {m.rec.key: m.max_offset() for m in rec.queues.sorted()}


# ---------------------------------------------------------------------------------------------------
# 7. IndexService.load(lastExitOK)


def index_files_loaded(rec: Recovery) -> tuple[list[str], list[str]]:
    """(dropped, kept): after an abnormal exit, index files whose endTimestamp is newer than the checkpoint's
    indexMsgTimestamp are destroyed."""
    dropped: list[str] = []
    kept: list[str] = []
    cp = rec.store.checkpoint
    idir = rec.store.layout.index_dir
    if not os.path.isdir(idir):
        return dropped, kept
    for name in sorted(os.listdir(idir)):
        p = os.path.join(idir, name)
        if not os.path.isfile(p):
            continue
        if rec.normal or cp is None:
            kept.append(name)
            continue
        with open(p, "rb") as fh:
            head = fh.read(INDEX_HEADER_SIZE)
        if len(head) < INDEX_HEADER_SIZE:
            kept.append(name)
            rec.notes.append(f"index/{name} is shorter than its header")
            continue
        end_ts = INDEX_HEADER.unpack_from(head, 0)[INDEX_HEADER_TABLE.index("end_timestamp")]
        (dropped if end_ts > cp.index_msg_timestamp else kept).append(name)
    return dropped, kept


# ---------------------------------------------------------------------------------------------------
# 8. what is lost past T


def messages_lost(store: Store, plan: RecoveryPlan, jobs: int | None = None) -> None:
    """Salvage past T: intact and damaged records the broker discards, per topic (consume-queue entries cut
    count for their queue's topic), and the damaged regions. Fills ``plan.messages_lost`` and ``plan.salvage``."""
    from ..salvage import salvage

    rep = salvage(store, plan.truncate_offset, accept_v2=True, queue_next_offsets=plan.consume_queue_max_offsets,
                  jobs=jobs)
    lost = rep.lost_summary(rep.damaged_records())
    lost["cq_entries_cut"] = {q.key: q.entries_cut for q in plan.queues if q.entries_cut}
    owner = {off: q.topic for q in plan.queues for off in q.cut_offsets}
    for r in rep.regions:
        topic = owner.get(r.start)
        if topic is not None and r.kind != "missing_file":
            lost["per_topic"][topic] = lost["per_topic"].get(topic, 0) + 1
    lost["regions"] = [r.to_dict() for r in rep.regions]
    plan.messages_lost = lost
    plan.salvage = rep


# ---------------------------------------------------------------------------------------------------


def plan_recovery(store: Store, options: RecoveryOptions | None = None) -> RecoveryPlan:
    """Reproduce DefaultMessageStore.load's recovery (and start()'s first dispatch) on ``store`` without
    writing anything."""
    options = options or RecoveryOptions()
    if store.layout.dledger is not None:  # DLedger mode: DLedger's own recovery first (recovery.dledger)
        from .dledger import plan_dledger_recovery

        return plan_dledger_recovery(store, options)
    rec = load_consume_queues(store, options)
    idx, start_reason = choose_start_file(rec)
    files = rec.files
    start_file = files[idx] if files else None
    scan = scan_commitlog(rec, idx)
    t = scan.truncate_offset
    cl_cut = truncate_commitlog(files, store.commitlog.file_size, t)
    if not cl_cut.after:
        rec.notes.append("no commit-log file left: every consume queue would be destroyed")
    cq_truncated = truncate_dirty_logic_files(rec, t)
    max_offsets = {m.rec.key: m.rec.max_offset for m in rec.queues.models}
    reput_from, after_start = reput_after_start(rec, t, scan.last_dispatched_end)
    dropped, kept = index_files_loaded(rec)
    models = rec.queues.models
    plan = RecoveryPlan(
        store=store.root, mode="normal" if rec.normal else "abnormal", version=rec.version,
        check_crc=options.check_crc, start_file=start_file.name if start_file else None, start_reason=start_reason,
        truncate_offset=t, stop_kind=scan.stop_kind, stop_reason=scan.stop_reason, stop_file=scan.stop_file,
        stop_position=scan.stop_position, max_phy_offset_of_consume_queue=rec.max_phy_cq,
        consume_queue_truncated=cq_truncated, commitlog_files_deleted=cl_cut.deleted,
        commitlog_file_truncated=cl_cut.truncated, commitlog_files_after=cl_cut.after,
        queues=[m.rec for m in models], consume_queue_max_offsets=max_offsets,
        consume_queue_max_offsets_before=rec.max_offsets_before, redispatch=scan.redispatch,
        index_files_dropped=dropped, index_files_kept=kept, scanned_bytes=scan.scanned_bytes,
        messages_scanned=scan.messages, notes=rec.notes, consume_queue_max_offsets_after_start=after_start,
        reput_from_offset=reput_from, redispatch_count=scan.redispatch_count,
        redispatch_first=scan.redispatch_first, redispatch_last=scan.redispatch_last,
        queue_models={m.rec.key: m for m in models},
    )
    if options.with_salvage:
        messages_lost(store, plan, rec.options.jobs)
    return plan


__all__ = ["CommitLogTruncation", "Recovery", "RecoveryOptions", "RecoveryPlan", "Scan", "abnormal_start_file",
           "choose_start_file", "index_files_loaded", "load_consume_queues", "messages_lost", "normal_start_file",
           "plan_recovery", "reput_after_start", "scan_commitlog", "truncate_commitlog",
           "truncate_dirty_logic_files"]
