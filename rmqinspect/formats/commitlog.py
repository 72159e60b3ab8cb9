"""CommitLog record, end-of-file blank record (FORMATS.md §1.2, §1.4).

Source: ../shared/docs/FORMATS.md §1.2 (record layout; CommitLog.DefaultAppendMessageCallback,
MessageExtEncoder.encode, MessageDecoder.decode), §1.4 (blank record). The properties string (§1.7) and the
``__CRC32#`` trailer (§1.8) live in ``formats.properties`` (re-exported here for older imports).

The layout is described once, in the field tables ``HEADER_FIELDS`` / host / ``MIDDLE_FIELDS`` /
``TRAILER_FIELDS``; ``RECORD_HEADERS`` (one ``FieldTable`` per IPv4/IPv6 born host x store host
combination) derives from them:

* ``CommitLogRecord`` - the construct schema (declarative, slow, used for single records and as the
  reference in tests);
* ``HEADER_STRUCTS`` - precompiled ``struct.Struct`` objects for the fixed-size header, used by the hot paths
  (walk, verify, rebuild); tests/test_fastpath.py and tests/test_formats.py prove both decode every oracle
  record identically;
* the named byte positions (``SYSFLAG_POSITION`` ..., ``store_timestamp_position(sys_flag)``) and the
  indexes of the fields in a ``HEADER_STRUCTS`` tuple (``HEADER_INDEX``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .constants import (
    BLANK_MAGIC_CODE,
    CRC32_RESERVED_LEN,  # noqa: F401  (re-exported)
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    SysFlag,
)
from .fields import FieldTable
from .properties import (  # noqa: F401  (re-exported: the rules live in formats.properties)
    crc32_trailer,
    crc32_value,
    decode_crc32_property,
    encode_crc32_property,
    encode_properties,
    parse_properties,
    parse_properties_checked,
    properties_well_formed,
)

if TYPE_CHECKING:
    from construct import Struct

# --- FORMATS.md §1.2, CommitLog record (MessageExtEncoder.encode / MessageDecoder.decode) ---------------
HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("total_size", "i"),  # TOTALSIZE, this field included
    ("magic_code", "i"),  # V1 0xDAA320A7 / V2 0xDAA320AB
    ("body_crc", "i"),  # crc32(body) & 0x7FFFFFFF
    ("queue_id", "i"),
    ("flag", "i"),
    ("queue_offset", "q"),
    ("physical_offset", "q"),
    ("sys_flag", "i"),
    ("born_timestamp", "q"),
)
# born_host (IP 4|16 bytes + port int32) follows, then:
MIDDLE_FIELDS: tuple[tuple[str, str], ...] = (("store_timestamp", "q"),)
# store_host follows, then:
TRAILER_FIELDS: tuple[tuple[str, str], ...] = (
    ("reconsume_times", "i"),
    ("prepared_transaction_offset", "q"),
    ("body_length", "i"),
)
# after the body: topic length (int8 in V1, int16 in V2), topic, properties length (int16), properties
TOPIC_LENGTH_CODES = {1: "b", 2: "h"}
PROPERTIES_LENGTH_CODE = "h"

IPV4_LENGTH = 4
IPV6_LENGTH = 16
HOST_V6_BITS = SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6  # 0x30: selects the header layout


def host_ip_length(sys_flag: int, v6_bit: int) -> int:
    return IPV6_LENGTH if sys_flag & v6_bit else IPV4_LENGTH


def host_fields(prefix: str, ip_length: int) -> tuple[tuple[str, str], ...]:
    """A SocketAddress as the broker writes it: the IP's bytes, then the port as int32."""
    return ((f"{prefix}_ip", f"{ip_length}s"), (f"{prefix}_port", "i"))


def _record_header(bits: int) -> FieldTable:
    return FieldTable(HEADER_FIELDS + host_fields("born", host_ip_length(bits, SysFlag.BORNHOST_V6)) + MIDDLE_FIELDS
                      + host_fields("store", host_ip_length(bits, SysFlag.STOREHOSTADDRESS_V6)) + TRAILER_FIELDS)


