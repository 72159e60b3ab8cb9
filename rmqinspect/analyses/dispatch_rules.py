"""What the broker's dispatcher derives from one record (FORMATS.md §3): whether it gets a consume-queue
entry, its tagsCode, and the index keys. Shared by `cq --join`, `verify`, `recover`, `rebuild` and the
fixtures, so there is one statement of these rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import DelayLevelError
from ..formats.constants import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_SCHEDULE_TOPIC,
    TransactionType,
    parse_delay_levels,
)
from ..formats.javahash import tags_code
from ..store.message import split_keys


@dataclass(frozen=True)
class DelayTable:
    """messageDelayLevel as the broker parsed it (ScheduleMessageService.parseDelayLevel)."""

    millis: dict[int, int]

    @classmethod
    def parse(cls, spec: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> "DelayTable":
        return cls(parse_delay_levels(spec))

    @property
    def max_level(self) -> int:
        return max(self.millis) if self.millis else 0

    def deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """ScheduleMessageService.computeDeliverTimestamp: +1000 ms when the level is not in the table."""
        ms = self.millis.get(level)
        return store_timestamp + (ms if ms is not None else 1000)


DEFAULT_DELAY_TABLE = DelayTable.parse()
# Integer.parseInt: optional sign, ASCII digits only, no spaces.
_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")


def goes_to_consume_queue(sys_flag: int) -> bool:
    """CommitLogDispatcherBuildConsumeQueue: NOT_TYPE and COMMIT only."""
    return (sys_flag & 0xC) in (TransactionType.NOT_TYPE, TransactionType.COMMIT)


def goes_to_index(sys_flag: int) -> bool:
    """CommitLogDispatcherBuildIndex: everything except ROLLBACK."""
    return (sys_flag & 0xC) != TransactionType.ROLLBACK


def dispatch_tags_code(topic: str, properties: dict[str, str], store_timestamp: int,
                       delay_table: DelayTable = DEFAULT_DELAY_TABLE) -> tuple[int, bool]:
    """tagsCode as CommitLog.checkMessageAndReturnSize computes it.

    Returns (tags_code, is_delivery_time). For SCHEDULE_TOPIC_XXXX with a DELAY level the value is the
    delivery timestamp, not a hash. Raises DelayLevelError for a non-numeric DELAY there.
    """
    code = tags_code(properties.get(PROPERTY_TAGS))
    if topic == RMQ_SYS_SCHEDULE_TOPIC:
        raw = properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if raw is not None:
            if not _JAVA_INT.match(raw):
                raise DelayLevelError(f"DELAY {raw!r} is not a number")
            level = int(raw)
            if level > delay_table.max_level:
                level = delay_table.max_level
            if level > 0:
                return delay_table.deliver_timestamp(level, store_timestamp), True
    return code, False


def index_keys(properties: dict[str, str]) -> list[str]:
    """IndexService.buildIndex order: UNIQ_KEY first, then each non-empty KEYS token (duplicates kept)."""
    out = []
    uniq = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq is not None:
        out.append(uniq)
    out.extend(split_keys(properties.get(PROPERTY_KEYS)))
    return out
