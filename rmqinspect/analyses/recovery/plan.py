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

Steps 2 and 3 (the start-file rules and the scan's control flow) live in ``recovery.scan``, which imports no
numpy: this module gives the scan its bulk policy (``scan_run``), ``recovery.small`` gives it row tuples.
Each step reads the store through read-only maps and records what it did in the ``Recovery`` it is given;
nothing is ever written. Both commit-log walks (3 and 6) are ``store.commitlog``'s; the policy (where to stop,
what to dispatch) is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...formats.constants import RMQ_SYS_SCHEDULE_TOPIC
from ...formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE
from ...store import Store
from ...store.consumequeue import ConsumeQueue, list_queues
from ...store.walk.kinds import ILLEGAL, DamageKind
from ...store.walk.records import RecordRun
from ..dispatch_rules import DelayTable, dispatch_tags_code
from .batch import BatchQueueModel, batch_queue_topics, load_batch_queues
from .combine import (
    accelerated_in_effect,
    combine_in_effect,
    load_combine_side,
    settle_after_start,
    truncate_combine_side,
    verify_and_init_offsets,
)
from .index import dispatched_ranges, index_after_load, reindex_ranges
from .queues import ConsumeQueueModel, QueueRecovery, default_cq_file_size
from .redispatch import (
    GOES_TO_CONSUME_QUEUE,
    SCHEDULE_TOPIC_BYTES,
    QueueColumns,
    RecordBatch,
    Redispatch,
    dispatch_columns,
    has_crc32_property,
    records_with_topic,
)
from .rocksdb import (
    RocksDBQueueModel,
    has_rocksdb_consume_queue,
    read_rocksdb_queues,
    truncate_rocksdb_queues,
)
from .scan import (
    SCAN_RECORDS_PER_RUN,
    QueueSet,
    Recovery,
    RecoveryOptions,
    Scan,
    abnormal_start_file,
    band_answers,
    choose_start_file,
    normal_start_file,
    scan_records,
    with_conf_switches,
)
from .version import VersionAssumption, assume_version
from .walked import WalkedRun, WalkedRuns


