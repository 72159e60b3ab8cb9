"""Another walk's record runs handed to the recovery's scan, so a command that walks the commit log anyway (the
report: verify's walk) need not map and check the same files again for its plan.

The scan's stop rule is checkMessageAndReturnSize's; a run another walk checked (the same compiled scanner) with a
rule at least as strict (the body CRC checked if the scan checks it; V2 records taken only where the release
accepts them) holds records that rule accepts at their positions, and where records follow each other the next
position is the same for both (verify's runs are also cut at a stale PHYSICALOFFSET, which only shortens them).
So the scan takes a handed run only where it starts exactly at the position the scan has reached; anywhere else
(damage, a blank record, a resynchronised walk, a run the policy cannot take, runs that never came) it walks the
file itself from that position, and its answer is the one its own walk gives. Taking what is handed never changes
a plan; it only spares the walk.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...formats.constants import PROPERTY_DELAY_TIME_LEVEL, RMQ_SYS_SCHEDULE_TOPIC
from ...formats.properties import parse_properties_at
from ...store.walk.records import RecordRun, crc32_trailer_records

if TYPE_CHECKING:  # numpy is not imported with the scan (``scan``: a small store's look-up runs without it)
    import numpy as np

# the records handed runs may hold while the scan has not taken them (~32 bytes each): past it the handing stops
# and the scan walks the rest itself, so a scan held up (its own walk elsewhere, its set-up) never makes the other
# walk wait and memory stays bounded
MAX_WAITING_RECORDS = 2 << 20


@dataclass
class WalkedRun:
    """What the recovery's scan needs of one run of records another walk checked (picklable, no map): the columns
    a DispatchRequest takes, the run's topic names (``tids`` index them), whether a record is V2, and the first
    and last records carrying the 5.2.0+ ``__CRC32#`` property (-1: none)."""

    file_start: int
    end: int  # where the run ends in its file
    phys: np.ndarray  # int64: file start + position
    size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    tids: np.ndarray
    sys_flag: np.ndarray
    topics: list[str]
    v2: bool
    crc32_first: int
    crc32_last: int
    # (index, properties, store timestamp) of each SCHEDULE_TOPIC_XXXX record with a DELAY: its tagsCode is the
    # delivery time the scan computes with its delay table
    schedule: list[tuple[int, dict, int]] | None = None
    illegal_delay: bool = False  # a SCHEDULE_TOPIC_XXXX record's DELAY fails Integer.parseInt: the scan stops there

    def __len__(self) -> int:
        return len(self.phys)


def walked_run(run: RecordRun, columns: tuple, topics: list[str], trailers: np.ndarray | None = None) -> WalkedRun:
    """The ``WalkedRun`` of ``run``, in the walk's own process: ``columns`` are (physical offset, size, queue id,
    queue offset, topic id, sysFlag) per record as verify's check made them (shared, not copied: one pickled
    buffer each), ``topics`` the names its topic ids index, ``trailers`` its ``crc32_trailer_records`` where the
    check has them."""
    from .redispatch import carries_crc32_property  # numpy's: the walk's process has it, the scan's import not

    r = run.records
    buf = run.file.buffer
    cand = (crc32_trailer_records(buf, r) if trailers is None else trailers).tolist()
    first = next((j for j in cand if carries_crc32_property(buf, r, j)), -1)
    last = next((j for j in reversed(cand) if j >= first and carries_crc32_property(buf, r, j)), -1) \
        if first >= 0 else -1
    phys, size, qid, qoff, tids, sf = columns
    schedule, illegal = _schedule_records(buf, r, tids, topics)
    return WalkedRun(run.file.start, run.end, phys, size, qid, qoff, tids, sf, list(topics),
                     bool((r["magic_version"] == 2).any()), first, last, schedule, illegal)


