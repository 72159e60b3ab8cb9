"""Reading the `checkpoint` file (FORMATS.md §6.1)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ..formats.checkpoint import CHECKPOINT_FIELDS, Checkpoint, min_timestamp, min_timestamp_index
from .errors import CorruptDataError


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
        data = f.read(4096)
    if len(data) < 24:
        raise CorruptDataError(f"checkpoint is {len(data)} bytes, needs at least 24", path, len(data))
    padded = data[:40].ljust(40, b"\0")
    cp = Checkpoint.parse(padded)
    nz = len(data.rstrip(b"\0"))
    used = max(24, (nz + 7) // 8 * 8)
    return CheckpointData(
        physic_msg_timestamp=cp.physic_msg_timestamp,
        logics_msg_timestamp=cp.logics_msg_timestamp,
        index_msg_timestamp=cp.index_msg_timestamp,
        master_flushed_offset=cp.master_flushed_offset if len(data) >= 32 else None,
        confirm_phy_offset=cp.confirm_phy_offset if len(data) >= 40 else None,
        file_size=os.path.getsize(path),
        used_length=used,
    )


__all__ = ["CheckpointData", "read_checkpoint", "CHECKPOINT_FIELDS"]