@dataclass
class RecoveryPlan:
    store: str
    mode: str  # normal | abnormal
    version: VersionAssumption
    check_crc: bool
    start_file: str | None
    start_reason: str
    truncate_offset: int
    stop_kind: str  # what ended the scan: blank(last file), end, illegal, crc, half, file_end, stale (5.5.0+ opt-in)
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
    combine: object = None  # recovery.combine.CombineSide: the RocksDB side of a CombineConsumeQueueStore
    band_answers: list = field(default_factory=list)  # recovery.scan.band_answers when the release is ambiguous
    accelerated_from: int | None = None  # enableAcceleratedRecovery: where the scan started checking records
    # the commit log's max offset once load() has run and once start() has run: T for a file commit log; for
    # DLedger committedPos (0 without a checkpoint), then the data end once the member leads again.
    # ``truncate_offset`` is where the recovery cuts the log (the data end when nothing is cut).
    max_offset_after_load: int | None = None
    max_offset_after_start: int | None = None
    # [from, to) of the record start offsets the restart dispatches (recovery re-dispatch + start()'s reput)
    dispatched: list[tuple[int, int]] = field(default_factory=list)
    # IndexService after load(): endPhyOffset of the last kept index file (buildIndex skips what lies below it)
    index_end_phy_offset: int = 0
    index_begin_timestamp: int = 0  # beginTimestamp of the file buildIndex puts into (0: set by its first put)
    # where the bytes that hold data end on disk (the last file's data end): what lies in [T, data_end) is cut
    data_end_on_disk: int | None = None

    # --- the restart model, asked by every command that speaks of "after restart" ---------------------------

    def reindex_ranges(self) -> list[tuple[int, int]]:
        """[from, to) of the record start offsets IndexService.buildIndex indexes after the restart."""
        return reindex_ranges(self.dispatched, self.index_end_phy_offset)

    def reindexes(self, offset: int) -> bool:
        """Whether the restart puts the record at ``offset`` into the index (a key look-up finds it after)."""
        return any(a <= offset < b for a, b in self.reindex_ranges())

    def redispatches(self, offset: int) -> bool:
        """Whether the restart dispatches the record at ``offset`` (recovery re-dispatch or start()'s reput)."""
        return any(a <= offset < b for a, b in self.dispatched)

    def cuts(self, offset: int, size: int = 1) -> bool:
        """Whether the recovery removes the record [offset, offset + size) from the commit log."""
        return offset + size > self.truncate_offset

    @property
    def bytes_cut(self) -> int:
        """Bytes holding data that the recovery removes (0 when it cuts nothing)."""
        if self.data_end_on_disk is None:
            return 0
        return max(self.data_end_on_disk - self.truncate_offset, 0)

    def cq_entries_written_by_start(self) -> int:
        """Consume-queue entries start()'s ReputMessageService writes (after-start max offsets over after-load)."""
        after = self.consume_queue_max_offsets_after_start
        if not after:
            return 0
        return sum(max(v - self.consume_queue_max_offsets.get(k, 0), 0) for k, v in after.items())

    def headline(self) -> dict:
        """What the restart does, in counts (JSON kinds; ``headline_text`` says it for people)."""
        lost = self.messages_lost or {}
        return {"records_cut": lost.get("count", 0), "records_cut_intact": lost.get("intact", 0),
                "bytes_cut": self.bytes_cut, "commitlog_files_deleted": len(self.commitlog_files_deleted),
                "cq_entries_cut": sum(q.entries_cut for q in self.queues),
                "cq_files_deleted": sum(len(q.files_deleted) for q in self.queues),
                "records_redispatched": self.redispatch_count,
                "cq_entries_redispatched": sum(q.redispatched for q in self.queues),
                "cq_entries_written_by_start": self.cq_entries_written_by_start(),
                "index_files_deleted": len(self.index_files_dropped),
                "reindex_from": self.reindex_ranges()[0][0] if self.reindex_ranges() else None,
                "max_offset_after_load": self.max_offset_after_load,
                "max_offset_after_start": self.max_offset_after_start}

    def headline_text(self) -> str:
        h = self.headline()
        parts = []
        if h["bytes_cut"] or h["records_cut"]:
            parts.append(f"cuts {h['records_cut']} record(s) ({h['bytes_cut']} bytes) from the commit log at "
                         f"{self.truncate_offset}")
        else:
            parts.append(f"cuts nothing from the commit log (its data ends at {self.truncate_offset})")
        if h["commitlog_files_deleted"]:
            parts.append(f"deletes {h['commitlog_files_deleted']} commit-log file(s)")
        if h["cq_entries_cut"]:
            parts.append(f"cuts {h['cq_entries_cut']} consume-queue entr{'y' if h['cq_entries_cut'] == 1 else 'ies'}")
        if h["records_redispatched"] or h["cq_entries_redispatched"]:
            parts.append(f"re-dispatches {h['records_redispatched']} record(s) "
                         f"({h['cq_entries_redispatched']} consume-queue entries written)")
        if h["cq_entries_written_by_start"]:
            parts.append(f"dispatches {h['cq_entries_written_by_start']} consume-queue entries in start() "
                         "(the queues were behind the commit log)")
        if h["index_files_deleted"]:
            parts.append(f"deletes {h['index_files_deleted']} index file(s)")
        rr = self.reindex_ranges()
        if rr:
            parts.append(f"indexes the records from {rr[0][0]} on again")
        if self.dledger is not None and self.max_offset_after_load != self.max_offset_after_start:
            parts.append(f"serves up to {self.max_offset_after_load} after load and {self.max_offset_after_start} "
                         "once the DLedger member leads again")
        return "the restart " + "; ".join(parts)

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
            "max_offset_after_load": self.max_offset_after_load,
            "max_offset_after_start": self.max_offset_after_start,
            "headline": self.headline(),
            "index_rebuild": {"index_end_phy_offset": self.index_end_phy_offset,
                              "dispatched": [list(r) for r in self.dispatched],
                              "reindexed": [list(r) for r in self.reindex_ranges()]},
        }
        if with_redispatch:
            d["redispatch"] = [r.as_list() for r in self.redispatch]
        if self.dledger is not None:
            d["dledger"] = self.dledger.to_dict()  # type: ignore[attr-defined]
        if self.combine is not None:
            from .combine import combine_to_dict

            d["combine"] = combine_to_dict(self)
        if self.band_answers:
            d["band_answers"] = self.band_answers
        d["accelerated_from"] = self.accelerated_from
        return d


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
    rocksdb = has_rocksdb_consume_queue(store)  # consumequeue/, or 5.5's separate directory
    combine = va.version.has_combine_store and rocksdb and combine_in_effect(store, options)
    if combine:
        rocksdb = False  # the file side is the plan's queues; the RocksDB side is rec.combine
    models: list = []
    if not rocksdb:
        for q in list_queues(cq_dir):
            cq = ConsumeQueue(q.topic, q.queue_id, q.path, options.cq_file_size)
            m = ConsumeQueueModel(cq, va.version, cq.file_size or options.cq_file_size or default_cq_file_size([]))
            m.recover()
            models.append(m)
    batch = load_batch_queues(store.root, store.commitlog, store.conf)
    models += batch
    rec = Recovery(store, options, va, normal, rocksdb, QueueSet(models), notes,
                   max_phy_cq=max((m.max_phys for m in models), default=-1),
                   rocksdb_max_phys=options.rocksdb_max_phys, batch_topics=batch_queue_topics(store.root))
    if rocksdb:
        load_rocksdb_queues(rec)
        rec.max_phy_cq = max([rec.max_phy_cq] + [m.max_phys for m in batch])
    if combine:
        rec.combine = load_combine_side(store)
        rec.notes.extend(rec.combine.notes)
        rec.combine.notes = []
    rec.accelerated = accelerated_in_effect(store, va.version, rocksdb, options, rec.notes)
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


