"""The recovery's shared state, its start-file rules and its commit-log scan (steps 2 and 3 of ``plan``), without
numpy at import: the scan's control flow is one, whatever reads the records. ``plan.scan_commitlog`` hands it
numpy runs (``plan.scan_run``); a key look-up's fates on a small store hand it row tuples (``small``), so that a
look-up there starts without importing numpy.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...formats.commitlog import (
    MAGIC_CODE_POSITION,
    PHYSICAL_OFFSET_POSITION,
    SYSFLAG_POSITION,
    store_timestamp_position,
)
from ...formats.constants import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from ...store import Store
from ...store.mapped import MappedFile
from ...store.version import BrokerVersion
from ...store.walk.file import walk_file
from ...store.walk.kinds import BLANK, END, FILE_END
from ...store.walk.parallel import map_files, resolve_jobs
from ...store.walk.records import RECORD_FIELDS, RecordRun
from ..dispatch_rules import DEFAULT_DELAY_TABLE, DelayTable
from .queueset import QueueSet
from .version import VersionAssumption
from .walked import WalkedRun, WalkedRuns

if TYPE_CHECKING:
    from .combine import CombineSide
    from .redispatch import Redispatch
    from .rocksdb import RocksDBQueues

# records per run of the walks: large runs amortise the per-run numpy work of the dispatch
SCAN_RECORDS_PER_RUN = 65536
_STORE_TIMESTAMP, _PHYSICAL_OFFSET_FIELD = (RECORD_FIELDS.index(n) for n in ("store_timestamp",
                                                                              "physical_offset_field"))


def conf_recovery_switches(conf) -> tuple[bool, bool]:
    """(checkCRCOnRecover, messageIndexSafe) in effect for a store opened with ``conf`` (a BrokerConf or None):
    the broker.conf's values, else the broker's defaults (true, false). Every restart question asks here."""
    from ...store.broker_conf import configured

    crc, safe = configured(conf, "checkCRCOnRecover"), configured(conf, "messageIndexSafe")
    return (bool(crc.value) if crc else True), (bool(safe.value) if safe else False)


def with_conf_switches(options: RecoveryOptions, conf) -> RecoveryOptions:
    """``options`` with checkCRCOnRecover and messageIndexSafe decided: those given, else the broker.conf's
    (``conf_recovery_switches``). Every plan runs with both decided, whichever command asked for it."""
    if options.check_crc is not None and options.index_safe is not None:
        return options
    crc, safe = conf_recovery_switches(conf)
    return dataclasses.replace(options, check_crc=crc if options.check_crc is None else options.check_crc,
                               index_safe=safe if options.index_safe is None else options.index_safe)


@dataclass
class RecoveryOptions:
    """The broker settings and what-ifs a plan runs with (defaults: the broker's defaults, version detected)."""

    version: BrokerVersion | None = None  # None: detected from the files
    # checkCRCOnRecover and messageIndexSafe (abnormal start-file rule): None = the store's broker.conf, else the
    # broker's defaults (true, false): ``conf_recovery_switches``, applied by ``plan_recovery``
    check_crc: bool | None = None
    index_safe: bool | None = None
    rocksdb_max_phys: int | None = None  # RocksDB consume queue max physical offset, when known from elsewhere
    delay_table: DelayTable = field(default_factory=lambda: DEFAULT_DELAY_TABLE)  # messageDelayLevel
    force_mode: str | None = None  # "normal" | "abnormal": what-if over the abort file
    with_salvage: bool = True  # step 8: classify what lies past T
    keep_redispatch: bool = True  # list every re-dispatched record (else only count them)
    # the TAGS tagsCode of every re-dispatched entry (False: 0 in the queue models and the kept list, for a caller
    # that reads the queues' offsets and counts only, as the report does: the properties are then not parsed)
    tags_codes: bool = True
    cq_file_size: int | None = None  # mappedFileSizeConsumeQueue for queues the recovery creates
    model_start: bool = True  # step 6: start()'s ReputMessageService
    jobs: int | None = None  # worker processes of the scan and the salvage walk (store.walk.parallel.resolve_jobs)
    # re-dispatched records reach the queue models (False: only T and the re-dispatch range are wanted, as by a
    # key look-up's fates; neither depends on the queue models)
    dispatch: bool = True
    # rocksdbCQDoubleWriteEnable: None = from broker.conf, else from the layout (file CQ and RocksDB CQ together)
    combine: bool | None = None
    # enableAcceleratedRecovery (5.3.4+, effective with storeType=defaultRocksDB only): None = from broker.conf
    accelerated: bool | None = None
    # checkCommitLogOffsetOnRecover (5.5.0+, abnormal recovery only): None = from broker.conf
    stale_offset_check: bool | None = None
    # controller mode (AutoSwitch HA): the recovery and start()'s reput dispatch only records ending at or before
    # the confirm offset (recovery.controller). None: detected from the store (epochFileCheckpoint) and the
    # store's broker.conf (enableControllerMode, duplicationEnable, readUnCommitted); -1: classic, never cut
    confirm_offset: int | None = None
    # progress(offset): called with the commit-log offset the scan has reached, after every run of records
    progress: Callable[[int], None] | None = field(default=None, compare=False, repr=False)
    # the runs another walk of the same files hands over as it goes (the report: verify's walk): the scan takes
    # those that are its own instead of walking them again (``walked``; the plan is the same either way)
    walked: WalkedRuns | None = field(default=None, compare=False, repr=False)


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
    combine: CombineSide | None = None  # the RocksDB side of a CombineConsumeQueueStore
    accelerated: bool = False  # enableAcceleratedRecovery in effect (storeType=defaultRocksDB)
    accelerated_from: int | None = None  # where the accelerated scan started checking records

    def __post_init__(self) -> None:
        # the steps (and tests of one step) read both switches decided, however the Recovery was made
        self.options = with_conf_switches(self.options, self.store.conf)

    @property
    def dispatch_from_phy_offset(self) -> int:
        """ConsumeQueueStoreInterface#getDispatchFromPhyOffset: the queue store's max physical offset, the minimum
        over both sides of a combine store."""
        if self.combine is not None:
            return min(self.max_phy_cq, self.combine.dispatch_from)
        return self.max_phy_cq

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

    @property
    def tags_codes(self) -> bool:
        """Whether dispatched entries carry their TAGS tagsCode: always where entries are compared with another
        store's (a RocksDB queue's rows, a combine store's two sides: checkRocksdbCqWriteProgress compares it),
        else as ``RecoveryOptions.tags_codes`` says."""
        return self.options.tags_codes or self.rocksdb or self.combine is not None

    def queue(self, topic: str, queue_id: int):
        """findConsumeQueue: the queue's model, created on the first record dispatched to it (an empty file
        queue of mappedFileSizeConsumeQueue, or an empty RocksDB queue)."""
        m = self.queues.find(topic, queue_id)
        if m is not None:
            return m
        from ...store.consumequeue import ConsumeQueue
        from .batch import BatchQueueModel
        from .queues import ConsumeQueueModel, default_cq_file_size
        from .rocksdb import RocksDBQueueModel

        if topic in self.batch_topics:
            return self.queues.add(BatchQueueModel(topic, queue_id, None, self.store.commitlog))
        if self.rocksdb:
            return self.queues.add(RocksDBQueueModel(topic, queue_id))
        cq = ConsumeQueue(topic, queue_id, os.path.join(self.store.layout.consumequeue_dir, topic, str(queue_id)))
        size = self.options.cq_file_size or default_cq_file_size(self.queues.models)
        return self.queues.add(ConsumeQueueModel(cq, self.bv, size))


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
    if rule == "cq-max":
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
            return i, f"normal recovery (5.3.4+ rule): {files[i].name}: {why}"
    return 0, "normal recovery (5.3.4+ rule): no later file qualifies, first file"


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
    """CommitLog#isMappedFileMatchedRecover from 5.3.4 (PR #9256), normal and abnormal: the file's first record
    must pass the full checkMessageAndReturnSize (CRC with checkCRCOnRecover), have a STORETIMESTAMP, with
    messageIndexSafe be no newer than the checkpoint's indexMsgTimestamp (both modes), then satisfy the queue
    store: file CQ normal ``phyOffset <= dispatchFromPhyOffset``, abnormal ``storeTimestamp <= checkpoint
    minTimestamp``; RocksDB CQ ``phyOffset <= dispatchFromPhyOffset`` in both; a combine store both sides
    (``combine.other_store_matches``)."""
    first = next(walk_file(f, 0, f.size, check_crc=rec.options.check_crc, accept_v2=rec.bv.accepts_v2, run_records=1),
                 None)
    if type(first) is not RecordRun:
        kind = first.kind if first is not None else None
        why = getattr(first, "reason", "") or kind
        return False, f"first record fails checkMessageAndReturnSize ({why})"
    row = first.row_tuples()[0]
    ts = row[_STORE_TIMESTAMP]
    if ts == 0:
        return False, "first record STORETIMESTAMP is 0"
    cp = rec.store.checkpoint
    if rec.options.index_safe and cp is not None and ts > cp.index_msg_timestamp:
        return False, f"first STORETIMESTAMP {ts} > checkpoint indexMsgTimestamp {cp.index_msg_timestamp} " \
                      "(messageIndexSafe)"
    phys = row[_PHYSICAL_OFFSET_FIELD]
    if rec.rocksdb:
        mp = rec.rocksdb_max_phys
        if mp is None:
            return True, "RocksDB consume queue: dispatchFromPhyOffset unknown, file taken"
        return phys <= mp, f"first PHYSICALOFFSET {phys} vs RocksDB dispatchFromPhyOffset {mp}"
    if rec.normal:
        test = (phys <= rec.max_phy_cq,
                f"first PHYSICALOFFSET {phys} vs maxPhyOffsetOfConsumeQueue {rec.max_phy_cq}")
    else:
        limit = cp.min_timestamp if cp is not None else 0
        test = (ts <= limit, f"first STORETIMESTAMP {ts} {'<=' if ts <= limit else '>'} checkpoint minTimestamp "
                             f"{limit}")
    if rec.combine is not None:
        from .combine import other_store_matches

        return other_store_matches(rec.combine, phys, test, f.name)
    return test


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

    def dispatched(self, count: int, first: int, last: int, end: int) -> None:
        """``count`` more records re-dispatched during the scan: the first at offset ``first``, the last at
        ``last``, ending at ``end``."""
        self.redispatch_count += count
        if self.redispatch_first is None:
            self.redispatch_first = first
        self.redispatch_last = last
        self.last_dispatched_end = end

    def passed(self, count: int, nbytes: int, end: int, v2: bool) -> None:
        """``count`` more records (``nbytes``) passed the check, the last ending at offset ``end``; ``v2``: one of
        them is a V2 record (False may also mean: not looked at, one was seen before)."""
        self.saw_v2 = self.saw_v2 or v2
        self.messages += count
        self.scanned_bytes += nbytes
        self.truncate_offset = end


def scan_records(rec: Recovery, idx: int, on_run: OnRun, walked: WalkedRuns | None = None,
                 on_walked: OnRun | None = None) -> Scan:
    """checkMessageAndReturnSize from the start file on, file after file (a blank record moves to the next
    file), until the first record that fails; T is where it stopped. Records past the dispatch-from offset
    (every record in abnormal mode) are dispatched during the scan, before truncateDirtyLogicFiles.

    ``on_run`` takes each run of records that passed the check (``OnRun``): ``plan.scan_run`` over numpy arrays,
    or ``small.scan_run_rows`` over row tuples for a store small enough to need no numpy. ``walked``: runs another
    walk checked at least as strictly (``walked.WalkedRuns``), taken where they continue the scan, each handed to
    ``on_walked`` instead; the scan walks the rest itself. It is closed when the scan ends."""
    try:
        return _scan_records(rec, idx, on_run, walked, on_walked)
    finally:
        if walked is not None:
            walked.close()


def _scan_records(rec: Recovery, idx: int, on_run: OnRun, walked: WalkedRuns | None,
                  on_walked: OnRun | None) -> Scan:
    files = rec.files
    n = len(files)
    start_file = files[idx] if files else None
    skip_to = accelerated_start(rec, start_file) if start_file is not None else 0
    scan = Scan(start_file.start + skip_to if start_file else 0)
    bv = rec.bv
    dispatch_all = not rec.normal
    dispatch_from = rec.dispatch_from_phy_offset if (rec.normal and bv.is_5x) else None
    if rec.rocksdb and rec.rocksdb_max_phys is None:
        dispatch_from = None
    delay_table = rec.options.delay_table if bv.delay_levels_at_recovery else DelayTable({})
    i = idx
    stale_check = stale_offset_check_in_effect(rec)
    if walked is not None:
        walks = walks_after_walked(files, idx, walked, rec.options.check_crc, bv.accepts_v2, skip_to)
    else:
        walks = file_walks(files, idx, rec.options.check_crc, bv.accepts_v2, rec.options.jobs, skip_to)
    while start_file is not None:
        f = files[i]
        moved = False
        for ev in next(walks):
            if type(ev) is WalkedRun:  # verify's run: its records carry no stale PHYSICALOFFSET (see walked)
                assert on_walked is not None
                if on_walked(rec, scan, ev, dispatch_all, dispatch_from, delay_table):
                    break
                if rec.options.progress is not None:
                    rec.options.progress(f.start + ev.end)
                continue
            if type(ev) is RecordRun:
                k = first_stale_record(ev) if stale_check else None
                if k is None:
                    if on_run(rec, scan, ev, dispatch_all, dispatch_from, delay_table):
                        break
                    if rec.options.progress is not None:
                        rec.options.progress(f.start + ev.end)
                    continue
                if k and on_run(rec, scan, ev[slice(0, k)], dispatch_all, dispatch_from, delay_table):
                    break
                p = ev.column("position")[k]
                stored = ev.column("physical_offset_field")[k]
                scan.stop("stale", f"stored PHYSICALOFFSET {stored} lies outside {f.name} "
                                   "(checkCommitLogOffsetOnRecover)", f.name, p)
                scan.truncate_offset = f.start + p
                break
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


def stale_offset_check_in_effect(rec: Recovery) -> bool:
    """checkCommitLogOffsetOnRecover (5.5.0+, default false; modelled from PR #10018/#10039, not checked against
    a broker): in abnormal recovery a record whose stored physical offset lies outside its file ends the scan."""
    on = rec.options.stale_offset_check
    if on is None:
        from ...store.broker_conf import configured

        s = configured(rec.store.conf, "checkCommitLogOffsetOnRecover")
        on = bool(s.value) if s is not None else False
    return bool(on) and rec.bv.has_stale_offset_check and not rec.normal


def first_stale_record(run: RecordRun) -> int | None:
    """Index of the run's first record whose stored PHYSICALOFFSET lies outside
    [fileFromOffset, fileFromOffset + fileSize] (BLANK records are never in a run: exempt, as in PR #10039)."""
    lo = run.file.start
    hi = lo + run.file.size
    for k, stored in enumerate(run.column("physical_offset_field")):
        if not lo <= stored <= hi:
            return k
    return None


def accelerated_start(rec: Recovery, f) -> int:
    """enableAcceleratedRecovery (5.3.4+, with storeType=defaultRocksDB): the scan seeks inside the start file to
    the dispatch-from offset (normal) or maxPhyOffsetOfConsumeQueue (abnormal); the records before it are not
    checked at all (no CRC). Returns the position in ``f`` the scan starts at (0: from the file's start)."""
    if not rec.accelerated:
        return 0
    target = rec.dispatch_from_phy_offset if rec.normal else rec.max_phy_cq
    pos = target - f.start
    if pos <= 0 or pos >= f.size:
        rec.notes.append(f"accelerated recovery: offset {target} is not inside {f.name}, the scan starts at the "
                         "file's start (the broker's fallback)")
        return 0
    rec.accelerated_from = target
    rec.notes.append(f"accelerated recovery (enableAcceleratedRecovery, storeType=defaultRocksDB): the scan starts "
                     f"at {target} inside {f.name}; the {pos} bytes before it are not checked (no CRC), so a "
                     "damaged record there survives the restart")
    return pos


def alternative_truncation(other: Recovery, j: int, idx: int, t: int, on_run: OnRun) -> int:
    """T of a scan from file ``j``, knowing the one from ``idx`` ended at ``t`` (the scan rules agree across the
    bands): a later start that the known scan passed gives the same T; an earlier one needs only its files before
    ``idx`` checked (the broker's walk then goes on exactly as the known one did), so the extra cost is those
    files, never the whole scan again (a delay level that fails to parse in those files is not looked for)."""
    files = other.files
    if j == idx or (j > idx and t >= files[j].start):
        return t
    if j > idx:
        return scan_records(other, j, on_run).truncate_offset
    for f in files[j:idx]:
        for ev in walk_file(f, 0, f.size, check_crc=other.options.check_crc, accept_v2=other.bv.accepts_v2,
                            run_records=SCAN_RECORDS_PER_RUN):
            if type(ev) is RecordRun:
                continue
            if ev.kind != BLANK:
                return f.start + ev.position  # the earlier start stops before the known scan's first file
            break
    return t


def band_answers(rec: Recovery, idx: int, t: int, on_run: OnRun) -> list[dict]:
    """Where the files cannot tell the release (``VersionAssumption.alternatives``): the start file and truncation
    point under each other band's rules, beside the assumed one's (``idx``, ``t``). Empty when the release was
    given or proven. The scan rules agree across these bands, so another scan runs only when the start differs."""
    if not rec.version.alternatives:
        return []
    files = rec.files
    out = [{"version": rec.bv.text, "band": rec.bv.recovery_band, "assumed": True,
            "start_file": files[idx].name if files else None, "truncate_offset": t}]
    for alt in rec.version.alternatives:
        va = dataclasses.replace(rec.version, version=alt, alternatives=[])
        opts = dataclasses.replace(rec.options, dispatch=False, keep_redispatch=False, jobs=1)
        combine = dataclasses.replace(rec.combine, extra_left=rec.combine.settings.max_extra_files, notes=[]) \
            if rec.combine is not None else None
        other = dataclasses.replace(rec, version=va, options=opts, notes=[], combine=combine)
        j, why = choose_start_file(other)
        t2 = alternative_truncation(other, j, idx, t, on_run)
        out.append({"version": alt.text, "band": alt.recovery_band, "assumed": False,
                    "start_file": files[j].name if files else None, "start_reason": why, "truncate_offset": t2})
    # what a restart keeps is decided by the truncation point; the start file changes only what is scanned
    differ = any(a["truncate_offset"] != out[0]["truncate_offset"] for a in out[1:])
    from .version import SETTLED_BY

    out.sort(key=lambda a: BrokerVersion.parse(a["version"]).parts)
    starts = ", ".join(f"{a['band']} {a['start_file']}" for a in out)
    if differ:
        rec.notes.append("the release bands give different answers here: " + "; ".join(
            f"{a['band']}: start {a['start_file']}, truncate at {a['truncate_offset']}" for a in out) +
            f"; settled by {SETTLED_BY}")
    else:
        rec.notes.append("the files cannot tell the release bands " + ", ".join(a["band"] for a in out) +
                         f" apart, but all truncate at {t} here (start files: {starts}); {SETTLED_BY} settles it")
    for a in out:
        a["differs"] = differ
    return out


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
    accept_v2[, lo, hi[, dledger]]): the walk from position ``lo`` (default 0) up to the record starting at ``hi``
    (None: the file's end); ``landed`` is ``hi`` when the walk reached it, else WALK_ENDED or WALKED_PAST;
    ``dledger`` the parent's ``MappedFile.dledger`` (None: from the path). The file is mapped here and closed."""
    path, start, check_crc, accept_v2 = args[:4]
    lo, hi = args[4:6] if len(args) > 4 else (0, None)
    f = MappedFile(path, start, dledger=args[6] if len(args) > 6 else None)
    out: list = []
    try:
        if hi is None:
            out = [ev.records if type(ev) is RecordRun else FileStop(ev.kind, ev.position, ev.reason)
                   for ev in walk_file(f, lo, f.size, check_crc=check_crc, accept_v2=accept_v2,
                                       run_records=SCAN_RECORDS_PER_RUN)]
            return start, lo, WALK_ENDED, out
        pos, seen_n, seen_bytes = lo, 0, 0  # runs ask for the records of average size that fit before hi
        while True:
            # runs sized to reach hi: the scanner is not asked for records far past the chunk
            run_records = min(SCAN_RECORDS_PER_RUN, max(1, (hi - pos) * seen_n // seen_bytes)) if seen_n else _AIM_PROBE
            for ev in walk_file(f, pos, f.size, check_crc=check_crc, accept_v2=accept_v2, run_records=run_records):
                if type(ev) is RecordRun:
                    r = ev.records
                    k = int(r["position"].searchsorted(hi))
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
            yield from walk_file(f, lo, f.size, check_crc=check_crc, accept_v2=accept_v2,
                                 run_records=SCAN_RECORDS_PER_RUN)
            return
        yield from (e if type(e) is FileStop else RecordRun(f, e) for e in events)
        if landed == WALK_ENDED:
            return


def record_chunks(f, start: int, *, accept_v2: bool = True, step: int | None = None) -> list[int]:
    """``salvage.record_chunks``, imported when a multi-process scan first splits a file: a key look-up's recovery
    scan runs in one process and should not import the salvage."""
    from ...store.walk.resync import record_chunks as chunks

    return chunks(f, start, accept_v2=accept_v2, step=step)


def file_walks(files: list, idx: int, check_crc: bool, accept_v2: bool, jobs: int | None, first_position: int = 0):
    """The walk of each file from ``files[idx]`` on, in order, one iterator of events per file: ``walk_file``
    in this process, or with ``jobs`` > 1 (``parallel.resolve_jobs``) the files checked by worker processes
    ahead of the scan (``scan_file``), split inside each file at valid records about every
    ``parallel.chunk_bytes()`` (``salvage.record_chunks``), their runs handed over as ``RecordRun``s of this
    process' maps. The scan takes the next file only after a blank record, so files past its stop are checked
    in vain but never looked at. ``first_position``: where the first file's walk starts (accelerated recovery;
    then the first file is walked in this process)."""
    if first_position:
        yield walk_file(files[idx], first_position, files[idx].size, check_crc=check_crc, accept_v2=accept_v2,
                        run_records=SCAN_RECORDS_PER_RUN)
        idx += 1
    if resolve_jobs(jobs) > 1:
        args = []
        for f in files[idx:]:
            starts = record_chunks(f, 0, accept_v2=accept_v2)
            args += [(f.path, f.start, check_crc, accept_v2, lo, starts[k + 1] if k + 1 < len(starts) else None,
                      f.dledger) for k, lo in enumerate(starts)]
        if len(args) > 1:
            results = _ChunkResults(map_files(scan_file, args, jobs))
            for f in files[idx:]:
                yield _chunked_file_walk(f, results, check_crc, accept_v2)
            return
    for f in files[idx:]:
        yield walk_file(f, 0, f.size, check_crc=check_crc, accept_v2=accept_v2, run_records=SCAN_RECORDS_PER_RUN)


def walks_after_walked(files: list, idx: int, walked: WalkedRuns, check_crc: bool, accept_v2: bool,
                       first_position: int = 0):
    """``file_walks`` for a scan handed another walk's runs: each file's runs that continue the scan from where it
    is (``WalkedRuns.runs_from``), then the file walked here from where they end."""
    for k, f in enumerate(files[idx:]):
        yield _walked_then_own(f, first_position if k == 0 else 0, walked, check_crc, accept_v2)


def _walked_then_own(f, pos: int, walked: WalkedRuns, check_crc: bool, accept_v2: bool):
    pos = yield from walked.runs_from(f.start, pos, accept_v2)
    yield from walk_file(f, pos, f.size, check_crc=check_crc, accept_v2=accept_v2, run_records=SCAN_RECORDS_PER_RUN)


# A run of records that passed the check, handed to the scan's policy: (rec, scan, run, dispatch_all, dispatch_from,
# delay_table) -> whether the scan stopped in this run
OnRun = Callable[["Recovery", "Scan", RecordRun, bool, "int | None", DelayTable], bool]


__all__ = ["FileStop", "OnRun", "QueueSet", "Recovery", "RecoveryOptions", "SCAN_RECORDS_PER_RUN", "Scan",
           "WALKED_PAST", "WALK_ENDED", "abnormal_file_matches", "abnormal_start_file", "accelerated_start",
           "alternative_truncation", "band_answers", "choose_start_file", "file_walks",
           "first_record_store_timestamp", "first_stale_record", "head_file_matches", "normal_start_file",
           "record_chunks", "scan_file", "scan_records", "stale_offset_check_in_effect", "walks_after_walked",
           "with_conf_switches"]
