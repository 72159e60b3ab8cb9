"""The two commit-log walks recovery makes, over the store's one scanner (``store.commitlog``): the recovery
scan, file by file from position 0 with the broker's checks, and the ReputMessageService's dispatch after
start(), over a physical range without CRC checks. Both hand record runs over as row arrays."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...store.commitlog import MESSAGE, CommitLog, _tuple_to_row, scan_records_array
from ...store.mapped import MappedFile
from ...store.record_runs import scan_record_runs


def file_runs(f: MappedFile, check_crc: bool, accept_v2: bool) -> Iterator[tuple[np.ndarray | None, tuple | None]]:
    """``(rows, None)`` for runs of records that pass the check, ``(None, scan_buffer tuple)`` for the first
    thing that does not (blank, end, damage), over the whole file."""
    buf = f.buffer
    for rows, one in scan_records_array(buf, 0, f.size, check_crc, accept_v2):
        if rows is None and one[0] == MESSAGE:
            yield _tuple_to_row(buf, one), None
        else:
            yield rows, one


def commitlog_runs(cl: CommitLog, start: int, end: int, accept_v2: bool) -> Iterator[tuple[MappedFile, np.ndarray]]:
    """``(file, rows)`` for the records in [start, end) the dispatcher reads (checkCRC=false), until the data
    ends or a record fails."""
    for f, rows, _ in scan_record_runs(cl, start, end, check_crc=False, accept_v2=accept_v2, stop_at_end=True):
        if rows is not None:
            yield f, rows
