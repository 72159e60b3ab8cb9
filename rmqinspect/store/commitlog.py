"""CommitLog files: offset -> file mapping and the broker's walk across them (the reader).

``CommitLog`` owns the iterator every analysis is built on (``walk``, ``scan``, ``messages``) and its corruption
error (``CorruptDataError``, raised by ``messages``/``read_message``); what one file holds and how a slot is
checked and decoded is ``store.walk.records``' (FORMATS.md §1.10/§1.11). Callers choose the policy (stop, skip,
resync: ``store.walk.resync``).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CorruptDataError, OffsetOutOfStoreError, StoreNotFoundError
from .broker_conf import BrokerConf, Setting
from .layout import StoreLayout
from .mapped import MappedFile
from .walk.file import walk_file
from .walk.kinds import BLANK, DAMAGE_KINDS, END, FILE_DONE_KINDS, FILE_END, HALF, MESSAGE
from .walk.records import RECORDS_PER_RUN, Gap, Record, RecordRun, decode_slot, scan_buffer

if TYPE_CHECKING:
    from .message import Message  # decode_slot imports it on the first decode


@dataclass
class CommitLog:
    """The commitlog files of one store, ordered by start offset, with the inferred mapped file size."""

    files: list[MappedFile]
    file_size: int
    gaps: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, layout: StoreLayout, file_size: int | None = None) -> CommitLog:
        entries = layout.commitlog_file_paths()
        if not entries:
            raise StoreNotFoundError("no commitlog files", layout.commitlog_dirs[0] if layout.commitlog_dirs else
                                     layout.root)
        # DLedger mode: the member's data files, walked through their entries (MappedFile.dledger)
        dledger = layout.dledger is not None
        files = [MappedFile(p, start, dledger=dledger) for start, p in entries]
        notes = list(layout.notes)
        if file_size is None:
            file_size = infer_file_size(files, notes)
        gaps = []
        for a, b in zip(files, files[1:]):
            if a.start + file_size < b.start:
                gaps.append(Gap(a.start + file_size, b.start))
            elif a.start + file_size > b.start:
                notes.append(f"{a.name} and {b.name} overlap (file size {file_size})")
        for f in files:
            if f.start % file_size and not layout.single_file:
                notes.append(f"{f.name}: start offset is not a multiple of the file size {file_size}")
            if f.size != file_size and f is not files[-1]:
                notes.append(f"{f.name}: length {f.size} differs from the mapped file size {file_size}; "
                             "RocketMQ 4.9.8+/5.x refuses to load it")
        return cls(files, file_size, gaps, notes)

    # --- geometry ----------------------------------------------------------------------------------
    @property
    def dledger(self) -> bool:
        """Whether the files are DLedger data files (entries around the records)."""
        return bool(self.files) and self.files[0].dledger

    @property
    def min_offset(self) -> int:
        return self.files[0].start

    @property
    def end_offset(self) -> int:
        """End of the last file's bytes (not of its data)."""
        return self.files[-1].start + self.files[-1].size

    def locate(self, offset: int) -> tuple[MappedFile, int]:
        """Physical offset -> (file, position). Raises OffsetOutOfStoreError for gaps and outside."""
        import bisect

        starts = [f.start for f in self.files]
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            raise OffsetOutOfStoreError(
                f"offset {offset} is below the first commitlog file ({self.files[0].name}); "
                "its file was deleted or never existed")
        f = self.files[i]
        if offset >= f.start + f.size:
            raise OffsetOutOfStoreError(f"offset {offset} is not covered by any commitlog file"
                                        f" (after {f.name}, size {f.size})")
        return f, offset - f.start

    # --- scanning ----------------------------------------------------------------------------------
    def walk(self, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
             accept_v2: bool = True, stop_at_end: bool = True, follow_blank: bool = True,
             run_records: int = RECORDS_PER_RUN, python_runs: bool = True,
             crc_continue: bool = False) -> Iterator[RecordRun | Record | Gap]:
        """The broker's walk across the commitlog files: the one walk every analysis is built on.

        Starts at ``start`` (a record boundary; default the first file) and stops before ``end``
        (exclusive). Each file is walked by ``walk_file`` (same ``check_crc``/``accept_v2``/``run_records``/
        ``python_runs``/``crc_continue``). Yields, in offset order:

        - ``RecordRun``: well-formed records in bulk (``run.records``, ``RECORD_DTYPE``);
        - ``Record``: anything else the scan met (``record.kind``: damage, blank record, zero fill, end of a
          file without a blank record; MESSAGE only with ``python_runs=False`` and no compiled scanner);
        - ``Gap``: a range no file covers.

        Moves to the next file after a BLANK record (unless not ``follow_blank``: then the walk ends) and
        at FILE_END; at END/ILLEGAL/CRC the file is done and, with ``stop_at_end``, the whole walk (without
        it the walk goes on with the next file: summaries of damaged stores; the broker never does that).
        What to do about damage is the caller's policy. Walked pages are released every ``RELEASE_EVERY``
        bytes (``PageReleaser``).
        """
        files = self.files
        if start is None:
            start = self.min_offset
        idx = None
        for i, f in enumerate(files):
            if f.start <= start < f.start + max(f.size, 1) or start < f.start:
                idx = i
                break
        if idx is None:
            return
        f = files[idx]
        if start < f.start:
            yield Gap(start, f.start, "no commitlog file covers this range")
            start = f.start
        pos = start - f.start
        while True:
            stop_here = False
            base = f.start
            limit = f.size
            if end is not None and end - base < limit:
                limit = max(end - base, 0)
            if pos < limit:
                for ev in walk_file(f, pos, limit, check_crc=check_crc, accept_v2=accept_v2, run_records=run_records,
                                    python_runs=python_runs, crc_continue=crc_continue, release_pages=True):
                    if isinstance(ev, Record):
                        kind = ev.kind
                        if kind in FILE_DONE_KINDS:
                            if kind == FILE_END and limit < f.size:
                                return  # reached the caller's end offset
                            yield ev
                            if kind == BLANK:
                                if not follow_blank:
                                    return
                            elif kind != FILE_END:
                                stop_here = True
                            break
                    yield ev
            elif end is not None and base + pos >= end:
                return
            if stop_here and stop_at_end:
                return
            idx += 1
            if idx >= len(files):
                return
            nxt = files[idx]
            if end is not None and nxt.start >= end:
                return
            expected = f.start + self.file_size
            if nxt.start > expected:
                yield Gap(expected, nxt.start, "missing commitlog file(s)")
            f = nxt
            pos = 0

    def scan(self, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
             accept_v2: bool = True, stop_at_end: bool = True, follow_blank: bool = True) -> Iterator[Record | Gap]:
        """``walk`` one record at a time: a ``Record`` per record (MESSAGE ones too, headers unpacked on first
        use) and the ``Gap``s, for per-record consumers (same rules and arguments as ``walk``)."""
        for ev in self.walk(start, end, check_crc=check_crc, accept_v2=accept_v2, stop_at_end=stop_at_end,
                            follow_blank=follow_blank, python_runs=False):
            if isinstance(ev, RecordRun):
                f = ev.file
                base = f.start
                for p, total, bpos, _, c, *_ in ev.row_tuples():
                    yield Record(MESSAGE, base + p, total, f, p, None, bpos, None if c < 0 else c == 1, "")
            else:
                yield ev

    def messages(self, start: int | None = None, end: int | None = None, *, keep_going: bool = False,
                 accept_v2: bool = True, on_damage=None) -> Iterator[Message]:
        """Decoded messages (body CRC always computed, reported in ``crc_ok``). Damage raises
        CorruptDataError unless ``keep_going`` (then the damaged file's rest is skipped, a HALF record is
        decoded with its reason in ``problems``). ``on_damage`` (with ``keep_going``) is called with a
        CorruptDataError for every damaged record it skips (ILLEGAL/CRC) and with the ``Gap`` of every range no
        file covers."""
        for rec in self.scan(start, end, check_crc=False, stop_at_end=not keep_going, accept_v2=accept_v2):
            if isinstance(rec, Gap):
                if on_damage is not None:
                    on_damage(rec)
                continue
            kind = rec.kind
            # DLedger keeps an entry whose header is intact whatever its record holds, and the broker serves the
            # record as its decoder reads it: a torn one is shown so (crc_ok false), with what is wrong
            if kind == MESSAGE or (kind == HALF and (keep_going or rec.file.dledger)):
                f = rec.file
                msg = decode_slot(f.buffer, f.start, rec.position, rec.header, rec.body_pos, None, f.path)
                if f.dledger:
                    _attach_entry(msg, f, rec.position)
                if kind == HALF:
                    msg.problems.append(rec.reason)
                    if f.dledger:
                        msg.problems.append("DLedger keeps this entry (its header is intact) and the broker serves "
                                            "the record as decoded here")
                yield msg
            elif kind in DAMAGE_KINDS:
                err = CorruptDataError(rec.reason, rec.file.path, rec.offset, kind=kind)
                if not keep_going:
                    raise err
                if on_damage is not None:
                    on_damage(err)

    def read_message(self, offset: int, accept_v2: bool = True):
        """Decode the single record at ``offset``; raise a CorruptDataError naming file and offset.
        ``accept_v2=False`` reads like a 4.x broker, to which a V2 record is an illegal magic code."""
        f, pos = self.locate(offset)
        if f.dledger:
            _refuse_entry_header(f, pos)
        for kind, p, size, hdr, bpos, _crc_ok, reason in scan_buffer(f.buffer, pos, f.size, False, accept_v2):
            if kind in (MESSAGE, HALF):
                msg = decode_slot(f.buffer, f.start, p, hdr, bpos, None, f.path)
                if f.dledger:
                    _attach_entry(msg, f, p)
                if kind == HALF:
                    raise CorruptDataError(reason, f.path, offset, kind=HALF)
                return msg
            if kind == BLANK:
                raise CorruptDataError(f"blank end-of-file record (TOTALSIZE {size}), not a message", f.path,
                                       offset, kind=BLANK)
            if kind == END:
                raise CorruptDataError("zero-filled space, no record here", f.path, offset, kind=END)
            raise CorruptDataError(reason, f.path, offset, kind=kind)
        raise CorruptDataError("no record", f.path, offset)

    def close(self) -> None:
        for f in self.files:
            f.close()


