"""ConsumeQueue output: what ``ConsumeQueue.putMessagePositionInfo`` writes (FORMATS.md §4.1).

One ``ConsumeQueueWriter`` per ``<topic>/<queueId>``; ``ConsumeQueueSet`` owns all of them for one output
directory. Entries are buffered per queue and written in large pieces, so memory is bounded by the number
of queues, never by the store size. Files are created full-size and zero-filled like the broker's
pre-allocated mapped files (the broker's trailing bytes after the last entry are zeros too).
"""

from __future__ import annotations

import os

import numpy as np

from ..formats.consumequeue import CQ_DTYPE, CQ_ENTRY, CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE, round_cq_file_size

_PRE_BLANK = CQ_ENTRY.pack(0, PRE_BLANK_SIZE, 0)
_FLUSH_AT = 1 << 16


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
        self._buf += CQ_ENTRY.pack(phys, size, tags_code)
        self.write_pos += CQ_STORE_UNIT_SIZE
        self.entries += 1
        if len(self._buf) >= _FLUSH_AT:
            self.flush()

    def put_many(self, cq_offsets, phys, sizes, tags_codes) -> None:
        """``put`` for each entry in order (int64 arrays). The common case - dense queue offsets continuing
        at the write position, physical offsets past everything built - is appended in one piece; anything
        else (repeats, misplaced or first entries) goes through ``put`` entry by entry."""
        m = len(cq_offsets)
        i = 0
        while i < m and self.write_pos < 0:
            self.put(int(cq_offsets[i]), int(phys[i]), int(sizes[i]), int(tags_codes[i]))
            i += 1
        if i >= m:
            return
        qo = cq_offsets[i:]
        ends = phys[i:] + sizes[i:]
        k = len(qo)
        if (int(qo[0]) * CQ_STORE_UNIT_SIZE == self.write_pos and int(ends[0]) > self.max_physic_offset
                and (k == 1 or (bool(np.all(np.diff(qo) == 1)) and bool(np.all(np.diff(ends) > 0))))):
            rec = np.empty(k, dtype=CQ_DTYPE)
            rec["physical_offset"] = phys[i:]
            rec["size"] = sizes[i:]
            rec["tags_code"] = tags_codes[i:]
            self._buf += rec.tobytes()
            self.max_physic_offset = int(ends[-1])
            self.write_pos += k * CQ_STORE_UNIT_SIZE
            self.entries += k
            if len(self._buf) >= _FLUSH_AT:
                self.flush()
            return
        for a, b, c, d in zip(qo.tolist(), phys[i:].tolist(), sizes[i:].tolist(), tags_codes[i:].tolist()):
            self.put(a, b, c, d)

    def put_packed(self, cq_offsets: np.ndarray, packed, dense: bool = False) -> None:
        """``put`` for each 20-byte entry of ``packed`` (``CQ_DTYPE``, any bytes-like object) at ``cq_offsets``, in
        order. When the entries simply continue the queue (consecutive queue offsets starting at the write position,
        the first one past maxPhysicOffset - always so for a sequential walk past the queue's first entry) the bytes
        are appended in one go, with exactly the state changes ``put`` makes entry by entry. ``dense``: the caller
        has checked that the queue offsets are consecutive and the entries' ends (offset + size) increase (a worker
        of the parallel rebuild does, ``analyses.rebuild.RecordingCQ``), so only the first entry is checked
        against the queue here."""
        n = len(cq_offsets)
        if n == 0:
            return
        ent = np.frombuffer(packed, dtype=CQ_DTYPE)
        i = 0
        if self.write_pos < 0:
            self.put(int(cq_offsets[0]), int(ent["physical_offset"][0]), int(ent["size"][0]),
                     int(ent["tags_code"][0]))
            i = 1
        if i < n:
            q0 = int(cq_offsets[i])
            if dense:
                first, last = ent[i], ent[n - 1]
                first_end = int(first["physical_offset"]) + int(first["size"])
                last_end = int(last["physical_offset"]) + int(last["size"])
                fits = q0 * CQ_STORE_UNIT_SIZE == self.write_pos and first_end > self.max_physic_offset
            else:
                end_phys = ent["physical_offset"][i:].astype(np.int64) + ent["size"][i:].astype(np.int64)
                last_end = int(end_phys[-1])
                fits = (q0 * CQ_STORE_UNIT_SIZE == self.write_pos and int(end_phys[0]) > self.max_physic_offset
                        and bool(np.all(np.diff(cq_offsets[i:]) == 1)) and bool(np.all(np.diff(end_phys) > 0)))
            if fits:
                m = n - i
                self._buf += memoryview(packed).cast("B")[i * CQ_STORE_UNIT_SIZE:]
                self.write_pos += m * CQ_STORE_UNIT_SIZE
                self.entries += m
                self.max_physic_offset = last_end
                if len(self._buf) >= _FLUSH_AT:
                    self.flush()
                return
        for j in range(i, n):
            self.put(int(cq_offsets[j]), int(ent["physical_offset"][j]), int(ent["size"][j]),
                     int(ent["tags_code"][j]))

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
        # an exactly full last file has no successor: the broker creates the next one only on the next append
        self.flush()


class ConsumeQueueSet:
    """All queues of one output directory ``<root>/consumequeue``."""

    writer_class = ConsumeQueueWriter
    # the dispatcher may hand a queue its entries in bulk (``put_many``): the files' bytes do not depend on
    # the order in which different queues are written
    bulk_puts = True

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
