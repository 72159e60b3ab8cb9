"""Java String.hashCode and the hashes RocketMQ derives from it.

FORMATS.md §3.1 (tagsCode), §5.4 (IndexFile.indexKeyHashMethod), §10.3 (tiered index hash).
Java hashes UTF-16 code units; characters outside the BMP count as two units (a surrogate pair).
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
# 31**k mod 2**32 for the chunked evaluation below.
_POW31 = [1]
for _ in range(64):
    _POW31.append((_POW31[-1] * 31) & _MASK)


def _to_int32(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` (signed int32) of ``s``."""
    if s.isascii():
        units = s.encode("ascii")
        h = 0
        for c in units:
            h = (31 * h + c) & _MASK
        return _to_int32(h)
    b = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & _MASK
    return _to_int32(h)


def tags_code(tags: str | None) -> int:
    """MessageExtBrokerInner.tagsString2tagsCode: 0 for absent/empty, else the hash widened to long."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key_string: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode) with Integer.MIN_VALUE -> 0."""
    h = java_string_hash(key_string)
    if h == -(1 << 31):
        return 0
    return abs(h)


def build_index_key(topic: str, key: str) -> str:
    """IndexService.buildKey."""
    return topic + "#" + key


def tiered_index_key_hash(key_string: str) -> int:
    """IndexStoreFile: ``h < 0 ? -h : h`` without the MIN_VALUE special case (stays negative)."""
    h = java_string_hash(key_string)
    if h < 0 and h != -(1 << 31):
        return -h
    return h
