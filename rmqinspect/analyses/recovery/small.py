"""The recovery's commit-log scan for a small store, over row tuples instead of numpy arrays.

A key look-up's fate column needs only where the broker's recovery truncates the commit log and which records
it re-dispatches (``analyses.lookup.recovery_view``), and a script looping over keys pays the command's start-up
for each: on a store of a few MiB the numpy import (~80 ms) is most of it. Here the same scan
(``scan.scan_records``: the start-file rules and the stop rule are shared) takes each run of records as tuples
(``scan_run_rows``, the policy of ``plan.scan_run``), and ConsumeQueue.recover's maxPhysicOffset is read with
struct. Stores that are not small, and every case this module does not model (DLedger mode, a RocksDB or batch
consume queue), go to ``plan.plan_recovery``. tests/test_recovery_small.py proves both give the same scan.
"""

from __future__ import annotations

import os

from ...formats.constants import (
    DEFAULT_CQ_FILE_SIZE,
    PROPERTY_CRC32,
    PROPERTY_DELAY_TIME_LEVEL,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from ...formats.consumequeue import CQ_ENTRY, CQ_STORE_UNIT_SIZE, mapped_cq_file_size
from ...formats.properties import has_crc32_trailer, parse_properties_at
from ...store import Store
from ...store.consumequeue import ConsumeQueue, list_queues
from ...store.detect import SEPARATE_ROCKSDB_CQ_DIRS
from ...store.layout import is_rocksdb_dir
from ...store.version import BrokerVersion
from ...store.walk.kinds import ILLEGAL
from ...store.walk.records import RECORD_FIELDS, RecordRun
from ..dispatch_rules import DelayLevelError, DelayTable, dispatch_tags_code
from .queueset import QueueSet
from .scan import Recovery, RecoveryOptions, Scan, choose_start_file, scan_records
from .version import assume_version

# The commit-log bytes up to which a look-up's recovery scan runs here, and the consume-queue entries ConsumeQueue.
# recover may read here (when the 5.x start-file rule needs maxPhyOffsetOfConsumeQueue): under them a Python loop
# costs less than importing numpy (~80 ms). Queue files are counted by the entries read, not by their length: a
# broker pre-allocates them (6 MB by default) and the read stops at the first empty entry.
SMALL_STORE_BYTES = 16 << 20
SMALL_QUEUE_ENTRIES = 100_000
# and the records the scan may take one by one (16 MiB of 100-byte records would be 160,000: past this the scan
# gives way to the plan's)
SMALL_SCAN_RECORDS = 50_000

_SCHEDULE_TOPIC = RMQ_SYS_SCHEDULE_TOPIC.encode()
(_POSITION, _TOTAL_SIZE, _STORE_TIMESTAMP, _TOPIC_POS, _TOPIC_LEN, _PROPERTIES_POS, _PROPERTIES_LEN,
 _MAGIC_VERSION) = (RECORD_FIELDS.index(n) for n in ("position", "total_size", "store_timestamp", "topic_pos",
                                                      "topic_len", "properties_pos", "properties_len",
                                                      "magic_version"))


class _OverBudget(Exception):
    pass


def _properties(buf, row: tuple) -> dict[str, str]:
    return parse_properties_at(buf, row[_PROPERTIES_POS], row[_PROPERTIES_LEN])


def scan_run_rows(rec: Recovery, scan: Scan, run: RecordRun, dispatch_all: bool, dispatch_from: int | None,
                  delay_table: DelayTable) -> bool:
    """``plan.scan_run`` record by record, for a scan that dispatches nothing into queue models: the records past
    the dispatch-from offset count as re-dispatched, a SCHEDULE_TOPIC_XXXX record whose DELAY Integer.parseInt
    rejects ends the scan there. Returns whether the scan stopped in this run."""
    rows = run.row_tuples()
    base = run.base
    buf = run.file.buffer
    stop_at = None
    first = last = None  # the first and last record re-dispatched
    sent = 0
    for j, r in enumerate(rows):
        tp = r[_TOPIC_POS]
        if r[_TOPIC_LEN] == len(_SCHEDULE_TOPIC) and buf[tp:tp + len(_SCHEDULE_TOPIC)] == _SCHEDULE_TOPIC:
            props = _properties(buf, r)
            if PROPERTY_DELAY_TIME_LEVEL in props:
                try:
                    dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, r[_STORE_TIMESTAMP], delay_table)
                except DelayLevelError as e:
                    scan.stop(ILLEGAL, f"{e} (Integer.parseInt fails: illegal record)", run.file.name, r[_POSITION])
                    stop_at = j
                    break
        if dispatch_all or (dispatch_from is not None and r[_POSITION] + base > dispatch_from):
            if first is None:
                first = r
            last = r
            sent += 1
            if (not scan.saw_crc32_property and has_crc32_trailer(buf, r[_POSITION] + r[_TOTAL_SIZE])
                    and PROPERTY_CRC32 in _properties(buf, r)):
                scan.saw_crc32_property = True
    if first is not None and last is not None:
        scan.dispatched(sent, base + first[_POSITION], base + last[_POSITION],
                        base + last[_POSITION] + last[_TOTAL_SIZE])
    done = rows if stop_at is None else rows[:stop_at]
    if done:
        scan.passed(len(done), sum(r[_TOTAL_SIZE] for r in done), base + done[-1][_POSITION] + done[-1][_TOTAL_SIZE],
                    not scan.saw_v2 and any(r[_MAGIC_VERSION] == 2 for r in done))
    if stop_at is not None:
        scan.truncate_offset = base + rows[stop_at][_POSITION]
        return True
    return False


