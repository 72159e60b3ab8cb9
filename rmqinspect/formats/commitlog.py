"""CommitLog record, end-of-file blank record and properties string.

Source: ../shared/docs/FORMATS.md §1.2 (record layout; CommitLog.DefaultAppendMessageCallback,
MessageExtEncoder.encode, MessageDecoder.decode), §1.4 (blank record), §1.7 (properties,
MessageDecoder.string2messageProperties), §1.8 (__CRC32# trailer).

The layout is described once, in ``HEADER_FIELDS`` / ``HOST_FIELDS`` / ``TRAILER_FIELDS``. Two things are
built from that description:

* ``CommitLogRecord`` - the construct schema (declarative, slow, used for single records and as the
  reference in tests);
* ``HEADER_STRUCTS`` - precompiled ``struct.Struct`` objects for the fixed-size header of each of the four
  host combinations (IPv4/IPv6 born host x store host), used by the hot paths (walk, verify, rebuild).
  ``tests/test_schema_fastpath.py`` proves both decode every oracle record identically.
"""

from __future__ import annotations

import struct
import zlib

from construct import (
    Bytes,
    Computed,
    Const,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int64sb,
    OneOf,
    Struct,
    Switch,
    this,
)

from .constants import (
    BLANK_MAGIC_CODE,
    CRC32_RESERVED_LEN,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    NAME_VALUE_SEPARATOR,
    PROPERTY_CRC32,
    PROPERTY_SEPARATOR,
    SysFlag,
)

# (name, struct code). Codes map both to construct types and to ``struct`` format characters.
_CONSTRUCT_TYPES = {"b": Int8sb, "h": Int16sb, "i": Int32sb, "q": Int64sb}

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

SYSFLAG_POSITION = 36
PHYSICAL_OFFSET_POSITION = 28
QUEUE_OFFSET_POSITION = 20
BORN_HOST_POSITION = 48


def host_ip_length(sys_flag: int, v6_bit: int) -> int:
    return 16 if sys_flag & v6_bit else 4


def _host_schema(v6_bit: int) -> Struct:
    return Struct(
        "ip" / IfThenElse(this._.sys_flag & v6_bit, Bytes(16), Bytes(4)),
        "port" / Int32sb,
    )


def _fields(fields):
    return [name / _CONSTRUCT_TYPES[code] for name, code in fields]


# FORMATS.md §1.2: the record. Negative BODYLEN / PROPLEN mean "no bytes follow".
CommitLogRecord = Struct(
    *_fields(HEADER_FIELDS[:1]),
    "magic_code" / OneOf(Int32sb, [MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2]),
    *_fields(HEADER_FIELDS[2:]),
    "born_host" / _host_schema(SysFlag.BORNHOST_V6),
    *_fields(MIDDLE_FIELDS),
    "store_host" / _host_schema(SysFlag.STOREHOSTADDRESS_V6),
    *_fields(TRAILER_FIELDS),
    "body" / Bytes(lambda ctx: max(ctx.body_length, 0)),
    "topic_length" / Switch(this.magic_code, {MESSAGE_MAGIC_CODE_V1: Int8sb, MESSAGE_MAGIC_CODE_V2: Int16sb}),
    "topic" / Bytes(lambda ctx: max(ctx.topic_length, 0)),
    "properties_length" / Int16sb,
    "properties" / Bytes(lambda ctx: max(ctx.properties_length, 0)),
    "magic_version" / Computed(lambda ctx: 1 if ctx.magic_code == MESSAGE_MAGIC_CODE_V1 else 2),
)

# FORMATS.md §1.4: only these 8 bytes are written; TOTALSIZE = bytes left in the file.
BlankRecord = Struct(
    "total_size" / Int32sb,
    "magic_code" / Const(BLANK_MAGIC_CODE, Int32sb),
)

# --- fast path derived from the same field tables ----------------------------------------------


def _host_format(ip_len: int) -> str:
    return "%ds" % ip_len + "i"


def _header_format(born_ip: int, store_ip: int) -> str:
    codes = "".join(code for _, code in HEADER_FIELDS)
    codes += _host_format(born_ip)
    codes += "".join(code for _, code in MIDDLE_FIELDS)
    codes += _host_format(store_ip)
    codes += "".join(code for _, code in TRAILER_FIELDS)
    return ">" + codes


