"""ConsumeQueue entries joined with the CommitLog records they point to (FORMATS.md §4.2).

Every mismatch a consumer would trip over is named: entry beyond/below the commitlog, size, topic, queue id,
queue offset, tagsCode. tagsCode is recomputed with the dispatcher's own rule (analyses/dispatch_rules.py), so a
SCHEDULE_TOPIC_XXXX entry holding a delivery time is recognised instead of flagged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import RmqInspectError
from ...formats.consumequeue import is_ext_address
from ...store.consumequeue import ConsumeQueue
from ..dispatch_rules import DEFAULT_DELAY_TABLE, DelayLevelError, DelayTable, dispatch_tags_code


@dataclass
class QueueBounds:
    topic: str
    queue_id: int
    min_offset: int  # first entry present (pre-blank padding skipped)
    max_offset: int  # exclusive
    entries: int
    files: int
    min_offset_for_commitlog: int | None = None  # ConsumeQueue.correctMinOffset against the commitlog
    cq_type: str = "SimpleCQ"  # the broker's CQType: SimpleCQ, BatchCQ, RocksDBCQ
    units: int | None = None  # BatchCQ: units (batches); its offsets and entries count messages


def queue_bounds(queues, commitlog_min_offset: int | None = None) -> Iterator[QueueBounds]:
    """Bounds of every queue in ``queues`` (file ConsumeQueue, RocksDB queues (see store.rocksdb_cq) or
    BatchConsumeQueues)."""
    for cq in queues:
        try:
            lo, hi, n = cq.bounds()
            corr = cq.min_offset_for(commitlog_min_offset) if commitlog_min_offset is not None else None
            files = len(getattr(cq, "files", ()))
            if getattr(cq, "kind", None) == "batch":  # offsets count messages: entries too, units apart
                yield QueueBounds(cq.topic, cq.queue_id, lo, hi, hi - lo, files, corr, "BatchCQ", n)
            else:
                yield QueueBounds(cq.topic, cq.queue_id, lo, hi, n, files, corr,
                                  "SimpleCQ" if hasattr(cq, "files") else "RocksDBCQ")
        finally:
            if hasattr(cq, "files"):
                cq.close()


@dataclass
class JoinedEntry:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    tags_code: int
    message: object = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self, with_message: bool = True) -> dict:
        d = {"topic": self.topic, "queue_id": self.queue_id, "queue_offset": self.queue_offset,
             "physical_offset": self.physical_offset, "size": self.size, "tags_code": self.tags_code}
        if with_message:
            d["message"] = self.message.to_dict() if self.message is not None else None
            d["problems"] = list(self.problems)
            if self.notes:
                d["notes"] = list(self.notes)
        return d


def check_entry(e: JoinedEntry, commitlog, delay_table: DelayTable = DEFAULT_DELAY_TABLE) -> JoinedEntry:
    """Decode the record an entry points to and record every disagreement."""
    off = e.physical_offset
    if off < commitlog.min_offset:
        e.problems.append(f"physical offset {off} is below the first commitlog file ({commitlog.min_offset}): "
                          "the record was deleted (expired)")
        return e
    if off >= commitlog.end_offset:
        e.problems.append(f"entry beyond the commitlog: physical offset {off} >= end {commitlog.end_offset}")
        return e
    try:
        msg = commitlog.read_message(off)
    except RmqInspectError as err:
        e.problems.append(f"no readable record at {off}: {err.message}")
        return e
    e.message = msg
    if msg.total_size != e.size:
        e.problems.append(f"size {e.size} differs from the record's TOTALSIZE {msg.total_size}")
    if msg.topic != e.topic:
        e.problems.append(f"record topic {msg.topic!r} differs from the queue's topic {e.topic!r}")
    if msg.queue_id != e.queue_id:
        e.problems.append(f"record queue id {msg.queue_id} differs from the queue {e.queue_id}")
    if msg.queue_offset != e.queue_offset:
        e.problems.append(f"record queue offset {msg.queue_offset} differs from the entry's {e.queue_offset}")
    if is_ext_address(e.tags_code):
        e.notes.append("tags_code is a consumequeue_ext address (enableConsumeQueueExt), not a hash")
        return e
    try:
        want, is_delivery = dispatch_tags_code(msg.topic, msg.properties, msg.store_timestamp, delay_table)
    except DelayLevelError as err:
        e.problems.append(f"the dispatcher would reject this record: {err}")
        return e
    if is_delivery:
        if e.tags_code == want:
            e.notes.append(f"tags_code is the delivery time {want} (SCHEDULE_TOPIC_XXXX), not a tag hash")
        else:
            e.notes.append(f"tags_code {e.tags_code} is a delivery time (SCHEDULE_TOPIC_XXXX); the default "
                           f"messageDelayLevel gives {want}: the broker's delay table differs")
    elif e.tags_code != want:
        e.problems.append(f"tags_code {e.tags_code} differs from the hash of TAGS {msg.tags!r} ({want})")
    return e


def join_queue(cq: ConsumeQueue, commitlog, from_offset: int | None = None, count: int | None = None,
               delay_table: DelayTable = DEFAULT_DELAY_TABLE) -> Iterator[JoinedEntry]:
    for qo, po, sz, tc in cq.entries(from_offset, count):
        yield check_entry(JoinedEntry(cq.topic, cq.queue_id, qo, po, sz, tc), commitlog, delay_table)
