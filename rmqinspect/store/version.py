"""The RocketMQ release a store is read as: one type for every ``--broker-version`` and every module.

A ``BrokerVersion`` parses what a user types (``4.9.8``, ``rocketmq-all-5.3.1``, ``v5.1``, ``4.x``, ``HEAD``),
compares as a (major, minor, patch) triple, and answers the per-release questions the analyses ask: which
message magic codes a broker accepts, how it counts index hash slots, and which recovery rules it runs.
Each rule names the release that changed it, so a fix to a rule happens here and nowhere else.

It lives in ``store/`` (not in ``analyses/recovery``) because store detection returns it and ``store/`` must not
import the layer above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# names users give to an unreleased build of the development branch
_HEAD_ALIASES = ("head", "master", "develop", "latest")
# the development branch after 5.3.3 behaves as the first release after it
HEAD_PARTS = (5, 3, 4)
ACCEPTED = "a RocketMQ version such as 4.9.8, 5.3.1, 5.x or HEAD"

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")


@dataclass(frozen=True, order=False)
class BrokerVersion:
    """A RocketMQ release and the broker behaviour that follows from it. ``text`` is how it was given (HEAD for
    the development branch); ``parts`` is what comparisons use."""

    text: str
    parts: tuple[int, int, int]

    @classmethod
    def parse(cls, text: str) -> BrokerVersion:
        """``ValueError`` (naming what is accepted) when ``text`` does not start with a version number."""
        t = text.strip().lower().removeprefix("rocketmq-all-").removeprefix("v")
        if t in _HEAD_ALIASES:
            return cls("HEAD", HEAD_PARTS)
        m = _VERSION.match(t)
        if not m:
            raise ValueError(f"not a RocketMQ version: {text!r} (e.g. 4.9.8, 5.3.3, HEAD)")
        return cls(text.strip(), (int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)))

    def __str__(self) -> str:
        return self.text

    def at_least(self, *parts: int) -> bool:
        return self.parts >= tuple(parts) + (0,) * (3 - len(parts))

    @property
    def major(self) -> int:
        return self.parts[0]

    # -- the message format ----------------------------------------------------------------------------
    @property
    def is_5x(self) -> bool:
        return self.at_least(5)

    @property
    def accepts_v2(self) -> bool:
        """MESSAGE_MAGIC_CODE_V2 exists from 5.1.0; 4.x treats it as an illegal magic code."""
        return self.at_least(5, 1)

    # -- IndexFile -------------------------------------------------------------------------------------
    @property
    def index_counts_every_put(self) -> bool:
        """Before 4.7.1 IndexFile.putKey incremented hashSlotCount on every put; from 4.7.1 only when the slot
        was empty (apache/rocketmq a14cf634, "fix increase hashSlot value")."""
        return not self.at_least(4, 7, 1)

    # -- recovery (DefaultMessageStore.load / CommitLog.recover*) --------------------------------------
    @property
    def normal_rule(self) -> str:
        """Which file recoverNormally starts at: ``third-last`` (4.x ... 5.3.1), ``cq-max`` (5.3.2, 5.3.3: the
        newest file starting at or below maxPhyOffsetOfConsumeQueue), ``head`` (after 5.3.3: the newest file
        whose first record validates)."""
        if self.at_least(*HEAD_PARTS):
            return "head"
        if self.at_least(5, 3, 2):
            return "cq-max"
        return "third-last"

    @property
    def store_ts_fixed_56(self) -> bool:
        """Before 4.6.0 isMappedFileMatchedRecover read STORETIMESTAMP at the fixed offset 56."""
        return not self.at_least(4, 6)

    @property
    def cq_max_phys_is_start(self) -> bool:
        """4.4.0's ConsumeQueue.recover kept ``offset`` (not offset + size) as max physical offset."""
        return not self.at_least(4, 5)

    @property
    def delay_levels_at_recovery(self) -> bool:
        """5.x parses messageDelayLevel in the store constructor, so recovery-time dispatch computes
        delivery times; 4.9.8's ScheduleMessageService has not parsed them yet (oracle: tagsCode = hash)."""
        return self.is_5x

    @property
    def writes_crc32_property(self) -> bool:
        """The ``__CRC32#`` property is written from 5.2.0."""
        return self.at_least(5, 2)


__all__ = ["ACCEPTED", "BrokerVersion"]
