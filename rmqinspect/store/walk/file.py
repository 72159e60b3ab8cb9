"""The walk of one commit-log file, whatever frames its records: plain files (``records.walk_records``) or
DLedger data files (``entries.walk_entries``: entries around the records, ``MappedFile.dledger``). Both yield
the same ``RecordRun``/``Record`` events, so every command built on the walk reads both without a second copy.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..mapped import MappedFile
from .records import RECORDS_PER_RUN, Record, RecordRun, walk_records


def walk_file(file: MappedFile, start: int = 0, limit: int | None = None, *, check_crc: bool = True,
              accept_v2: bool = True, run_records: int = RECORDS_PER_RUN, python_runs: bool = True,
              crc_continue: bool = False, release_pages: bool = False) -> Iterator[RecordRun | Record]:
    """The broker's check over one file from ``start`` to ``limit``: ``records.walk_records``' events and rules
    (see there), read through the DLedger entries when the file is a DLedger data file."""
    if file.dledger:
        # imported here: the entry walk needs numpy, which a look-up in a plain store never loads
        from .entries import walk_entries

        return walk_entries(file, start, limit, check_crc=check_crc, accept_v2=accept_v2, run_records=run_records,
                            python_runs=python_runs, crc_continue=crc_continue, release_pages=release_pages)
    return walk_records(file, start, limit, check_crc=check_crc, accept_v2=accept_v2, run_records=run_records,
                        python_runs=python_runs, crc_continue=crc_continue, release_pages=release_pages)
