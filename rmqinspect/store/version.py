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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker_conf import BrokerConf

# names users give to an unreleased build of the development branch
_HEAD_ALIASES = ("head", "master", "develop", "latest")
# the development branch after 5.3.3 behaves as the first release after it
HEAD_PARTS = (5, 3, 4)
ACCEPTED = ("a RocketMQ version such as 4.4, 4.4.0, 4.9.8, 5, 5.x, 5.3.3 or HEAD (what `summary` prints, e.g. "
            "'5.x (detected)', is accepted too)")
# "4.x" / "5.x" (what store detection says): the newest release of that line, the one a store of unknown minor
# version most likely came from; a rule that differs inside a line needs the exact release (e.g. 4.4.0)
NEWEST_OF_LINE = {4: (4, 9, 8), 5: (5, 3, 3)}

_VERSION = re.compile(r"^(\d+)(?:\.(\d+|x))?(?:\.(\d+))?(?:-[\w.]+)?(?:\s*\((?:detected|override)\))?$")
# a build of the development branch named by its commit and its pom revision, as the oracle stores name theirs:
# "develop-8fc57f1 (5.3.4-SNAPSHOT)" behaves as the release its revision names
_BRANCH_BUILD = re.compile(r"^(?:develop|master|head)-[0-9a-f]{6,40}\s*\((\d+)\.(\d+)\.(\d+)(?:-snapshot)?\)$")

# the recovery bands: releases between two rule changes recover alike (VERSIONS.md §1.1, §1.5)
RECOVERY_BANDS = (
    ((5, 5, 0), "5.5.0+", "5.3.4 rules plus the opt-in stale physical-offset stop (checkCommitLogOffsetOnRecover, "
                          "abnormal recovery only; modelled from PR #10018/#10039, not checked against a broker)"),
    ((5, 3, 4), "5.3.4+", "start file: the newest whose first record passes the full check (CRC) and the consume-queue "
                          "store's test; messageIndexSafe in normal recovery too; truncateDirtyLogicFiles always "
                          "(PR #9256)"),
    ((5, 3, 2), "5.3.2-5.3.3", "normal start file: the newest starting at or below maxPhyOffsetOfConsumeQueue"),
    ((0, 0, 0), "<=5.3.1", "normal start file: the third-last"),
)


def _as_typed(text: str) -> str:
    """The version as the user typed it, without a " (detected)" that came along from `summary`'s output."""
    return re.sub(r"\s*\((?:detected|override)\)\s*$", "", text.strip(), flags=re.I)


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
        b = _BRANCH_BUILD.match(t)
        if b:
            return cls(text.strip(), (int(b.group(1)), int(b.group(2)), int(b.group(3))))
        m = _VERSION.match(t)
        if not m or (m.group(2) == "x" and m.group(3)):
            raise ValueError(f"not a RocketMQ version: {text!r} (e.g. 4.4, 4.9.8, 5.x, 5.3.3, HEAD)")
        major = int(m.group(1))
        if m.group(2) == "x":
            if major not in NEWEST_OF_LINE:
                raise ValueError(f"no RocketMQ {major}.x line: {text!r} (4.x or 5.x)")
            return cls(_as_typed(text), NEWEST_OF_LINE[major])
        return cls(_as_typed(text), (major, int(m.group(2) or 0), int(m.group(3) or 0)))

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
    def recovery_band(self) -> str:
        """The band of releases that recover alike: ``<=5.3.1``, ``5.3.2-5.3.3``, ``5.3.4+``, ``5.5.0+``."""
        return next(name for parts, name, _ in RECOVERY_BANDS if self.parts >= parts)

    @property
    def has_combine_store(self) -> bool:
        """CombineConsumeQueueStore (rocksdbCQDoubleWriteEnable) and enableAcceleratedRecovery exist from 5.3.4."""
        return self.at_least(5, 3, 4)

    @property
    def has_stale_offset_check(self) -> bool:
        """checkCommitLogOffsetOnRecover (default false) exists from 5.5.0 (modelled from PR #10018/#10039)."""
        return self.at_least(5, 5)

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


def index_counting_version(index_dir: str, conf: BrokerConf | None = None) -> tuple[BrokerVersion | None, str]:
    """Which side of 4.7.1 wrote the IndexFiles in ``index_dir``, proven from their headers: before 4.7.1
    hashSlotCount grew on every put (= indexCount - 1), from 4.7.1 only when a slot was first used (= the
    number of non-empty slots). Decided only by a file where the two differ (two keys shared a slot);
    otherwise ``(None, why)``. Returns 4.4 or 4.9 as the representative release of each side."""
    import os

    from .indexfile import IndexFile  # numpy: only when a command needs the answer

    if not os.path.isdir(index_dir):
        return None, f"{index_dir}: no index directory"
    for name in sorted(os.listdir(index_dir)):
        try:
            idx = IndexFile(os.path.join(index_dir, name), conf=conf)
        except Exception:  # noqa: BLE001 - damaged or foreign files prove nothing; the next one may
            continue
        try:
            puts = idx.header.index_count - 1
            used = int((idx.slot_table() != 0).sum())
            counted = idx.header.hash_slot_count
        finally:
            idx.close()
        if puts == used:
            continue
        where = f"{os.path.join(index_dir, name)}: hashSlotCount {counted}, {puts} items, {used} slots in use"
        if counted == puts:
            return BrokerVersion("4.4", (4, 4, 0)), f"{where}: counted every put (before 4.7.1)"
        if counted == used:
            return BrokerVersion("4.9", (4, 9, 0)), f"{where}: counted new slots only (4.7.1 or later)"
    return None, f"{index_dir}: no index file tells (no two keys shared a hash slot)"


__all__ = ["ACCEPTED", "BrokerVersion", "RECOVERY_BANDS", "index_counting_version"]