def scan_commitlog(rec: Recovery, idx: int) -> Scan:
    """``scan.scan_records`` with the bulk policy (``scan_run``), taking the runs another walk hands over
    (``RecoveryOptions.walked``, ``scan_walked_run``) where they are this scan's own."""
    walked = rec.options.walked
    if walked is not None and not takes_walked(rec, walked):
        walked.close()
        walked = None
    return scan_records(rec, idx, scan_run, walked, scan_walked_run)


def takes_walked(rec: Recovery, walked: WalkedRuns) -> bool:
    """Whether the scan can take ``walked``'s runs: their records passed a check at least as strict as its own
    (the body CRC checked where checkCRCOnRecover is on; a run with a V2 record is not taken where the release
    rejects V2: ``WalkedRuns.runs_from``), and the scan keeps no DispatchRequest and needs no tagsCode (the runs
    carry neither properties nor store times)."""
    return ((walked.check_crc or not rec.options.check_crc)
            and not rec.options.keep_redispatch and not rec.tags_codes)


def scan_walked_run(rec: Recovery, scan: Scan, run: WalkedRun, dispatch_all: bool, dispatch_from: int | None,
                    delay_table: DelayTable) -> bool:
    """``scan_run`` for a run another walk checked: the same records dispatched and counted, from its columns
    (``takes_walked``: no TAGS tagsCode, no kept list; ``WalkedRuns.runs_from``: no illegal DELAY, so no stop
    inside the run). A SCHEDULE_TOPIC_XXXX record's tagsCode is its delivery time, as ``RecordBatch`` gives it."""
    phys, size = run.phys, run.size
    n = len(phys)
    # scan_run's wanted records: the dispatch-from offset leaves a suffix, the confirm offset a prefix
    a, b = (0, n) if dispatch_all else (0, 0) if dispatch_from is None else (
        int(np.searchsorted(phys, dispatch_from, side="right")), n)
    if dispatch_all and rec.options.confirm_offset is not None and rec.options.confirm_offset >= 0:
        b = int(np.searchsorted(phys + size, rec.options.confirm_offset, side="right"))
    if b > a:
        # a prefix or a suffix holds a __CRC32# record exactly when its first or last one lies in it
        if not scan.saw_crc32_property and (a <= run.crc32_first < b or a <= run.crc32_last < b):
            scan.saw_crc32_property = True
        scan.dispatched(b - a, int(phys[a]), int(phys[b - 1]), int(phys[b - 1]) + int(size[b - 1]))
        if rec.dispatches:
            codes = np.zeros(n, dtype=np.int64)
            for j, props, ts in run.schedule or ():
                codes[j] = dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, ts, delay_table)[0]
            cols = QueueColumns(phys, size, run.queue_id, run.queue_offset, run.sys_flag, run.tids, run.topics, codes)
            wi = np.arange(a, b)
            dispatch_columns(cols, wi, 0, rec.queue)
            if rec.combine is not None:
                dispatch_columns(cols, wi, 0, rec.combine.queue, count=False)
    if n:
        scan.passed(n, int(size.sum()), int(phys[-1]) + int(size[-1]), run.v2)
    return False


