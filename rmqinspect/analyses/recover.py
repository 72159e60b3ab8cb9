"""The recovery a RocketMQ broker runs when it loads a store, reproduced offline (FORMATS.md §7).

``plan_recovery(store)`` answers "what will the broker keep and what will it throw away if I start it on
these files?": normal vs abnormal mode (the ``abort`` file), the first commit-log file scanned (by
version), the record scan and its stop rule, the truncation point T, the commit-log files deleted /
truncated (truncateDirtyFiles), every consume queue's recover + truncateDirtyLogicFiles, the records the
recovery re-dispatches, the index files dropped on an abnormal start, and the per-queue max offsets after
``load()``. Nothing is written: every number is computed from read-only maps.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field

import numpy as np

from ..formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE
from ..formats.constants import (
    CRC32_RESERVED_LEN,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_CRC32,
    PROPERTY_DELAY_TIME_LEVEL,
    RMQ_SYS_SCHEDULE_TOPIC,
    SysFlag,
)
from ..formats.commitlog import parse_properties
from ..store import Store
from ..store.detect import detect_store
from ..store.commitlog import (
    BLANK,
    END,
    FILE_END,
    ILLEGAL,
    MESSAGE,
    RecordRun,
    _tuple_to_row,
    scan_buffer,
    scan_records_array,
)
from ..store.consumequeue import ConsumeQueue, list_queues
from ..store.indexfile import INDEX_HEADER
from .rebuild import dispatch_fields
from .dispatch import DEFAULT_DELAY_TABLE, DelayLevelError, DelayTable, dispatch_tags_code, goes_to_consume_queue


def scan_record_runs(cl, *a, **kw):  # transitional, until the recovery consumes CommitLog.walk's events itself
    return ((ev.file, ev.rows, None) for ev in cl.walk(*a, batch=65536, **kw) if type(ev) is RecordRun)


# ---------------------------------------------------------------------------------------------------
# Broker version: which recovery rules apply


_RULES = {
    "third-last": "normal recovery starts at the third-last commit-log file (4.x ... 5.3.1)",
    "cq-max": "normal recovery starts at the newest file whose start <= maxPhyOffsetOfConsumeQueue (5.3.2, 5.3.3)",
    "head": "normal recovery starts at the newest file whose first record validates (after 5.3.3)",
}


@dataclass(frozen=True)
class BrokerVersion:
    """A RocketMQ version and the recovery rules that follow from it."""

    text: str
    parts: tuple[int, int, int]

    @classmethod
    def parse(cls, text: str) -> "BrokerVersion":
        t = text.strip().lower().removeprefix("rocketmq-all-").removeprefix("v")
        if t in ("head", "master", "develop", "latest"):
            return cls("HEAD", (5, 3, 4))
        m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", t)
        if not m:
            raise ValueError(f"not a RocketMQ version: {text!r} (e.g. 4.9.8, 5.3.3, HEAD)")
        parts = (int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0))
        return cls(text.strip(), parts)

    @property
    def is_5x(self) -> bool:
        return self.parts >= (5, 0, 0)

    @property
    def accepts_v2(self) -> bool:
        """MESSAGE_MAGIC_CODE_V2 exists from 5.1.0; 4.x treats it as an illegal magic code."""
        return self.parts >= (5, 1, 0)

    @property
    def normal_rule(self) -> str:
        if self.parts >= (5, 3, 4):
            return "head"
        if self.parts >= (5, 3, 2):
            return "cq-max"
        return "third-last"

    @property
    def store_ts_fixed_56(self) -> bool:
        """Before 4.6.0 isMappedFileMatchedRecover read STORETIMESTAMP at the fixed offset 56."""
        return self.parts < (4, 6, 0)

    @property
    def cq_max_phys_is_start(self) -> bool:
        """4.4.0's ConsumeQueue.recover kept ``offset`` (not offset + size) as max physical offset."""
        return self.parts < (4, 5, 0)

    @property
    def delay_levels_at_recovery(self) -> bool:
        """5.x parses messageDelayLevel in the store constructor, so recovery-time dispatch computes
        delivery times; 4.9.8's ScheduleMessageService has not parsed them yet (oracle: tagsCode = hash)."""
        return self.is_5x


@dataclass
class VersionAssumption:
    version: BrokerVersion
    source: str  # "option" | "detected" | "default"
    evidence: list[str] = field(default_factory=list)

    def describe(self) -> str:
        how = {"option": "given with --broker-version", "detected": "detected", "default": "assumed"}[self.source]
        ev = f" ({'; '.join(self.evidence)})" if self.evidence else ""
        abn = ("abnormal recovery starts at the newest file whose first record validates and is not newer than "
               "the checkpoint minTimestamp" if self.version.normal_rule == "head" else
               "abnormal recovery starts at the newest file whose first record is not newer than the checkpoint "
               "minTimestamp")
        return f"RocketMQ {self.version.text} {how}{ev}: {_RULES[self.version.normal_rule]}; {abn}"

    def to_dict(self) -> dict:
        return {"version": self.version.text, "source": self.source, "evidence": self.evidence,
                "normal_start_rule": self.version.normal_rule, "description": self.describe()}


def rocksdb_consume_queue(store: Store) -> bool:
    d = store.layout.consumequeue_dir
    return os.path.isfile(os.path.join(d, "CURRENT")) and any(n.startswith("MANIFEST-") for n in os.listdir(d))


@dataclass
class RocksDBQueues:
    """What recovery needs of a RocksDB consume queue (FORMATS.md §10.1), read with ``store.rocksdb_cq``
    (a private snapshot; the store's directory is never opened by RocksDB)."""

    checkpoint: int | None  # CHECKPOINT_TOPIC max: the dispatch-from offset
    max: dict  # (topic, queueId) -> (physical offset of the last entry, max offset (exclusive))
    problems: list[str] = field(default_factory=list)