# Indexed by ``sys_flag & HOST_V6_BITS``: the fixed part of a record, TOTALSIZE .. BODYLEN.
RECORD_HEADERS: dict[int, FieldTable] = {bits: _record_header(bits) for bits in (0x00, 0x10, 0x20, 0x30)}
RECORD_HEADER_V4 = RECORD_HEADERS[0]
HEADER_STRUCTS = {bits: t.struct for bits, t in RECORD_HEADERS.items()}
HEADER_V4 = HEADER_STRUCTS[0]
# Field names in the order HEADER_STRUCTS unpack them, and the index of each in that tuple (the same for
# every host combination).
HEADER_STRUCT_NAMES = list(RECORD_HEADER_V4.names)
HEADER_INDEX: dict[str, int] = {n: i for i, n in enumerate(HEADER_STRUCT_NAMES)}
_HEADER_SIZES = {bits: t.size for bits, t in RECORD_HEADERS.items()}

# Byte positions inside a record (before the born host: the same for every host combination).
TOTAL_SIZE_POSITION = RECORD_HEADER_V4.position("total_size")
MAGIC_CODE_POSITION = RECORD_HEADER_V4.position("magic_code")
BODY_CRC_POSITION = RECORD_HEADER_V4.position("body_crc")
QUEUE_ID_POSITION = RECORD_HEADER_V4.position("queue_id")
FLAG_POSITION = RECORD_HEADER_V4.position("flag")
QUEUE_OFFSET_POSITION = RECORD_HEADER_V4.position("queue_offset")
PHYSICAL_OFFSET_POSITION = RECORD_HEADER_V4.position("physical_offset")
SYSFLAG_POSITION = RECORD_HEADER_V4.position("sys_flag")
BORN_TIMESTAMP_POSITION = RECORD_HEADER_V4.position("born_timestamp")
BORN_HOST_POSITION = RECORD_HEADER_V4.position("born_ip")
# Fields after the store host sit at a fixed distance before the body.
_TRAILER = FieldTable(TRAILER_FIELDS)
RECONSUME_TIMES_BEFORE_BODY = _TRAILER.size - _TRAILER.position("reconsume_times")
PREPARED_TRANSACTION_OFFSET_BEFORE_BODY = _TRAILER.size - _TRAILER.position("prepared_transaction_offset")
BODY_LENGTH_BEFORE_BODY = _TRAILER.size - _TRAILER.position("body_length")
_HOST_V6_EXTRA = IPV6_LENGTH - IPV4_LENGTH
_BORN_V6 = int(SysFlag.BORNHOST_V6)
_STORE_V6 = int(SysFlag.STOREHOSTADDRESS_V6)


def store_timestamp_position(sys_flag):
    """Position of STORETIMESTAMP: after a 8- or 20-byte born host. Works on ints and numpy int arrays."""
    return RECORD_HEADER_V4.position("store_timestamp") + ((sys_flag & _BORN_V6) != 0) * _HOST_V6_EXTRA


def store_host_position(sys_flag):
    """Position of STOREHOSTADDRESS (IP, then port). Works on ints and numpy int arrays."""
    return RECORD_HEADER_V4.position("store_ip") + ((sys_flag & _BORN_V6) != 0) * _HOST_V6_EXTRA


def body_position(sys_flag):
    """Position of BODY (= size of the fixed header). Works on ints and numpy int arrays."""
    return (RECORD_HEADER_V4.size + ((sys_flag & _BORN_V6) != 0) * _HOST_V6_EXTRA
            + ((sys_flag & _STORE_V6) != 0) * _HOST_V6_EXTRA)


def _host_schema(v6_bit: int) -> Struct:
    """``host_fields`` with the IP length chosen by the record's sys_flag (construct form only)."""
    from construct import Bytes, IfThenElse, Int32sb, Struct, this

    return Struct(
        "ip" / IfThenElse(this._.sys_flag & v6_bit, Bytes(IPV6_LENGTH), Bytes(IPV4_LENGTH)),
        "port" / Int32sb,
    )


_HEADER = FieldTable(HEADER_FIELDS)


