"""`checkpoint` (StoreCheckpoint, FORMATS.md §6.1): 4096 bytes mapped, 24/32/40 bytes used by version."""

from __future__ import annotations

from construct import Int64sb, Struct

CHECKPOINT_FILE_SIZE = 4096

CHECKPOINT_FIELDS = (
    "physic_msg_timestamp",  # all versions
    "logics_msg_timestamp",  # all versions
    "index_msg_timestamp",  # all versions
    "master_flushed_offset",  # 5.0.0+
    "confirm_phy_offset",  # 5.1.1+
)

Checkpoint = Struct(*[name / Int64sb for name in CHECKPOINT_FIELDS])

# getMinTimestamp subtracts this margin.
MIN_TIMESTAMP_MARGIN_MS = 3000


def min_timestamp(physic: int, logics: int) -> int:
    """StoreCheckpoint.getMinTimestamp."""
    return max(0, min(physic, logics) - MIN_TIMESTAMP_MARGIN_MS)


def min_timestamp_index(physic: int, logics: int, index: int) -> int:
    """StoreCheckpoint.getMinTimestampIndex."""
    return min(min_timestamp(physic, logics), index)
