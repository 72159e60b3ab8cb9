"""ConsumeQueue entry (FORMATS.md §4.1, ConsumeQueue.CQ_STORE_UNIT_SIZE) and BatchConsumeQueue entry (§4.4)."""

from __future__ import annotations

import struct

import numpy as np
from construct import Int16sb, Int32sb, Int64sb, Padding, Struct

CQ_STORE_UNIT_SIZE = 20
MSG_TAG_OFFSET_INDEX = 12
# ConsumeQueue.fillPreBlank: entries written before the first real entry of a recreated queue.
PRE_BLANK_SIZE = 0x7FFFFFFF
# ConsumeQueueExt.MAX_ADDR: a tagsCode at or below this is an address into consumequeue_ext.
CQ_EXT_MAX_ADDR = -2147483649

CQ_ENTRY_FIELDS = (("physical_offset", "q"), ("size", "i"), ("tags_code", "q"))

ConsumeQueueEntry = Struct(*[name / {"q": Int64sb, "i": Int32sb}[code] for name, code in CQ_ENTRY_FIELDS])
CQ_ENTRY = struct.Struct(">" + "".join(code for _, code in CQ_ENTRY_FIELDS))
# numpy view of a whole CQ file: one row per entry, no per-entry Python.
CQ_DTYPE = np.dtype([(name, ">i8" if code == "q" else ">i4") for name, code in CQ_ENTRY_FIELDS])
assert CQ_ENTRY.size == CQ_DTYPE.itemsize == CQ_STORE_UNIT_SIZE


def is_valid_entry(physical_offset: int, size: int) -> bool:
    """The validity test used by recovery, truncation and the last-offset scan."""
    return physical_offset >= 0 and size > 0


def is_pre_blank(physical_offset: int, size: int, tags_code: int) -> bool:
    return physical_offset == 0 and size == PRE_BLANK_SIZE and tags_code == 0


def is_ext_address(tags_code: int) -> bool:
    return tags_code <= CQ_EXT_MAX_ADDR


# BatchConsumeQueue (5.x), 46-byte entries.
BCQ_STORE_UNIT_SIZE = 46
BatchConsumeQueueEntry = Struct(
    "physical_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
    "store_timestamp" / Int64sb,
    "msg_base_offset" / Int64sb,
    "batch_size" / Int16sb,
    "compacted_offset" / Int32sb,
    Padding(4),
)
BCQ_DTYPE = np.dtype([("physical_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"), ("store_timestamp", ">i8"),
                      ("msg_base_offset", ">i8"), ("batch_size", ">i2"), ("compacted_offset", ">i4"), ("reserved", ">i4")])
assert BCQ_DTYPE.itemsize == BCQ_STORE_UNIT_SIZE