def scan_run(rec: Recovery, scan: Scan, run: RecordRun, dispatch_all: bool, dispatch_from: int | None,
             delay_table: DelayTable) -> bool:
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
    cut = dispatch_all and rec.options.confirm_offset is not None and rec.options.confirm_offset >= 0
    if cut:
        # controller/duplication mode, recoverAbnormally only (recoverNormally dispatches past it)
        want &= recs["position"] + recs["total_size"] + base <= rec.options.confirm_offset
    # topic and tagsCode of the dispatched records only when they go into queue models or the kept list (the
    # look-up's view needs where the dispatch runs, not what it writes)
    fields = rec.dispatches or rec.options.keep_redispatch
    stop_at = None
    if fields and dispatch_all and not cut:
        sl = np.arange(len(recs))  # every record is wanted, the SCHEDULE_TOPIC_XXXX ones among them
    else:
        sched = records_with_topic(np.frombuffer(run.file.buffer, dtype=np.uint8), recs, SCHEDULE_TOPIC_BYTES)
        sl = np.flatnonzero(want | sched if fields else sched)
    b = None
    if sl.size:
        b = RecordBatch(run[sl], rec.topics, rec.tags_codes)
        # checkMessageAndReturnSize parses DELAY of SCHEDULE_TOPIC_XXXX records (Integer.parseInt)
        err = b.schedule_codes(delay_table)
        if err is not None:
            j, e = err
            scan.stop(ILLEGAL, f"{e} (Integer.parseInt fails: illegal record)", run.file.name,
                      int(b.records["position"][j]))
            stop_at = int(sl[j])
    if fields:
        if b is not None:
            w = want[sl]
            if stop_at is not None:
                w = w.copy()
                w[int(np.searchsorted(sl, stop_at)):] = False
            wi = np.flatnonzero(w)
            if wi.size:
                redispatch_during_scan(rec, scan, base, b, wi)
    else:
        wi = np.flatnonzero(want if stop_at is None else want[:stop_at])
        if wi.size:
            count_redispatch(scan, base, run.file.buffer, recs if wi.size == len(recs) else recs[wi])
    k = len(recs) if stop_at is None else stop_at
    if k:
        done = recs[:k]
        scan.passed(k, int(done["total_size"].sum()), base + int(done["position"][-1] + done["total_size"][-1]),
                    not scan.saw_v2 and bool((done["magic_version"] == 2).any()))
    if stop_at is not None:
        scan.truncate_offset = base + int(recs["position"][stop_at])
        return True
    return False


