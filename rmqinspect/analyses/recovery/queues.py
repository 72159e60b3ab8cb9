"""Consume queues while the broker recovers: ConsumeQueue.recover, truncateDirtyLogicFiles and dispatch,
modelled in memory over the store's read-only maps (FORMATS.md §7)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...formats.constants import DEFAULT_CQ_FILE_SIZE
from ...formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE, mapped_cq_file_size
from ...store.consumequeue import ConsumeQueue, first_invalid_entry
from ...store.version import BrokerVersion
from .queueset import QueueSet


@dataclass
class QueueRecovery:
    """One consume queue through ConsumeQueue.recover, truncateDirtyLogicFiles and re-dispatch."""

    topic: str
    queue_id: int
    file_size: int
    files: list[str]
    recover_start_file: str | None = None
    max_offset_on_disk: int = 0  # logical end found by ConsumeQueue.recover
    max_physic_offset: int = -1  # maxPhysicOffset after ConsumeQueue.recover
    files_deleted: list[str] = field(default_factory=list)
    truncated_file: str | None = None
    truncated_position: int | None = None
    entries_cut: int = 0  # entries removed by truncateDirtyLogicFiles
    cut_offsets: list[int] = field(default_factory=list, repr=False)  # physical offsets of cut entries (<= 10000)
    max_offset_after_truncate: int = 0
    redispatched: int = 0  # entries appended by the recovery's re-dispatch
    max_offset: int = 0  # after load()
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    def to_dict(self) -> dict:
        return {"queue": self.key, "files": len(self.files), "recover_start_file": self.recover_start_file,
                "max_offset_on_disk": self.max_offset_on_disk, "max_physic_offset": self.max_physic_offset,
                "files_deleted": self.files_deleted, "truncated_file": self.truncated_file,
                "truncated_position": self.truncated_position, "entries_cut": self.entries_cut,
                "redispatched": self.redispatched, "max_offset": self.max_offset, "notes": self.notes}


class ConsumeQueueModel:
    """One file ConsumeQueue (its MappedFileQueue) as the broker holds it in memory while recovery runs.

    ``recover`` is ConsumeQueue.recover, ``truncate_dirty`` truncateDirtyLogicFiles(T), ``dispatch`` /
    ``dispatch_many`` putMessagePositionInfo. The store's files are read through read-only maps; an entry the
    model writes goes into a private copy of its file (copy-on-write), never into the store.

    State, per file keyed by its start offset: ``arrays`` (the entries, CQ_DTYPE), ``names``, ``wrote`` (the
    byte write position); ``starts`` lists the files still in the queue, oldest first; ``max_phys`` is the
    queue's maxPhysicOffset; ``rec`` collects what happened for the report.
    """

    def __init__(self, cq: ConsumeQueue, version: BrokerVersion, file_size: int):
        self.cq = cq
        self.version = version
        unit = CQ_STORE_UNIT_SIZE
        size = mapped_cq_file_size(file_size)  # a damaged file's length (7 bytes, 0) is no mapped size
        odd = size != file_size
        file_size = self.size = size
        self.arrays = {f.start: cq.file_entries(f) for f in cq.files}
        self.names = {f.start: f.name for f in cq.files}
        self.starts = sorted(self.arrays)
        self.wrote: dict[int, int] = {s: 0 for s in self.starts}  # byte write position per file
        self.max_phys = -1
        self.rec = QueueRecovery(cq.topic, cq.queue_id, file_size, [f.name for f in cq.files])
        if odd:
            self.rec.notes.append(f"file length {cq.file_size} is not a whole number of {unit}-byte entries; "
                                  f"modelled as mapped file size {file_size} (RocketMQ 4.9.8+ refuses to load it)")

    def _phys_end(self, off: int, size: int) -> int:
        return off if self.version.cq_max_phys_is_start else off + size

    def max_offset(self) -> int:
        if not self.starts:
            return 0
        last = self.starts[-1]
        return (last + self.wrote[last]) // CQ_STORE_UNIT_SIZE

    def files(self) -> dict[str, bytes]:
        """The queue's files as held now: file name -> bytes up to the write position."""
        return {self.names[s]: self.arrays[s][: self.wrote[s] // CQ_STORE_UNIT_SIZE].tobytes() for s in self.starts}

    def recover(self) -> None:
        """ConsumeQueue.recover: walk from the third-last file; files beyond the logical end are deleted."""
        if not self.starts:
            return
        i = max(0, len(self.starts) - 3)
        self.rec.recover_start_file = self.names[self.starts[i]]
        unit = CQ_STORE_UNIT_SIZE
        while True:
            start = self.starts[i]
            arr = self.arrays[start]
            nunits = self.size // unit
            sub = arr[:nunits]
            n = first_invalid_entry(sub)
            if n:
                self.max_phys = self._phys_end(int(sub["physical_offset"][n - 1]), int(sub["size"][n - 1]))
            valid = n * unit
            if valid == self.size and i + 1 < len(self.starts):
                i += 1
                continue
            end = start + valid
            break
        # MappedFileQueue.truncateDirtyFiles(end)
        for s in list(self.starts):
            if s + self.size > end:
                if end >= s:
                    self.wrote[s] = end - s
                else:
                    self.starts.remove(s)
                    self.rec.files_deleted.append(self.names[s])
            else:
                self.wrote[s] = self.size
        self.rec.max_offset_on_disk = self.max_offset()
        self.rec.max_physic_offset = self.max_phys

    def truncate_dirty(self, t: int) -> None:
        """ConsumeQueue.truncateDirtyLogicFiles(T): entry 0 of the last file decides deletion (without a
        validity test); later entries stop at the first invalid one or the first starting at/after T."""
        before = self.max_offset()
        before_end = {s: self.wrote[s] for s in self.starts}
        unit = CQ_STORE_UNIT_SIZE
        while self.starts:
            last = self.starts[-1]
            arr = self.arrays[last]
            n = min(len(arr), self.size // unit)
            offs = arr["physical_offset"][:n]
            sizes = arr["size"][:n]
            if n == 0 or int(offs[0]) >= t:
                self.starts.remove(last)
                self.rec.files_deleted.append(self.names[last])
                continue
            self.max_phys = self._phys_end(int(offs[0]), int(sizes[0]))
            k = 1 + first_invalid_entry(arr[1:n], before=t)  # entries kept
            if k > 1:
                self.max_phys = self._phys_end(int(offs[k - 1]), int(sizes[k - 1]))
            self.wrote[last] = k * unit
            self.rec.truncated_file = self.names[last]
            self.rec.truncated_position = k * unit
            if int(offs[0]) < 0 or int(sizes[0]) <= 0:
                self.rec.notes.append(f"entry 0 of {self.names[last]} is not a valid entry but is kept "
                                      "(truncateDirtyLogicFiles does not test it)")
            break
        self.rec.entries_cut = max(0, before - self.max_offset())
        for st, end in before_end.items():
            lo = self.wrote.get(st, 0) if st in self.starts else 0
            if end > lo and len(self.rec.cut_offsets) < 10000:
                arr = self.arrays[st][lo // unit:end // unit]
                self.rec.cut_offsets.extend(arr["physical_offset"][:10000].tolist())
        self.rec.max_offset_after_truncate = self.max_offset()

    def _writable(self, fstart: int) -> np.ndarray:
        arr = self.arrays.get(fstart)
        n = self.size // CQ_STORE_UNIT_SIZE
        if arr is None or len(arr) < n:
            new = np.zeros(n, dtype=CQ_DTYPE)
            if arr is not None:
                new[:len(arr)] = arr
            self.arrays[fstart] = arr = new
        elif not arr.flags.writeable:
            self.arrays[fstart] = arr = arr.copy()  # copy-on-write: the store's map stays read-only
        return arr

    def dispatch(self, phys: int, size: int, cq_offset: int, tags_code: int = 0) -> bool:
        """ConsumeQueue.putMessagePositionInfo (re-dispatch during recovery, ReputMessageService after
        start). The entry goes into an in-memory copy of the file. Returns whether an entry was written."""
        if phys + size <= self.max_phys:
            return False  # "build consume queue repeatedly"
        unit = CQ_STORE_UNIT_SIZE
        expect = cq_offset * unit
        if not self.starts:
            # getLastMappedFile creates the file holding the expected position; fillPreBlank before it
            fstart = expect - expect % self.size
            self.starts.append(fstart)
            self.names[fstart] = f"{fstart:020d}"
            self.wrote[fstart] = expect - fstart
            arr = self._writable(fstart)
            k = (expect - fstart) // unit
            arr["physical_offset"][:k] = 0
            arr["size"][:k] = PRE_BLANK_SIZE
            arr["tags_code"][:k] = 0
        last = self._roll_if_full()
        current = last + self.wrote[last]
        if cq_offset != 0:
            if expect < current:
                return False
            if expect != current and len(self.rec.notes) < 5:
                self.rec.notes.append(f"logic queue order maybe wrong: expected offset {cq_offset}, "
                                      f"queue is at {current // unit}; the entry is appended at {current // unit}")
        self.max_phys = phys + size
        arr = self._writable(last)
        arr[self.wrote[last] // unit] = (phys, size, tags_code)
        self.wrote[last] += unit
        return True

    def first_past(self, ends: np.ndarray) -> int:
        """Index of the first record (by its end physical offsets, increasing) that ``dispatch`` would not skip
        as "build consume queue repeatedly": the ones before it change nothing."""
        return int(np.searchsorted(ends, self.max_phys, side="right"))

    def dispatch_many(self, phys: np.ndarray, size: np.ndarray, cq_offset: np.ndarray, tags_code: np.ndarray) -> int:
        """``dispatch`` for many records of this queue, in order, with the same effect as calling it once per
        record. Runs where every entry is accepted and appended exactly at the queue's write position
        (end physical offset increasing, queue offsets consecutive from the current one) are written in bulk;
        any other record goes through ``dispatch``. Returns the number of entries written."""
        n = len(phys)
        unit = CQ_STORE_UNIT_SIZE
        if n == 0:
            return 0
        ends = phys + size
        if self.size % unit:
            return sum(self.dispatch(int(a), int(b), int(c), int(d)) for a, b, c, d in
                       zip(phys.tolist(), size.tolist(), cq_offset.tolist(), tags_code.tolist(), strict=True))
        # i -> first index after i where the run property breaks (ends not increasing or offsets not consecutive)
        breaks = np.flatnonzero((ends[1:] <= ends[:-1]) | (cq_offset[1:] != cq_offset[:-1] + 1)) + 1
        written = 0
        i = 0
        while i < n:
            if int(ends[i]) <= self.max_phys:
                # "build consume queue repeatedly": ``dispatch`` returns at once and changes nothing, so the whole
                # stretch up to the first record ending past maxPhysicOffset is skipped in one step (an abnormal
                # recovery re-dispatches every record the queues already hold: one Python call each cost ~1 s/GiB)
                past = np.flatnonzero(ends[i:] > self.max_phys)
                if not past.size:
                    break
                i += int(past[0])
                continue
            current = self.starts[-1] + self.wrote[self.starts[-1]] if self.starts else -1
            if (not self.starts or current % unit or int(cq_offset[i]) * unit != current
                    or int(ends[i]) <= self.max_phys):
                written += self.dispatch(int(phys[i]), int(size[i]), int(cq_offset[i]), int(tags_code[i]))
                i += 1
                continue
            k = np.searchsorted(breaks, i, side="right")
            j = int(breaks[k]) if k < len(breaks) else n
            pos = i
            while pos < j:
                last = self._roll_if_full()
                arr = self._writable(last)
                w = self.wrote[last] // unit
                take = min(j - pos, (self.size - self.wrote[last]) // unit)
                arr["physical_offset"][w:w + take] = phys[pos:pos + take]
                arr["size"][w:w + take] = size[pos:pos + take]
                arr["tags_code"][w:w + take] = tags_code[pos:pos + take]
                self.wrote[last] += take * unit
                pos += take
            self.max_phys = int(ends[j - 1])
            written += j - i
            i = j
        return written

    def _roll_if_full(self) -> int:
        """getLastMappedFile: a full last file makes the next one (same rule as ``dispatch``)."""
        last = self.starts[-1]
        if self.wrote[last] >= self.size:
            nxt = last + self.size
            self.starts.append(nxt)
            self.names[nxt] = f"{nxt:020d}"
            self.wrote[nxt] = 0
            # a new mapped file reads as zeros: truncate_dirty may look at it before anything is written
            self.arrays[nxt] = np.zeros(self.size // CQ_STORE_UNIT_SIZE, dtype=CQ_DTYPE)
            last = nxt
        return last


def default_cq_file_size(models: list) -> int:
    """mappedFileSizeConsumeQueue for a queue the recovery creates: the most common size among the existing
    file queues, else the broker default."""
    sizes = [m.size for m in models if isinstance(m, ConsumeQueueModel) and m.size > 1]
    return max(set(sizes), key=sizes.count) if sizes else DEFAULT_CQ_FILE_SIZE


# What becomes of an on-disk consume-queue entry once the broker has recovered the directory:
ENTRY_FATES = (
    "survives",  # the queue still holds this entry at this queue offset
    "replaced",  # the recovery's re-dispatch wrote another entry at this queue offset
    "beyond_truncation",  # truncateDirtyLogicFiles cut it: its record lies at or past the truncation offset T
    "dropped",  # gone for another reason (the queue's files were deleted, or the queue is not modelled)
)


def entry_fate(entry, after: dict, truncate_offset: int) -> str:
    """The fate (``ENTRY_FATES``) of one on-disk entry (queue offset, physical offset, size, tagsCode), given the
    queue after recovery as {queue offset: entry} and the truncation offset."""
    now = after.get(entry[0])
    if now is None:
        return "beyond_truncation" if entry[1] >= truncate_offset else "dropped"
    return "survives" if now == tuple(entry[:4]) else "replaced"


def entry_fates(on_disk, recovered, truncate_offset: int) -> list[str]:
    """``entry_fate`` of each on-disk entry, given the queue after recovery ``recovered`` (same tuples)."""
    after = {e[0]: tuple(e[:4]) for e in recovered}
    return [entry_fate(e, after, truncate_offset) for e in on_disk]


__all__ = ["ENTRY_FATES", "ConsumeQueueModel", "QueueRecovery", "QueueSet", "default_cq_file_size", "entry_fate",
           "entry_fates"]
