"""Timer message store readers (FORMATS.md §10.2): timer log units, the wheel, the checkpoint, and the
commit-log record in ``rmq_sys_wheel_timer`` each unit points to."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import CorruptDataError, StoreNotFoundError
from ..formats.timer import (
    BLANK,
    BLANK_MAGIC_CODE,
    DEFAULT_PRECISION_MS,
    MAGIC_DELETE,
    MAGIC_ROLL,
    SLOT,
    SLOT_DTYPE,
    SLOT_TABLE,
    SLOTS_TOTAL,
    TIMERCHECK,
    TIMERCHECK_TABLE,
    UNIT,
    UNIT_SIZE,
    WHEEL_SLOT_SIZE,
    magic_names,
    magic_valid,
)
from .layout import is_offset_file_name
from .mapped import MappedFile


@dataclass
class TimerUnit:
    pos: int  # timer-log offset
    file: str
    prev_pos: int
    magic: int
    curr_write_time: int
    delay: int
    commitlog_offset: int
    commitlog_size: int
    real_topic_hash: int

    @property
    def delivery_time(self) -> int:
        """delayedTime = currWriteTime + delay (for ROLL units the provisional re-enqueue time)."""
        return self.curr_write_time + self.delay

    @property
    def kind(self) -> str:
        return "delete" if self.magic & MAGIC_DELETE else "roll" if self.magic & MAGIC_ROLL else "default"

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["delivery_time"] = self.delivery_time
        d["magic_names"] = magic_names(self.magic)
        return d


@dataclass
class TimerLogScan:
    units: list[TimerUnit] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    end_pos: int = 0  # where recovery would truncate / the write position


class TimerLog:
    def __init__(self, directory: str, file_size: int | None = None):
        if not os.path.isdir(directory):
            raise StoreNotFoundError("no timerlog/ directory", directory)
        self.directory = directory
        names = sorted(n for n in os.listdir(directory) if is_offset_file_name(n))
        self.files = [MappedFile(os.path.join(directory, n), int(n)) for n in names]
        sizes = [f.size for f in self.files if f.size]
        self.file_size = file_size or (max(set(sizes), key=sizes.count) if sizes else 0)

    def scan(self) -> TimerLogScan:
        """Walk units in 52-byte steps; a blank (magic 0xCBD43194 at +12) ends a file; zeros end the log;
        a bad size/magic is reported with file and offset and ends the walk (recoverAndRevise truncates)."""
        out = TimerLogScan()
        for f in self.files:
            buf = f.buffer
            pos = 0
            while pos + BLANK.size <= f.size:
                # a unit and a blank start alike (size, 8 bytes, magic): read that much before deciding
                size, _, magic = BLANK.unpack_from(buf, pos)
                if magic == BLANK_MAGIC_CODE:
                    pos = f.size
                    break
                if size == 0 and magic == 0:
                    out.end_pos = f.start + pos
                    return out
                if size != UNIT_SIZE or not magic_valid(magic) or pos + UNIT_SIZE > f.size:
                    out.problems.append(f"{f.path} @ {pos}: not a timer-log unit (size {size}, magic "
                                        f"0x{magic & 0xFFFFFFFF:08X}); recovery truncates here")
                    out.end_pos = f.start + pos
                    return out
                s, prev, mg, cwt, delay, off, sz, h, _ = UNIT.unpack_from(buf, pos)
                out.units.append(TimerUnit(f.start + pos, f.name, prev, mg, cwt, delay, off, sz, h))
                pos += UNIT_SIZE
            out.end_pos = f.start + pos
        return out

    def unit_at(self, pos: int) -> TimerUnit:
        for f in self.files:
            if f.start <= pos < f.start + f.size:
                p = pos - f.start
                if p + UNIT_SIZE > f.size:
                    break
                s, prev, mg, cwt, delay, off, sz, h, _ = UNIT.unpack_from(f.buffer, p)
                if s != UNIT_SIZE or not magic_valid(mg):
                    raise CorruptDataError(f"not a timer-log unit (size {s}, magic 0x{mg & 0xFFFFFFFF:08X})",
                                           f.path, p)
                return TimerUnit(pos, f.name, prev, mg, cwt, delay, off, sz, h)
        raise CorruptDataError("timer-log position outside the files", self.directory, pos)

    def close(self) -> None:
        for f in self.files:
            f.close()


@dataclass
class WheelSlot:
    index: int
    time_units: int
    first_pos: int
    last_pos: int
    num: int
    magic: int


class TimerWheel:
    def __init__(self, path: str, precision_ms: int = DEFAULT_PRECISION_MS, slots_total: int = SLOTS_TOTAL):
        if not os.path.isfile(path):
            raise StoreNotFoundError("no timerwheel file", path)
        self.path = path
        self.mf = MappedFile(path)
        self.precision_ms = precision_ms
        self.slots_total = slots_total
        if self.mf.size % WHEEL_SLOT_SIZE:
            raise CorruptDataError(f"size {self.mf.size} is not a multiple of 32", path)
        self.problems = []
        if self.mf.size and self.mf.size != 2 * slots_total * WHEEL_SLOT_SIZE:
            self.problems.append(f"size {self.mf.size} != {2 * slots_total * WHEEL_SLOT_SIZE}: the broker refuses "
                                 "a wheel of a different length")

    def used_slots(self) -> list[WheelSlot]:
        """Slots with a timer-log position (vectorised over the whole wheel)."""
        n = self.mf.size // WHEEL_SLOT_SIZE
        if n == 0:
            return []
        arr = np.frombuffer(self.mf.buffer, dtype=SLOT_DTYPE, count=n)
        idx = np.flatnonzero((arr["num"] != 0) | (arr["last_pos"] != 0) | (arr["time_units"] != 0))
        return [WheelSlot(int(i), *[int(arr[k][i]) for k in SLOT_TABLE.names]) for i in idx]

    def slot_for(self, time_ms: int) -> WheelSlot | None:
        """TimerWheel.getSlot: valid only if the stored time equals time // precision."""
        i = (time_ms // self.precision_ms) % (2 * self.slots_total)
        if (i + 1) * WHEEL_SLOT_SIZE > self.mf.size:
            return None
        t, first, last, num, magic = SLOT.unpack_from(self.mf.buffer, i * WHEEL_SLOT_SIZE)
        if t != time_ms // self.precision_ms:
            return None
        return WheelSlot(i, t, first, last, num, magic)

    def close(self) -> None:
        self.mf.close()


def walk_slot(log: TimerLog, slot: WheelSlot, limit: int = 1 << 20) -> list[TimerUnit]:
    """TimerMessageStore.dequeue: from lastPos follow prevPos until -1 (cycle-safe)."""
    out: list[TimerUnit] = []
    pos = slot.last_pos
    seen = set()
    while pos != -1 and len(out) < limit:
        if pos in seen:
            raise CorruptDataError(f"wheel slot {slot.index}: prevPos chain cycles at {pos}", log.directory, pos)
        seen.add(pos)
        u = log.unit_at(pos)
        out.append(u)
        pos = u.prev_pos
    return out


def read_timercheck(path: str) -> dict | None:
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        raw = f.read(TIMERCHECK.size)
    if len(raw) < TIMERCHECK.size:
        raise CorruptDataError(f"{len(raw)} bytes, expected at least {TIMERCHECK.size}", path, 0)
    return TIMERCHECK_TABLE.parse_dict(raw)