def redispatch_during_scan(rec: Recovery, scan: Scan, base: int, b: RecordBatch, wi: np.ndarray) -> None:
    """DefaultMessageStore.doDispatch during the scan, before truncateDirtyLogicFiles."""
    sent = b.records if wi.size == len(b.records) else b.records[wi]  # wi is increasing: all = no copy
    count_redispatch(scan, base, b.buf, sent)
    if rec.options.keep_redispatch:
        scan.redispatch.extend(b.redispatch_records(wi, base))
    if rec.dispatches:
        b.dispatch_to_queues(wi, base, rec.queue)
        if rec.combine is not None:
            b.dispatch_to_queues(wi, base, rec.combine.queue, count=False)


def count_redispatch(scan: Scan, base: int, buf, sent: np.ndarray) -> None:
    """What the scan records of the records it dispatches (RECORD_DTYPE ``sent``, in order): how many, the
    first and last offsets, where the dispatch ends, whether one carries ``__CRC32#``."""
    if not scan.saw_crc32_property and has_crc32_property(buf, sent):
        scan.saw_crc32_property = True
    first, last = sent[0], sent[-1]
    scan.dispatched(len(sent), int(first["position"]) + base, int(last["position"]) + base,
                    int(last["position"]) + base + int(last["total_size"]))


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
    reput_from = reput_from_offset(rec, last_dispatched_end)
    for ev in cl.walk(reput_from, t, check_crc=False, accept_v2=rec.bv.accepts_v2, stop_at_end=True,
                      run_records=SCAN_RECORDS_PER_RUN):
        if type(ev) is not RecordRun:
            continue
        sel = np.flatnonzero(GOES_TO_CONSUME_QUEUE[ev.records["sys_flag"] & 0xF])
        if not sel.size:
            continue
        b = RecordBatch(ev[sel], rec.topics, rec.tags_codes)
        err = b.schedule_codes(rec.options.delay_table)
        k = len(sel) if err is None else err[0]
        if k:
            b.dispatch_to_queues(np.arange(k), ev.base, rec.queue, count=False)
            if rec.combine is not None:
                b.dispatch_to_queues(np.arange(k), ev.base, rec.combine.queue, count=False)
        if err is not None:
            rec.queue(b.topics[int(b.tid[k])], int(b.records["queue_id"][k]))
            break  # the dispatcher's check fails (-1): ReputMessageService stops
    return reput_from, {m.rec.key: m.max_offset() for m in rec.queues.sorted()}


def reput_from_offset(rec: Recovery, last_dispatched_end: int) -> int:
    """Where start()'s ReputMessageService begins: the largest queue maxPhysicOffset after load() (at least the
    commit log's min offset; RocksDB: CHECKPOINT_TOPIC advanced by the recovery's dispatch). Queue models the
    plan did not dispatch into (``dispatch=False``) are behind the recovery's dispatch, hence its end too."""
    cl = rec.store.commitlog
    if rec.rocksdb:
        return max(cl.min_offset, rec.rocksdb_max_phys if rec.rocksdb_max_phys is not None else -1,
                   last_dispatched_end)
    frm = max([cl.min_offset] + [m.max_phys for m in rec.queues.models])
    return frm if rec.dispatches else max(frm, last_dispatched_end)


def data_end_on_disk(store: Store, t: int | None = None, lost: dict | None = None) -> int | None:
    """Where the bytes holding data end: after the last non-zero byte of the commit log (a pre-allocated or
    zeroed tail holds none). With the cut ``t``: when salvage (``lost``) found nothing past it, or (without
    salvage) the page at ``t`` and the first page of every later file are zero, the data ends at ``t`` and no
    file is read backwards (a pre-allocated 1 GiB file would cost a second)."""
    files = store.commitlog.files
    if not files:
        return None
    if t is not None:
        if lost is not None:
            if not lost.get("count") and not lost.get("regions"):
                return t
        elif all(not any(bytes(f.buffer[max(t - f.start, 0):max(t - f.start, 0) + 4096]))
                 for f in files if f.start + f.size > t):
            return t
    # backwards over zero pages without copying them (a pre-allocated 1 GiB tail: ~0.1 s where a bytes copy per
    # MiB took 1.6 s): 64 MiB windows tested with numpy, the window that holds data narrowed per MiB; the holes
    # of a sparse file (the broker's setLength pre-allocation) are zeros without being read (0.2 s per GiB)
    big, small = 64 << 20, 1 << 20
    for f in reversed(files):
        buf = f.buffer
        for lo, end in reversed(f.data_ranges(0, len(buf))):
            while end > lo:
                a = max(lo, end - big)
                if np.frombuffer(buf, dtype=np.uint8, count=end - a, offset=a).any():
                    while end > a:
                        b = max(a, end - small)
                        s = bytes(buf[b:end]).rstrip(b"\0")
                        if s:
                            return f.start + b + len(s)
                        end = b
                end = a
    return files[0].start