def _attach_entry(msg: Message, f: MappedFile, position: int) -> None:
    """DLedger mode: the entry header 48 bytes before the record (index, term, pos ...) on the message; a
    record with no valid entry in front of it says so in ``problems``."""
    from .walk.entries import entry_for_message  # numpy: for DLedger stores only

    try:
        msg.dledger = entry_for_message(f.buffer, f.start, position, f).header_dict()
    except CorruptDataError as e:
        msg.problems.append(f"no DLedger entry frames this record: {e}")


def _refuse_entry_header(f: MappedFile, position: int) -> None:
    """DLedger mode: an offset at an entry header (not at the record 48 bytes later) is named as such."""
    from .walk.entries import entry_header_problem, read_entry  # numpy: for DLedger stores only

    if position + 48 <= f.size:
        e = read_entry(f.buffer, position, f)
        if not entry_header_problem(e, f.size - position):
            raise CorruptDataError(f"DLedger entry {e.index} (term {e.term}) starts here; its message is at "
                                   f"physical offset {e.physical_offset}", f.path, f.start + position)


COMMITLOG_SIZE_SETTLE = "mappedFileSizeCommitLog in --broker-config"


def prove_file_size(files: list[MappedFile]) -> Setting:
    """mappedFileSizeCommitLog as the files prove it (FORMATS.md §1.1): every file is created at that size
    and named by its first physical offset, so consecutive names step by it. One value shared by the name
    steps and the lengths is proven ("inferred"); lengths that disagree with the steps are "ambiguous"."""
    sizes = collections.Counter(f.size for f in files if f.size > 0)
    steps = collections.Counter(b.start - a.start for a, b in zip(files, files[1:]))
    if not sizes:
        return Setting(1, "ambiguous", f"every commitlog file is empty; {COMMITLOG_SIZE_SETTLE} settles it")
    size, _ = sizes.most_common(1)[0]
    if not steps:
        return Setting(size, "inferred", f"the one commitlog file is {size} bytes (no second name to confirm it)",
                       (size,))
    step, _ = steps.most_common(1)[0]
    if set(sizes) == {step} and len(steps) == 1:
        return Setting(step, "inferred", f"every commitlog file is {step} bytes and names step by it", (step,))
    if len(steps) == 1 and all(f.size <= step for f in files):
        # files shorter than the step (a copy cut short): the names are the broker's own record of the size
        return Setting(step, "inferred", f"names step by {step}; lengths {dict(sizes)}", (step,))
    cands = tuple(sorted(set(sizes) | set(steps)))
    return Setting(size, "ambiguous", f"commitlog lengths {dict(sizes)} and name steps {dict(steps)} disagree; "
                   f"using {size}; {COMMITLOG_SIZE_SETTLE} settles it", cands)


def infer_file_size(files: list[MappedFile], notes: list[str]) -> int:
    """``prove_file_size``'s value; an ambiguous answer is said in ``notes`` with the key that settles it."""
    if len(files) == 1:
        return files[0].size or 1
    got = prove_file_size(files)
    if got.source == "ambiguous":
        notes.append(f"file size ambiguous: {got.detail}")
    return got.value


def open_commitlog(path: str | os.PathLike, file_size: int | None = None, conf: BrokerConf | None = None
                   ) -> CommitLog:
    return CommitLog.open(StoreLayout.open(path, conf), file_size)