def queue_max_physic_offset(cq: ConsumeQueue, version: BrokerVersion, budget: int | None = None) -> tuple[int, int]:
    """ConsumeQueue.recover's maxPhysicOffset (``queues.ConsumeQueueModel.recover``): from the third-last file,
    entries up to the first invalid one; a file full of valid entries goes on with the next. Returns (max physic
    offset, entries read); with ``budget``, stops once more than that many entries were read (the caller then
    leaves the queue to the plan)."""
    size = mapped_cq_file_size(cq.file_size or DEFAULT_CQ_FILE_SIZE)
    units = size // CQ_STORE_UNIT_SIZE
    files = sorted(cq.files, key=lambda f: f.start)
    max_phys = -1
    read = 0
    i = max(0, len(files) - 3)
    while i < len(files):
        f = files[i]
        n = min(f.size // CQ_STORE_UNIT_SIZE, units)
        valid = 0
        with memoryview(f.buffer if n > 0 else b"") as mv:  # released before the queue's maps are closed
            for off, sz, _ in CQ_ENTRY.iter_unpack(mv[:n * CQ_STORE_UNIT_SIZE]):
                read += 1
                if off < 0 or sz <= 0:
                    break
                valid += 1
                max_phys = off if version.cq_max_phys_is_start else off + sz
                if budget is not None and read > budget:
                    return max_phys, read
        if valid < units:
            break
        i += 1
    return max_phys, read


def small_queue_max_phys(store: Store, version: BrokerVersion | None = None) -> int | None:
    """max over the file queues of ConsumeQueue.recover's maxPhysicOffset (-1 without a queue), where start()'s
    ReputMessageService begins after a normal recovery; None past SMALL_QUEUE_ENTRIES (the plan answers)."""
    return queues_max_physic_offset(store.layout.consumequeue_dir, assume_version(store, version).version)


def queues_max_physic_offset(cq_dir: str, bv: BrokerVersion) -> int | None:
    """maxPhyOffsetOfConsumeQueue over the file queues in ``cq_dir`` (-1 without a queue); None once more than
    SMALL_QUEUE_ENTRIES entries would have to be read."""
    queues = [ConsumeQueue(q.topic, q.queue_id, q.path) for q in list_queues(cq_dir)]
    budget = SMALL_QUEUE_ENTRIES
    max_phy = -1
    try:
        for cq in queues:
            phys, read = queue_max_physic_offset(cq, bv, budget)
            budget -= read
            if budget < 0:
                return None
            max_phy = max(max_phy, phys)
    finally:
        for cq in queues:
            cq.close()
    return max_phy


def small_recovery_scan(store: Store, check_crc: bool = True, index_safe: bool = False,
                        version: BrokerVersion | None = None) -> Scan | None:
    """The recovery scan of ``plan.plan_recovery`` (version detected, broker defaults otherwise) for a store of at
    most SMALL_STORE_BYTES; None when the store is larger or of a kind only the plan models."""
    layout = store.layout
    cq_dir = layout.consumequeue_dir
    if (layout.dledger is not None
            or os.path.isdir(os.path.join(layout.root, "batchconsumequeue"))
            or sum(f.size for f in store.commitlog.files) > SMALL_STORE_BYTES):
        return None
    from .controller import detect_confirm_offset

    if detect_confirm_offset(store) >= 0:  # controller mode: the recovery's dispatch stops at the confirm offset
        return None
    va = assume_version(store, version)
    bv = va.version
    options = RecoveryOptions(check_crc=check_crc, index_safe=index_safe, with_salvage=False, keep_redispatch=False,
                              model_start=False, dispatch=False, version=version)
    combine = None
    if is_rocksdb_dir(cq_dir) or any(is_rocksdb_dir(os.path.join(layout.root, n)) for n in SEPARATE_ROCKSDB_CQ_DIRS):
        # a pure RocksDB consume queue is the plan's; a combine store (5.3.4+) needs only its RocksDB side's
        # dispatch-from offset beside the file queues read here
        from .combine import combine_in_effect, load_combine_side

        if not (bv.has_combine_store and list_queues(cq_dir) and combine_in_effect(store, options)):
            return None
        combine = load_combine_side(store)
    normal = not store.abort_present
    max_phy: int | None = -1
    if normal and bv.is_5x:  # the 5.x start-file rule and dispatch-from offset read maxPhyOffsetOfConsumeQueue
        max_phy = queues_max_physic_offset(cq_dir, bv)
        if max_phy is None:
            return None
    rec = Recovery(store, options, va, normal, False, QueueSet(), max_phy_cq=max_phy, combine=combine)
    idx, _ = choose_start_file(rec)
    left = SMALL_SCAN_RECORDS

    def on_run(rec: Recovery, scan: Scan, run: RecordRun, dispatch_all: bool, dispatch_from: int | None,
               delay_table: DelayTable) -> bool:
        nonlocal left
        left -= len(run)
        if left < 0:
            raise _OverBudget()
        return scan_run_rows(rec, scan, run, dispatch_all, dispatch_from, delay_table)

    try:
        return scan_records(rec, idx, on_run)
    except _OverBudget:
        return None


__all__ = ["SMALL_QUEUE_ENTRIES", "SMALL_SCAN_RECORDS", "SMALL_STORE_BYTES", "queue_max_physic_offset", "scan_run_rows",
           "small_queue_max_phys", "small_recovery_scan"]
