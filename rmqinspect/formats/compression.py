"""Bounded body decompression: the one function every command uses to turn a COMPRESSED body into what the
consumer sees (decode-commitlog, salvage/recover exports, Message.to_dict).

A valid record (correct BODYCRC) can carry a 60 KB zstd frame that expands to 1.9 GB; the broker never
decompresses bodies, so nothing on its side bounds them. We decompress with the codecs' streaming APIs and
stop at ``limit`` bytes, reporting that the body was cut. Producers compress bodies that passed
``maxMessageSize`` (4 MiB by default), so the default cap leaves room for every body a broker accepted.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from ..errors import DecodeError
from .constants import CompressionType

DEFAULT_BODY_LIMIT = 16 << 20  # bytes of decompressed body kept; 4x RocketMQ's default maxMessageSize
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Decompressed:
    data: bytes  # at most ``limit`` bytes
    truncated: bool  # the body decompresses to more than ``limit`` bytes; ``data`` is its first ``limit``
    limit: int


def decompress_body(codec: CompressionType, body: bytes, limit: int = DEFAULT_BODY_LIMIT) -> Decompressed:
    """Decompress ``body`` with ``codec``, keeping at most ``limit`` bytes (memory stays O(limit)).
    Raises DecodeError (a ValueError) when the codec fails or the stream ends early."""
    if limit < 0:
        raise ValueError(f"decompression limit {limit} is negative")
    try:
        if codec == CompressionType.ZLIB:
            return _zlib(body, limit)
        if codec == CompressionType.ZSTD:
            return _zstd(body, limit)
        if codec == CompressionType.LZ4:
            return _lz4(body, limit)
    except DecodeError:
        raise
    except ValueError as e:  # the codec's own refusal, said as it says it
        raise DecodeError(str(e)) from e
    except Exception as e:  # noqa: BLE001 - any codec failure is a data problem
        raise DecodeError(f"{codec.name} body does not decompress: {e}") from e
    raise DecodeError(f"unknown compression codec {codec}")


def _zlib(body: bytes, limit: int) -> Decompressed:
    d = zlib.decompressobj()
    try:
        out = d.decompress(body, limit + 1)  # max_length 0 would mean unbounded: ask for one byte more
    except zlib.error as e:
        raise DecodeError(f"ZLIB body does not decompress: {e}") from e
    if len(out) > limit:
        return Decompressed(out[:limit], True, limit)
    if not d.eof:
        raise DecodeError("ZLIB body does not decompress: incomplete or truncated stream")
    return Decompressed(out, False, limit)


def _zstd(body: bytes, limit: int) -> Decompressed:
    import io

    import zstandard

    parts: list[bytes] = []
    got = 0
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)) as r:
        while got <= limit:
            chunk = r.read(min(_CHUNK, limit + 1 - got))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
    data = b"".join(parts)
    if len(data) > limit:
        return Decompressed(data[:limit], True, limit)
    return Decompressed(data, False, limit)


def _lz4(body: bytes, limit: int) -> Decompressed:
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    data = d.decompress(body, max_length=limit + 1)
    if len(data) > limit:
        return Decompressed(data[:limit], True, limit)
    if not d.eof:
        raise DecodeError("LZ4 body does not decompress: incomplete frame")
    return Decompressed(data, False, limit)
