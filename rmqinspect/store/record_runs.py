"""``CommitLog.scan`` in bulk: the same walk over the commit-log files (``CommitLog.walk``: start inside a
file, next file at a blank record or at a file's end, missing files skipped, stop at zero fill / illegal /
CRC mismatch, stop at the caller's end offset), but runs of well-formed records come out as numpy rows
(``scan_records_array``, FAST_FIELDS order) instead of one ``Slot`` per record.

For vectorised consumers that need the broker's walk across files (e.g. the ReputMessageService model in
``analyses.recover``); tests/test_recover_bulk.py proves the records equal ``CommitLog.scan``'s MESSAGE slots.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .commitlog import MESSAGE, CommitLog, MappedFile, _tuple_to_row

# Records per run: bulk consumers amortise their per-run numpy overhead over large runs.
RUN_BATCH = 65536


def scan_record_runs(cl: CommitLog, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
                     accept_v2: bool = True, stop_at_end: bool = True
                     ) -> Iterator[tuple[MappedFile, np.ndarray | None, tuple | None]]:
    """``(file, rows, None)`` for runs of MESSAGE records (positions relative to ``file``) and
    ``(file, None, slot_tuple)`` for every other record kind, in the order ``CommitLog.scan(start, end,
    check_crc=..., accept_v2=..., stop_at_end=...)`` yields them (GAP slots are not reported: a missing file
    is simply skipped, as that scan continues after it)."""
    for f, rows, one, gap in cl.walk(start, end, check_crc=check_crc, accept_v2=accept_v2, stop_at_end=stop_at_end,
                                     batch=RUN_BATCH, python_rows=True):
        if rows is not None:
            yield f, rows, None
        elif one is not None:
            if one[0] == MESSAGE:
                yield f, _tuple_to_row(f.buffer, one), None
            else:
                yield f, None, one


__all__ = ["scan_record_runs"]