# ---------------------------------------------------------------------------------------------------
# 7. IndexService.load(lastExitOK)


def index_files_loaded(rec: Recovery) -> tuple[list[str], list[str]]:
    """(dropped, kept): after an abnormal exit, index files whose endTimestamp is newer than the checkpoint's
    indexMsgTimestamp are destroyed."""
    ia = index_load(rec)
    rec.notes.extend(ia.notes)
    return ia.dropped, ia.kept


def index_load(rec: Recovery):
    """``recovery.index.index_after_load`` for this store (files dropped / kept, the surviving endPhyOffset)."""
    cp = rec.store.checkpoint
    return index_after_load(rec.store.layout.index_dir, rec.normal, cp.index_msg_timestamp if cp else None)


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
        if topic is not None and r.kind != DamageKind.MISSING_FILE:
            lost["per_topic"][topic] = lost["per_topic"].get(topic, 0) + 1
    lost["regions"] = [r.to_dict() for r in rep.regions]
    plan.messages_lost = lost
    plan.salvage = rep


# ---------------------------------------------------------------------------------------------------


def plan_recovery(store: Store, options: RecoveryOptions | None = None) -> RecoveryPlan:
    """Reproduce DefaultMessageStore.load's recovery (and start()'s first dispatch) on ``store`` without
    writing anything."""
    try:
        return _plan_recovery(store, options or RecoveryOptions())
    finally:
        if options is not None and options.walked is not None:
            options.walked.close()  # a DLedger plan, or one that failed first, takes no run


def _plan_recovery(store: Store, options: RecoveryOptions) -> RecoveryPlan:
    options = with_conf_switches(options, store.conf)
    if options.confirm_offset is None and store.layout.dledger is None:
        from .controller import detect_confirm_offset

        options = replace(options, confirm_offset=detect_confirm_offset(store))
    if store.layout.dledger is not None:  # DLedger mode: DLedger's own recovery first (recovery.dledger)
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
    if rec.combine is not None:
        truncate_combine_side(store, rec.combine, t)
    max_offsets = {m.rec.key: m.rec.max_offset for m in rec.queues.models}
    reput_end = t if options.confirm_offset is None or options.confirm_offset < 0 else min(t, options.confirm_offset)
    reput_from, after_start = reput_after_start(rec, reput_end, scan.last_dispatched_end)
    if rec.combine is not None:
        verify_and_init_offsets(rec.combine, [m for m in rec.queues.models if isinstance(m, ConsumeQueueModel)])
        rec.notes.extend(rec.combine.notes)
    dropped, kept = index_files_loaded(rec)
    ia = index_load(rec)
    reput_start = reput_from if reput_from is not None else (
        reput_from_offset(rec, scan.last_dispatched_end) if files else None)
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
        queue_models={m.rec.key: m for m in models}, combine=rec.combine, accelerated_from=rec.accelerated_from,
        max_offset_after_load=t, max_offset_after_start=t,
        dispatched=dispatched_ranges(scan.redispatch_first, scan.redispatch_last, reput_start, reput_end),
        index_end_phy_offset=ia.end_phy_offset, index_begin_timestamp=ia.begin_timestamp,
    )
    plan.band_answers = band_answers(rec, idx, t, scan_run)
    if rec.combine is not None and options.dispatch:
        settle_after_start(store, plan)
    if options.with_salvage:
        messages_lost(store, plan, rec.options.jobs)
    plan.data_end_on_disk = data_end_on_disk(store, t, plan.messages_lost if options.with_salvage else None)
    return plan