def _schedule_records(buf, r: np.ndarray, tids: np.ndarray, topics: list[str]) -> tuple[list | None, bool]:
    """The SCHEDULE_TOPIC_XXXX records with a DELAY (``WalkedRun.schedule``), and whether one's DELAY is no Java
    int (checkMessageAndReturnSize's Integer.parseInt fails whatever the delay table)."""
    if RMQ_SYS_SCHEDULE_TOPIC not in topics:
        return None, False
    from ..dispatch_rules import DelayLevelError, dispatch_tags_code

    out = []
    for j in (tids == topics.index(RMQ_SYS_SCHEDULE_TOPIC)).nonzero()[0].tolist():
        props = parse_properties_at(buf, int(r["properties_pos"][j]), int(r["properties_len"][j]))
        if PROPERTY_DELAY_TIME_LEVEL not in props:
            continue
        ts = int(r["store_timestamp"][j])
        try:
            dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, ts)
        except DelayLevelError:
            return None, True
        out.append((j, props, ts))
    return out, False


class WalkedRuns:
    """The runs another walk hands over, in its order (``put``; ``finish`` when it ends), for the recovery's scan
    in another thread (``runs_from``). ``check_crc``: whether the other walk checked the body CRC (a run's V2 flag
    says the rest: ``runs_from``); the scan takes its runs only when their check was at least as strict as its own.
    Never blocks the handing side: once the scan has stopped (``close``) runs are dropped, and past ``max_records``
    waiting the handing stops for good."""

    def __init__(self, check_crc: bool, max_records: int = MAX_WAITING_RECORDS):
        self.check_crc = check_crc
        self.max_records = max_records
        self.runs: deque[WalkedRun] = deque()
        self.waiting = 0
        self.ended = False  # nothing more comes: the walk finished, overflowed, or the scan closed
        self.closed = False
        self.taken = 0  # records the scan took from handed runs
        self.cond = threading.Condition()

    def put(self, run: WalkedRun) -> None:
        with self.cond:
            if self.ended:
                return
            if self.waiting + len(run) > self.max_records:
                self.runs.clear()
                self.waiting = 0
                self.ended = True
            else:
                self.runs.append(run)
                self.waiting += len(run)
            self.cond.notify()

    def finish(self) -> None:
        """The other walk is over (or failed): the scan walks whatever it was not handed."""
        with self.cond:
            self.ended = True
            self.cond.notify()

    def close(self) -> None:
        """The scan is done with the runs: drop them, take no more."""
        with self.cond:
            self.closed = self.ended = True
            self.runs.clear()
            self.waiting = 0

    def _head(self) -> WalkedRun | None:
        with self.cond:
            while not self.runs and not self.ended:
                self.cond.wait()
            return self.runs[0] if self.runs else None

    def _pop(self) -> None:
        with self.cond:
            if self.runs:
                self.waiting -= len(self.runs.popleft())

    def runs_from(self, file_start: int, pos: int, accept_v2: bool = True) -> Iterator[WalkedRun]:
        """The handed runs of the file starting at ``file_start`` that follow each other from ``pos`` on; the
        generator's value is the position they reach, from which the scan walks the file itself. Runs of earlier
        files, and runs of this one ending at or before ``pos``, are dropped; a run of a later file stays for it.
        A run holding a SCHEDULE_TOPIC_XXXX record whose DELAY is illegal is not taken (the scan stops inside it),
        nor one holding a V2 record for a scan that does not ``accept_v2``."""
        while True:
            run = self._head()
            if run is None or run.file_start > file_start:
                return pos
            if run.file_start < file_start or run.end <= pos or not len(run):
                self._pop()
                continue
            if int(run.phys[0]) - file_start != pos or run.illegal_delay or run.v2 and not accept_v2:
                return pos
            self._pop()
            self.taken += len(run)
            pos = run.end
            yield run


__all__ = ["MAX_WAITING_RECORDS", "WalkedRun", "WalkedRuns", "walked_run"]
