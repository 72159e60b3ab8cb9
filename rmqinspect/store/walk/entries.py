"""The walk of a DLedger data file (``enableDLegerCommitLog=true``): the entries around the records.

A DLedger data file holds entries (``formats.dledger``): a 48-byte header, then one RocketMQ message record.
Positions in the files are RocketMQ physical offsets (the record of the entry at ``pos`` is at ``pos + 48``, and
its PHYSICALOFFSET field says so), so every offset-based read (``CommitLog.locate``/``read_message``, consume
queues, index files, msgIds) works unchanged. Only the walk differs: ``walk_entries`` is what ``walk_file``
runs for a DLedger data file (``MappedFile.dledger``), yielding the same ``RecordRun``/``Record`` events for the
records inside the entries. ``entry_events`` is DLedger's own walk (``EntryKind``), for what only DLedger has
(index and term; ``store.dledger``, ``analyses.recovery.dledger``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...errors import CorruptDataError, unpack_at
from ...formats.commitlog import PHYSICAL_OFFSET_POSITION
from ...formats.constants import MESSAGE_MAGICS, RECORD_SIZE_CAP
from ...formats.dledger import (
    BLANK_MAGIC_CODE,
    BODY_OFFSET,
    CURRENT_MAGIC,
    ENTRY_HEADER,
    HEADER_SIZE,
    MAGIC_1,
)
from ..mapped import MappedFile
from ..scanner import compiled
from .kinds import BLANK, CRC_MISMATCH, END, FILE_END, HALF, ILLEGAL, MESSAGE, EntryKind
from .records import RECORD_DTYPE, PageReleaser, Record, RecordRun, python_row, scan_buffer

_PREFIX = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class Entry:
    """One DLedger entry header as the data file holds it, with where it was read."""

    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_size: int
    file: MappedFile
    position: int  # in ``file``

    @property
    def offset(self) -> int:
        """Absolute position of the entry (file start + position): what ``pos`` must say."""
        return self.file.start + self.position

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def physical_offset(self) -> int:
        """RocketMQ physical offset of the record inside (entry position + 48)."""
        return self.offset + BODY_OFFSET

    def header_dict(self) -> dict:
        return {"index": self.index, "term": self.term, "pos": self.pos, "size": self.size, "magic": self.magic,
                "channel": self.channel, "chain_crc": self.chain_crc, "body_crc": self.body_crc,
                "body_size": self.body_size}


def read_entry(buf, position: int, file: MappedFile) -> Entry:
    """The entry header at ``position`` of ``file`` (``buf`` is its buffer); its fields unchecked
    (``entry_header_problem``), a header cut by the end of the buffer a CorruptDataError naming the file."""
    magic, size, index, term, pos, channel, chain_crc, body_crc, body_size = unpack_at(
        ENTRY_HEADER, buf, position, file.path, "DLedger entry header", base=file.start)
    return Entry(magic, size, index, term, pos, channel, chain_crc, body_crc, body_size, file, position)


class EntryEvent(NamedTuple):
    """What the entry walk met at an entry boundary: an ``entry`` (header checks passed), a ``blank`` record,
    the ``end`` of written data (size 0), the file's end, or a ``bad`` header (``reason``)."""

    kind: EntryKind
    offset: int
    size: int
    file: MappedFile
    position: int
    entry: Entry | None = None
    reason: str = ""


def entry_header_problem(e: Entry, rem: int) -> str:
    """Why DLedger's recovery would reject this header by itself (magic, size, pos, bodySize), or ""."""
    if not (MAGIC_1 <= e.magic <= CURRENT_MAGIC):
        return f"DLedger entry magic {e.magic} (expected {MAGIC_1})"
    if e.size <= HEADER_SIZE:
        return f"DLedger entry size {e.size} should be > {HEADER_SIZE}"
    if e.pos != e.offset:
        return f"DLedger entry pos {e.pos} != its position {e.offset}"
    if e.body_size + BODY_OFFSET != e.size:
        return f"DLedger entry size {e.size} != bodySize {e.body_size} + {BODY_OFFSET}"
    if e.size > rem:
        return f"DLedger entry size {e.size} runs past the end of the file ({rem} bytes left)"
    return ""


