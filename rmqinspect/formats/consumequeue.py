"""ConsumeQueue entry (FORMATS.md §4.1, ConsumeQueue.CQ_STORE_UNIT_SIZE) and BatchConsumeQueue entry (§4.4)."""

from __future__ import annotations

from .fields import FieldTable

# --- FORMATS.md §4.1, ConsumeQueue entry (ConsumeQueue.putMessagePositionInfo) -----------------------------
CQ_STORE_UNIT_SIZE = 20
# ConsumeQueue.fillPreBlank: entries written before the first real entry of a recreated queue.
PRE_BLANK_SIZE = 0x7FFFFFFF
# ConsumeQueueExt.MAX_ADDR: a tagsCode at or below this is an address into consumequeue_ext.
CQ_EXT_MAX_ADDR = -2147483649

CQ_ENTRY_FIELDS = (("physical_offset", "q"), ("size", "i"), ("tags_code", "q"))
CQ_ENTRY_TABLE = FieldTable(CQ_ENTRY_FIELDS)
CQ_ENTRY = CQ_ENTRY_TABLE.struct
# CQ_DTYPE (module __getattr__): numpy view of a whole CQ file, one row per entry, no per-entry Python.
MSG_TAG_OFFSET_INDEX = CQ_ENTRY_TABLE.position("tags_code")  # ConsumeQueue.MSG_TAG_OFFSET_INDEX
assert CQ_ENTRY_TABLE.size == CQ_STORE_UNIT_SIZE and MSG_TAG_OFFSET_INDEX == 12


def round_cq_file_size(n: int) -> int:
    """MessageStoreConfig.getMappedFileSizeConsumeQueue: the configured size rounded up to a multiple of 20."""
    return -(-n // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE


def mapped_cq_file_size(file_size: int) -> int:
    """``round_cq_file_size`` of a size taken from a file's length, at least one 20-byte unit (a damaged file's
    length, 7 bytes or 0, is no mapped size: a queue of it would hold no entry)."""
    return max(CQ_STORE_UNIT_SIZE, round_cq_file_size(file_size))


def is_ext_address(tags_code: int) -> bool:
    return tags_code <= CQ_EXT_MAX_ADDR


# ConsumeQueueExt.decorate / unDecorate: address = realOffset + Long.MIN_VALUE (FORMATS.md §4.3).
_LONG_MIN = -(1 << 63)


def ext_address(real_offset: int) -> int:
    return real_offset + _LONG_MIN


def ext_real_offset(address: int) -> int:
    return address - _LONG_MIN


# --- FORMATS.md §4.4, BatchConsumeQueue entry (5.0.0+, BatchConsumeQueue.putBatchMessagePositionInfo) ------
# 46-byte entries. The last 4 bytes are written as 0 and never read by the broker: declared as the int32
# field "reserved" (FORMATS.md §4.4 "reserved, 0"), so that every form below has the same fields.
BCQ_STORE_UNIT_SIZE = 46
BCQ_FIELDS = (("physical_offset", "q"), ("size", "i"), ("tags_code", "q"), ("store_timestamp", "q"),
              ("msg_base_offset", "q"), ("batch_size", "h"), ("compacted_offset", "i"), ("reserved", "i"))
BCQ_ENTRY_TABLE = FieldTable(BCQ_FIELDS)
BCQ_ENTRY = BCQ_ENTRY_TABLE.struct
assert BCQ_ENTRY_TABLE.size == BCQ_STORE_UNIT_SIZE


def __getattr__(name: str):
    # The construct schemas are built on first use (the readers use CQ_ENTRY / BCQ_ENTRY and the dtypes), so
    # importing the queue layouts costs no construct import (~12 ms of every store command's start-up).
    # The numpy dtypes likewise: a small store's recovery scan reads its queues with struct, without numpy.
    tables = {"ConsumeQueueEntry": CQ_ENTRY_TABLE, "BatchConsumeQueueEntry": BCQ_ENTRY_TABLE}
    if name in tables:
        return tables[name].construct()  # FieldTable keeps the schema: built once
    dtypes = {"CQ_DTYPE": CQ_ENTRY_TABLE, "BCQ_DTYPE": BCQ_ENTRY_TABLE}
    if name in dtypes:
        return dtypes[name].dtype  # a cached_property: built once
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
