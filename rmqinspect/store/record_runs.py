"""``CommitLog.scan`` in bulk: the same walk over the commit-log files (start inside a file, next file at a
blank record or at a file's end, missing files skipped, stop at zero fill / illegal / CRC mismatch, stop at
the caller's end offset), but runs of well-formed records come out as numpy rows
(``scan_records_array``, FAST_FIELDS order) instead of one ``Slot`` per record.

For vectorised consumers that need the broker's walk across files (e.g. the ReputMessageService model in
``analyses.recover``); tests/test_recover_bulk.py proves the records equal ``CommitLog.scan``'s MESSAGE slots.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .commitlog import (BLANK, CRC_MISMATCH, END, FILE_END, ILLEGAL, MESSAGE, CommitLog, MappedFile, _tuple_to_row,
                        scan_records_array)


def scan_record_runs(cl: CommitLog, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
                     accept_v2: bool = True, stop_at_end: bool = True
                     ) -> Iterator[tuple[MappedFile, np.ndarray | None, tuple | None]]:
    """``(file, rows, None)`` for runs of MESSAGE records (positions relative to ``file``) and
    ``(file, None, slot_tuple)`` for every other record kind, in the order ``CommitLog.scan(start, end,
    check_crc=..., accept_v2=..., stop_at_end=...)`` yields them (GAP slots are not reported: a missing file
    is simply skipped, as that scan continues after it)."""
    if start is None:
        start = cl.min_offset
    files = cl.files
    idx = None
    for i, f in enumerate(files):
        if f.start <= start < f.start + max(f.size, 1) or start < f.start:
            idx = i
            break
    if idx is None:
        return
    f = files[idx]
    if start < f.start:
        start = f.start
    pos = start - f.start
    while True:
        stop_here = False
        base = f.start
        limit = f.size
        if end is not None and end - base < limit:
            limit = max(end - base, 0)
        if pos < limit:
            buf = f.buffer
            for rows, one in scan_records_array(buf, pos, limit, check_crc, accept_v2):
                if rows is not None:
                    yield f, rows, None
                    continue
                kind = one[0]
                if kind == MESSAGE:
                    yield f, _tuple_to_row(buf, one), None
                    continue
                if kind == FILE_END and limit < f.size:
                    return  # reached the caller's end offset
                yield f, None, one
                if kind in (END, ILLEGAL, CRC_MISMATCH):
                    stop_here = True
                if kind in (END, ILLEGAL, CRC_MISMATCH, BLANK, FILE_END):
                    break
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
        f = nxt
        pos = 0


__all__ = ["scan_record_runs"]
