"""Reading the `checkpoint` file (FORMATS.md §6.1)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ..errors import CorruptDataError
from ..formats.checkpoint import (
    CHECKPOINT,
    CHECKPOINT_FIELDS,
    CHECKPOINT_FILE_SIZE,
    CHECKPOINT_SIZE_4X,
    CHECKPOINT_SIZE_50,
    CHECKPOINT_SIZE_511,
    min_timestamp,
    min_timestamp_index,
)


@dataclass
class CheckpointData:
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int
    master_flushed_offset: int | None  # 5.0.0+
    confirm_phy_offset: int | None  # 5.1.1+
    file_size: int
    used_length: int  # non-zero prefix rounded up to 8: 24 (4.x), 32 (5.0-5.1.0) or 40 (5.1.1+) when in use

    @property
    def min_timestamp(self) -> int:
        return min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp)

    @property
    def min_timestamp_index(self) -> int:
        return min_timestamp_index(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["min_timestamp"] = self.min_timestamp
        d["min_timestamp_index"] = self.min_timestamp_index
        return d


def read_checkpoint(path: str) -> CheckpointData | None:
    """None when the file does not exist; CorruptDataError when it is too short to hold the 4.x fields."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        data = f.read(CHECKPOINT_FILE_SIZE)
    if len(data) < CHECKPOINT_SIZE_4X:
        raise CorruptDataError(f"checkpoint is {len(data)} bytes, needs at least {CHECKPOINT_SIZE_4X}", path,
                               len(data))
    physic, logics, index, master_flushed, confirm = CHECKPOINT.unpack(
        data[:CHECKPOINT_SIZE_511].ljust(CHECKPOINT_SIZE_511, b"\0"))
    nz = len(data.rstrip(b"\0"))
    used = max(CHECKPOINT_SIZE_4X, (nz + 7) // 8 * 8)
    return CheckpointData(
        physic_msg_timestamp=physic,
        logics_msg_timestamp=logics,
        index_msg_timestamp=index,
        master_flushed_offset=master_flushed if len(data) >= CHECKPOINT_SIZE_50 else None,
        confirm_phy_offset=confirm if len(data) >= CHECKPOINT_SIZE_511 else None,
        file_size=os.path.getsize(path),
        used_length=used,
    )


__all__ = ["CheckpointData", "read_checkpoint", "CHECKPOINT_FIELDS"]
