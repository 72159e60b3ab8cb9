"""`summary`: what is in a store - file map, offsets, per-topic/queue counts, time range, checkpoint."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..formats.constants import MESSAGE_MAGIC_CODE_V1, TRANSACTION_MASK, SysFlag, TransactionType
from ..store import Store
from ..formats.commitlog import body_position
from ..store.walk.records import topic_and_properties, unpack_header
from ..store.scanner import compiled
from ..store.detect import detect_store
from .dispatcher import queue_groups
from .rows import topic_ids
from ..store.walk.kinds import Damage, DamageKind
from ..store.walk.resync import BlankRecord, walk_batches


@dataclass
class FileSummary:
    name: str
    start_offset: int
    size: int
    records: int = 0
    bytes_in_records: int = 0
    data_end: int | None = None  # physical offset where this file's records end
    blank_at: int | None = None  # physical offset of the blank record
    blank_size: int | None = None
    zero_tail_at: int | None = None  # physical offset where zero-filled space starts
    zero_tail_size: int = 0
    damage: str | None = None  # first damage met in this file
    damage_at: int | None = None
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None


@dataclass
class QueueSummary:
    topic: str
    queue_id: int
    messages: int = 0
    bytes: int = 0
    min_queue_offset: int | None = None
    max_queue_offset: int | None = None


@dataclass
class StoreSummary:
    root: str
    mapped_file_size: int
    files: list[FileSummary]
    gaps: list[dict]
    min_physical_offset: int
    max_physical_offset: int  # end of the last valid record
    messages: int
    message_bytes: int
    topics: dict[str, dict]
    queues: list[QueueSummary]
    first_store_timestamp: int | None
    last_store_timestamp: int | None
    checkpoint: dict | None
    abort_present: bool
    abort_content: str | None
    version_hints: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    detection: dict | None = None  # store.detect.StoreDetection.to_dict(): evidence and version guess
    damage: list[dict] = field(default_factory=list)  # damaged ranges the count resynchronised past


@dataclass
class RunCounts:
    """What ``summarize`` counts in one run of valid records of one file (in the file's own walk)."""

    name: str
    records: int
    bytes: int
    end: int  # physical offset after the run's last record
    first_ts: int
    last_ts: int
    min_ts: int
    max_ts: int
    v2: int
    v6: int
    prop_crc: int
    # ((topic, queue id), messages, bytes, min queue offset, max queue offset) per queue, in first-seen order;
    # the offsets are None when every record of the queue is a PREPARED/ROLLBACK one
    queues: list[tuple]


_IPV6 = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
# PREPARED/ROLLBACK records carry queue offset 0, not a position in the queue
_NOT_IN_QUEUE = (int(TransactionType.PREPARED), int(TransactionType.ROLLBACK))
_CRC_PROPERTY = b"__CRC32#"


def count_run(ev, named: tuple | None = None):
    """``walk_batches``' converter for ``summarize``: the counts of a run. ``named``: its (topic ids, names) as
    ``topic_ids`` numbers them, when another pass over the run already has them."""
    import numpy as np

    if named is not None:
        return count_named_run(ev, named[0], named[1])
    topics: dict[str, int] = {}
    tids = topic_ids(np.frombuffer(ev.file.buffer, dtype=np.uint8), ev.records, topics)
    return count_named_run(ev, tids, list(topics))


def count_named_run(ev, tids, names: list[str]):
    """``count_run`` of a run whose records' topic ids (``topic_ids``, into ``names``) another pass over the same
    run already has."""
    import numpy as np

    buf = ev.file.buffer
    base = ev.base
    r = ev.records
    ts = r["store_timestamp"]
    size = r["total_size"]
    sf = r["sys_flag"]
    last = r[-1]
    ext = compiled()
    # records with __CRC32# in their properties: the compiled scanner counts them; without it, the definition
    prop = (ext.count_properties_containing(buf, ev.rows, _CRC_PROPERTY) if ext is not None
            else sum(1 for pp, pl in zip(r["properties_pos"].tolist(), r["properties_len"].tolist())
                     if _CRC_PROPERTY in bytes(buf[pp:pp + pl])))
    qid = r["queue_id"]
    if ext is not None and hasattr(ext, "queue_counts"):
        # one compiled pass (tests/test_summary_queue_counts.py proves it equal to the numpy below)
        raw, total, min_ts, max_ts, v2, v6 = ext.queue_counts(
            np.ascontiguousarray(ev.rows), np.ascontiguousarray(tids, dtype=np.int64), TRANSACTION_MASK,
            *_NOT_IN_QUEUE, _IPV6)
        queues = [((names[int(tids[j])], int(qid[j])), k, by, lo if has else None, hi if has else None)
                  for j, k, by, lo, hi, has in np.frombuffer(raw, dtype=np.int64).reshape(-1, 6).tolist()]
        return RunCounts(ev.file.name, len(r), total, base + int(last["position"] + last["total_size"]),
                         int(ts[0]), int(ts[-1]), min_ts, max_ts, v2, v6, prop, queues)
    # per (topic, queue) in order of first appearance: the radix grouping of rebuild (np.unique would sort 64-bit
    # keys and, the first time in a worker, import numpy.ma: ~15 ms)
    order, bounds, groups = queue_groups(tids, qid)
    starts = bounds[:-1]
    n = np.diff(bounds)
    by = np.add.reduceat(size[order], starts) if len(order) else np.zeros(0, dtype=np.int64)
    tx = (sf & TRANSACTION_MASK)[order]
    inq = (tx != _NOT_IN_QUEUE[0]) & (tx != _NOT_IN_QUEUE[1])
    qoff = r["queue_offset"][order]
    if len(order):
        lo = np.minimum.reduceat(np.where(inq, qoff, np.iinfo(np.int64).max), starts)
        hi = np.maximum.reduceat(np.where(inq, qoff, np.iinfo(np.int64).min), starts)
        has = np.logical_or.reduceat(inq, starts)
    queues = []
    for g in groups:
        j = int(order[starts[g]])
        queues.append(((names[int(tids[j])], int(qid[j])), int(n[g]), int(by[g]),
                       int(lo[g]) if has[g] else None, int(hi[g]) if has[g] else None))
    return RunCounts(ev.file.name, len(r), int(size.sum()), base + int(last["position"] + last["total_size"]),
                     int(ts[0]), int(ts[-1]), int(ts.min()), int(ts.max()),
                     int(np.count_nonzero(r["magic_version"] != 1)), int(np.count_nonzero(sf & _IPV6)), prop, queues)


@dataclass
class _Totals:
    """What ``summarize`` adds up over the walk: per file, per queue and for the store, one ``RunCounts`` at a time
    (a run of valid records, or one damaged record the count takes in)."""

    files: dict[str, FileSummary]
    min_offset: int
    queues: dict[tuple[str, int], QueueSummary] = field(default_factory=dict)
    first_ts: int | None = None
    last_ts: int | None = None
    messages: int = 0
    message_bytes: int = 0
    max_phys: int = 0
    v2: int = 0
    v6: int = 0
    prop_crc: int = 0

    def add(self, rc: RunCounts) -> None:
        fs = self.files[rc.name]
        fs.records += rc.records
        fs.bytes_in_records += rc.bytes
        fs.data_end = rc.end
        if fs.first_store_timestamp is None:
            fs.first_store_timestamp = rc.first_ts
        fs.last_store_timestamp = rc.last_ts
        self.first_ts = rc.min_ts if self.first_ts is None or rc.min_ts < self.first_ts else self.first_ts
        self.last_ts = rc.max_ts if self.last_ts is None or rc.max_ts > self.last_ts else self.last_ts
        self.messages += rc.records
        self.message_bytes += rc.bytes
        self.max_phys = max(self.max_phys, rc.end)
        self.v2 += rc.v2
        self.v6 += rc.v6
        self.prop_crc += rc.prop_crc
        for key, n, size, lo, hi in rc.queues:
            q = self.queues.get(key)
            if q is None:
                q = self.queues[key] = QueueSummary(*key)
            q.messages += n
            q.bytes += size
            if lo is not None:
                q.min_queue_offset = lo if q.min_queue_offset is None else min(q.min_queue_offset, lo)
                q.max_queue_offset = hi if q.max_queue_offset is None else max(q.max_queue_offset, hi)


def _damaged_record_counts(f, d: Damage) -> RunCounts | None:
    """The counts of the record a CRC/HALF damage starts with, when it has records after it: counted, as
    decode-commitlog counts it (a torn tail is not: nothing valid follows, decode-commitlog stops before it);
    None when its fields are unreadable (the range stays damage, nothing counted)."""
    if d.kind not in (DamageKind.CRC, DamageKind.HALF) or d.position is None:
        return None
    try:
        hdr = unpack_header(f.buffer, d.position)
        topic, props = topic_and_properties(f.buffer, hdr, d.position + body_position(hdr.sys_flag))
    except Exception:
        return None
    ts, size, sf, qo = hdr.store_timestamp, hdr.total_size, hdr.sys_flag, hdr.queue_offset
    in_queue = sf & TRANSACTION_MASK not in _NOT_IN_QUEUE
    return RunCounts(f.name, 1, size, d.start + size, ts, ts, ts, ts, int(hdr.magic_code != MESSAGE_MAGIC_CODE_V1),
                     int(bool(sf & _IPV6)), int(_CRC_PROPERTY in props),
                     [((topic, hdr.queue_id), 1, size, qo if in_queue else None, qo if in_queue else None)])


def _close_files(files: dict[str, FileSummary]) -> None:
    """A file without a blank record: where its data ends, and the zero tail after it (unless damage is there)."""
    for fs in files.values():
        end = fs.start_offset + fs.size
        if fs.blank_at is None:
            data_end = fs.data_end if fs.data_end is not None else fs.start_offset
            if data_end < end and (fs.damage_at is None or fs.damage_at < data_end):
                fs.zero_tail_at, fs.zero_tail_size = data_end, end - data_end
            if fs.data_end is None:
                fs.data_end = data_end


def _version_hints(store: Store, t: _Totals) -> list[str]:
    """What the records and the store's files say about the release that wrote them."""
    hints = []
    cp = store.checkpoint
    if t.v2:
        hints.append(f"{t.v2} V2 records (RocketMQ 5.1.0+)")
    if t.v6:
        hints.append(f"{t.v6} records with IPv6 hosts (RocketMQ 4.6.0+)")
    if t.prop_crc:
        hints.append(f"{t.prop_crc} records with __CRC32# property (RocketMQ 5.2.0+)")
    if store.dledger is not None:  # DLedger mode: messages inside DLedger entries
        hints.append(f"DLedger mode: member {store.dledger.self_id}, data in {store.layout.dledger.dir}")
    if cp is not None:
        hints.append(f"checkpoint uses {cp.used_length} bytes"
                     + (" (4.x layout)" if cp.used_length <= 24 else " (5.x layout)"))
    for extra in ("abort.bak", "compaction", "timerlog", "timerwheel", "batchconsumequeue", "tiered_index_file"):
        if os.path.exists(os.path.join(store.root, extra)):
            hints.append(f"{extra} present (RocketMQ 5.x)")
    if os.path.exists(os.path.join(store.layout.consumequeue_dir, "CURRENT")):
        hints.append("consumequeue/ holds a RocksDB database (RocketMQ 5.2.0+ RocksDB consume queue)")
    return hints


def summarize(store: Store, progress: Callable[[int], None] | None = None,
              broker_version: str | None = None, jobs: int | None = None, events=None) -> StoreSummary:
    """What is in ``store``. The commit-log walk runs one file per task: ``jobs`` (default
    ``parallel.resolve_jobs``) > 1 walks and counts the files in worker processes; the summary is the same.
    ``events``: the items of a walk another pass makes (``walk_batches`` with CRC check and V2 records, each run
    converted by ``count_run``), instead of a walk of its own."""
    cl = store.commitlog
    files: dict[str, FileSummary] = {f.name: FileSummary(f.name, f.start, f.size) for f in cl.files}
    t = _Totals(files, cl.min_offset, max_phys=cl.min_offset)
    # The same records decode-commitlog, export and verify see: every structurally sound record, those whose
    # body CRC fails included (flagged, as the broker would refuse them on recovery), and past any damage the
    # walk resynchronises on the next valid record (store.walk.resync) instead of giving up the rest of the file.
    # Runs of valid records are counted inside the file's walk (a worker process with jobs > 1, count_run).
    by_name = {f.name: f for f in cl.files}
    damage: list[dict] = []
    for ev in (events if events is not None else walk_batches(cl, jobs=jobs, convert=count_run)):
        if type(ev) is RunCounts:
            t.add(ev)
            if progress:
                progress(ev.end - cl.min_offset)
            continue
        if type(ev) is BlankRecord:
            fs = files[ev.file]
            fs.blank_at, fs.blank_size = ev.offset, ev.size
            fs.data_end = ev.offset
            continue
        d = ev
        damage.append(d.to_dict())
        if d.file is None or d.file not in files:
            continue
        fs = files[d.file]
        if fs.damage is None:
            fs.damage, fs.damage_at = f"{d.cause or d.kind}: {d.reason}", d.start
        counted = _damaged_record_counts(by_name[d.file], d)
        if counted is not None:
            t.add(counted)
    _close_files(files)
    notes = list(cl.notes)
    for dd in damage:
        notes.append(f"{dd['kind']} at {dd['start']} .. {dd['end']} ({dd['file']}): {dd['reason']}; "
                     + ("nothing valid after it" if dd["kind"] == DamageKind.TORN_TAIL
                        else "counting resumed at " + str(dd["end"])))
    topics: dict[str, dict] = {}
    for q in t.queues.values():
        tp = topics.setdefault(q.topic, {"messages": 0, "bytes": 0, "queues": 0})
        tp["messages"] += q.messages
        tp["bytes"] += q.bytes
        tp["queues"] += 1
    hints = _version_hints(store, t)
    abort_content = None
    if store.abort_present:
        with open(store.layout.abort_path, "rb") as f:
            abort_content = f.read(64).decode("ascii", "replace")
    if progress:
        progress(cl.end_offset - cl.min_offset)
    det = detect_store(store, broker_version)
    cp = store.checkpoint
    return StoreSummary(
        detection=det.to_dict(),
        root=store.root,
        mapped_file_size=cl.file_size,
        files=list(files.values()),
        gaps=[{"start": g.start, "end": g.end, "size": g.size} for g in cl.gaps],
        min_physical_offset=cl.min_offset,
        max_physical_offset=t.max_phys,
        messages=t.messages,
        message_bytes=t.message_bytes,
        topics=dict(sorted(topics.items())),
        queues=sorted(t.queues.values(), key=lambda q: (q.topic, q.queue_id)),
        first_store_timestamp=t.first_ts,
        last_store_timestamp=t.last_ts,
        checkpoint=cp.to_dict() if cp else None,
        abort_present=store.abort_present,
        abort_content=abort_content,
        version_hints=hints,
        notes=notes,
        damage=damage,
    )
