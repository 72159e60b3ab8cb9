"""Controller mode (AutoSwitch HA) on top of the RecoveryPlan: what the broker does differently when
``enableControllerMode`` is set (develop 8fc57f1, the same in 5.1.4-5.3.3 where checked).

- ``effective_confirm_offset``: the checkpoint's ``confirmPhyOffset`` after the recovery's clamp (``CommitLog``
  recoverNormally/Abnormally: raised to the min offset, lowered to the recovered end).
- ``detect_confirm_offset`` gives the RecoveryPlan (``RecoveryOptions.confirm_offset``) the offset the broker
  dispatches up to: ``recoverAbnormally`` re-dispatches only records ending at or before it and start()'s
  ReputMessageService stops there (``getReputEndOffset``, unless ``readUnCommitted``), so the unconfirmed tail is on
  disk in no queue. ``recoverNormally`` has no such check: after a clean shutdown it re-dispatches the records past
  the queues' max physical offset, the unconfirmed tail included.
- ``compensate_for_ha``: ``ConsumeQueueStore.recoverOffsetTable`` -> ``compensateForHA`` walks the records from the
  confirm offset to the end to advance the queue-offset table; it accepts only the V1 magic code (and blanks) and
  throws ``RuntimeException("Unknown magicCode")`` on anything else: ``load()`` returns false, the broker does not
  start. Run when ``enableControllerMode`` or ``duplicationEnable``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...formats.constants import MESSAGE_MAGIC_CODE_V1
from ...store import Store
from ...store.epoch import EPOCH_FILE
from ...store.walk.kinds import BLANK, MESSAGE
from ...store.walk.records import Gap, topic_and_properties

RULE_COMPENSATE = ("ConsumeQueueStore.compensateForHA (recoverOffsetTable, at load) walks the records after the "
                   "confirm offset and accepts only MESSAGE_MAGIC_CODE (V1) and blanks: any other magic code throws "
                   "RuntimeException(\"Unknown magicCode\"), load() returns false and the broker does not start")


def detect_confirm_offset(store: Store) -> int:
    """The confirm offset the broker dispatches up to, for ``RecoveryOptions.confirm_offset``: the checkpoint's
    confirmPhyOffset when the store is in controller mode (an ``epochFileCheckpoint`` or ``.bak`` in the root, or
    ``enableControllerMode=true`` in the store's broker.conf) or ``duplicationEnable=true``; -1 (no cut) otherwise,
    and with ``readUnCommitted=true`` (the reput then runs to the max offset).

    What the broker does once it runs: a fenced broker (BrokerController fences a controller-mode broker before
    load) and a slave serve the checkpoint's value; a master the controller unfences with a one-member sync state
    set (or allAckInSyncStateSet=false) returns the max offset from getConfirmOffset, and the tail is dispatched
    then. The plan models the restart, i.e. the fenced broker."""
    from ...store.broker_conf import configured

    def conf(key: str):
        s = configured(store.conf, key)
        return None if s is None else s.value

    if conf("readUnCommitted"):
        return -1
    enabled = conf("enableControllerMode")
    if enabled is None:
        enabled = any(os.path.isfile(os.path.join(store.root, n)) for n in (EPOCH_FILE, EPOCH_FILE + ".bak"))
    if not (enabled or conf("duplicationEnable")):
        return -1
    cp = store.checkpoint
    return cp.confirm_phy_offset or 0 if cp is not None and cp.confirm_phy_offset is not None else 0


def effective_confirm_offset(confirm: int | None, min_offset: int, recovered_end: int) -> int | None:
    if confirm is None:
        return None
    return min(max(confirm, min_offset), recovered_end)


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


@dataclass
class Finding:
    """A controller-mode fact ``verify`` reports: ``problem`` False is a note (the unconfirmed tail is normal)."""

    kind: str  # epoch_file | epoch_past_data | epoch_not_record | confirm_past_data | will_not_load | unconfirmed
    start: int
    end: int
    file: str
    position: int | None
    reason: str
    problem: bool = True


def controller_findings(store: Store, data_end: int) -> list[Finding]:
    """The epoch file (as the broker reads it), the confirm offset against the data and the load check, for a
    store in controller mode (``detect_confirm_offset`` >= 0); empty otherwise."""
    from ...errors import OffsetOutOfStoreError
    from ...formats.epoch import derive_end_offsets
    from ...store.epoch import read_epoch_checkpoint
    from ...store.walk.resync import validate_at

    confirm = detect_confirm_offset(store)
    if confirm < 0:
        return []
    out: list[Finding] = []
    ef = read_epoch_checkpoint(store.root)
    name = os.path.basename(ef.path)
    for p in ef.problems:
        out.append(Finding("epoch_file", 0, 0, name, None, p.split(": ", 1)[-1]))
    entries = list(ef.entries)
    derive_end_offsets(entries, data_end)
    cl = store.commitlog
    for e in entries:
        if e.start_offset > data_end:
            out.append(Finding("epoch_past_data", e.start_offset, e.start_offset, name, None,
                               f"epoch {e.epoch} starts at {e.start_offset}, past the end of the data ({data_end})"))
        elif cl.min_offset < e.start_offset < data_end:
            try:
                f, pos = cl.locate(e.start_offset)
                ok = validate_at(f, pos, True, True) is not None
            except OffsetOutOfStoreError:
                ok = False
            if not ok:
                out.append(Finding("epoch_not_record", e.start_offset, e.start_offset, name, None,
                                   f"epoch {e.epoch} starts at {e.start_offset}, not at a valid record: a slave "
                                   "truncating there is refused (isOffsetAligned)"))
    if confirm > data_end:
        out.append(Finding("confirm_past_data", data_end, confirm, "checkpoint", 32,
                           f"confirmPhyOffset {confirm} is past the end of the data ({data_end}): acknowledged "
                           "data is missing; recovery lowers it to the recovered end"))
    eff = effective_confirm_offset(confirm, cl.min_offset, data_end)
    assert eff is not None
    _, fail = compensate_for_ha(store, eff, data_end)
    if fail is not None:
        f, pos = cl.locate(fail.physical_offset)
        out.append(Finding("will_not_load", fail.physical_offset, fail.physical_offset + fail.store_size,
                           os.path.join("commitlog", f.name), pos, fail.sentence))
    if eff < data_end:
        out.append(Finding("unconfirmed", eff, data_end, "checkpoint", 32,
                           f"[{eff}, {data_end}) is past confirmPhyOffset: on disk, in no consume queue until "
                           "the controller makes this broker a master that needs no acks", problem=False))
    return out
