"""5.x batch structures: BatchConsumeQueue entries (FORMATS.md §4.4, declared in ``formats.consumequeue``),
ConsumeQueueExt units (§4.3) and inner-batch record bodies (§1.9, ``MessageDecoder.encodeMessage``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .consumequeue import (  # noqa: F401  (re-exported)
    BCQ_DTYPE,
    BCQ_ENTRY,
    BCQ_ENTRY_TABLE,
    BCQ_FIELDS,
    BCQ_STORE_UNIT_SIZE,
)
from .fields import FieldTable

if TYPE_CHECKING:
    from construct import Struct

BCQ_INVALID_POS = -1  # compactedOffset as written (BatchConsumeQueue.INVALID_POS)
DEFAULT_BCQ_FILE_SIZE = 300_000 * BCQ_STORE_UNIT_SIZE

# --- FORMATS.md §4.3, ConsumeQueueExt.CqExtUnit: a fixed head, then bit_map_size bytes of filter bit map ----
CQ_EXT_MIN_UNIT_SIZE = 20
CQ_EXT_MAX_UNIT_SIZE = 32767
CQ_EXT_END_BLANK_DATA_LENGTH = 4
CQ_EXT_HEAD_FIELDS = (("size", "h"), ("tags_code", "q"), ("msg_store_time", "q"), ("bit_map_size", "h"))
CQ_EXT_HEAD_TABLE = FieldTable(CQ_EXT_HEAD_FIELDS)
CQ_EXT_HEAD = CQ_EXT_HEAD_TABLE.struct
assert CQ_EXT_HEAD.size == CQ_EXT_MIN_UNIT_SIZE

# --- FORMATS.md §1.9, inner item of an INNER_BATCH record body (MessageDecoder.encodeMessage) -------------
INNER_HEAD_FIELDS = (
    ("total_size", "i"),
    ("magic_code", "i"),  # written as 0
    ("body_crc", "i"),  # written as 0
    ("flag", "i"),
    ("body_length", "i"),
)
INNER_HEAD_TABLE = FieldTable(INNER_HEAD_FIELDS)
INNER_PROPERTIES_LENGTH_TABLE = FieldTable((("properties_length", "h"),))
INNER_HEAD = INNER_HEAD_TABLE.struct
INNER_PROPERTIES_LENGTH = INNER_PROPERTIES_LENGTH_TABLE.struct
# Fixed bytes of an item: the head plus the properties length.
INNER_FIXED_SIZE = INNER_HEAD.size + INNER_PROPERTIES_LENGTH.size


def encode_inner_item(body: bytes, properties: bytes, flag: int = 0) -> bytes:
    total = INNER_FIXED_SIZE + len(body) + len(properties)
    return INNER_HEAD.pack(total, 0, 0, flag, len(body)) + body + INNER_PROPERTIES_LENGTH.pack(len(properties)) \
        + properties


_SCHEMAS: dict[str, Struct] = {}


def __getattr__(name: str):
    # The construct schemas are built on first use: the readers use the struct forms, and importing this
    # module (the recovery imports it for every store) should not import construct (~12 ms).
    if name == "BatchConsumeQueueEntry":
        return BCQ_ENTRY_TABLE.construct()
    if name not in ("CqExtUnit", "InnerBatchItem"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _SCHEMAS:
        from construct import Bytes, Struct, this

        _SCHEMAS["CqExtUnit"] = Struct(*CQ_EXT_HEAD_TABLE.subcons(), "filter_bit_map" / Bytes(this.bit_map_size))
        _SCHEMAS["InnerBatchItem"] = Struct(
            *INNER_HEAD_TABLE.subcons(),
            "body" / Bytes(this.body_length),
            *INNER_PROPERTIES_LENGTH_TABLE.subcons(),
            "properties" / Bytes(this.properties_length),
        )
    return _SCHEMAS[name]