# Indexed by ``sys_flag & 0x30``. Each unpacks to:
# total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts, born_ip, born_port, store_ts,
# store_ip, store_port, reconsume, prepared, body_len
HEADER_STRUCTS: dict[int, struct.Struct] = {}
for _bits in (0x00, 0x10, 0x20, 0x30):
    HEADER_STRUCTS[_bits] = struct.Struct(
        _header_format(host_ip_length(_bits, SysFlag.BORNHOST_V6), host_ip_length(_bits, SysFlag.STOREHOSTADDRESS_V6))
    )
HEADER_V4 = HEADER_STRUCTS[0]
PREFIX = struct.Struct(">ii")  # total_size, magic_code
INT32 = struct.Struct(">i")
INT16 = struct.Struct(">h")
INT8 = struct.Struct(">b")
INT64 = struct.Struct(">q")

# Field names in the order HEADER_STRUCTS unpack them.
HEADER_STRUCT_NAMES = (
    [n for n, _ in HEADER_FIELDS]
    + ["born_ip", "born_port"]
    + [n for n, _ in MIDDLE_FIELDS]
    + ["store_ip", "store_port"]
    + [n for n, _ in TRAILER_FIELDS]
)


def record_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int, version: int) -> int:
    """CommitLog.calMsgLength / MessageExtEncoder.calMsgLength (§1.2)."""
    return (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
        + (20 if sys_flag & SysFlag.BORNHOST_V6 else 8)
        + 8
        + (20 if sys_flag & SysFlag.STOREHOSTADDRESS_V6 else 8)
        + 4 + 8
        + 4 + max(body_length, 0)
        + (1 if version == 1 else 2) + topic_length
        + 2 + max(properties_length, 0)
    )


def body_crc(body: bytes) -> int:
    """UtilAll.crc32: java.util.zip.CRC32 masked to 31 bits (§1.3)."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --- properties (§1.7) ---------------------------------------------------------------------------


def parse_properties(raw: bytes | str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties (4.9.8 / 5.x rule).

    Split on \\x02; in each piece the first \\x01 separates name and value; both must be non-empty;
    later duplicates win; pieces without \\x01 are ignored.
    """
    s = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    out: dict[str, str] = {}
    for piece in s.split(PROPERTY_SEPARATOR):
        k = piece.find(NAME_VALUE_SEPARATOR)
        if 0 < k < len(piece) - 1:
            out[piece[:k]] = piece[k + 1 :]
    return out


def properties_well_formed(raw: bytes) -> bool:
    """True when every non-empty piece has a name/value separator. Used to flag damage, not to parse."""
    if not raw:
        return True
    for piece in raw.split(b"\x02"):
        if piece and b"\x01" not in piece:
            return False
    return True


def encode_properties(props: dict[str, str] | list[tuple[str, str]]) -> bytes:
    """MessageDecoder.messageProperties2String: ``name\\x01value\\x02`` for each pair, in the given order."""
    items = props.items() if isinstance(props, dict) else props
    return "".join(k + NAME_VALUE_SEPARATOR + v + PROPERTY_SEPARATOR for k, v in items if v is not None).encode("utf-8")


# --- __CRC32# property (§1.8) --------------------------------------------------------------------


def decode_crc32_property(value: str) -> int | None:
    """The trailer stores decimal digits least-significant first, right-padded with '0'."""
    if not value or not value.isdigit():
        return None
    return int(value[::-1])


def encode_crc32_property(crc: int) -> str:
    return str(crc)[::-1].ljust(10, "0")


def crc32_trailer(record_without_trailer: bytes) -> bytes:
    return (PROPERTY_CRC32 + NAME_VALUE_SEPARATOR + encode_crc32_property(body_crc(record_without_trailer))
            + PROPERTY_SEPARATOR).encode("ascii")


assert len(crc32_trailer(b"")) == CRC32_RESERVED_LEN


# --- encoding (used by the project's own writer) ------------------------------------------------


def encode_host(ip: bytes, port: int) -> bytes:
    return ip + struct.pack(">i", port)


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
    fmt = HEADER_STRUCTS[sys_flag & 0x30]
    head = fmt.pack(
        total, magic, body_crc(body) if body_crc_value is None else body_crc_value, queue_id, flag, queue_offset,
        physical_offset, sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
        reconsume_times, prepared_transaction_offset, len(body),
    )
    tlen = INT8.pack(len(topic)) if version == 1 else INT16.pack(len(topic))
    return b"".join((head, body, tlen, topic, INT16.pack(len(properties)), properties))


def encode_blank(total_size: int) -> bytes:
    return PREFIX.pack(total_size, BLANK_MAGIC_CODE)
