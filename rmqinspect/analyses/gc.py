"""`gc --dry-run`: what the broker's clean services would delete now (FORMATS.md §8) and which
unconsumed messages per consumer group that destroys. Pure function over readers; never deletes.

CleanCommitLogService: deletion is attempted when the local hour is in ``deleteWhen``, or the disk is
over ``diskMaxUsedSpaceRatio`` (or above the forcibly/warning ratios, which also bypass the age test when
``cleanFileForciblyEnable``), or an admin asked for it. Files are examined oldest first, age = file
mtime + fileReservedTime, at most ``deleteFileBatchMax`` per run, never the newest file, never skipping
over a younger file. CleanConsumeQueueService then deletes CQ files whose last entry's physical offset is
below the new commitlog min offset, corrects each queue's min logical offset, and deletes index files
whose endPhyOffset is below it.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from dataclasses import dataclass, field

from ..formats.consumequeue import CQ_ENTRY, CQ_STORE_UNIT_SIZE
from ..formats.indexfile import INDEX_HEADER, INDEX_HEADER_TABLE
from ..store.config_files import consumer_offset_rows, load_config_file
from ..store.consumequeue import ConsumeQueue, list_queues

HOUR_MS = 3_600_000


@dataclass
class GcSettings:
    now_ms: int
    file_reserved_hours: float = 72
    delete_when: str = "04"
    disk_ratio: float | None = None  # None: measured on the store's partition
    disk_max_used_space_ratio: int = 75  # percent, clamped 10..95
    clean_forcibly_ratio: float = 0.85
    warning_ratio: float = 0.90
    clean_file_forcibly_enable: bool = True
    delete_file_batch_max: int = 10
    manual: bool = False
    tz: _dt.tzinfo | None = None  # deleteWhen is a local hour of the broker
    broker_major: int | None = None  # 4: the forcibly/warning ratios are system properties, not clamped
    offsets_file: str | None = None  # consumerOffset.json elsewhere (a copied store often lacks config/)


@dataclass
class FilePlan:
    kind: str  # commitlog | consumequeue | index
    path: str
    delete: bool
    reason: str
    topic: str | None = None
    queue_id: int | None = None
    mtime_ms: int | None = None
    last_physical_offset: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Loss:
    topic: str
    group: str
    queue_id: int
    consumer_offset: int
    old_min_offset: int
    new_min_offset: int
    messages_lost: int
    first_lost_physical_offset: int | None
    last_lost_physical_offset: int | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class GcPlan:
    triggered: bool
    triggers: list[str]
    disk_ratio: float
    clean_immediately: bool
    clean_at_once: bool
    commitlog_min_offset_before: int
    commitlog_min_offset_after: int
    files: list[FilePlan] = field(default_factory=list)
    queue_min_offsets: list[dict] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def deleted(self) -> list[FilePlan]:
        return [f for f in self.files if f.delete]

    def to_dict(self) -> dict:
        return {"triggered": self.triggered, "triggers": self.triggers, "disk_ratio": self.disk_ratio,
                "clean_immediately": self.clean_immediately, "clean_at_once": self.clean_at_once,
                "commitlog_min_offset_before": self.commitlog_min_offset_before,
                "commitlog_min_offset_after": self.commitlog_min_offset_after,
                "files": [f.to_dict() for f in self.files], "queue_min_offsets": self.queue_min_offsets,
                "losses": [x.to_dict() for x in self.losses], "notes": self.notes}


def disk_used_ratio(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent (4.9.8/5.x): ceil(used*100/(used+usable))/100, -1 on error."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    free = st.f_bfree * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    used = total - free
    if used + usable <= 0:
        return -1.0
    return math.ceil(used * 100 / (used + usable)) / 100


def is_time_to_delete(delete_when: str, now_ms: int, tz) -> bool:
    """UtilAll.isItTimeToDo: the local hour equals one of the ';'-separated hours."""
    hour = _dt.datetime.fromtimestamp(now_ms / 1000, tz).hour if tz else _dt.datetime.fromtimestamp(now_ms / 1000).hour
    for w in delete_when.split(";"):
        w = w.strip()
        if w.isdigit() and int(w) == hour:
            return True
    return False


def file_mtime_ms(path: str) -> int:
    return int(os.stat(path).st_mtime * 1000)


def _triggers(ratio: float, s: GcSettings) -> tuple[list[str], bool]:
    """CommitLog.CleanCommitLogService.isSpaceToDelete / isTimeToDelete / manual: why deletion runs, and
    whether the disk asks to clean immediately."""
    max_used = min(max(s.disk_max_used_space_ratio, 10), 95) / 100
    if s.broker_major == 4:
        forcibly, warning = s.clean_forcibly_ratio, s.warning_ratio
    else:
        forcibly = min(max(s.clean_forcibly_ratio, 0.30), 0.85)
        warning = min(max(s.warning_ratio, 0.35), 0.90)
    triggers = []
    clean_immediately = False
    if ratio > warning:
        clean_immediately = True
        triggers.append(f"disk {ratio:.2f} > warning ratio {warning:.2f} (disk marked full, clean immediately)")
    elif ratio > forcibly:
        clean_immediately = True
        triggers.append(f"disk {ratio:.2f} > clean-forcibly ratio {forcibly:.2f} (clean immediately)")
    elif ratio > max_used or ratio < 0:
        triggers.append(f"disk {ratio:.2f} > diskMaxUsedSpaceRatio {max_used:.2f}" if ratio >= 0
                        else "disk ratio unknown (-1): treated as space to delete")
    if is_time_to_delete(s.delete_when, s.now_ms, s.tz):
        triggers.append(f"local hour is in deleteWhen {s.delete_when!r}")
    if s.manual:
        triggers.append("manual delete requested")
    return triggers, clean_immediately


def _plan_commitlog_files(plan: GcPlan, files: list, s: GcSettings) -> None:
    """deleteExpiredFileByTime: oldest first, the newest never, at most deleteFileBatchMax, stopping at the first
    file kept."""
    reserved_ms = int(s.file_reserved_hours * HOUR_MS)
    chosen = 0
    stopped = not plan.triggers
    for i, f in enumerate(files):
        mt = file_mtime_ms(f.path)
        if i == len(files) - 1:
            plan.files.append(FilePlan("commitlog", f.path, False, "newest file is never deleted", mtime_ms=mt))
            continue
        if stopped:
            why = "no deletion trigger (not deleteWhen hour, disk below thresholds)" if not plan.triggers else \
                "kept: an older file was not deleted / batch limit reached"
            plan.files.append(FilePlan("commitlog", f.path, False, why, mtime_ms=mt))
            continue
        expired = s.now_ms >= mt + reserved_ms
        if expired or plan.clean_at_once:
            reason = (f"expired: mtime + {s.file_reserved_hours:g} h <= now" if expired else
                      "forced by disk ratio (cleanFileForciblyEnable, age ignored)")
            plan.files.append(FilePlan("commitlog", f.path, True, reason, mtime_ms=mt))
            chosen += 1
            if chosen >= s.delete_file_batch_max:
                stopped = True
        else:
            hours_left = (mt + reserved_ms - s.now_ms) / HOUR_MS
            plan.files.append(FilePlan("commitlog", f.path, False, f"not expired ({hours_left:.1f} h left); the "
                                       "scan stops at the first younger file", mtime_ms=mt))
            stopped = True


def _plan_consume_queues(plan: GcPlan, queues, before: int, new_min: int) -> dict:
    """CleanConsumeQueueService: the queue files whose last entry is below the new min offset, and every queue's
    min offset before and after; (topic, queueId) -> (queue, old min, new min, max) for the losses."""
    mins = {}
    rocks_moved = 0
    for q in queues:
        _, hi, _ = q.bounds()
        old_lo = q.min_offset_for(before)
        qfiles = getattr(q, "files", [])
        if new_min > before:
            for j, f in enumerate(qfiles):
                if j == len(qfiles) - 1:
                    break
                if f.size < CQ_STORE_UNIT_SIZE:
                    break
                last_phy = CQ_ENTRY.unpack_from(f.buffer, f.size - CQ_STORE_UNIT_SIZE)[0]
                if last_phy < new_min:
                    plan.files.append(FilePlan("consumequeue", f.path, True, f"last entry physical offset "
                                               f"{last_phy} < new commitlog min offset {new_min}", q.topic,
                                               q.queue_id, last_physical_offset=last_phy))
                else:
                    break
        new_lo = q.min_offset_for(new_min) if new_min > before else q.min_offset_for(before)
        mins[(q.topic, q.queue_id)] = (q, old_lo, new_lo, hi)
        plan.queue_min_offsets.append({"topic": q.topic, "queue_id": q.queue_id, "min_offset_before": old_lo,
                                       "min_offset_after": new_lo, "max_offset": hi})
        if getattr(q, "kind", "file") == "rocksdb" and new_lo > old_lo:
            rocks_moved += 1
    if rocks_moved:
        plan.notes.append(f"RocksDB consume queue: no files are deleted; rows below {new_min} in {rocks_moved} "
                          "queue(s) are dropped by the compaction filter and their min offsets move")
    return mins


def _plan_index_files(plan: GcPlan, idx_dir: str, new_min: int) -> None:
    """IndexService.deleteExpiredFile: the index files (never the newest) whose endPhyOffset is below the new
    min offset, oldest first, stopping at the first one kept."""
    names = sorted(n for n in os.listdir(idx_dir) if n.isascii() and n.isdigit())
    go = True
    for j, n in enumerate(names):
        p = os.path.join(idx_dir, n)
        with open(p, "rb") as fh:
            raw = fh.read(INDEX_HEADER.size)
        if len(raw) < INDEX_HEADER.size:
            plan.files.append(FilePlan("index", p, False, "header truncated"))
            go = False
            continue
        end_phy = INDEX_HEADER.unpack(raw)[INDEX_HEADER_TABLE.index("end_phy_offset")]
        if go and j < len(names) - 1 and end_phy < new_min:
            plan.files.append(FilePlan("index", p, True, f"endPhyOffset {end_phy} < new commitlog min offset "
                                       f"{new_min}", last_physical_offset=end_phy))
        else:
            go = False


def _plan_losses(plan: GcPlan, store, s: GcSettings, mins: dict) -> None:
    """Per consumer group and queue: the messages between its committed offset and the queue's new min offset."""
    ld = load_config_file(os.path.dirname(s.offsets_file) or ".", os.path.basename(s.offsets_file)) \
        if s.offsets_file else load_config_file(store.layout.config_dir, "consumerOffset.json")
    if ld.source == "bak":
        plan.notes.append(ld.reason)
    if ld.data is None:
        plan.notes.append("no consumerOffset.json: per-group losses not computed")
    for r in consumer_offset_rows(ld.data):
        m = mins.get((r["topic"], r["queue_id"]))
        if m is None:
            continue
        q, old_lo, new_lo, hi = m
        start = max(r["offset"], old_lo)
        if new_lo > start:
            lost = list(q.entries(start, new_lo - start))
            plan.losses.append(Loss(r["topic"], r["group"], r["queue_id"], r["offset"], old_lo, new_lo, len(lost),
                                    lost[0][1] if lost else None, lost[-1][1] if lost else None))


