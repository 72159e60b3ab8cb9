"""The properties string of a CommitLog record and its ``__CRC32#`` trailer: each rule written once here.

Source: ../shared/docs/FORMATS.md §1.7 (``MessageDecoder.string2messageProperties`` /
``messageProperties2String``) and §1.8 (``__CRC32#``, ``CommitLog.CRC32_RESERVED_LEN``,
``MessageExtEncoder`` with ``enabledAppendPropCRC``). ``store/_fastscan.c`` mirrors ``dispatch_properties``
and is proven equal to it by tests/test_rebuild_fastpath.py and tests/test_rebuild_compiled.py.

\\x01 and \\x02 are ASCII, and a UTF-8 decoder (even with replacement) never swallows an ASCII byte, so
splitting the bytes and splitting the decoded text give the same pieces; the functions below rely on that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from .constants import (
    CRC32_RESERVED_LEN,
    NAME_VALUE_SEPARATOR,
    PROPERTY_CRC32,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from .crc import crc32

NAME_VALUE_SEPARATOR_B = NAME_VALUE_SEPARATOR.encode("ascii")
PROPERTY_SEPARATOR_B = PROPERTY_SEPARATOR.encode("ascii")
MALFORMED_PROPERTIES = "properties string has a piece without a name/value separator (\\x01)"

# --- the parse rule (§1.7) -------------------------------------------------------------------------


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray, memoryview)) else raw


def parse_properties_checked(raw: bytes | str) -> tuple[dict[str, str], bool]:
    """MessageDecoder.string2messageProperties (4.9.8 / 5.x rule), and whether the string is well formed.

    Split on \\x02; in each piece the first \\x01 separates name and value; both must be non-empty;
    later duplicates win. A non-empty piece without \\x01 is ignored by the broker and makes the string
    not well formed (a sign of damage, reported as ``MALFORMED_PROPERTIES``).
    """
    out: dict[str, str] = {}
    well_formed = True
    for piece in _text(raw).split(PROPERTY_SEPARATOR):
        name, sep, value = piece.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            out[name] = value
        elif piece and not sep:
            well_formed = False
    return out, well_formed


def parse_properties(raw: bytes | str) -> dict[str, str]:
    """The broker's properties map of ``raw`` (see ``parse_properties_checked``)."""
    return parse_properties_checked(raw)[0]


def parse_properties_at(buf, pos: int, length: int) -> dict[str, str]:
    """``parse_properties`` of a record's properties where they lie in ``buf`` (a record without any: {})."""
    return parse_properties(bytes(buf[pos:pos + length]) if length > 0 else b"")


def properties_well_formed(raw: bytes | str) -> bool:
    """True when every non-empty piece has a name/value separator. Used to flag damage, not to parse."""
    return not raw or parse_properties_checked(raw)[1]


def encode_properties(props: dict[str, str] | list[tuple[str, str]]) -> bytes:
    """MessageDecoder.messageProperties2String: ``name\\x01value\\x02`` for each pair, in the given order."""
    items = props.items() if isinstance(props, dict) else props
    return "".join(k + NAME_VALUE_SEPARATOR + v + PROPERTY_SEPARATOR for k, v in items if v is not None).encode("utf-8")


# The properties the dispatcher reads (CommitLog.checkMessageAndReturnSize): TAGS, KEYS, UNIQ_KEY, DELAY.
DISPATCH_PROPERTIES = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_DELAY_TIME_LEVEL)
_WANTED = tuple((n + NAME_VALUE_SEPARATOR).encode("ascii") for n in DISPATCH_PROPERTIES)
_TAGS_B, _KEYS_B, _UNIQ_B, _DELAY_B = (n.encode("ascii") for n in DISPATCH_PROPERTIES)


def dispatch_properties(raw: bytes) -> tuple[bytes | None, bytes | None, bytes | None, bytes | None]:
    """(TAGS, KEYS, UNIQ_KEY, DELAY) as raw bytes or None, exactly as ``parse_properties`` resolves them
    (same split, empty values ignored, later duplicates win), without building the whole map."""
    tags = keys = uniq = delay = None
    if raw:
        for pc in raw.split(PROPERTY_SEPARATOR_B):
            if pc.startswith(_WANTED):
                name, _, val = pc.partition(NAME_VALUE_SEPARATOR_B)
                if val:
                    if name == _TAGS_B:
                        tags = val
                    elif name == _KEYS_B:
                        keys = val
                    elif name == _UNIQ_B:
                        uniq = val
                    else:
                        delay = val
    return tags, keys, uniq, delay