def read_rocksdb_queues(store: Store) -> tuple[RocksDBQueues | None, str]:
    """The offset table of the RocksDB consume queue: per queue the ``max`` row (RocksDBConsumeQueue
    getMaxOffsetInQueue = cq offset + 1; a queue without one falls back to its last row) and the
    CHECKPOINT_TOPIC value. Returns (None, why) when the database cannot be read."""
    from ..store.errors import RmqInspectError
    from ..store.rocksdb_cq import RocksDBConsumeQueueStore

    try:
        with RocksDBConsumeQueueStore(store.layout.consumequeue_dir) as db:
            table = db.offset_table
            out = {}
            for q in db.queue_ids():
                mx = table.max.get((q.topic, q.queue_id))
                if mx is not None:
                    out[(q.topic, q.queue_id)] = (mx[0], mx[1] + 1)
                else:
                    qq = db.queue(q.topic, q.queue_id)
                    out[(q.topic, q.queue_id)] = (qq.max_physical_offset, qq.bounds()[1])
            for (topic, qid), mx in table.max.items():
                out.setdefault((topic, qid), (mx[0], mx[1] + 1))
            return RocksDBQueues(table.checkpoint, out, list(table.problems)), \
                "RocksDB consume queue read from a private snapshot (store.rocksdb_cq)"
    except RmqInspectError as e:
        return None, f"cannot read the RocksDB consume queue: {e}"
    except Exception as e:  # a damaged database must not abort the plan
        return None, f"cannot read the RocksDB consume queue: {type(e).__name__}: {e}"


def _rocksdb_truncate(store: Store, states: list, t: int) -> str | None:
    """truncateDirtyLogicFiles(T) on RocksDB queues whose last entry starts at or after T: the queue's max
    offset goes back to just after its last entry starting before T."""
    from ..store.rocksdb_cq import RocksDBConsumeQueueStore

    hit = [s for s in states if s.max_phys >= t]
    if not hit:
        return None
    try:
        with RocksDBConsumeQueueStore(store.layout.consumequeue_dir) as db:
            for s in hit:
                keep = 0
                for base, arr in db.queue(s.cq.topic, s.cq.queue_id).raw_chunks():
                    ok = np.flatnonzero(arr["physical_offset"] < t)
                    if ok.size:
                        keep = base + int(ok[-1]) + 1
                        s.max_phys = int(arr["physical_offset"][ok[-1]])
                s.truncate_to(keep)
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        return f"RocksDB truncateDirtyLogicFiles not modelled: {e}"
    return None


class _RocksQueueState:
    """One RocksDB consume queue while recovery runs: rows are keyed by the dispatched queue offset and the
    offset table keeps the last dispatched entry (FORMATS.md §10.1), so only the max offset is modelled."""

    def __init__(self, topic: str, queue_id: int, max_phys: int = -1, max_offset: int = 0):
        from ..store.rocksdb_cq import RocksQueueId

        self.cq = RocksQueueId(topic, queue_id)
        self.max_phys = max_phys
        self.max_off = max_offset
        self.rec = QueueRecovery(topic, queue_id, 0, [], max_offset_on_disk=max_offset, max_physic_offset=max_phys)

    def max_offset(self) -> int:
        return self.max_off

    def dispatch_many(self, phys: np.ndarray, size: np.ndarray, cq_offset: np.ndarray, tags_code: np.ndarray) -> int:
        if len(phys):
            self.max_off = int(cq_offset[-1]) + 1
            self.max_phys = int(phys[-1])
        return len(phys)

    def truncate_to(self, max_offset: int) -> None:
        self.rec.entries_cut = max(0, self.max_off - max_offset)
        self.max_off = max_offset
        self.rec.max_offset_after_truncate = max_offset


def detect_version(store: Store) -> VersionAssumption:
    """What the files themselves say about the broker version (FORMATS.md §0.1, §6), from the one store
    detector (``store.detect``): any 5.x-only structure or record format means 5.x rules."""
    det = detect_store(store)
    ev5 = [e.detail for e in det.found() if e.implies.startswith("5")]
    other = [e.detail for e in det.found() if not e.implies.startswith("5")]
    if ev5:
        return VersionAssumption(BrokerVersion.parse("5.3.3"), "detected", ev5 + other +
                                 ["5.x release assumed: 5.3.3; pass --broker-version for 5.0-5.3.1 or HEAD"])
    return VersionAssumption(BrokerVersion.parse("4.9.8"), "default",
                             other + ["no 5.x marker found (abort PID, abort.bak, compaction/, timer store, RocksDB "
                                      "consume queue, V2 or __CRC32# records, 32/40-byte checkpoint); 4.x assumed: "
                                      "4.9.8"])


# ---------------------------------------------------------------------------------------------------
# Consume queues


@dataclass
class QueueRecovery:
    """One consume queue through ConsumeQueue.recover, truncateDirtyLogicFiles and re-dispatch."""

    topic: str
    queue_id: int
    file_size: int
    files: list[str]
    recover_start_file: str | None = None
    max_offset_on_disk: int = 0  # logical end found by ConsumeQueue.recover
    max_physic_offset: int = -1  # maxPhysicOffset after ConsumeQueue.recover
    files_deleted: list[str] = field(default_factory=list)
    truncated_file: str | None = None
    truncated_position: int | None = None
    entries_cut: int = 0  # entries removed by truncateDirtyLogicFiles
    cut_offsets: list[int] = field(default_factory=list, repr=False)  # physical offsets of cut entries (<= 10000)
    max_offset_after_truncate: int = 0
    redispatched: int = 0  # entries appended by the recovery's re-dispatch
    max_offset: int = 0  # after load()
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    def to_dict(self) -> dict:
        return {"queue": self.key, "files": len(self.files), "recover_start_file": self.recover_start_file,
                "max_offset_on_disk": self.max_offset_on_disk, "max_physic_offset": self.max_physic_offset,
                "files_deleted": self.files_deleted, "truncated_file": self.truncated_file,
                "truncated_position": self.truncated_position, "entries_cut": self.entries_cut,
                "redispatched": self.redispatched, "max_offset": self.max_offset, "notes": self.notes}