def entry_events(file: MappedFile, start: int = 0, limit: int | None = None) -> Iterator[EntryEvent]:
    """DLedger's own walk over one data file (``DLedgerMmapFileStore.recover``'s per-entry header checks, not
    the cross-entry index/term ones): entries one after another from ``start`` (an entry boundary) until a blank
    record, size 0, a header that fails, or ``limit``."""
    buf = file.buffer
    if limit is None:
        limit = file.size
    base = file.start
    p = start
    while True:
        rem = limit - p
        if rem <= 0:
            yield EntryEvent(EntryKind.FILE_END, base + p, 0, file, p, reason="end of file without a blank record")
            return
        if rem < 8:
            if not any(bytes(buf[p:limit])):
                yield EntryEvent(EntryKind.END, base + p, rem, file, p, reason="zero-filled space")
            else:
                yield EntryEvent(EntryKind.BAD, base + p, rem, file, p,
                                 reason=f"{rem} trailing bytes, too short for an entry header")
            return
        magic, size = _PREFIX.unpack_from(buf, p)
        if magic == BLANK_MAGIC_CODE:
            yield EntryEvent(EntryKind.BLANK, base + p, size, file, p)
            return
        if size == 0:
            yield EntryEvent(EntryKind.END, base + p, rem, file, p,
                             reason="zero-filled space" if magic == 0 else f"entry size 0 (magic {magic})")
            return
        if rem < BODY_OFFSET:
            yield EntryEvent(EntryKind.BAD, base + p, rem, file, p,
                             reason="DLedger entry header cut off by the file end")
            return
        e = read_entry(buf, p, file)
        why = entry_header_problem(e, rem)
        if why:
            yield EntryEvent(EntryKind.BAD, base + p, rem, file, p, e, why)
            return
        yield EntryEvent(EntryKind.ENTRY, base + p, e.size, file, p, e)
        p += e.size


def _entry_start(buf, base: int, start: int) -> int:
    """``start`` when it is an entry boundary; the entry's position when ``start`` is the record inside an entry
    (callers pass RocketMQ physical offsets of messages, which are entry position + 48)."""
    p = start - BODY_OFFSET
    if p >= 0 and len(buf) >= start:
        magic, size = _PREFIX.unpack_from(buf, p)
        if magic == MAGIC_1 and size > HEADER_SIZE:
            if ENTRY_HEADER.unpack_from(buf, p)[4] == base + p:
                return p
    return start


def _record_without_entry(buf, base: int, start: int, limit: int) -> bool:
    """A RocketMQ record at ``start`` whose PHYSICALOFFSET says it is there (DLedgerCommitLog writes pos + 48),
    with no valid entry header 48 bytes before it."""
    if start < BODY_OFFSET or start + PHYSICAL_OFFSET_POSITION + 8 > limit:
        return False
    magic = _PREFIX.unpack_from(buf, start)[1]
    if magic not in MESSAGE_MAGICS:
        return False
    return int.from_bytes(buf[start + PHYSICAL_OFFSET_POSITION:start + PHYSICAL_OFFSET_POSITION + 8], "big",
                          signed=True) == base + start


