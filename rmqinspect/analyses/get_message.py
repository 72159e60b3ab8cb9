"""What a consumer gets: ``DefaultMessageStore.getMessage`` (5.3.3) over a BatchConsumeQueue, offline.

The broker answers a pull at ``offset`` with whole batches: the unit that *contains* the offset
(``BatchConsumeQueue.get``: ``msgBaseOffset <= offset < msgBaseOffset + batchSize``) is always returned from
its base, then further units while ``isTheBatchFull`` allows, and only from the BatchCQ file that holds the
start unit (``iterateFrom`` hands out one file's buffer; ``travelCqFileNumWhenGetMessage`` = 1 only moves on
when nothing was found). ``nextBeginOffset`` is the last returned unit's base + batch size.

Two inputs cannot be read from a copied store and are options here, named as in MessageStoreConfig:
whether the broker judged the data to be in memory (``accessMessageInMemoryMaxRatio`` × the broker host's
RAM against the distance to the commit-log end; in memory by default) and the broker role
(``nextOffsetCorrection``: a SLAVE without ``offsetCheckInSlave`` keeps the requested offset as
``nextBeginOffset`` on OFFSET_TOO_SMALL / OVERFLOW answers, a master corrects it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import RmqInspectError
from ..store.batch import BatchConsumeQueue

MAX_PULL_MSG_SIZE = 128 * 1024 * 1024  # DefaultMessageStore.MAX_PULL_MSG_SIZE
BCQ_UNIT_SIZE = 46  # what getMessage multiplies queue offsets by for maxFilterMessageSize


@dataclass(frozen=True)
class GetMessageOptions:
    """MessageStoreConfig values getMessage reads (5.3.3 defaults)."""

    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    max_filter_message_size: int = 16000
    max_total_msg_size: int = MAX_PULL_MSG_SIZE
    in_memory: bool = True
    slave: bool = False  # brokerRole=SLAVE and offsetCheckInSlave=false


@dataclass
class GetMessageResult:
    offset: int
    max_msg_nums: int
    status: str  # GetMessageStatus name
    next_begin_offset: int
    min_offset: int
    max_offset: int
    message_count: int = 0  # inner messages returned
    msg_count4commercial: int = 0  # batches (units) returned
    message_queue_offsets: list[int] = field(default_factory=list)  # base offset of each returned batch
    physical_offsets: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _full(size: int, batch: int, max_msg_nums: int, buffer_total: int, message_total: int,
          opts: GetMessageOptions) -> bool:
    """DefaultMessageStore.isTheBatchFull: the first unit is always taken."""
    if buffer_total == 0 or message_total == 0:
        return False
    if message_total + batch > max_msg_nums:
        return True
    if buffer_total + size > max(opts.max_total_msg_size, 100):
        return True
    if opts.in_memory:
        if buffer_total + size > opts.max_transfer_bytes_on_message_in_memory:
            return True
        return message_total > opts.max_transfer_count_on_message_in_memory - 1
    if buffer_total + size > opts.max_transfer_bytes_on_message_in_disk:
        return True
    return message_total > opts.max_transfer_count_on_message_in_disk - 1


def _units(queue: BatchConsumeQueue) -> tuple[list[np.ndarray], int, int]:
    """The queue's valid units per file (files without one left out) and its (min, max) message offsets, read
    in one pass (``BatchConsumeQueue.bounds`` over the same chunks)."""
    files = [arr for _, arr in queue.chunks() if len(arr)]
    if not files:
        return files, 0, 0
    last = files[-1]
    return files, int(files[0]["msg_base_offset"][0]), int(last["msg_base_offset"][-1] + last["batch_size"][-1])


def _start_unit(files: list[np.ndarray], offset: int):
    """getBatchMsgIndexBuffer: the file whose first unit starts at or before ``offset`` and, in it, the last
    unit starting at or before it. (units of that file, index) or None."""
    units = None
    for arr in files:
        if int(arr["msg_base_offset"][0]) <= offset:
            units = arr
    if units is None:
        return None
    return units, int(np.searchsorted(units["msg_base_offset"], offset, side="right")) - 1


def batch_unit_at(queue: BatchConsumeQueue, offset: int) -> dict | None:
    """``BatchConsumeQueue.get(offset)``: the unit whose batch contains ``offset`` (None past the end)."""
    files, _, hi = _units(queue)
    found = _start_unit(files, offset) if offset < hi else None
    if found is None:
        return None
    units, i = found
    row = units[i]
    return {"queue_offset": int(row["msg_base_offset"]), "physical_offset": int(row["physical_offset"]),
            "size": int(row["size"]), "tags_code": int(row["tags_code"]), "batch_size": int(row["batch_size"]),
            "compacted_offset": int(row["compacted_offset"])}


def batch_get_message(queue: BatchConsumeQueue, offset: int, max_msg_nums: int = 32, commitlog=None,
                      options: GetMessageOptions | None = None) -> GetMessageResult:
    """The answer to ``getMessage(group, topic, queueId, offset, maxMsgNums, filter=null)`` on this queue.

    With ``commitlog`` (a ``CommitLog``), units whose record lies outside every commit-log file are skipped
    as the broker does when ``commitLog.getMessage`` returns nothing (MESSAGE_WAS_REMOVING)."""
    opts = options or GetMessageOptions()
    files, lo, hi = _units(queue)

    def corrected(new: int) -> int:
        return offset if opts.slave else new

    if hi == 0:
        return GetMessageResult(offset, max_msg_nums, "NO_MESSAGE_IN_QUEUE", corrected(0), lo, hi)
    if offset < lo:
        return GetMessageResult(offset, max_msg_nums, "OFFSET_TOO_SMALL", corrected(lo), lo, hi)
    if offset == hi:
        return GetMessageResult(offset, max_msg_nums, "OFFSET_OVERFLOW_ONE", corrected(offset), lo, hi)
    if offset > hi:
        return GetMessageResult(offset, max_msg_nums, "OFFSET_OVERFLOW_BADLY", corrected(hi), lo, hi)
    res = GetMessageResult(offset, max_msg_nums, "NO_MATCHED_MESSAGE", offset, lo, hi)
    found = _start_unit(files, offset)
    if found is None:
        res.status = "OFFSET_FOUND_NULL"
        return res
    units, i = found
    max_filter = max(opts.max_filter_message_size, max_msg_nums * BCQ_UNIT_SIZE)
    buffer_total = message_total = 0
    for j in range(i, len(units)):
        if res.next_begin_offset >= hi:
            break
        qoff, pos, size, batch = (int(units[k][j]) for k in ("msg_base_offset", "physical_offset", "size",
                                                             "batch_size"))
        if (qoff - offset) * BCQ_UNIT_SIZE >= max_filter:
            break
        if _full(size, batch, max_msg_nums, buffer_total, message_total, opts):
            break
        if buffer_total >= max(opts.max_total_msg_size, 100):
            break
        res.next_begin_offset = qoff + batch
        if commitlog is not None:
            try:
                commitlog.locate(pos)
            except RmqInspectError:
                if buffer_total == 0:
                    res.status = "MESSAGE_WAS_REMOVING"
                res.notes.append(f"unit at queue offset {qoff}: commit-log offset {pos} is in no file")
                continue
        buffer_total += size
        message_total += batch
        res.message_queue_offsets.append(qoff)
        res.physical_offsets.append(pos)
        res.status = "FOUND"
    res.message_count = message_total
    res.msg_count4commercial = len(res.message_queue_offsets)
    return res