# --- __CRC32# (§1.8) ----------------------------------------------------------------------------------
# The broker reserves the last CRC32_RESERVED_LEN bytes of the record for ``__CRC32#\x01<10 digits>\x02``;
# the CRC covers the record up to that trailer.

CRC32_TRAILER_PREFIX = (PROPERTY_CRC32 + NAME_VALUE_SEPARATOR).encode("ascii")  # b"__CRC32#\x01"
CRC32_VALUE_LENGTH = CRC32_RESERVED_LEN - len(CRC32_TRAILER_PREFIX) - len(PROPERTY_SEPARATOR_B)  # 10 digits
TRAILER_AT = -CRC32_RESERVED_LEN  # where the prefix starts, from the record's end


def crc32_value(data) -> int:
    """UtilAll.crc32: java.util.zip.CRC32 masked to 31 bits (the body CRC and the ``__CRC32#`` value)."""
    return crc32(data) & 0x7FFFFFFF


def decode_crc32_property(value: str) -> int | None:
    """The trailer stores decimal digits least-significant first, right-padded with '0'."""
    if not value or not value.isdigit():
        return None
    return int(value[::-1])


def encode_crc32_property(crc: int) -> str:
    return str(crc)[::-1].ljust(CRC32_VALUE_LENGTH, "0")


def crc32_trailer(record_without_trailer: bytes) -> bytes:
    """The CRC32_RESERVED_LEN bytes the broker appends to the properties of a record."""
    return (PROPERTY_CRC32 + NAME_VALUE_SEPARATOR + encode_crc32_property(crc32_value(record_without_trailer))
            + PROPERTY_SEPARATOR).encode("ascii")


assert len(crc32_trailer(b"")) == CRC32_RESERVED_LEN


def record_property_crc(buf, position: int, total_size: int) -> int:
    """The CRC the ``__CRC32#`` property of the record at ``position`` should hold."""
    return crc32_value(memoryview(buf)[position:position + total_size - CRC32_RESERVED_LEN])


def property_crc_problem(stored: int | None, actual: int) -> str:
    """The problem text of a record whose ``__CRC32#`` does not match (a Message / export row problem)."""
    return f"__CRC32# property {stored} != crc of record {actual}"


def check_property_crc(buf, position: int, total_size: int, value: str) -> tuple[bool, int | None, int]:
    """(matches, stored, actual) for a record whose properties hold ``__CRC32#`` = ``value``."""
    stored = decode_crc32_property(value)
    actual = record_property_crc(buf, position, total_size)
    return stored == actual, stored, actual


def crc32_trailer_rows(u8: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Indexes of the records (given by their end positions in the uint8 view ``u8``) whose last
    CRC32_RESERVED_LEN bytes start with ``__CRC32#\\x01``: where the broker writes the property."""
    import numpy as np

    if not len(ends):
        return np.zeros(0, dtype=np.int64)
    prefix = np.frombuffer(CRC32_TRAILER_PREFIX, dtype=np.uint8)
    at = np.arange(TRAILER_AT, TRAILER_AT + len(CRC32_TRAILER_PREFIX), dtype=np.int64)
    # one byte of every record first (a store without the property rarely has "_" there), the rest where it is
    cand = np.flatnonzero(u8[ends + TRAILER_AT] == prefix[0])
    if not len(cand):
        return cand
    return cand[(u8[ends[cand][:, None] + at] == prefix).all(axis=1)]


def has_crc32_trailer(buf, end: int) -> bool:
    """``crc32_trailer_rows`` for one record (its end position in ``buf``), without numpy."""
    return buf[end + TRAILER_AT:end + TRAILER_AT + len(CRC32_TRAILER_PREFIX)] == CRC32_TRAILER_PREFIX


def crc32_trailer_value(buf, end: int) -> str:
    """The digits of the trailer of the record ending at ``end`` (see ``crc32_trailer_rows``)."""
    stop = end - len(PROPERTY_SEPARATOR_B)
    return bytes(buf[stop - CRC32_VALUE_LENGTH:stop]).decode("ascii", "replace")
