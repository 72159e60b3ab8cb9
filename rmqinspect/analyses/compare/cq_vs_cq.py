"""Compare two sets of consume queues (e.g. the RocksDB CQ and the file CQ of one store, the migration
check users run before switching ``storeType``). Pure function over readers with the ConsumeQueue
interface; returns plain dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class QueueDiff:
    topic: str
    queue_id: int
    only_in: str | None = None  # "left" | "right" when the queue exists on one side only
    left_bounds: tuple | None = None
    right_bounds: tuple | None = None
    mismatches: list = field(default_factory=list)  # (queue_offset, left entry | None, right entry | None)
    mismatch_count: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class CompareResult:
    queues_compared: int
    entries_compared: int
    diffs: list[QueueDiff]

    @property
    def equal(self) -> bool:
        return not self.diffs


def compare_consume_queues(left, right, max_examples: int = 20) -> CompareResult:
    """Entry-by-entry equality of (queue_offset, physical_offset, size, tags_code) per queue."""
    lq = {(q.topic, q.queue_id): q for q in left}
    rq = {(q.topic, q.queue_id): q for q in right}
    diffs = []
    entries = 0
    for key in sorted(set(lq) | set(rq)):
        a, b = lq.get(key), rq.get(key)
        if a is None or b is None:
            diffs.append(QueueDiff(*key, only_in="left" if b is None else "right"))
            continue
        d = QueueDiff(*key, left_bounds=a.bounds(), right_bounds=b.bounds())
        ea = {e[0]: e[1:4] for e in a.entries()}
        eb = {e[0]: e[1:4] for e in b.entries()}
        entries += len(set(ea) | set(eb))
        for off in sorted(set(ea) | set(eb)):
            if ea.get(off) != eb.get(off):
                d.mismatch_count += 1
                if len(d.mismatches) < max_examples:
                    d.mismatches.append((off, ea.get(off), eb.get(off)))
        if d.mismatch_count or d.left_bounds[:2] != d.right_bounds[:2]:
            diffs.append(d)
    return CompareResult(len(set(lq) | set(rq)), entries, diffs)