def plan_gc(store, s: GcSettings, queues=None) -> GcPlan:
    """``queues``: readers with the ConsumeQueue interface (default: file CQ of the store)."""
    cl = store.commitlog
    ratio = s.disk_ratio if s.disk_ratio is not None else disk_used_ratio(cl.files[0].path if cl.files else
                                                                          store.root)
    triggers, clean_immediately = _triggers(ratio, s)
    clean_at_once = s.clean_file_forcibly_enable and clean_immediately
    before = cl.min_offset if cl.files else 0
    plan = GcPlan(bool(triggers), triggers, ratio, clean_immediately, clean_at_once, before, before)
    files = sorted(cl.files, key=lambda f: f.start)
    _plan_commitlog_files(plan, files, s)
    remaining = [f for f, p in zip(files, plan.files) if not p.delete]
    new_min = remaining[0].start if remaining else before
    plan.commitlog_min_offset_after = new_min
    if new_min <= before:
        plan.notes.append("commitlog min offset unchanged: CleanConsumeQueueService does nothing")
    if queues is None:
        queues = [ConsumeQueue(q.topic, q.queue_id, q.path) for q in list_queues(store.layout.consumequeue_dir)]
    mins = _plan_consume_queues(plan, queues, before, new_min)
    if os.path.isdir(store.layout.index_dir) and new_min > before:
        _plan_index_files(plan, store.layout.index_dir, new_min)
    _plan_losses(plan, store, s, mins)
    return plan
