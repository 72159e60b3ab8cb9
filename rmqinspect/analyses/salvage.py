"""``salvage``: the intact records a restart would throw away, past the recovery's truncation point, and the
damaged ranges between them (the resynchronising walk, ``store.walk.resync``, consumed here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store import Store
from ..store.walk.kinds import Damage, DamageKind
from ..store.walk.records import RecordRun, decode_slot, unpack_header
from ..store.walk.resync import BlankRecord, walk_batches
from .dispatch_rules import goes_to_consume_queue


@dataclass
class SalvageReport:
    truncate_offset: int
    regions: list[Damage]
    messages: list = field(default_factory=list)  # store.message.Message, intact records past T
    suspects: list[dict] = field(default_factory=list)  # intact records failing queue-offset monotonicity
    bytes_discarded: int = 0

    def lost_summary(self, damaged_records: int = 0) -> dict:
        per_topic: dict[str, int] = {}
        for m in self.messages:
            per_topic[m.topic] = per_topic.get(m.topic, 0) + 1
        return {"count": len(self.messages) + damaged_records, "intact": len(self.messages),
                "damaged": damaged_records, "bytes": self.bytes_discarded,
                "intact_bytes": sum(m.total_size for m in self.messages), "per_topic": per_topic}

    def to_dict(self) -> dict:
        return {"truncate_offset": self.truncate_offset, "regions": [r.to_dict() for r in self.regions],
                "intact_messages": len(self.messages), "suspects": self.suspects,
                "messages_lost": self.lost_summary(self.damaged_records())}

    def damaged_records(self) -> int:
        return sum(1 for r in self.regions
                   if r.kind in (DamageKind.TORN_TAIL, DamageKind.CRC, DamageKind.HALF, DamageKind.STALE)
                   and (r.cause or r.kind) != DamageKind.GARBAGE)


def _decode_run(item: RecordRun, *_) -> list:
    """``walk_batches``' converter for ``salvage``: the decoded messages of a run."""
    f = item.file
    buf = f.buffer
    r = item.records
    return [decode_slot(buf, f.start, p, unpack_header(buf, p), bpos, None if c < 0 else c == 1, f.path)
            for p, bpos, c in zip(r["position"].tolist(), r["body_pos"].tolist(), r["crc_ok"].tolist())]


def salvage(store: Store, truncate_offset: int, *, accept_v2: bool = True,
            queue_next_offsets: dict[str, int] | None = None, jobs: int | None = None) -> SalvageReport:
    """Intact records at or after ``truncate_offset`` (what the broker would discard) and the damaged
    regions between them. ``queue_next_offsets`` ("topic/queueId" -> next logical offset after recovery)
    seeds the queue-offset monotonicity check. The records are decoded inside each file's walk (worker
    processes with ``jobs`` > 1, default ``parallel.resolve_jobs``); the check runs in file order."""
    cl = store.commitlog
    nxt_q = dict(queue_next_offsets or {})
    rep = SalvageReport(truncate_offset, [])
    discarded = 0
    for item in walk_batches(cl, truncate_offset, check_crc=True, accept_v2=accept_v2, jobs=jobs,
                             convert=_decode_run):
        if isinstance(item, Damage):
            rep.regions.append(item)
            if item.kind != DamageKind.MISSING_FILE:
                discarded += item.size
            continue
        if isinstance(item, BlankRecord):
            continue
        for msg in item:
            discarded += msg.total_size
            if goes_to_consume_queue(msg.sys_flag):
                key = f"{msg.topic}/{msg.queue_id}"
                expect = nxt_q.get(key)
                if expect is not None and msg.queue_offset < expect:
                    rep.suspects.append({"physical_offset": msg.physical_offset, "queue": key,
                                         "queue_offset": msg.queue_offset,
                                         "reason": f"queue offset {msg.queue_offset} is below the queue's next "
                                                   f"offset {expect}: an older generation of this queue (stale "
                                                   "data)"})
                    continue
                nxt_q[key] = msg.queue_offset + 1
            rep.messages.append(msg)
    rep.bytes_discarded = discarded
    return rep
