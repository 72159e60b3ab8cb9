"""Write a timer message store from the spec (FORMATS.md §10.2; TimerMessageStore.doEnqueue,
TimerLog.append, TimerWheel.putSlot, TimerCheckpoint) into a NEW store directory. Fixtures only."""

from __future__ import annotations

import os

from ..formats.javahash import java_string_hash
from ..formats.timer import (
    BLANK,
    BLANK_MAGIC_CODE,
    DEFAULT_PRECISION_MS,
    DEFAULT_TIMERLOG_FILE_SIZE,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MIN_BLANK_LEN,
    SLOT,
    SLOTS_TOTAL,
    TIMERCHECK,
    TIMERCHECK_SIZE,
    UNIT,
    UNIT_SIZE,
    WHEEL_SLOT_SIZE,
    slot_index,
)


class TimerStoreWriter:
    def __init__(self, root: str, timerlog_file_size: int = DEFAULT_TIMERLOG_FILE_SIZE,
                 precision_ms: int = DEFAULT_PRECISION_MS, slots_total: int = SLOTS_TOTAL):
        self.root = root
        self.dir = os.path.join(root, "timerlog")
        os.makedirs(self.dir, exist_ok=True)
        self.file_size = timerlog_file_size
        self.precision_ms = precision_ms
        self.slots_total = slots_total
        self.wheel_path = os.path.join(root, "timerwheel")
        with open(self.wheel_path, "wb") as f:
            f.truncate(2 * slots_total * WHEEL_SLOT_SIZE)
        self._wheel = open(self.wheel_path, "r+b")
        self.file_start = 0
        self.wrote = 0
        self._f = self._new_file(0)

    def _new_file(self, start: int):
        f = open(os.path.join(self.dir, f"{start:020d}"), "w+b")
        f.truncate(self.file_size)
        return f

    @property
    def write_pos(self) -> int:
        return self.file_start + self.wrote

    def _append(self, data: bytes) -> int:
        if len(data) + MIN_BLANK_LEN > self.file_size - self.wrote:
            self._f.seek(self.wrote)
            self._f.write(BLANK.pack(self.file_size - self.wrote, 0, BLANK_MAGIC_CODE))
            self._f.close()
            self.file_start += self.file_size
            self.wrote = 0
            self._f = self._new_file(self.file_start)
        pos = self.write_pos
        self._f.seek(self.wrote)
        self._f.write(data)
        self.wrote += len(data)
        return pos

    def _slot(self, t_ms: int):
        i = slot_index(t_ms, self.precision_ms, self.slots_total)
        self._wheel.seek(i * WHEEL_SLOT_SIZE)
        t, first, last, num, magic = SLOT.unpack(self._wheel.read(WHEEL_SLOT_SIZE))
        if t != t_ms // self.precision_ms:
            return i, -1, -1, 0, 0
        return i, first, last, num, magic

    def enqueue(self, commitlog_offset: int, size: int, real_topic: str | None, curr_write_time: int,
                delayed_time: int, magic: int = MAGIC_DEFAULT) -> int:
        """One timer-log unit chained into the wheel slot of ``delayed_time``; returns its position."""
        i, first, last, num, smagic = self._slot(delayed_time)
        h = java_string_hash(real_topic) if real_topic else 0
        pos = self._append(UNIT.pack(UNIT_SIZE, last, magic, curr_write_time, delayed_time - curr_write_time,
                                     commitlog_offset, size, h, 0))
        self._wheel.seek(i * WHEEL_SLOT_SIZE)
        self._wheel.write(SLOT.pack(delayed_time // self.precision_ms, pos if first == -1 else first, pos,
                                    num - 1 if magic & MAGIC_DELETE else num + 1, smagic))
        return pos

    def write_timercheck(self, last_read_time_ms: int, last_timer_queue_offset: int, state_version: int = 0,
                         timestamp: int = 0, counter: int = 0) -> str:
        path = os.path.join(self.root, "config", "timercheck")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(TIMERCHECK.pack(last_read_time_ms, self.write_pos, last_timer_queue_offset,
                                    last_timer_queue_offset, state_version, timestamp, counter))
            f.truncate(TIMERCHECK_SIZE)
        return path

    def close(self) -> None:
        for f in (self._f, self._wheel):
            if not f.closed:
                f.close()

    def __enter__(self) -> TimerStoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
