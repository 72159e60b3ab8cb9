"""Magic values, system flags and property names, spelled as RocketMQ spells them.

Source: ../shared/docs/FORMATS.md §0 (magic table), §1.5 (MessageSysFlag), §1.7 (MessageConst),
§3.4 (TopicValidator / MixAll topic names).
"""

from __future__ import annotations

import enum

# --- magic codes (MessageDecoder / CommitLog) -------------------------------------------------
MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7, 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, 2-byte topic length (5.1.0+)
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, end-of-file filler
MESSAGE_MAGICS = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)

# CommitLog.END_FILE_MIN_BLANK_LENGTH: a message is placed only if 8 bytes remain after it.
END_FILE_MIN_BLANK_LENGTH = 8

# Default geometry (MessageStoreConfig).
DEFAULT_COMMITLOG_FILE_SIZE = 1024 * 1024 * 1024
DEFAULT_CQ_FILE_SIZE = 300_000 * 20
DEFAULT_INDEX_SLOTS = 5_000_000
DEFAULT_INDEX_MAX = 5_000_000 * 4
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
# A record cannot claim more than this many bytes; bounds memory on hostile TOTALSIZE values.
# (maxMessageSize is 4 MiB by default; brokers may raise it, so we allow far more but stay bounded.)
RECORD_SIZE_CAP = 256 * 1024 * 1024


def magic_version(magic: int) -> int:
    """1 for V1, 2 for V2, 0 for anything else."""
    if magic == MESSAGE_MAGIC_CODE_V1:
        return 1
    if magic == MESSAGE_MAGIC_CODE_V2:
        return 2
    return 0


def u32hex(v: int) -> str:
    return "0x%08X" % (v & 0xFFFFFFFF)


# --- MessageSysFlag -----------------------------------------------------------------------------
class SysFlag(enum.IntFlag):
    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    BORNHOST_V6 = 0x10
    STOREHOSTADDRESS_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80


TRANSACTION_MASK = 0xC
COMPRESSION_TYPE_MASK = 0x700


class TransactionType(enum.IntEnum):
    NOT_TYPE = 0x0
    PREPARED = 0x4
    COMMIT = 0x8
    ROLLBACK = 0xC


class CompressionType(enum.IntEnum):
    """CompressionType.findByValue: 0 and 3 are both ZLIB (0 = pre-4.9.4 producers)."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def compression_type(sys_flag: int) -> CompressionType | None:
    """Codec of a COMPRESSED body, or None when the body is not compressed. Raises on codes 4..7."""
    if not sys_flag & SysFlag.COMPRESSED:
        return None
    code = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if code == 0:
        return CompressionType.ZLIB
    return CompressionType(code)


# --- MessageConst property names ----------------------------------------------------------------
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"  # MessageConst: a delete marker names REAL_TOPIC + "+" + UNIQ_KEY
PROPERTY_CRC32 = "__CRC32#"
# transactions (MessageConst; TransactionalMessageUtil.TRANSACTION_ID is the same name as PROPERTY_TRANSACTION_ID)
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
KEY_SEPARATOR = " "
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# CommitLog.CRC32_RESERVED_LEN = len("__CRC32#") + 1 + 10 + 1
CRC32_RESERVED_LEN = 20

# --- topics ---------------------------------------------------------------------------------------
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"  # TopicValidator: halves the checker gave up on
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"  # MixAll: the check service's consumer group (its offsets: consumerOffset.json)
TRANS_OP_REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVE_TAG: an op message ending the halves its body lists
TRANS_OP_OFFSET_SEPARATOR = ","  # 5.x: "<half queue offset>," per half, batched; 4.x: one offset, no separator
TIMER_TOPIC = "rmq_sys_wheel_timer"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def parse_delay_levels(spec: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> dict[int, int]:
    """messageDelayLevel -> {level: millis} (ScheduleMessageService.parseDelayLevel)."""
    unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    out = {}
    for i, tok in enumerate(spec.split(" "), start=1):
        out[i] = int(tok[:-1]) * unit[tok[-1]]
    return out
