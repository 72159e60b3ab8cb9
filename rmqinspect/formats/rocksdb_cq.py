"""RocksDB ConsumeQueue key/value layouts (FORMATS.md §10.1; RocksDBConsumeQueueTable,
RocksDBConsumeQueueOffsetTable, AbstractRocksDBStorage). All integers big-endian.

The construct schemas are the documentation; the struct codecs below are derived from the same field
tables and are what the reader uses per row (tests prove both agree on the oracle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DecodeError
from .fields import FieldTable

if TYPE_CHECKING:
    from construct import Struct

CTRL_0 = b"\x00"
CTRL_1 = b"\x01"
CTRL_2 = b"\x02"

CF_DEFAULT = "default"  # CQ table
CF_OFFSET = "offset"  # offset table

# TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC: the dispatch checkpoint row (8-byte value)
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
MAX = b"max"
MIN = b"min"

# --- FORMATS.md §10.1: keys (RocksDBConsumeQueueTable.buildCQKeyByteBuffer,
# RocksDBConsumeQueueOffsetTable.buildOffsetKeyByteBuffer). A key is a fixed head, the topic's UTF-8 bytes,
# then a fixed tail; the separators are CTRL_1 bytes.
KEY_HEAD_FIELDS = (("topic_length", "i"), ("topic_start", "1s"))
CQ_KEY_TAIL_FIELDS = (("topic_end", "1s"), ("queue_id", "i"), ("queue_id_end", "1s"), ("cq_offset", "q"))
OFFSET_KEY_TAIL_FIELDS = (("topic_end", "1s"), ("kind", "3s"), ("kind_end", "1s"), ("queue_id", "i"))
# --- values: RocksDBConsumeQueueTable.buildCQValueByteBuffer (CQ_UNIT_SIZE), RocksDBConsumeQueueOffsetTable
# (OFFSET_VALUE), the CHECKPOINT_TOPIC row (one int64) ---------------------------------------------------------
CQ_VALUE_FIELDS = (("physical_offset", "q"), ("size", "i"), ("tags_code", "q"), ("store_timestamp", "q"))
OFFSET_VALUE_FIELDS = (("physical_offset", "q"), ("cq_offset", "q"))
CHECKPOINT_VALUE_FIELDS = (("max_physical_end", "q"),)

KEY_HEAD = FieldTable(KEY_HEAD_FIELDS)
CQ_KEY_TAIL = FieldTable(CQ_KEY_TAIL_FIELDS)
OFFSET_KEY_TAIL = FieldTable(OFFSET_KEY_TAIL_FIELDS)
CQ_VALUE_TABLE = FieldTable(CQ_VALUE_FIELDS)
OFFSET_VALUE_TABLE = FieldTable(OFFSET_VALUE_FIELDS)
CHECKPOINT_VALUE_TABLE = FieldTable(CHECKPOINT_VALUE_FIELDS)

# RocksDBConsumeQueueTable.CQ_UNIT_SIZE
CQ_UNIT_SIZE = 28
CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES = KEY_HEAD.size + CQ_KEY_TAIL.size
OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES = KEY_HEAD.size + OFFSET_KEY_TAIL.size
OFFSET_VALUE_SIZE = 16

_SEPARATORS = ("topic_start", "topic_end", "queue_id_end", "kind_end")


def _key_schema(tail: FieldTable) -> Struct:
    from construct import Const, PaddedString, Struct, this

    seps = {n: Const(CTRL_1) for n in _SEPARATORS}
    return Struct(*KEY_HEAD.subcons(**{n: c for n, c in seps.items() if n in KEY_HEAD.names}),
                  "topic" / PaddedString(this.topic_length, "utf8"),
                  *tail.subcons(**{n: c for n, c in seps.items() if n in tail.names}))


_KEY_SCHEMAS: dict[str, Struct] = {}


def __getattr__(name: str):
    # The construct schemas are built on first use: the codecs below are struct forms, and the recovery imports
    # this module for every store (construct costs ~12 ms to import).
    values = {"RocksDBCQValue": CQ_VALUE_TABLE, "RocksDBOffsetValue": OFFSET_VALUE_TABLE,
              "RocksDBCheckpointValue": CHECKPOINT_VALUE_TABLE}
    keys = {"RocksDBCQKey": CQ_KEY_TAIL, "RocksDBOffsetKey": OFFSET_KEY_TAIL}
    if name in values:
        return values[name].construct()  # FieldTable keeps the schema: built once
    if name in keys:
        if name not in _KEY_SCHEMAS:
            _KEY_SCHEMAS[name] = _key_schema(keys[name])
        return _KEY_SCHEMAS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


CQ_VALUE = CQ_VALUE_TABLE.struct
OFFSET_VALUE = OFFSET_VALUE_TABLE.struct
CHECKPOINT_VALUE = CHECKPOINT_VALUE_TABLE.struct
CQ_VALUE_DTYPE = CQ_VALUE_TABLE.dtype
# cq_offset is the key's last field: the keys of one queue differ only there.
CQ_OFFSET_FROM_KEY_END = CQ_KEY_TAIL.size - CQ_KEY_TAIL.position("cq_offset")
assert CQ_VALUE.size == CQ_UNIT_SIZE and OFFSET_VALUE.size == OFFSET_VALUE_SIZE
assert CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES == 4 + 1 + 1 + 4 + 1 + 8 and OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES == 14


def queue_prefix(topic: str, queue_id: int) -> bytes:
    """Key prefix shared by every CQ row of one queue: len ‖ 0x01 ‖ topic ‖ 0x01 ‖ queueId ‖ 0x01."""
    return cq_key(topic, queue_id, 0)[:-CQ_OFFSET_FROM_KEY_END]


def cq_key(topic: str, queue_id: int, cq_offset: int) -> bytes:
    t = topic.encode("utf-8")
    return KEY_HEAD.pack(len(t), CTRL_1) + t + CQ_KEY_TAIL.pack(CTRL_1, queue_id, CTRL_1, cq_offset)


def _topic_of(key: bytes, without_topic: int) -> tuple[int, str]:
    """(topic byte length, topic) of a key whose fixed parts take ``without_topic`` bytes."""
    if len(key) < without_topic:
        raise DecodeError("key too short")
    n, start = KEY_HEAD.unpack_from(key, 0)
    if n < 0 or len(key) != without_topic + n:
        raise DecodeError(f"key length {len(key)} does not match topic length {n}")
    if start != CTRL_1:
        raise DecodeError("missing CTRL_1 separator")
    return n, key[KEY_HEAD.size:KEY_HEAD.size + n].decode("utf-8", "replace")


def parse_cq_key(key: bytes) -> tuple[str, int, int]:
    """(topic, queue_id, cq_offset); DecodeError (a ValueError) on anything that is not a CQ key."""
    n, topic = _topic_of(key, CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES)
    end, queue_id, queue_id_end, cq_offset = CQ_KEY_TAIL.unpack_from(key, KEY_HEAD.size + n)
    if end != CTRL_1 or queue_id_end != CTRL_1:
        raise DecodeError("missing CTRL_1 separator")
    return topic, queue_id, cq_offset


def offset_key(topic: str, kind: bytes, queue_id: int) -> bytes:
    t = topic.encode("utf-8")
    return KEY_HEAD.pack(len(t), CTRL_1) + t + OFFSET_KEY_TAIL.pack(CTRL_1, kind, CTRL_1, queue_id)


def parse_offset_key(key: bytes) -> tuple[str, str, int]:
    """(topic, 'max'|'min', queue_id)."""
    n, topic = _topic_of(key, OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES)
    end, kind, kind_end, queue_id = OFFSET_KEY_TAIL.unpack_from(key, KEY_HEAD.size + n)
    if end != CTRL_1 or kind_end != CTRL_1:
        raise DecodeError("missing CTRL_1 separator")
    return topic, kind.decode("ascii", "replace"), queue_id


def encode_cq_value(physical_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return CQ_VALUE.pack(physical_offset, size, tags_code, store_timestamp)


def encode_offset_value(physical_offset: int, cq_offset: int) -> bytes:
    return OFFSET_VALUE.pack(physical_offset, cq_offset)


def encode_checkpoint_value(max_physical_end: int) -> bytes:
    return CHECKPOINT_VALUE.pack(max_physical_end)
