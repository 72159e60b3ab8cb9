"""`summary`: what is in a store - file map, offsets, per-topic/queue counts, time range, checkpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from ..store import Store
from ..store.detect import detect_store
from ..store.commitlog import BLANK, CRC_MISMATCH, END, FILE_END, GAP, HALF, ILLEGAL, MESSAGE, _topic_and_properties


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


def summarize(store: Store, progress: Callable[[int], None] | None = None,
              broker_version: str | None = None) -> StoreSummary:
    cl = store.commitlog
    files: dict[str, FileSummary] = {f.name: FileSummary(f.name, f.start, f.size) for f in cl.files}
    queues: dict[tuple[str, int], QueueSummary] = {}
    first_ts = last_ts = None
    messages = message_bytes = 0
    max_phys = cl.min_offset
    v2 = v6 = prop_crc = 0
    for slot in cl.scan(check_crc=True, stop_at_end=False):
        if slot.kind == GAP:
            continue
        fs = files[slot.file.name]
        if slot.kind == MESSAGE or slot.kind == CRC_MISMATCH or slot.kind == HALF:
            hdr = slot.header
            if slot.kind != MESSAGE:
                fs.damage = fs.damage or f"{slot.kind}: {slot.reason}"
                fs.damage_at = fs.damage_at if fs.damage_at is not None else slot.offset
                if slot.kind == CRC_MISMATCH:
                    continue
            fs.records += 1
            fs.bytes_in_records += slot.size
            fs.data_end = slot.end
            ts = hdr[11]
            if fs.first_store_timestamp is None:
                fs.first_store_timestamp = ts
            fs.last_store_timestamp = ts
            first_ts = ts if first_ts is None or ts < first_ts else first_ts
            last_ts = ts if last_ts is None or ts > last_ts else last_ts
            messages += 1
            message_bytes += slot.size
            max_phys = max(max_phys, slot.end)
            if hdr[1] != -626843481:
                v2 += 1
            if hdr[7] & 0x30:
                v6 += 1
            topic, props, _ = _topic_and_properties(slot.file.buffer, hdr, slot.body_pos)
            if b"__CRC32#" in props:
                prop_crc += 1
            key = (topic, hdr[3])
            q = queues.get(key)
            if q is None:
                q = queues[key] = QueueSummary(topic, hdr[3])
            q.messages += 1
            q.bytes += slot.size
            qo = hdr[5]
            if hdr[7] & 0xC in (0x4, 0xC):
                pass  # PREPARED/ROLLBACK carry queue offset 0, not a position in the queue
            else:
                q.min_queue_offset = qo if q.min_queue_offset is None else min(q.min_queue_offset, qo)
                q.max_queue_offset = qo if q.max_queue_offset is None else max(q.max_queue_offset, qo)
            if progress and messages % 4096 == 0:
                progress(slot.end - cl.min_offset)
        elif slot.kind == BLANK:
            fs.blank_at, fs.blank_size = slot.offset, slot.size
            fs.data_end = slot.offset
        elif slot.kind == END:
            fs.zero_tail_at, fs.zero_tail_size = slot.offset, slot.size
            if fs.data_end is None:
                fs.data_end = slot.offset
        elif slot.kind in (ILLEGAL,):
            fs.damage = f"{slot.kind}: {slot.reason}"
            fs.damage_at = slot.offset
        elif slot.kind == FILE_END:
            pass
    topics: dict[str, dict] = {}
    for q in queues.values():
        t = topics.setdefault(q.topic, {"messages": 0, "bytes": 0, "queues": 0})
        t["messages"] += q.messages
        t["bytes"] += q.bytes
        t["queues"] += 1
    hints = []
    cp = store.checkpoint
    if v2:
        hints.append(f"{v2} V2 records (RocketMQ 5.1.0+)")
    if v6:
        hints.append(f"{v6} records with IPv6 hosts (RocketMQ 4.6.0+)")
    if prop_crc:
        hints.append(f"{prop_crc} records with __CRC32# property (RocketMQ 5.2.0+)")
    if cp is not None:
        hints.append(f"checkpoint uses {cp.used_length} bytes"
                     + (" (4.x layout)" if cp.used_length <= 24 else " (5.x layout)"))
    abort_content = None
    if store.abort_present:
        with open(store.layout.abort_path, "rb") as f:
            abort_content = f.read(64).decode("ascii", "replace")
    for extra in ("abort.bak", "compaction", "timerlog", "timerwheel", "batchconsumequeue", "tiered_index_file"):
        if os.path.exists(os.path.join(store.root, extra)):
            hints.append(f"{extra} present (RocketMQ 5.x)")
    if os.path.exists(os.path.join(store.layout.consumequeue_dir, "CURRENT")):
        hints.append("consumequeue/ holds a RocksDB database (RocketMQ 5.2.0+ RocksDB consume queue)")
    if progress:
        progress(cl.end_offset - cl.min_offset)
    det = detect_store(store, broker_version)
    return StoreSummary(
        detection=det.to_dict(),
        root=store.root,
        mapped_file_size=cl.file_size,
        files=list(files.values()),
        gaps=[{"start": g.start, "end": g.end, "size": g.size} for g in cl.gaps],
        min_physical_offset=cl.min_offset,
        max_physical_offset=max_phys,
        messages=messages,
        message_bytes=message_bytes,
        topics=dict(sorted(topics.items())),
        queues=sorted(queues.values(), key=lambda q: (q.topic, q.queue_id)),
        first_store_timestamp=first_ts,
        last_store_timestamp=last_ts,
        checkpoint=cp.to_dict() if cp else None,
        abort_present=store.abort_present,
        abort_content=abort_content,
        version_hints=hints,
        notes=list(cl.notes),
    )