def _commitlog_record() -> Struct:
    """The record. Negative BODYLEN / PROPLEN mean "no bytes follow"."""
    from construct import Bytes, Computed, Int8sb, Int16sb, Int32sb, OneOf, Struct, Switch, this

    return Struct(
        *_HEADER.subcons(magic_code=OneOf(Int32sb, [MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2])),
        "born_host" / _host_schema(SysFlag.BORNHOST_V6),
        *FieldTable(MIDDLE_FIELDS).subcons(),
        "store_host" / _host_schema(SysFlag.STOREHOSTADDRESS_V6),
        *_TRAILER.subcons(),
        "body" / Bytes(lambda ctx: max(ctx.body_length, 0)),
        "topic_length" / Switch(this.magic_code, {MESSAGE_MAGIC_CODE_V1: Int8sb, MESSAGE_MAGIC_CODE_V2: Int16sb}),
        "topic" / Bytes(lambda ctx: max(ctx.topic_length, 0)),
        "properties_length" / Int16sb,
        "properties" / Bytes(lambda ctx: max(ctx.properties_length, 0)),
        "magic_version" / Computed(lambda ctx: 1 if ctx.magic_code == MESSAGE_MAGIC_CODE_V1 else 2),
    )


_SCHEMAS: dict[str, Struct] = {}


def __getattr__(name: str):
    # The construct schemas (CommitLogRecord, BlankRecord) are built on first use: the hot paths read records
    # with HEADER_STRUCTS, and a command that reads one record should not pay ~16 ms to import construct.
    if name not in ("CommitLogRecord", "BlankRecord"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _SCHEMAS:
        if name == "CommitLogRecord":
            _SCHEMAS[name] = _commitlog_record()
        else:
            from construct import Const, Int32sb

            _SCHEMAS[name] = BLANK_RECORD.construct(magic_code=Const(BLANK_MAGIC_CODE, Int32sb))
    return _SCHEMAS[name]


# --- FORMATS.md §1.4, end-of-file blank record (CommitLog.DefaultAppendMessageCallback) -------------------
# Only these 8 bytes are written; TOTALSIZE = bytes left in the file. Every record starts with them too.
BLANK_FIELDS: tuple[tuple[str, str], ...] = (("total_size", "i"), ("magic_code", "i"))
BLANK_RECORD = FieldTable(BLANK_FIELDS)
PREFIX = BLANK_RECORD.struct  # total_size, magic_code
INT32 = FieldTable((("v", "i"),)).struct
INT16 = FieldTable((("v", "h"),)).struct
INT8 = FieldTable((("v", "b"),)).struct
INT64 = FieldTable((("v", "q"),)).struct
_TOPIC_LENGTH = {v: FieldTable((("topic_length", c),)).struct for v, c in TOPIC_LENGTH_CODES.items()}
_PROPERTIES_LENGTH = FieldTable((("properties_length", PROPERTIES_LENGTH_CODE),)).struct


def _topic_length(version: int):
    return _TOPIC_LENGTH[1] if version == 1 else _TOPIC_LENGTH[2]


def record_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int, version: int) -> int:
    """CommitLog.calMsgLength / MessageExtEncoder.calMsgLength (§1.2)."""
    return (_HEADER_SIZES[sys_flag & HOST_V6_BITS] + max(body_length, 0) + _topic_length(version).size + topic_length
            + _PROPERTIES_LENGTH.size + max(properties_length, 0))


# Smallest TOTALSIZE: all fixed fields, empty body/topic/properties (V1, IPv4).
MIN_RECORD_SIZE = record_length(0, 0, 0, 0, 1)


# BODYCRC (§1.3) is UtilAll.crc32 of the body, the same 31-bit CRC as the __CRC32# value.
body_crc = crc32_value


# --- encoding (used by the project's own writer) ------------------------------------------------


def encode_record(
    *,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_ip: bytes,
    born_port: int,
    store_timestamp: int,
    store_ip: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: bytes,
    properties: bytes,
    version: int = 1,
    body_crc_value: int | None = None,
) -> bytes:
    """MessageExtEncoder.encode: a complete record, byte for byte what the broker appends."""
    total = record_length(sys_flag, len(body), len(topic), len(properties), version)
    magic = MESSAGE_MAGIC_CODE_V1 if version == 1 else MESSAGE_MAGIC_CODE_V2
    fmt = HEADER_STRUCTS[sys_flag & HOST_V6_BITS]
    head = fmt.pack(
        total, magic, body_crc(body) if body_crc_value is None else body_crc_value, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
        reconsume_times, prepared_transaction_offset, len(body),
    )
    tlen = _topic_length(version).pack(len(topic))
    return b"".join((head, body, tlen, topic, _PROPERTIES_LENGTH.pack(len(properties)), properties))


def encode_blank(total_size: int) -> bytes:
    return PREFIX.pack(total_size, BLANK_MAGIC_CODE)