class _QueueState:
    """In-memory model of one ConsumeQueue's MappedFileQueue while recovery runs."""

    def __init__(self, cq: ConsumeQueue, version: BrokerVersion, file_size: int):
        self.cq = cq
        self.version = version
        self.size = file_size
        self.arrays = {f.start: cq.file_entries(f) for f in cq.files}
        self.names = {f.start: f.name for f in cq.files}
        self.starts = sorted(self.arrays)
        self.wrote: dict[int, int] = {s: 0 for s in self.starts}  # byte write position per file
        self.max_phys = -1
        self.rec = QueueRecovery(cq.topic, cq.queue_id, file_size, [f.name for f in cq.files])

    def _phys_end(self, off: int, size: int) -> int:
        return off if self.version.cq_max_phys_is_start else off + size

    def max_offset(self) -> int:
        if not self.starts:
            return 0
        last = self.starts[-1]
        return (last + self.wrote[last]) // CQ_STORE_UNIT_SIZE

    def recover(self) -> None:
        """ConsumeQueue.recover: walk from the third-last file; files beyond the logical end are deleted."""
        if not self.starts:
            return
        i = max(0, len(self.starts) - 3)
        self.rec.recover_start_file = self.names[self.starts[i]]
        unit = CQ_STORE_UNIT_SIZE
        while True:
            start = self.starts[i]
            arr = self.arrays[start]
            nunits = self.size // unit
            sub = arr[:nunits]
            bad = np.flatnonzero((sub["physical_offset"] < 0) | (sub["size"] <= 0))
            n = int(bad[0]) if bad.size else len(sub)
            if n:
                self.max_phys = self._phys_end(int(sub["physical_offset"][n - 1]), int(sub["size"][n - 1]))
            valid = n * unit
            if valid == self.size and i + 1 < len(self.starts):
                i += 1
                continue
            end = start + valid
            break
        # MappedFileQueue.truncateDirtyFiles(end)
        for s in list(self.starts):
            if s + self.size > end:
                if end >= s:
                    self.wrote[s] = end - s
                else:
                    self.starts.remove(s)
                    self.rec.files_deleted.append(self.names[s])
            else:
                self.wrote[s] = self.size
        self.rec.max_offset_on_disk = self.max_offset()
        self.rec.max_physic_offset = self.max_phys

    def truncate_dirty(self, t: int) -> None:
        """ConsumeQueue.truncateDirtyLogicFiles(T): entry 0 of the last file decides deletion (without a
        validity test); later entries stop at the first invalid one or the first starting at/after T."""
        before = self.max_offset()
        before_end = {s: self.wrote[s] for s in self.starts}
        unit = CQ_STORE_UNIT_SIZE
        while self.starts:
            last = self.starts[-1]
            arr = self.arrays[last]
            n = min(len(arr), self.size // unit)
            offs = arr["physical_offset"][:n]
            sizes = arr["size"][:n]
            if n == 0 or int(offs[0]) >= t:
                self.starts.remove(last)
                self.rec.files_deleted.append(self.names[last])
                continue
            self.max_phys = self._phys_end(int(offs[0]), int(sizes[0]))
            rest_bad = np.flatnonzero((offs[1:] < 0) | (sizes[1:] <= 0) | (offs[1:] >= t))
            k = 1 + (int(rest_bad[0]) if rest_bad.size else n - 1)  # entries kept
            if k > 1:
                self.max_phys = self._phys_end(int(offs[k - 1]), int(sizes[k - 1]))
            self.wrote[last] = k * unit
            self.rec.truncated_file = self.names[last]
            self.rec.truncated_position = k * unit
            if int(offs[0]) < 0 or int(sizes[0]) <= 0:
                self.rec.notes.append(f"entry 0 of {self.names[last]} is not a valid entry but is kept "
                                      "(truncateDirtyLogicFiles does not test it)")
            break
        self.rec.entries_cut = max(0, before - self.max_offset())
        for st, end in before_end.items():
            lo = self.wrote.get(st, 0) if st in self.starts else 0
            if end > lo and len(self.rec.cut_offsets) < 10000:
                arr = self.arrays[st][lo // unit:end // unit]
                self.rec.cut_offsets.extend(arr["physical_offset"][:10000].tolist())
        self.rec.max_offset_after_truncate = self.max_offset()

    def _writable(self, fstart: int) -> np.ndarray:
        arr = self.arrays.get(fstart)
        n = self.size // CQ_STORE_UNIT_SIZE
        if arr is None or len(arr) < n:
            new = np.zeros(n, dtype=CQ_DTYPE)
            if arr is not None:
                new[:len(arr)] = arr
            self.arrays[fstart] = arr = new
        elif not arr.flags.writeable:
            self.arrays[fstart] = arr = arr.copy()  # copy-on-write: the store's map stays read-only
        return arr

    def dispatch(self, phys: int, size: int, cq_offset: int, tags_code: int = 0) -> bool:
        """ConsumeQueue.putMessagePositionInfo (re-dispatch during recovery, ReputMessageService after
        start). The entry goes into an in-memory copy of the file. Returns whether an entry was written."""
        if phys + size <= self.max_phys:
            return False  # "build consume queue repeatedly"
        unit = CQ_STORE_UNIT_SIZE
        expect = cq_offset * unit
        if not self.starts:
            # getLastMappedFile creates the file holding the expected position; fillPreBlank before it
            fstart = expect - expect % self.size
            self.starts.append(fstart)
            self.names[fstart] = "%020d" % fstart
            self.wrote[fstart] = expect - fstart
            arr = self._writable(fstart)
            k = (expect - fstart) // unit
            arr["physical_offset"][:k] = 0
            arr["size"][:k] = PRE_BLANK_SIZE
            arr["tags_code"][:k] = 0
        last = self._roll_if_full()
        current = last + self.wrote[last]
        if cq_offset != 0:
            if expect < current:
                return False
            if expect != current and len(self.rec.notes) < 5:
                self.rec.notes.append(f"logic queue order maybe wrong: expected offset {cq_offset}, "
                                      f"queue is at {current // unit}; the entry is appended at {current // unit}")
        self.max_phys = phys + size
        arr = self._writable(last)
        arr[self.wrote[last] // unit] = (phys, size, tags_code)
        self.wrote[last] += unit
        return True

    def dispatch_many(self, phys: np.ndarray, size: np.ndarray, cq_offset: np.ndarray, tags_code: np.ndarray) -> int:
        """``dispatch`` for many records of this queue, in order, with the same effect as calling it once per
        record. Runs where every entry is accepted and appended exactly at the queue's write position
        (end physical offset increasing, queue offsets consecutive from the current one) are written in bulk;
        any other record goes through ``dispatch``. Returns the number of entries written."""
        n = len(phys)
        unit = CQ_STORE_UNIT_SIZE
        if n == 0:
            return 0
        ends = phys + size
        if self.size % unit:
            return sum(self.dispatch(int(a), int(b), int(c), int(d)) for a, b, c, d in
                       zip(phys.tolist(), size.tolist(), cq_offset.tolist(), tags_code.tolist()))
        # i -> first index after i where the run property breaks (ends not increasing or offsets not consecutive)
        breaks = np.flatnonzero((ends[1:] <= ends[:-1]) | (cq_offset[1:] != cq_offset[:-1] + 1)) + 1
        written = 0
        i = 0
        while i < n:
            current = self.starts[-1] + self.wrote[self.starts[-1]] if self.starts else -1
            if (not self.starts or current % unit or int(cq_offset[i]) * unit != current
                    or int(ends[i]) <= self.max_phys):
                written += self.dispatch(int(phys[i]), int(size[i]), int(cq_offset[i]), int(tags_code[i]))
                i += 1
                continue
            k = np.searchsorted(breaks, i, side="right")
            j = int(breaks[k]) if k < len(breaks) else n
            pos = i
            while pos < j:
                last = self._roll_if_full()
                arr = self._writable(last)
                w = self.wrote[last] // unit
                take = min(j - pos, (self.size - self.wrote[last]) // unit)
                arr["physical_offset"][w:w + take] = phys[pos:pos + take]
                arr["size"][w:w + take] = size[pos:pos + take]
                arr["tags_code"][w:w + take] = tags_code[pos:pos + take]
                self.wrote[last] += take * unit
                pos += take
            self.max_phys = int(ends[j - 1])
            written += j - i
            i = j
        return written

    def _roll_if_full(self) -> int:
        """getLastMappedFile: a full last file makes the next one (same rule as ``dispatch``)."""
        last = self.starts[-1]
        if self.wrote[last] >= self.size:
            nxt = last + self.size
            self.starts.append(nxt)
            self.names[nxt] = "%020d" % nxt
            self.wrote[nxt] = 0
            self.arrays.pop(nxt, None)
            last = nxt
        return last


# ---------------------------------------------------------------------------------------------------
# The plan


@dataclass
class Redispatch:
    """A DispatchRequest the recovery hands to the dispatchers (same order as the oracle's dispatchRecorded)."""

    commit_log_offset: int
    msg_size: int
    topic: str
    queue_id: int
    consume_queue_offset: int
    tags_code: int
    sys_flag: int
    store_timestamp: int

    def as_list(self) -> list:
        return [self.commit_log_offset, self.msg_size, self.topic, self.queue_id, self.consume_queue_offset,
                self.tags_code, self.sys_flag, self.store_timestamp]


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

    def consume_queue_files(self, key: str) -> dict[str, bytes]:
        """The queue's files as the broker holds them after start() (recovery + re-dispatch), file name ->
        bytes up to the write position. Entries written by the model live in memory, never in the store."""
        st = getattr(self, "_queue_states", {}).get(key)
        if not isinstance(st, _QueueState):
            return {}  # absent, or a RocksDB queue (no files)
        return {st.names[s]: st.arrays[s][: st.wrote[s] // CQ_STORE_UNIT_SIZE].tobytes() for s in st.starts}

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
        return d


_SCHEDULE_TOPIC_B = np.frombuffer(RMQ_SYS_SCHEDULE_TOPIC.encode(), dtype=np.uint8)


def _is_topic(u8: np.ndarray, rows: np.ndarray, name: np.ndarray) -> np.ndarray:
    """Rows (scan_records_array) whose topic bytes are ``name``."""
    out = rows[:, 12] == name.size
    cand = np.flatnonzero(out)
    if cand.size:
        out[cand] = (u8[rows[cand, 11][:, None] + np.arange(name.size)] == name).all(axis=1)
    return out


# goes_to_consume_queue by the low sysFlag bits (it only looks at the transaction type)
_CQ_TX = np.array([goes_to_consume_queue(f) for f in range(16)], dtype=bool)


class _RecordBatch:
    """What dispatch needs of a batch of scanned records (rows in FAST_FIELDS order), from the rebuild
    dispatcher's compiled ``dispatch_fields`` (TAGS tagsCode, topic interning); only SCHEDULE_TOPIC_XXXX
    records go through ``dispatch_tags_code`` one by one."""

    def __init__(self, buf, rows: np.ndarray, names: dict[bytes, str]):
        self.buf = buf
        self.rows = rows
        fields, _, topics = dispatch_fields(buf, rows, want_keys=False)
        self.tid = fields[:, 0]
        self.codes = fields[:, 1].copy()
        self.topics = []
        for tb in topics:
            name = names.get(tb)
            if name is None:
                name = names[tb] = tb.decode("utf-8", "replace")
            self.topics.append(name)

    def schedule_codes(self, delay_table: DelayTable):
        """tagsCode of SCHEDULE_TOPIC_XXXX records with a DELAY property (delivery time with the table's
        levels). Returns (index, DelayLevelError) for the first record whose DELAY Integer.parseInt rejects
        (codes after it are not computed), else None."""
        sched = [i for i, t in enumerate(self.topics) if t == RMQ_SYS_SCHEDULE_TOPIC]
        if not sched:
            return None
        buf = self.buf
        for j in np.flatnonzero(np.isin(self.tid, sched)).tolist():
            r = self.rows[j]
            pp, pl = int(r[13]), int(r[14])
            props = parse_properties(bytes(buf[pp:pp + pl]) if pl > 0 else b"")
            if PROPERTY_DELAY_TIME_LEVEL in props:
                try:
                    self.codes[j], _ = dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, int(r[9]), delay_table)
                except DelayLevelError as e:
                    return j, e
        return None

    def redispatch_records(self, idx: np.ndarray, base: int) -> list:
        r = self.rows[idx]
        topics = self.topics
        return [Redispatch(p + base, size, topics[t], qid, qoff, code, sf, ts) for p, size, t, qid, qoff, code, sf, ts in
                zip(r[:, 0].tolist(), r[:, 1].tolist(), self.tid[idx].tolist(), r[:, 6].tolist(), r[:, 7].tolist(),
                    self.codes[idx].tolist(), r[:, 5].tolist(), r[:, 9].tolist())]

    def dispatch_to_queues(self, idx: np.ndarray, base: int, queue_state, count: bool = True) -> None:
        """CommitLogDispatcherBuildConsumeQueue for the records ``idx`` (in order): per queue in bulk;
        queues are touched (and created) in order of their first record, as record-by-record dispatch does."""
        sel = idx[_CQ_TX[self.rows[idx, 5] & 0xF]]
        if not sel.size:
            return
        r = self.rows[sel]
        tid = self.tid[sel]
        qid = r[:, 6]
        key = (tid << 32) + (qid & 0xFFFFFFFF)
        order = np.argsort(key, kind="stable")
        ks = key[order]
        cuts = (np.flatnonzero(ks[1:] != ks[:-1]) + 1).tolist()
        bounds = list(zip([0] + cuts, cuts + [len(sel)]))
        bounds.sort(key=lambda ab: int(order[ab[0]]))
        phys = r[:, 0] + base
        size = r[:, 1]
        qoff = r[:, 7]
        codes = self.codes[sel]
        for a, b in bounds:
            o = order[a:b]
            first = int(o[0])
            st = queue_state(self.topics[int(tid[first])], int(qid[first]))
            n = st.dispatch_many(phys[o], size[o], qoff[o], codes[o])
            if count:  # entries the recovery (not the ReputMessageService after start) re-dispatched
                st.rec.redispatched += n


_CRC_TRAILER = np.frombuffer((PROPERTY_CRC32 + "\x01").encode(), dtype=np.uint8)
_CRC_TRAILER_AT = np.arange(-CRC32_RESERVED_LEN, -CRC32_RESERVED_LEN + _CRC_TRAILER.size)


def _has_crc32_property(buf, rows: np.ndarray) -> bool:
    """Whether a record carries the 5.2.0+ ``__CRC32#`` property. The broker writes it only as the
    record's last CRC32_RESERVED_LEN bytes (FORMATS.md §1.8, as verify reads it): records with that
    trailer are candidates, confirmed with ``parse_properties``."""
    u8 = np.frombuffer(buf, dtype=np.uint8)
    ends = rows[:, 0] + rows[:, 1]
    cand = np.flatnonzero((u8[ends[:, None] + _CRC_TRAILER_AT] == _CRC_TRAILER).all(axis=1))
    for j in cand.tolist():
        pp, pl = int(rows[j, 13]), int(rows[j, 14])
        if pl > 0 and PROPERTY_CRC32 in parse_properties(bytes(buf[pp:pp + pl])):
            return True
    return False


def _first_record_store_ts(buf, version: BrokerVersion) -> int:
    if version.store_ts_fixed_56:
        return struct.unpack_from(">q", buf, 56)[0]
    sf = struct.unpack_from(">i", buf, 36)[0]
    born = 20 if sf & SysFlag.BORNHOST_V6 else 8
    return struct.unpack_from(">q", buf, 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born)[0]


def _matched_abnormal(f, version: BrokerVersion, cp, index_safe: bool, rocksdb_max_phys: int | None,
                      rocksdb: bool) -> tuple[bool, str]:
    """CommitLog.isMappedFileMatchedRecover (4.x / 5.0-5.3.3)."""
    if f.size < 64:
        return False, "file too short for a record header"
    buf = f.buffer
    magic = struct.unpack_from(">i", buf, 4)[0]
    ok_magic = magic == MESSAGE_MAGIC_CODE_V1 or (version.accepts_v2 and magic == MESSAGE_MAGIC_CODE_V2)
    if not ok_magic:
        return False, "first record has no message magic code"
    if version.is_5x and rocksdb:
        phys = struct.unpack_from(">q", buf, 28)[0]
        if rocksdb_max_phys is None:
            raise _NeedRocksDB()
        return phys <= rocksdb_max_phys, f"first PHYSICALOFFSET {phys} vs RocksDB max {rocksdb_max_phys}"
    ts = _first_record_store_ts(buf, version)
    if ts == 0:
        return False, "first record STORETIMESTAMP is 0"
    if cp is None:
        return False, "no checkpoint file"
    limit = cp.min_timestamp_index if index_safe else cp.min_timestamp
    what = "checkpoint minTimestampIndex" if index_safe else "checkpoint minTimestamp"
    return ts <= limit, f"first STORETIMESTAMP {ts} {'<=' if ts <= limit else '>'} {what} {limit}"


class _NeedRocksDB(Exception):
    pass


def _check_first_record(f, version: BrokerVersion, check_crc: bool):
    for kind, p, size, hdr, bpos, crc_ok, reason in scan_buffer(f.buffer, 0, f.size, check_crc, version.accepts_v2):
        return kind, hdr
    return None, None


def _matched_head(f, version, cp, normal: bool, max_phy_cq: int, index_safe: bool, check_crc: bool):
    kind, hdr = _check_first_record(f, version, check_crc)
    if kind != MESSAGE:
        return False, f"first record does not validate ({kind})"
    ts = hdr[11]
    if ts == 0:
        return False, "first record STORETIMESTAMP is 0"
    if index_safe and cp is not None and ts > cp.index_msg_timestamp:
        return False, "first record newer than checkpoint indexMsgTimestamp"
    if normal:
        return hdr[6] <= max_phy_cq, f"first PHYSICALOFFSET {hdr[6]} vs maxPhyOffsetOfConsumeQueue {max_phy_cq}"
    limit = cp.min_timestamp if cp is not None else 0
    return ts <= limit, f"first STORETIMESTAMP {ts} vs checkpoint minTimestamp {limit}"


def plan_recovery(store: Store, *, version: str | BrokerVersion | None = None, check_crc: bool = True,
                  index_safe: bool = False, rocksdb_max_phys: int | None = None,
                  delay_table: DelayTable = DEFAULT_DELAY_TABLE, force_mode: str | None = None,
                  with_salvage: bool = True, keep_redispatch: bool = True,
                  cq_file_size: int | None = None, model_start: bool = True) -> RecoveryPlan:
    """Reproduce DefaultMessageStore.load's recovery on ``store`` without writing anything."""
    if version is None:
        va = detect_version(store)
    else:
        bv = version if isinstance(version, BrokerVersion) else BrokerVersion.parse(version)
        va = VersionAssumption(bv, "option")
    bv = va.version
    cl = store.commitlog
    files = cl.files
    cp = store.checkpoint
    notes: list[str] = []
    normal = not store.abort_present
    if force_mode:
        normal = force_mode == "normal"
        notes.append(f"mode forced to {force_mode} (abort file {'present' if store.abort_present else 'absent'})")
    rocksdb = os.path.isdir(store.layout.consumequeue_dir) and rocksdb_consume_queue(store)

    # 1. consume queues: ConsumeQueue.recover for each, then maxPhyOffsetOfConsumeQueue
    states: list = []  # _QueueState (file consume queues) or _RocksQueueState
    if not rocksdb:
        for q in list_queues(store.layout.consumequeue_dir):
            cq = ConsumeQueue(q.topic, q.queue_id, q.path, cq_file_size)
            st = _QueueState(cq, bv, cq.file_size or cq_file_size or _default_cq_size([]))
            st.recover()
            states.append(st)
    max_phy_cq = max((s.max_phys for s in states), default=-1)
    rq = None
    if rocksdb:
        rq, how = read_rocksdb_queues(store)
        notes.append(how)
        if rq is not None:
            notes.extend(f"RocksDB offset table: {p}" for p in rq.problems[:5])
            for (topic, qid), (mp, mo) in sorted(rq.max.items()):
                states.append(_RocksQueueState(topic, qid, mp, mo))
            if rocksdb_max_phys is None:
                rocksdb_max_phys = rq.checkpoint
                if rq.checkpoint is None:
                    notes.append("RocksDB consume queue has no CHECKPOINT_TOPIC max offset")
        if rocksdb_max_phys is not None:
            max_phy_cq = rocksdb_max_phys
            notes.append(f"RocksDB consume queue: maxPhyOffsetOfConsumeQueue = {rocksdb_max_phys} (CHECKPOINT_TOPIC "
                         "max, the dispatch-from offset)")
        else:
            notes.append("RocksDB consume queue: its max physical offset cannot be read here; the start-file rule "
                         "that depends on it is replaced by the file-based fallback")
        if rq is None:
            notes.append("RocksDB consume queue: per-queue results are not computed")
    before = {s.rec.key: s.rec.max_offset_on_disk for s in states}

    # 2. the start file
    n = len(files)
    start_reason = ""
    idx = 0
    if normal:
        rule = bv.normal_rule
        if rule == "third-last":
            idx = max(0, n - 3)
            start_reason = f"normal recovery, third-last of {n} file(s)"
        elif rule == "cq-max" or (rule == "head" and rocksdb):
            idx = 0
            mp = max_phy_cq
            if rocksdb and rocksdb_max_phys is None:
                mp = files[-1].start  # unknown: assume the queue is caught up
            for i in range(n - 1, 0, -1):
                if files[i].start <= mp:
                    idx = i
                    break
            start_reason = (f"normal recovery (5.3.2/5.3.3 rule): newest file starting at or below "
                            f"maxPhyOffsetOfConsumeQueue {mp}")
        else:
            idx = 0
            for i in range(n - 1, 0, -1):
                ok, why = _matched_head(files[i], bv, cp, True, max_phy_cq, index_safe, check_crc)
                if ok:
                    idx = i
                    start_reason = f"normal recovery (HEAD rule): {why}"
                    break
            else:
                start_reason = "normal recovery (HEAD rule): no later file qualifies, first file"
    else:
        idx = -1
        why = ""
        for i in range(n - 1, -1, -1):
            if bv.normal_rule == "head":
                ok, why = _matched_head(files[i], bv, cp, False, max_phy_cq, index_safe, check_crc)
            else:
                try:
                    ok, why = _matched_abnormal(files[i], bv, cp, index_safe, rocksdb_max_phys, rocksdb)
                except _NeedRocksDB:
                    ok, why = False, "RocksDB max offset unknown"
                    notes.append("abnormal recovery with a RocksDB consume queue needs its max physical offset; "
                                 "fell back to the first file")
                    break
            if ok:
                idx = i
                break
        if idx < 0:
            idx = 0
            start_reason = "abnormal recovery: no file matched the checkpoint, first file"
        else:
            start_reason = f"abnormal recovery: newest matching file ({why})"

    # 3. the scan
    start_file = files[idx] if files else None
    t = start_file.start if start_file else 0
    stop_kind, stop_reason, stop_file, stop_pos = "", "", None, None
    redispatch: list[Redispatch] = []
    redispatch_count = 0
    redispatch_first = redispatch_last = None
    by_key = {(st.cq.topic, st.cq.queue_id): st for st in states}

    def queue_state(topic: str, qid: int) -> _QueueState:
        st = by_key.get((topic, qid))
        if st is None:
            if rocksdb:
                st = _RocksQueueState(topic, qid)
            else:
                cq = ConsumeQueue(topic, qid, os.path.join(store.layout.consumequeue_dir, topic, str(qid)))
                st = _QueueState(cq, bv, cq_file_size or _default_cq_size(states))
            states.append(st)
            by_key[(topic, qid)] = st
        return st

    scanned = 0
    count = 0
    dispatch_all = not normal
    dispatch_from = max_phy_cq if (normal and bv.is_5x) else None
    if rocksdb and rocksdb_max_phys is None:
        dispatch_from = None
    dt = delay_table if bv.delay_levels_at_recovery else DelayTable({})
    saw_crc_prop = False
    saw_v2 = False
    gtopics: dict[bytes, str] = {}  # topic bytes -> name, shared by every batch
    last_end = -1  # end of the last record the recovery dispatched
    i = idx
    while start_file is not None:
        f = files[i]
        buf = f.buffer
        moved = False
        u8 = None
        for rows, one in scan_records_array(buf, 0, f.size, check_crc, bv.accepts_v2):
            if rows is None and one[0] == MESSAGE:
                rows = _tuple_to_row(buf, one)
            if rows is not None:
                # only the records the recovery dispatches, or whose delay level it parses, need their fields
                if dispatch_all:
                    want = np.ones(len(rows), dtype=bool)
                elif dispatch_from is not None:
                    want = rows[:, 0] + rows[:, 1] + f.start > dispatch_from
                else:
                    want = np.zeros(len(rows), dtype=bool)
                if u8 is None:
                    u8 = np.frombuffer(buf, dtype=np.uint8)
                slow = want | _is_topic(u8, rows, _SCHEDULE_TOPIC_B)
                stop_at = None
                sl = np.flatnonzero(slow)
                if sl.size:
                    b = _RecordBatch(buf, rows[sl], gtopics)
                    # checkMessageAndReturnSize parses DELAY of SCHEDULE_TOPIC_XXXX records (Integer.parseInt)
                    err = b.schedule_codes(dt)
                    w = want[sl]
                    if err is not None:
                        j, e = err
                        stop_kind, stop_reason = ILLEGAL, f"{e} (Integer.parseInt fails: illegal record)"
                        stop_file, stop_pos = f.name, int(b.rows[j, 0])
                        stop_at = int(sl[j])
                        w = w.copy()
                        w[j:] = False
                    wi = np.flatnonzero(w)
                    if wi.size:
                        # DefaultMessageStore.doDispatch during the scan, before truncateDirtyLogicFiles
                        if not saw_crc_prop and _has_crc32_property(buf, b.rows[wi]):
                            saw_crc_prop = True
                        offs = b.rows[wi, 0] + f.start
                        if keep_redispatch:
                            redispatch.extend(b.redispatch_records(wi, f.start))
                        redispatch_count += int(wi.size)
                        if redispatch_first is None:
                            redispatch_first = int(offs[0])
                        redispatch_last = int(offs[-1])
                        last_end = int(offs[-1] + b.rows[wi[-1], 1])
                        if not rocksdb or rq is not None:
                            b.dispatch_to_queues(wi, f.start, queue_state)
                k = len(rows) if stop_at is None else stop_at
                if k:
                    done = rows[:k]
                    if not saw_v2 and bool((done[:, 15] == 2).any()):
                        saw_v2 = True
                    count += k
                    scanned += int(done[:, 1].sum())
                    t = f.start + int(done[-1, 0] + done[-1, 1])
                if stop_at is not None:
                    t = f.start + int(rows[stop_at, 0])
                    break
                continue
            kind, p, size, hdr, bpos, crc_ok, reason = one
            if kind == BLANK:
                if i + 1 < n:
                    i += 1
                    moved = True
                    scanned += f.size - p
                    break
                stop_kind, stop_reason = BLANK, "blank end-of-file record in the last file"
            else:
                stop_kind = kind
                stop_reason = reason or kind
                if kind == FILE_END:
                    stop_reason = "the file ends without a blank record; the broker reads past it and stops"
            stop_file, stop_pos, t = f.name, p, f.start + p
            break
        else:
            stop_kind, stop_reason, stop_file, stop_pos = END, "nothing to scan", f.name, 0
        if not moved:
            break
        if files[i].start != f.start + cl.file_size:
            notes.append(f"commit-log files are not contiguous after {f.name}: the broker continues with "
                         f"{files[i].name}")
    if saw_v2 and not bv.accepts_v2:
        notes.append("V2 records exist but this version does not accept them")
    if saw_crc_prop and bv.parts < (5, 2, 0):
        notes.append("__CRC32# properties found: the store was written by 5.2.0+")

    # 4. commit log truncateDirtyFiles(T)
    deleted: list[str] = []
    truncated = None
    after: list[dict] = []
    for f in files:
        fsize = cl.file_size
        if f.start + fsize > t:
            if t >= f.start:
                truncated = {"name": f.name, "position": t - f.start}
                after.append({"name": f.name, "file_from_offset": f.start, "wrote_position": t - f.start})
            else:
                deleted.append(f.name)
        else:
            after.append({"name": f.name, "file_from_offset": f.start, "wrote_position": fsize})
    if not after:
        notes.append("no commit-log file left: every consume queue would be destroyed")

    # 5. consume queues: truncateDirtyLogicFiles(T) (after the scan's re-dispatch, as in recoverAbnormally)
    # the broker logs and runs truncateDirtyLogicFiles whenever maxPhyOffsetOfConsumeQueue >= T (RocksDB too)
    cq_truncated = max_phy_cq >= t
    if cq_truncated:
        if rocksdb:
            why = _rocksdb_truncate(store, states, t)
            if why:
                notes.append(why)
        for s in states:
            if not rocksdb:
                s.truncate_dirty(t)
            elif not s.rec.entries_cut:
                s.rec.max_offset_after_truncate = s.max_offset()
    else:
        for s in states:
            s.rec.max_offset_after_truncate = s.max_offset()
    for s in states:
        s.rec.max_offset = s.max_offset()
    states.sort(key=lambda s: (s.cq.topic, s.cq.queue_id))
    max_offsets = {s.rec.key: s.rec.max_offset for s in states}

    # 7. start(): the ReputMessageService dispatches from the largest queue maxPhysicOffset (at least the
    # commit log's min offset) up to T, with checkCRC=false (DefaultMessageStore.start)
    after_start = None
    reput_from = None
    if (not rocksdb or rq is not None) and files and model_start:
        if rocksdb:
            # the RocksDB store's max physical offset: CHECKPOINT_TOPIC, advanced by the recovery's dispatch
            reput_from = max(cl.min_offset, rocksdb_max_phys if rocksdb_max_phys is not None else -1, last_end)
        else:
            reput_from = max([cl.min_offset] + [s.max_phys for s in states])
        for f, rows, _ in scan_record_runs(cl, reput_from, t, check_crc=False, accept_v2=bv.accepts_v2,
                                           stop_at_end=True):
            if rows is None:
                continue
            sel = np.flatnonzero(_CQ_TX[rows[:, 5] & 0xF])
            if not sel.size:
                continue
            b = _RecordBatch(f.buffer, rows[sel], gtopics)
            err = b.schedule_codes(delay_table)
            k = len(sel) if err is None else err[0]
            if k:
                b.dispatch_to_queues(np.arange(k), f.start, queue_state, count=False)
            if err is not None:
                r = b.rows[k]
                queue_state(b.topics[int(b.tid[k])], int(r[6]))
                break  # the dispatcher's check fails (-1): ReputMessageService stops
        after_start = {f"{s.cq.topic}/{s.cq.queue_id}": s.max_offset() for s in
                       sorted(states, key=lambda s: (s.cq.topic, s.cq.queue_id))}

    # 6. index files (IndexService.load(lastExitOK))
    dropped, kept = [], []
    idir = store.layout.index_dir
    if os.path.isdir(idir):
        for name in sorted(os.listdir(idir)):
            p = os.path.join(idir, name)
            if not os.path.isfile(p):
                continue
            if normal or cp is None:
                kept.append(name)
                continue
            with open(p, "rb") as fh:
                head = fh.read(40)
            if len(head) < 40:
                kept.append(name)
                notes.append(f"index/{name} is shorter than its header")
                continue
            end_ts = INDEX_HEADER.unpack_from(head, 0)[1]
            (dropped if end_ts > cp.index_msg_timestamp else kept).append(name)

    plan = RecoveryPlan(
        store=store.root, mode="normal" if normal else "abnormal", version=va, check_crc=check_crc,
        start_file=start_file.name if start_file else None, start_reason=start_reason, truncate_offset=t,
        stop_kind=stop_kind, stop_reason=stop_reason, stop_file=stop_file, stop_position=stop_pos,
        max_phy_offset_of_consume_queue=max_phy_cq, consume_queue_truncated=cq_truncated,
        commitlog_files_deleted=deleted, commitlog_file_truncated=truncated, commitlog_files_after=after,
        queues=[s.rec for s in states], consume_queue_max_offsets=max_offsets,
        consume_queue_max_offsets_before=before, redispatch=redispatch, index_files_dropped=dropped,
        index_files_kept=kept, scanned_bytes=scanned, messages_scanned=count, notes=notes,
        consume_queue_max_offsets_after_start=after_start, reput_from_offset=reput_from,
        redispatch_count=redispatch_count, redispatch_first=redispatch_first, redispatch_last=redispatch_last,
    )
    plan._queue_states = {st.rec.key: st for st in states}
    if with_salvage:
        from .salvage import salvage

        rep = salvage(store, t, accept_v2=True, queue_next_offsets=max_offsets)
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
    return plan


def _default_cq_size(states: list[_QueueState]) -> int:
    from ..formats.constants import DEFAULT_CQ_FILE_SIZE

    sizes = [s.size for s in states if s.size > 1]
    return max(set(sizes), key=sizes.count) if sizes else DEFAULT_CQ_FILE_SIZE


__all__ = ["BrokerVersion", "VersionAssumption", "detect_version", "plan_recovery", "RecoveryPlan",
           "QueueRecovery", "Redispatch", "RocksDBQueues", "read_rocksdb_queues"]