def plan_dledger_recovery(store: Store, options):
    """``plan_recovery`` for a DLedger-mode store: DLedger's recovery, then RocketMQ's consume-queue
    truncation, start()'s reput and the index files, in one ``RecoveryPlan`` (``plan.dledger`` holds step 1;
    ``truncate_offset`` is where DLedger cuts the data, its data end: nothing before it is lost, whatever the
    committed position; ``max_offset_after_load`` / ``max_offset_after_start`` are the broker's max offsets)."""
    from .dledger import dledger_recover  # DLedger's own recovery, step 1 (numpy-free plans need not load it)

    rec = load_consume_queues(store, options)
    dl = dledger_recover(store)
    rec.notes.extend(dl.notes)
    files = rec.files
    cut = truncate_commitlog(files, store.commitlog.file_size, dl.data_end)
    cq_truncated = truncate_dirty_logic_files(rec, dl.data_end)
    max_offsets = {m.rec.key: m.rec.max_offset for m in rec.queues.models}
    reput_from, after_start = reput_after_start(rec, dl.max_offset_after_start, -1)
    dropped, kept = index_files_loaded(rec)
    if dropped:
        rec.notes.append("DLedger recovery re-dispatches nothing: the messages of the dropped index file(s) stay "
                         "in the log and the consume queues but cannot be found by key")
    ia = index_load(rec)
    models = rec.queues.models
    plan = RecoveryPlan(
        store=store.root, mode="normal" if rec.normal else "abnormal",
        version=replace(rec.version, dledger=True),
        check_crc=False, start_file=dl.start_file, start_reason=f"DLedger: {dl.start_reason}",
        truncate_offset=dl.data_end, stop_kind=dl.stop_kind, stop_reason=dl.stop_reason,
        stop_file=dl.stop_file, stop_position=dl.stop_position, max_phy_offset_of_consume_queue=rec.max_phy_cq,
        consume_queue_truncated=cq_truncated, commitlog_files_deleted=cut.deleted,
        commitlog_file_truncated=cut.truncated, commitlog_files_after=cut.after,
        queues=[m.rec for m in models], consume_queue_max_offsets=max_offsets,
        consume_queue_max_offsets_before=rec.max_offsets_before, redispatch=[],
        index_files_dropped=dropped, index_files_kept=kept, scanned_bytes=max(dl.data_end - files[0].start, 0)
        if files else 0, messages_scanned=dl.entries_accepted, notes=rec.notes,
        consume_queue_max_offsets_after_start=after_start, reput_from_offset=reput_from,
        queue_models={m.rec.key: m for m in models},
        max_offset_after_load=dl.max_offset_after_load, max_offset_after_start=dl.max_offset_after_start,
        # DLedger re-dispatches nothing during recovery: start()'s reput dispatches up to the data end
        dispatched=dispatched_ranges(None, None, reput_from if reput_from is not None else (
            reput_from_offset(rec, -1) if files else None), dl.max_offset_after_start),
        index_end_phy_offset=ia.end_phy_offset, index_begin_timestamp=ia.begin_timestamp,
    )
    plan.dledger = dl
    if options.with_salvage:
        # what is lost lies past the data end DLedger keeps (committed or not: a leader commits it again)
        messages_lost(store, plan)
    plan.data_end_on_disk = data_end_on_disk(store, dl.data_end, plan.messages_lost if options.with_salvage else None)
    return plan


__all__ = ["CommitLogTruncation", "Recovery", "RecoveryOptions", "RecoveryPlan", "Scan", "abnormal_start_file",
           "choose_start_file", "index_files_loaded", "load_consume_queues", "messages_lost", "normal_start_file",
           "plan_recovery", "reput_after_start", "reput_from_offset", "index_load",
           "data_end_on_disk", "scan_commitlog", "truncate_commitlog",
           "truncate_dirty_logic_files"]
