"""Java String.hashCode and the hashes RocketMQ derives from it.

FORMATS.md §3.1 (tagsCode), §5.4 (IndexFile.indexKeyHashMethod), §10.3 (tiered index hash).
Java hashes UTF-16 code units; characters outside the BMP count as two units (a surrogate pair).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

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


_INT_MIN = -(1 << 31)


def index_key_hash(key_string: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode) with Integer.MIN_VALUE -> 0."""
    h = java_string_hash(key_string)
    if h == _INT_MIN:
        return 0
    return abs(h)


def _pow31(n: int) -> np.ndarray:
    import numpy as np

    p = np.full(max(n, 1), 31, dtype=np.uint32)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint32)  # wraps mod 2**32, as Java int arithmetic does


_POW: np.ndarray | None = None  # powers of 31 mod 2**32, made on first bulk use


def java_string_hashes(keys: list[bytes]) -> np.ndarray:
    """``java_string_hash`` of many UTF-8 byte strings at once (int64 holding the signed int32 values).

    ASCII strings are hashed vectorised (UTF-16 code units == bytes); others fall back to the scalar hash
    of the UTF-8-decoded string (Python's replacement rule), which is what the rest of rmqinspect hashes.
    """
    import numpy as np  # only the bulk forms need numpy; one key's hash (a look-up) does not

    global _POW
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    width = int(lens.max())
    flat = None
    if width <= 256:
        # keys right-aligned in a zero-padded matrix: Horner's rule column by column (leading zeros add
        # nothing), all keys at once, in uint32 so the arithmetic wraps like Java int
        padded = b"".join([k.rjust(width, b"\0") for k in keys])
        cols = np.frombuffer(padded, dtype=np.uint8).reshape(n, width).T.astype(np.uint32)  # contiguous columns
        acc = np.zeros(n, dtype=np.uint32)
        m31 = np.uint32(31)
        for j in range(width):
            acc *= m31
            acc += cols[j]
        h = acc.view(np.int32).astype(np.int64)
    else:
        flat = b"".join(keys)
        ends = np.cumsum(lens)
        starts = ends - lens
        if _POW is None or width > len(_POW):
            _POW = _pow31(max(width, 1 << 12))
        codes = np.frombuffer(flat, dtype=np.uint8).astype(np.uint32)
        # exponent of each byte: distance to the end of its key minus one
        expo = np.repeat(ends, lens) - 1 - np.arange(len(flat), dtype=np.int64)
        contrib = codes * _POW[expo]
        h = np.add.reduceat(contrib, starts).astype(np.uint32).view(np.int32).astype(np.int64)
    if not (padded if flat is None else flat).isascii():
        for i, k in enumerate(keys):
            if not k.isascii():
                h[i] = java_string_hash(k.decode("utf-8", "replace"))
    return h


def index_key_hashes(keys: list[bytes]) -> np.ndarray:
    import numpy as np

    """``index_key_hash`` for many ``topic#key`` UTF-8 byte strings at once (int64, non-negative)."""
    h = np.abs(java_string_hashes(keys))
    h[h == -_INT_MIN] = 0  # abs(Integer.MIN_VALUE) stays negative in Java; the broker maps it to 0
    return h


def build_index_key(topic: str, key: str) -> str:
    """IndexService.buildKey."""
    return topic + "#" + key


def tiered_index_key_hash(key_string: str) -> int:
    """IndexStoreFile: ``h < 0 ? -h : h`` without the MIN_VALUE special case (stays negative)."""
    h = java_string_hash(key_string)
    if h < 0 and h != _INT_MIN:
        return -h
    return h