def walk_entries(file: MappedFile, start: int = 0, limit: int | None = None, *, check_crc: bool = True,
                 accept_v2: bool = True, run_records: int = 8192, python_runs: bool = True, crc_continue: bool = False,
                 release_pages: bool = False) -> Iterator[RecordRun | Record]:
    """``walk_file`` for a DLedger data file: the records inside the entries, as ``RecordRun``s (positions are
    the records', entry position + 48) and ``Record``s (same kinds and rules as ``walk_file``).

    A DLedger blank record (magic -1) comes as BLANK at the entry position with its declared size, size 0 as
    END, a header DLedger's recovery rejects as ILLEGAL (reason names the rule). Inside a good entry the record
    gets RocketMQ's check, bounded by the entry: a record whose lengths disagree (or whose TOTALSIZE is not the
    entry's bodySize) is HALF and the walk goes on at the next entry, as the entry header still frames it."""
    # A hot loop, long on purpose: every entry the compiled scanner declines passes here one at a time, and each
    # of the cases below yields in the middle of the loop (a helper per case would be a generator per entry).
    buf = file.buffer
    if limit is None:
        limit = file.size
    base = file.start
    ext = compiled()
    rel = PageReleaser(buf, start, enabled=release_pages)
    pending: list = []  # rows (RECORD_DTYPE bytes) not handed out yet

    def flush():
        if not pending:
            return None
        run = RecordRun(file, np.frombuffer(b"".join(pending), dtype=RECORD_DTYPE))
        pending.clear()
        return run

    pos = _entry_start(buf, base, start)
    if pos == start and _record_without_entry(buf, base, start, limit):
        # a resynchronising caller (salvage) landed on a record whose entry header is damaged: the record
        # itself (its PHYSICALOFFSET proves where it is), then the entry boundary after it
        one = next(scan_buffer(buf, start, limit, check_crc, accept_v2))
        if one[0] == MESSAGE:
            yield RecordRun(file, np.array([tuple(python_row(buf, one))], dtype=RECORD_DTYPE))
            pos = start + one[2]
    while True:
        if ext is not None:
            # the compiled scanner takes every run of well-formed entries; Python decides the rest, one at a time
            raw, n, stop = ext.scan_entries(buf, pos, limit, base, check_crc, accept_v2, run_records, RECORD_SIZE_CAP)
            if n:
                run = flush()
                if run is not None:
                    yield run
                yield RecordRun(file, np.frombuffer(raw, dtype=RECORD_DTYPE))
                rel.advance(stop)
                pos = stop
                if n == run_records:
                    continue
        ev = next(entry_events(file, pos, limit))
        kind = ev.kind
        if kind != EntryKind.ENTRY:
            run = flush()
            if run is not None:
                yield run
            if kind == EntryKind.BLANK:
                yield Record(BLANK, ev.offset, ev.size, file, ev.position)
            elif kind == EntryKind.END:
                yield Record(END, ev.offset, ev.size, file, ev.position, reason=ev.reason)
            elif kind == EntryKind.FILE_END:
                yield Record(FILE_END, ev.offset, 0, file, ev.position, reason=ev.reason)
            else:
                yield Record(ILLEGAL, ev.offset, ev.size, file, ev.position, reason=ev.reason)
            rel.finish(file.size)
            return
        m = ev.position + BODY_OFFSET
        mend = pos = ev.position + ev.size
        one = next(scan_buffer(buf, m, mend, False if crc_continue else check_crc, accept_v2))
        rkind, p, size, hdr, bpos, crc_ok, reason = one
        if rkind == MESSAGE and crc_continue and check_crc:
            # the structure passed unchecked: now the CRC alone (a CRC record, and the walk goes on)
            again = next(scan_buffer(buf, m, mend, True, accept_v2))
            if again[0] == CRC_MISMATCH:
                rkind, crc_ok, reason = CRC_MISMATCH, False, again[6]
            else:
                crc_ok = again[5]
                one = again
        if rkind == MESSAGE and p + size == mend:
            if python_runs or ext is not None:
                pending.append(np.array([tuple(python_row(buf, one))], dtype=RECORD_DTYPE).tobytes())
                if len(pending) >= run_records:
                    yield flush()  # type: ignore[misc]
                    rel.advance(mend)
            else:
                yield Record(MESSAGE, base + p, size, file, p, hdr, bpos, crc_ok, "")
            continue
        run = flush()
        if run is not None:
            yield run
        if rkind == MESSAGE or rkind == HALF:
            why = reason or f"record TOTALSIZE {size} != the entry's bodySize {ev.size - BODY_OFFSET}"
            yield Record(HALF, base + m, ev.size - BODY_OFFSET, file, m, hdr, bpos, crc_ok, why)
            continue
        if rkind == CRC_MISMATCH:
            yield Record(CRC_MISMATCH, base + m, size, file, m, hdr, bpos, False, reason)
            if crc_continue:
                continue
            rel.finish(file.size)
            return
        why = reason if rkind != FILE_END else "empty entry body"
        yield Record(ILLEGAL, base + m, ev.size - BODY_OFFSET, file, m, hdr, bpos, crc_ok,
                     f"record inside DLedger entry {ev.entry.index if ev.entry else '?'}: {why}")
        rel.finish(file.size)
        return


def entry_for_message(buf, base: int, position: int, file: MappedFile) -> Entry:
    """The entry header in front of the record at ``position`` of a DLedger data file; CorruptDataError when
    there is none (the offset is not the record of an entry)."""
    p = position - BODY_OFFSET
    if p < 0:
        raise CorruptDataError("no DLedger entry header before this record", file.path, base + position)
    e = read_entry(buf, p, file)
    why = entry_header_problem(e, file.size - p)
    if why:
        raise CorruptDataError(why, file.path, base + p)
    return e
