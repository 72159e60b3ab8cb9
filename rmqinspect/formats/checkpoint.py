"""`checkpoint` (StoreCheckpoint, FORMATS.md §6.1): 4096 bytes mapped, 24/32/40 bytes used by version."""

from __future__ import annotations

from .fields import FieldTable

CHECKPOINT_FILE_SIZE = 4096

# --- FORMATS.md §6.1, StoreCheckpoint: int64 fields at 0, 8, 16 (all versions), 24 (5.0.0+), 32 (5.1.1+) ------
CHECKPOINT_TABLE = FieldTable((
    ("physic_msg_timestamp", "q"),  # all versions
    ("logics_msg_timestamp", "q"),  # all versions
    ("index_msg_timestamp", "q"),  # all versions
    ("master_flushed_offset", "q"),  # 5.0.0+
    ("confirm_phy_offset", "q"),  # 5.1.1+
))
CHECKPOINT_FIELDS = CHECKPOINT_TABLE.names
CHECKPOINT = CHECKPOINT_TABLE.struct  # what store.checkpoint reads with
# Bytes used by a 4.x broker (the first three fields) and by 5.0.0 .. 5.1.0 (four fields).
CHECKPOINT_SIZE_4X = CHECKPOINT_TABLE.position("master_flushed_offset")
CHECKPOINT_SIZE_50 = CHECKPOINT_TABLE.position("confirm_phy_offset")
CHECKPOINT_SIZE_511 = CHECKPOINT_TABLE.size

# getMinTimestamp subtracts this margin.
MIN_TIMESTAMP_MARGIN_MS = 3000


def min_timestamp(physic: int, logics: int) -> int:
    """StoreCheckpoint.getMinTimestamp."""
    return max(0, min(physic, logics) - MIN_TIMESTAMP_MARGIN_MS)


def min_timestamp_index(physic: int, logics: int, index: int) -> int:
    """StoreCheckpoint.getMinTimestampIndex."""
    return min(min_timestamp(physic, logics), index)


def __getattr__(name: str):
    # The construct schema (Checkpoint) is built on first use: every command that opens a store reads the
    # checkpoint with the struct form, and construct costs ~16 ms to import.
    if name == "Checkpoint":
        return CHECKPOINT_TABLE.construct()  # FieldTable keeps the schema: built once
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
