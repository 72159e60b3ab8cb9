"""ConsumeQueue output: what ``ConsumeQueue.putMessagePositionInfo`` writes (FORMATS.md §4.1).

One ``ConsumeQueueWriter`` per ``<topic>/<queueId>``; ``ConsumeQueueSet`` owns all of them for one output
directory. Entries are buffered per queue and written in large pieces, so memory is bounded by the number
of queues, never by the store size. Files are created full-size and zero-filled like the broker's
pre-allocated mapped files (the broker's trailing bytes after the last entry are zeros too).
"""

from __future__ import annotations

import os
import struct

from ..formats.consumequeue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE

_ENTRY = struct.Struct(">qiq")
_PRE_BLANK = _ENTRY.pack(0, PRE_BLANK_SIZE, 0)
_FLUSH_AT = 1 << 16


def round_cq_file_size(n: int) -> int:
    """getMappedFileSizeConsumeQueue: the configured size rounded up to a multiple of 20."""
    return -(-n // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE


class ConsumeQueueWriter:
    """The broker's append rules for one queue, including its quirks:

    * a record whose ``offset + size <= maxPhysicOffset`` was already built and is ignored;
    * the very first file of a queue is created at the file holding ``cqOffset * 20``; when the queue does
      not start at 0 the positions before it are filled with pre-blank entries (``fillPreBlank``);
    * an entry whose expected position is below the write position is a repeat and ignored; one above it is
      logged by the broker but still appended at the write position (so positions stay dense).
    """

    __slots__ = ("directory", "file_size", "write_pos", "max_physic_offset", "_buf", "_buf_start", "_created",
                 "entries", "repeats", "misplaced", "first_entry")

    def __init__(self, directory: str, file_size: int):
        self.directory = directory
        self.file_size = file_size
        self.write_pos = -1  # global logical byte position of the next entry; -1 = no file yet
        self.max_physic_offset = -1
        self._buf = bytearray()
        self._buf_start = 0
        self._created: set[int] = set()
        self.entries = 0
        self.repeats = 0
        self.misplaced = 0
        self.first_entry = None

    def put(self, cq_offset: int, phys: int, size: int, tags_code: int) -> None:
        if phys + size <= self.max_physic_offset:
            self.repeats += 1
            return
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        if self.write_pos < 0:
            start = expect - expect % self.file_size
            self.write_pos = self._buf_start = start
            if cq_offset != 0 and expect > start:
                self._buf += _PRE_BLANK * ((expect - start) // CQ_STORE_UNIT_SIZE)
                self.write_pos = expect
            self.first_entry = cq_offset
        elif cq_offset != 0:
            if expect < self.write_pos:
                self.repeats += 1
                return
            if expect != self.write_pos:
                self.misplaced += 1
        self.max_physic_offset = phys + size
        self._buf += _ENTRY.pack(phys, size, tags_code)
        self.write_pos += CQ_STORE_UNIT_SIZE
        self.entries += 1
        if len(self._buf) >= _FLUSH_AT:
            self.flush()

    def put_packed(self, cq_offset: int, phys: int, size: int, entry: bytes) -> None:
        """Hot path for the common case (no file yet handled by ``put``): the entry is already packed."""
        if self.write_pos < 0 or phys + size <= self.max_physic_offset or (
                cq_offset != 0 and cq_offset * CQ_STORE_UNIT_SIZE != self.write_pos):
            self.put(cq_offset, phys, size, _ENTRY.unpack(entry)[2])
            return
        self.max_physic_offset = phys + size
        self._buf += entry
        self.write_pos += CQ_STORE_UNIT_SIZE
        self.entries += 1
        if len(self._buf) >= _FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        data = memoryview(self._buf)
        pos = self._buf_start
        while data:
            fstart = pos - pos % self.file_size
            n = min(len(data), fstart + self.file_size - pos)
            if fstart not in self._created:
                self._create(fstart)
                self._created.add(fstart)
            self._write(fstart, pos - fstart, data[:n])
            data = data[n:]
            pos += n
        data.release()
        self._buf = bytearray()
        self._buf_start = pos

    # --- output (overridden by the dry-run comparison) ---------------------------------------------
    def _create(self, fstart: int) -> None:
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, "%020d" % fstart), "wb") as f:
            f.truncate(self.file_size)

    def _write(self, fstart: int, pos: int, data) -> None:
        with open(os.path.join(self.directory, "%020d" % fstart), "r+b") as f:
            f.seek(pos)
            f.write(data)

    def close(self) -> None:
        self.flush()
        # The broker pre-creates the next file once the last one is full only on the next append; an exactly
        # full last file therefore has no successor. Nothing to do here.


class ConsumeQueueSet:
    """All queues of one output directory ``<root>/consumequeue``."""

    writer_class = ConsumeQueueWriter

    def __init__(self, root: str, file_size: int):
        self.root = root
        self.file_size = round_cq_file_size(file_size)
        self.queues: dict[tuple[str, int], ConsumeQueueWriter] = {}

    def queue(self, topic: str, queue_id: int) -> ConsumeQueueWriter:
        key = (topic, queue_id)
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = self.writer_class(os.path.join(self.root, topic, str(queue_id)), self.file_size)
        return q

    def close(self) -> None:
        for q in self.queues.values():
            q.close()
