"""5.x batch structures: BatchConsumeQueue entries (FORMATS.md §4.4), ConsumeQueueExt units (§4.3) and
inner-batch record bodies (§1.9, ``MessageDecoder.encodeMessage``)."""

from __future__ import annotations

import struct

from construct import Bytes, Int16sb, Int32sb, Int64sb, Struct, this

from .consumequeue import BCQ_DTYPE, BCQ_STORE_UNIT_SIZE, BatchConsumeQueueEntry  # noqa: F401

BCQ_INVALID_POS = -1  # compactedOffset as written
DEFAULT_BCQ_FILE_SIZE = 300_000 * BCQ_STORE_UNIT_SIZE

BCQ_FIELDS = (("physical_offset", "q"), ("size", "i"), ("tags_code", "q"), ("store_timestamp", "q"),
              ("msg_base_offset", "q"), ("batch_size", "h"), ("compacted_offset", "i"), ("reserved", "i"))
BCQ_ENTRY = struct.Struct(">" + "".join(c for _, c in BCQ_FIELDS))
assert BCQ_ENTRY.size == BCQ_STORE_UNIT_SIZE == BCQ_DTYPE.itemsize

# ConsumeQueueExt.CqExtUnit
CQ_EXT_MIN_UNIT_SIZE = 20
CQ_EXT_MAX_UNIT_SIZE = 32767
CQ_EXT_END_BLANK_DATA_LENGTH = 4
CqExtUnit = Struct(
    "size" / Int16sb,
    "tags_code" / Int64sb,
    "msg_store_time" / Int64sb,
    "bit_map_size" / Int16sb,
    "filter_bit_map" / Bytes(this.bit_map_size),
)
CQ_EXT_HEAD = struct.Struct(">hqqh")

# Inner item of an INNER_BATCH record body
InnerBatchItem = Struct(
    "total_size" / Int32sb,
    "magic_code" / Int32sb,  # written as 0
    "body_crc" / Int32sb,  # written as 0
    "flag" / Int32sb,
    "body_length" / Int32sb,
    "body" / Bytes(this.body_length),
    "properties_length" / Int16sb,
    "properties" / Bytes(this.properties_length),
)
INNER_HEAD = struct.Struct(">iiiii")


def encode_inner_item(body: bytes, properties: bytes, flag: int = 0) -> bytes:
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(properties)
    return INNER_HEAD.pack(total, 0, 0, flag, len(body)) + body + struct.pack(">h", len(properties)) + properties
