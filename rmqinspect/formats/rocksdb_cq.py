"""RocksDB ConsumeQueue key/value layouts (FORMATS.md §10.1; RocksDBConsumeQueueTable,
RocksDBConsumeQueueOffsetTable, AbstractRocksDBStorage). All integers big-endian.

The construct schemas are the documentation; the struct codecs below are derived from the same field
tables and are what the reader uses per row (tests prove both agree on the oracle).
"""

from __future__ import annotations

import struct

from construct import Bytes, Const, Int32sb, Int64sb, PaddedString, Struct, this

CTRL_0 = b"\x00"
CTRL_1 = b"\x01"
CTRL_2 = b"\x02"

CF_DEFAULT = "default"  # CQ table
CF_OFFSET = "offset"  # offset table

# RocksDBConsumeQueueTable.CQ_UNIT_SIZE
CQ_UNIT_SIZE = 28
CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES = 4 + 1 + 1 + 4 + 1 + 8
OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES = 4 + 1 + 1 + 3 + 1 + 4
OFFSET_VALUE_SIZE = 16
# TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC: the dispatch checkpoint row (8-byte value)
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
MAX = b"max"
MIN = b"min"

CQ_VALUE_FIELDS = (("physical_offset", "q"), ("size", "i"), ("tags_code", "q"), ("store_timestamp", "q"))
OFFSET_VALUE_FIELDS = (("physical_offset", "q"), ("cq_offset", "q"))
_C = {"q": Int64sb, "i": Int32sb}

RocksDBCQKey = Struct(
    "topic_length" / Int32sb,
    Const(CTRL_1),
    "topic" / PaddedString(this.topic_length, "utf8"),
    Const(CTRL_1),
    "queue_id" / Int32sb,
    Const(CTRL_1),
    "cq_offset" / Int64sb,
)
RocksDBCQValue = Struct(*[n / _C[c] for n, c in CQ_VALUE_FIELDS])

RocksDBOffsetKey = Struct(
    "topic_length" / Int32sb,
    Const(CTRL_1),
    "topic" / PaddedString(this.topic_length, "utf8"),
    Const(CTRL_1),
    "kind" / Bytes(3),
    Const(CTRL_1),
    "queue_id" / Int32sb,
)
RocksDBOffsetValue = Struct(*[n / _C[c] for n, c in OFFSET_VALUE_FIELDS])
RocksDBCheckpointValue = Struct("max_physical_end" / Int64sb)

CQ_VALUE = struct.Struct(">" + "".join(c for _, c in CQ_VALUE_FIELDS))
OFFSET_VALUE = struct.Struct(">" + "".join(c for _, c in OFFSET_VALUE_FIELDS))
assert CQ_VALUE.size == CQ_UNIT_SIZE and OFFSET_VALUE.size == OFFSET_VALUE_SIZE
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def queue_prefix(topic: str, queue_id: int) -> bytes:
    """Key prefix shared by every CQ row of one queue: len ‖ 0x01 ‖ topic ‖ 0x01 ‖ queueId ‖ 0x01."""
    t = topic.encode("utf-8")
    return _I32.pack(len(t)) + CTRL_1 + t + CTRL_1 + _I32.pack(queue_id) + CTRL_1


def cq_key(topic: str, queue_id: int, cq_offset: int) -> bytes:
    return queue_prefix(topic, queue_id) + _I64.pack(cq_offset)


def parse_cq_key(key: bytes) -> tuple[str, int, int]:
    """(topic, queue_id, cq_offset); ValueError on anything that is not a CQ key."""
    if len(key) < CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES:
        raise ValueError("key too short")
    n = _I32.unpack_from(key, 0)[0]
    if n < 0 or len(key) != CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES + n:
        raise ValueError(f"key length {len(key)} does not match topic length {n}")
    if key[4:5] != CTRL_1 or key[5 + n:6 + n] != CTRL_1 or key[10 + n:11 + n] != CTRL_1:
        raise ValueError("missing CTRL_1 separator")
    topic = key[5:5 + n].decode("utf-8", "replace")
    return topic, _I32.unpack_from(key, 6 + n)[0], _I64.unpack_from(key, 11 + n)[0]


def offset_key(topic: str, kind: bytes, queue_id: int) -> bytes:
    t = topic.encode("utf-8")
    return _I32.pack(len(t)) + CTRL_1 + t + CTRL_1 + kind + CTRL_1 + _I32.pack(queue_id)


def parse_offset_key(key: bytes) -> tuple[str, str, int]:
    """(topic, 'max'|'min', queue_id)."""
    n = _I32.unpack_from(key, 0)[0]
    if n < 0 or len(key) != OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES + n:
        raise ValueError(f"offset key length {len(key)} does not match topic length {n}")
    if key[4:5] != CTRL_1 or key[5 + n:6 + n] != CTRL_1 or key[9 + n:10 + n] != CTRL_1:
        raise ValueError("missing CTRL_1 separator")
    return key[5:5 + n].decode("utf-8", "replace"), key[6 + n:9 + n].decode("ascii", "replace"), \
        _I32.unpack_from(key, 10 + n)[0]


def encode_cq_value(physical_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return CQ_VALUE.pack(physical_offset, size, tags_code, store_timestamp)


def encode_offset_value(physical_offset: int, cq_offset: int) -> bytes:
    return OFFSET_VALUE.pack(physical_offset, cq_offset)


def encode_checkpoint_value(max_physical_end: int) -> bytes:
    return _I64.pack(max_physical_end)
