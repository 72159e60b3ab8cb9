"""Controller mode (AutoSwitch HA) on top of the RecoveryPlan: what the broker does differently when
``enableControllerMode`` is set (develop 8fc57f1, the same in 5.1.4-5.3.3 where checked).

- ``effective_confirm_offset``: the checkpoint's ``confirmPhyOffset`` after the recovery's clamp (``CommitLog``
  recoverNormally/Abnormally: raised to the min offset, lowered to the recovered end).
- ``served_queue_entries``: the ReputMessageService dispatches only up to the confirm offset
  (``DefaultMessageStore`` doReput, unless ``readUnCommitted``), so a queue as the broker serves it holds only the
  entries whose record ends at or before it; the unconfirmed tail is on disk in no queue.
- ``compensate_for_ha``: ``ConsumeQueueStore.recoverOffsetTable`` -> ``compensateForHA`` walks the records from the
  confirm offset to the end to advance the queue-offset table; it accepts only the V1 magic code (and blanks) and
  throws ``RuntimeException("Unknown magicCode")`` on anything else: ``load()`` returns false, the broker does not
  start. Run when ``enableControllerMode`` or ``duplicationEnable``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...formats.constants import MESSAGE_MAGIC_CODE_V1
from ...store import Store
from ...store.commitlog import BLANK, MESSAGE, Gap, topic_and_properties

RULE_COMPENSATE = ("ConsumeQueueStore.compensateForHA (recoverOffsetTable, at load) walks the records after the "
                   "confirm offset and accepts only MESSAGE_MAGIC_CODE (V1) and blanks: any other magic code throws "
                   "RuntimeException(\"Unknown magicCode\"), load() returns false and the broker does not start")


def effective_confirm_offset(confirm: int | None, min_offset: int, recovered_end: int) -> int | None:
    if confirm is None:
        return None
    return min(max(confirm, min_offset), recovered_end)


def served_queue_entries(entries: list[tuple[int, int, int, int]], confirm: int | None) -> list:
    """The entries a controller-mode broker dispatches: those whose record ends at or before ``confirm``."""
    if confirm is None:
        return entries
    return [e for e in entries if e[1] + e[2] <= confirm]


@dataclass
class LoadFailure:
    """Why the broker refuses to load the store, with the record and the rule."""

    rule: str
    compensate_from: int
    records_accepted: int
    physical_offset: int
    store_size: int
    magic_code: int
    topic: str
    queue_id: int
    queue_offset: int
    sentence: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "compensate_from": self.compensate_from, "records_accepted": self.records_accepted,
                "physical_offset": self.physical_offset, "store_size": self.store_size,
                "magic_code": f"0x{self.magic_code & 0xFFFFFFFF:08X}", "topic": self.topic,
                "queue_id": self.queue_id, "queue_offset": self.queue_offset, "sentence": self.sentence}


def compensate_for_ha(store: Store, confirm: int, end: int) -> tuple[int, LoadFailure | None]:
    """Walk [confirm, end) as compensateForHA does: (records accepted, the failure or None)."""
    accepted = 0
    if confirm >= end:
        return 0, None
    for rec in store.commitlog.scan(confirm, end, check_crc=True, accept_v2=True):
        if isinstance(rec, Gap):
            break
        if rec.kind == BLANK:
            continue
        if rec.kind != MESSAGE:
            break  # checkMessageAndReturnSize fails: the walk stops, load goes on
        hdr = rec.header
        assert hdr is not None
        if hdr.magic_code != MESSAGE_MAGIC_CODE_V1:
            topic, _ = topic_and_properties(rec.file.buffer, hdr, rec.body_pos)
            sentence = (f"the broker would not start: compensateForHA reads the unconfirmed records from the confirm "
                        f"offset {confirm}, accepts {accepted}, then meets a V2 record (magic "
                        f"0x{hdr.magic_code & 0xFFFFFFFF:08X}, topic {topic[:40]}{'...' if len(topic) > 40 else ''}, "
                        f"queue {hdr.queue_id}, queue offset {hdr.queue_offset}) at physical offset {rec.offset} "
                        "and throws Unknown magicCode; load() returns false")
            return accepted, LoadFailure(RULE_COMPENSATE, confirm, accepted, rec.offset, rec.size, hdr.magic_code,
                                         topic, hdr.queue_id, hdr.queue_offset, sentence)
        accepted += 1
    return accepted, None
