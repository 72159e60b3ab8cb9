"""RIP-82 (5.4.0+, PR #9787): index, timer and transaction records in one RocksDB at
``<storeRoot>/RocksDBMessageStore`` (VERSIONS.md §1.6). Key and value layouts only, no I/O; all numbers big-endian,
``@`` separates the string parts.

Modelled from the ported ``IndexRocksDBRecord`` / ``TimerRocksDBRecord`` / ``TransRocksDBRecord`` sources and the
PR description, not checked against a broker: no store written by 5.4+ was available.

* index CF (``default``): key = hour(i64) + ``@topic@K@key@uniqKey@`` (``T`` + tag, or ``U`` without a key part)
  + offsetPy(i64); value = storeTime(i64); meta keys ``lastOffsetPy``, ``lastStoreTimeStamp``;
* timer CF: key = delayTime(i64, ms) + uniqKey (UTF-8); value = sizePy(i32) + offsetPy(i64);
* trans CF: key = offsetPy(i64) + ``@topic@uniqKey``; value = checkTimes(i32) + sizePy(i32); an op message
  deletes the key, so what is left are the open half messages.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import DecodeError

CF_INDEX = "default"
CF_TIMER = "timer"
CF_TRANS = "trans"
SEP = b"@"
INDEX_KEY_TYPE, INDEX_TAG_TYPE, INDEX_UNIQUE_TYPE = "K", "T", "U"  # MessageConst.INDEX_*_TYPE
META_KEYS = (b"lastOffsetPy", b"lastStoreTimeStamp", b"sys_topic_scan_offset_checkpoint", b"timeline_checkpoint")
HOUR_MS = 3_600_000
_I64 = struct.Struct(">q")
_TIMER_VALUE = struct.Struct(">iq")
_TRANS_VALUE = struct.Struct(">ii")


def hour_of(store_time: int) -> int:
    """MixAll.dealTimeToHourStamps: the store time floored to its hour (ms; whole-hour time zones)."""
    return store_time - store_time % HOUR_MS


@dataclass(frozen=True)
class IndexRecord:
    topic: str
    kind: str  # K | T | U
    value: str  # the key or the tag ("" for U)
    uniq_key: str
    offset_py: int
    store_time: int


def index_key(topic: str, kind: str, value: str, uniq_key: str, store_time: int, offset_py: int) -> bytes:
    middle = f"@{topic}@{kind}@{value}@{uniq_key}@" if kind != INDEX_UNIQUE_TYPE else f"@{topic}@U@{uniq_key}@"
    return _I64.pack(hour_of(store_time)) + middle.encode("utf-8") + _I64.pack(offset_py)


def index_value(store_time: int) -> bytes:
    return _I64.pack(store_time)


def parse_index(key: bytes, value: bytes) -> IndexRecord:
    """``DecodeError`` (a ValueError) for a meta key or a malformed record. The topic, key and tag may hold ``@``
    only where the broker would not split them (topics cannot; keys are KEYS tokens): the parts are split from both
    ends."""
    if len(key) < 18 or len(value) != 8 or key[8:9] != SEP or key[-9:-8] != SEP:
        raise DecodeError("not an index record")
    parts = key[9:-9].decode("utf-8").split("@")
    offset_py = _I64.unpack_from(key, len(key) - 8)[0]
    (store_time,) = _I64.unpack(value)
    if len(parts) == 3 and parts[1] == INDEX_UNIQUE_TYPE:
        return IndexRecord(parts[0], INDEX_UNIQUE_TYPE, "", parts[2], offset_py, store_time)
    if len(parts) < 4 or parts[1] not in (INDEX_KEY_TYPE, INDEX_TAG_TYPE):
        raise DecodeError("not an index record")
    return IndexRecord(parts[0], parts[1], "@".join(parts[2:-1]), parts[-1], offset_py, store_time)


@dataclass(frozen=True)
class TimerRecord:
    delay_time: int
    uniq_key: str
    size_py: int
    offset_py: int


def timer_key(delay_time: int, uniq_key: str) -> bytes:
    return _I64.pack(delay_time) + uniq_key.encode("utf-8")


def timer_value(size_py: int, offset_py: int) -> bytes:
    return _TIMER_VALUE.pack(size_py, offset_py)


def parse_timer(key: bytes, value: bytes) -> TimerRecord:
    if len(key) < 8 or len(value) != _TIMER_VALUE.size:
        raise DecodeError("not a timer record")
    size_py, offset_py = _TIMER_VALUE.unpack(value)
    return TimerRecord(_I64.unpack_from(key, 0)[0], key[8:].decode("utf-8"), size_py, offset_py)


@dataclass(frozen=True)
class TransRecord:
    offset_py: int
    topic: str
    uniq_key: str
    check_times: int
    size_py: int


def trans_key(offset_py: int, topic: str, uniq_key: str) -> bytes:
    return _I64.pack(offset_py) + f"@{topic}@{uniq_key}".encode()


def trans_value(check_times: int, size_py: int) -> bytes:
    return _TRANS_VALUE.pack(check_times, size_py)


def parse_trans(key: bytes, value: bytes) -> TransRecord:
    if len(key) < 10 or key[8:9] != SEP or len(value) != _TRANS_VALUE.size:
        raise DecodeError("not a transaction record")
    topic, _, uniq = key[9:].decode("utf-8").partition("@")
    check_times, size_py = _TRANS_VALUE.unpack(value)
    return TransRecord(_I64.unpack_from(key, 0)[0], topic, uniq, check_times, size_py)


__all__ = ["CF_INDEX", "CF_TIMER", "CF_TRANS", "HOUR_MS", "INDEX_KEY_TYPE", "INDEX_TAG_TYPE", "INDEX_UNIQUE_TYPE",
           "IndexRecord", "META_KEYS", "TimerRecord", "TransRecord", "hour_of", "index_key", "index_value",
           "parse_index", "parse_timer", "parse_trans", "timer_key", "timer_value", "trans_key", "trans_value"]
