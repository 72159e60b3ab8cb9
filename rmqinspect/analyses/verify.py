"""`verify`: every check a store can be put through offline, reported as ranges.

Checks (selectable):
* ``structure`` - every record's layout (FORMATS.md §1.10), the stored PHYSICALOFFSET equal to file
  start + position (stale data), consecutive commit-log file names, blank records closing non-last files;
* ``crc`` - body CRC of every record, and the 5.2.0+ ``__CRC32#`` whole-record CRC where present;
* ``cq`` - every consume-queue entry against the record it points to (size, topic, queue id, queue
  offset), entries pointing past the valid data (CQ ahead of the commit log), records the dispatcher
  should have put into a queue but did not (CQ behind);
* ``index`` - every index item against its record: keyHash among the hashes of ``topic#key`` for the
  record's keys / UNIQ_KEY, store time inside the header range and consistent with timeDiff;
* ``checkpoint`` - the checkpoint's flush timestamps against the newest surviving record.

Problems are ``[start, end)`` ranges (physical offsets for the commit log, logical byte offsets for a
consume queue, byte positions for an index file) with file, position, kind and a one-line reason.
Damage never stops the run: the commit-log walk resynchronises on the next valid record.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..formats.constants import RMQ_SYS_TRANS_HALF_TOPIC, TRANSACTION_MASK, TransactionType
from ..formats.distinct import distinct
from ..formats.properties import check_property_crc, crc32_trailer_value
from ..store import Store
from ..store.walk.kinds import Damage, DamageKind
from ..store.walk.records import crc32_trailer_records
from ..store.walk.resync import BlankRecord, run_stats, walk_batches
from .verify_checks import ALL_CHECKS

# The consume-queue and index checks import their readers (consume queues, BatchCQ, RocksDB, index files, the
# dispatcher's rules) when they run: `verify --checks crc,structure` is a walk of the commit log alone, and those
# imports were ~15 ms of its start-up (a fresh process per command).


@dataclass
class Problem:
    check: str
    kind: str
    start: int
    end: int
    file: str | None
    position: int | None
    reason: str
    count: int = 1  # how many items this range stands for (merged consecutive problems)
    # bytes the items hold, when the range [start, end) also spans other queues' records (cq_behind, index_behind:
    # records of one queue interleave with the others'); None: end - start
    size: int | None = None

    def to_dict(self) -> dict:
        d = {"check": self.check, "kind": self.kind, "start": self.start, "end": self.end, "file": self.file,
             "position": self.position, "count": self.count, "reason": self.reason}
        if self.size is not None:
            d["bytes"] = self.size
        return d


@dataclass
class VerifyReport:
    store: str
    checks: tuple[str, ...]
    problems: list[Problem] = field(default_factory=list)
    suppressed: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # items checked per check
    notes: list[str] = field(default_factory=list)
    max_errors: int | None = None
    # per index file: {value, source: flag|config|inferred|ambiguous, candidates, detail}
    index_geometry: dict[str, dict] = field(default_factory=dict)
    # not reported (the report's own use): valid records that are transaction halves or PREPARED records (None: the
    # columns were not collected), and the damaged ranges the walk met
    transaction_records: int | None = field(default=None, repr=False)
    damaged: list[tuple[int, int]] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.suppressed

    def add(self, p: Problem, merge: bool = True) -> None:
        last = self.problems[-1] if self.problems else None
        if (merge and last is not None and last.check == p.check and last.kind == p.kind and last.file == p.file
                and last.end == p.start):
            last.end = p.end
            last.count += p.count
            return
        if self.max_errors is not None and len(self.problems) >= self.max_errors:
            self.suppressed += p.count
            return
        self.problems.append(p)

    def summary(self) -> list[dict]:
        rows: dict[tuple[str, str], dict] = {}
        for p in self.problems:
            r = rows.setdefault((p.check, p.kind), {"check": p.check, "kind": p.kind, "ranges": 0, "items": 0,
                                                    "bytes": 0})
            r["ranges"] += 1
            r["items"] += p.count
            r["bytes"] += p.end - p.start if p.size is None else p.size
        return list(rows.values())

    def to_dict(self) -> dict:
        return {"store": self.store, "checks": list(self.checks), "ok": self.ok, "problems": len(self.problems),
                "suppressed": self.suppressed, "checked": self.counts, "summary": self.summary(),
                "notes": self.notes, "index_geometry": self.index_geometry}


class _Records:
    """Compact per-record columns collected during the walk (bounded memory: ~30 bytes per record)."""

    def __init__(self, of: _Records | None = None):
        self._cols: list[tuple[np.ndarray, ...]] = []
        self._keys: list[tuple[np.ndarray, ...]] = []
        # a window's columns share the walk's topic ids and damaged ranges (``of``)
        self.topics: dict[str, int] = of.topics if of is not None else {}
        self.damaged = of.damaged if of is not None else array("q")  # starts of damaged ranges
        self.damaged_end = of.damaged_end if of is not None else array("q")
        self.bytes = 0  # commit-log bytes the columns' records hold

    def __len__(self) -> int:
        return len(self._cols)

    def add_columns(self, cols: tuple[np.ndarray, ...], keys: tuple[np.ndarray, ...] | None = None) -> None:
        """(offset, size, queue id, queue offset, topic id, sys flag) of a run of records (``_check_run``), and
        for the index check (store timestamp, number of index keys, their key hashes record after record)."""
        self._cols.append(cols)
        if len(cols[0]):
            self.bytes += int(cols[0][-1] - cols[0][0]) + int(cols[1][-1])
        if keys is not None:
            self._keys.append(keys)

    @staticmethod
    def _columns(chunks: list, dts: tuple) -> list[np.ndarray]:
        """The runs' chunks joined column by column, each column's chunks released as soon as it is joined: the
        peak is the columns plus one column's chunks, not twice the columns."""
        per = [list(c) for c in zip(*chunks)] if chunks else [[] for _ in dts]
        chunks.clear()
        out = []
        for k, dt in enumerate(dts):
            c, per[k] = per[k], []
            out.append(np.concatenate(c) if c else np.zeros(0, dt))
            del c
        return out

    def finish(self):
        (self.np_offset, self.np_size, self.np_qid, self.np_qoff, self.np_topic, self.np_sysflag) = self._columns(
            self._cols, (np.int64, np.int32, np.int32, np.int64, np.int32, np.int32))
        self.np_ts, nkeys, self.np_keyh = self._columns(self._keys, (np.int64, np.int32, np.int32))
        # where each record's key hashes start in np_keyh
        self.np_kstart = np.cumsum(nkeys, dtype=np.int64) - nkeys
        self.np_nkeys = nkeys

    def find(self, offsets: np.ndarray) -> np.ndarray:
        """Index of the record starting at each offset, -1 when none does."""
        if self.np_offset.size == 0:
            return np.full(len(offsets), -1, dtype=np.int64)
        i = np.searchsorted(self.np_offset, offsets)
        i = np.minimum(i, self.np_offset.size - 1)
        return np.where(self.np_offset[i] == offsets, i, -1)

    def in_damage(self, off: int) -> tuple[int, int] | None:
        import bisect

        k = bisect.bisect_right(self.damaged, off) - 1
        if k >= 0 and off < self.damaged_end[k]:
            return self.damaged[k], self.damaged_end[k]
        return None


STORE_TIME_JUMP_MS = 7 * 86_400_000  # a week: far beyond a clock step, far below a flipped high bit
CALENDAR_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _apart(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|x - y| > STORE_TIME_JUMP_MS, exactly, for any int64 values: where the difference may not fit in an int64
    (a flipped sign bit: -2**63 against 0 wrapped to "agree" before) the float64 one, far beyond a week, decides."""
    with np.errstate(over="ignore"):
        return (np.abs(x.astype(np.float64) - y.astype(np.float64)) > 2.0 ** 61) | (np.abs(x - y) > STORE_TIME_JUMP_MS)


def _far_from_neighbours(a: np.ndarray) -> np.ndarray:
    """Indices (1 .. len - 2) of the store times in ``a`` (int64) more than a week from both neighbours while those
    agree with each other, and inside the calendar."""
    if a.size < 3:
        return np.zeros(0, dtype=np.int64)
    mid = a[1:-1]
    if -(2 ** 61) < int(a.min()) and int(a.max()) < 2 ** 61:
        # no difference can overflow, and one above 2**61 is also above a week: the int64 test alone is exact
        # (``_apart``'s float64 casts are a third of the check of a run holding an outlier)
        jump = STORE_TIME_JUMP_MS
        far = ((np.abs(mid - a[:-2]) > jump) & (np.abs(mid - a[2:]) > jump) & ~(np.abs(a[2:] - a[:-2]) > jump)
               & (mid >= 0) & (mid <= CALENDAR_MAX_MS))
        return np.flatnonzero(far) + 1
    far = _apart(mid, a[:-2]) & _apart(mid, a[2:]) & ~_apart(a[2:], a[:-2]) & (mid >= 0) & (mid <= CALENDAR_MAX_MS)
    return np.flatnonzero(far) + 1


def _jump_reason(left: int, right: int) -> str:
    return f"more than {STORE_TIME_JUMP_MS // 86_400_000} days from both neighbours ({left}, {right}), which agree"


_CALENDAR_REASON = "outside the calendar (year 1970..9999)"


def store_time_candidates(r: np.ndarray, bounds: tuple[int, int] | None = None) -> tuple:
    """The part of the store-time check one run of records can answer alone (in the worker that walked it): its
    records outside the calendar, its interior records (1 .. n - 2) far from both neighbours, as (ts, position,
    size[, left, right]), and its first and last two records (ts, position, size) for the check across runs.
    ``bounds``: the run's smallest and largest store time when the caller knows them (``run_stats``)."""
    ts = r["store_timestamp"]
    pos, size = r["position"], r["total_size"]

    def rec(j: int) -> tuple[int, int, int]:
        return int(ts[j]), int(pos[j]), int(size[j])

    n = len(ts)
    lo, hi = bounds if bounds is not None else (int(ts.min()), int(ts.max())) if n else (0, 0)
    if 0 <= lo and hi <= CALENDAR_MAX_MS and hi - lo <= STORE_TIME_JUMP_MS:
        # the run's store times all lie inside the calendar and within a week of each other (a healthy run): no
        # two are apart (|x - y| <= hi - lo, far below 2**61 as floats), so neither list can hold a record
        cal, far = [], []
    else:
        ts = ts.astype(np.int64)
        cal = [rec(j) for j in np.flatnonzero((ts < 0) | (ts > CALENDAR_MAX_MS)).tolist()]
        far = [(*rec(j), int(ts[j - 1]), int(ts[j + 1])) for j in _far_from_neighbours(ts).tolist()]
    return cal, far, [rec(j) for j in range(min(n, 2))], [rec(j) for j in range(max(0, n - 2), n)]


class _StoreTimeOutliers:
    """STORETIMESTAMP is not covered by the body CRC, so a flipped bit there passes every check the broker
    makes. A record whose store time is outside the calendar, or more than a week from both neighbours while
    they agree with each other, is a damaged header field to report (never a time to compute with). The runs'
    own records are checked where they were walked (``store_time_candidates``); here, in file order, the records
    whose neighbours lie in two runs: the last of the run before and the first of this one."""

    def __init__(self):
        self.carry: list[tuple[int, str, int, int, int]] = []  # the last two records: (ts, file, pos, size, start)

    def feed(self, f, candidates: tuple) -> list[tuple[int, str, int, int, int, str]]:
        cal, far, head, tail = candidates
        name, start = f.name, f.start
        out = [(t, name, p, n, start, _CALENDAR_REASON) for t, p, n in cal]
        edge = self.carry + [(t, name, p, n, start) for t, p, n in head]
        if len(edge) >= 3:  # every middle one is the run before's last or this run's first record
            a = np.array([e[0] for e in edge], dtype=np.int64)
            out += [(*edge[i], _jump_reason(int(a[i - 1]), int(a[i + 1]))) for i in _far_from_neighbours(a).tolist()]
        out += [(t, name, p, n, start, _jump_reason(left, right)) for t, p, n, left, right in far]
        self.carry = (self.carry + [(t, name, p, n, start) for t, p, n in tail])[-2:]
        return out


@dataclass
class _RunChecked:
    """What the walk's side of ``verify`` found in one run of valid records (in the file's own walk, a worker
    process with ``jobs`` > 1): picklable, no map. Topic ids are the run's own (``topics`` in order of first
    appearance); the parent maps them to the store's."""

    name: str
    start: int
    records: int
    max_ts: int
    property_crc: list[tuple[int, int, int, int]]  # (position, end, stored, actual) of every __CRC32# mismatch
    outliers: tuple | None  # store_time_candidates, when the structure check runs
    cols: tuple | None  # _Records columns (topic ids local to the run), when cq/index/checkpoint run
    topics: list[str] = field(default_factory=list)
    keys: tuple | None = None  # (store timestamp, number of index keys, key hashes), when the index check runs
    end: int = 0  # where the run ends in its file


def _check_run(item, do_crc: bool, do_struct: bool, need_records: bool, do_index: bool = False,
               trailers: np.ndarray | None = None):
    """``walk_batches``' converter for ``verify``: the per-run work that needs the file's bytes. ``trailers``: the
    run's ``crc32_trailer_records`` where the caller has them."""
    r = item.records
    f = item.file
    buf = f.buffer
    u8 = np.frombuffer(buf, dtype=np.uint8)
    bad = []
    _, ts_lo, ts_hi, _ = run_stats(item, f.start)
    if do_crc:
        # 5.2.0+ __CRC32#: the last 20 bytes of the record are the trailer
        starts = r["position"]
        ends = starts + r["total_size"]
        for j in (crc32_trailer_records(buf, r) if trailers is None else trailers).tolist():
            end = int(ends[j])
            pos = int(starts[j])
            ok, stored, actual = check_property_crc(buf, pos, end - pos, crc32_trailer_value(buf, end))
            if not ok:
                bad.append((pos, end, stored, actual))
    oc = None
    if do_struct:
        oc = store_time_candidates(r, (ts_lo, ts_hi))
    cols = None
    topics: dict[str, int] = {}
    keys = None
    tids = None
    if do_index:
        # the index keys every record gives its dispatcher, hashed (rebuild's vectorised rule): the index check
        # compares the files' items with them. The same call names every record's topic.
        from .dispatcher import dispatch_fields
        from .rows import topic_id_table

        fields, keyh, topic_bytes = dispatch_fields(buf, item.rows, True)
        keys = (r["store_timestamp"].astype(np.int64), fields[:, 2].astype(np.int32), keyh.astype(np.int32))
        lut = topic_id_table(topic_bytes, topics)  # ids numbered as topic_ids numbers them
        tids = lut[fields[:, 0]] if len(lut) else fields[:, 0]
    if need_records:
        if tids is None:
            from .rows import topic_ids

            tids = topic_ids(u8, item.rows, topics)
        cols = (r["position"] + f.start, r["total_size"].astype(np.int32), r["queue_id"].astype(np.int32),
                r["queue_offset"].copy(), tids.astype(np.int32), r["sys_flag"].astype(np.int32))
    return _RunChecked(f.name, f.start, len(r), ts_hi, bad, oc, cols, list(topics), keys, item.end)


class _FileName:
    """The two attributes of a commitlog file ``_StoreTimeOutliers.feed`` reads."""

    __slots__ = ("name", "start")

    def __init__(self, name: str, start: int):
        self.name, self.start = name, start


def read_bytes(store: Store, checks=ALL_CHECKS) -> dict[str, int]:
    """The bytes ``verify`` reads with these checks, per source: the commit log's span, the consume-queue files
    (cq), the index files' used items (index). What a progress bar's total is."""
    cl = store.commitlog
    # the commit log up to the end of each file's data (the unwritten, pre-allocated tail of the newest file is a
    # hole the walk stops before; a file without holes counts whole)
    data = 0
    for f in cl.files:
        ranges = f.data_ranges(max(cl.min_offset - f.start, 0), f.size)
        if ranges:
            data += ranges[-1][1] - max(cl.min_offset - f.start, 0)
    out = {"commitlog": data, "cq": 0, "index": 0}
    if "cq" in checks:
        for d in (store.layout.consumequeue_dir, os.path.join(store.root, "batchconsumequeue")):
            if os.path.isdir(d) and not os.path.exists(os.path.join(d, "CURRENT")):  # RocksDB: not counted
                for dirpath, _, names in os.walk(d):
                    for n in names:
                        st = os.stat(os.path.join(dirpath, n))
                        # pre-allocated files: their written blocks (the holes read as zeros, never as entries)
                        out["cq"] += min(st.st_size, getattr(st, "st_blocks", st.st_size // 512 + 1) * 512)
    if "index" in checks and os.path.isdir(store.layout.index_dir):
        for name in os.listdir(store.layout.index_dir):
            with open(os.path.join(store.layout.index_dir, name), "rb") as f:
                head = f.read(40)
            if len(head) == 40:
                out["index"] += max(int.from_bytes(head[36:40], "big", signed=True) - 1, 0) * 20  # indexCount
    return out


# the commit-log bytes whose record columns the cq and index joins hold at once (~7 MB of columns for 128 MiB of
# 1.2 KiB records); the joins go window by window, so verify's memory does not grow with the store. A window is
# whole runs of records: it ends after a record, and what lies between two windows holds no record.
_WINDOW_BYTES = 128 << 20


class RunColumns(NamedTuple):
    """What verify's check made of a run that another pass over it may take instead of making it again: the
    records' topic ids and their names (``rows.topic_ids``' numbering), the record columns (physical offset, size,
    queue id, queue offset, topic id, sysFlag: arrays it may hand on, pickled once) and the records with a
    ``__CRC32#`` trailer (``crc32_trailer_records``; None where the CRC is not checked)."""

    tids: np.ndarray
    topics: list[str]
    columns: tuple
    crc32_trailers: np.ndarray | None


def _check_run_and(item, tap_convert, do_crc: bool, *args):
    """``_check_run`` and another pass's converter over the same run, in the walk's own process. The converter
    also gets the check's ``RunColumns`` where the cq, index or checkpoint check made the columns, else None."""
    trailers = crc32_trailer_records(item.file.buffer, item.records) if do_crc else None
    checked = _check_run(item, do_crc, *args, trailers=trailers)
    return checked, tap_convert(item, None if checked.cols is None else RunColumns(checked.cols[4], checked.topics,
                                                                                  checked.cols, trailers))


def _fed(item, feed):
    """The walk's item for verify, after handing the tapped pass its part (a converted run is a pair)."""
    if type(item) is Damage or type(item) is BlankRecord:
        feed(item)
        return item
    item, other = item
    feed(other)
    return item


def _damage_problem(item: Damage, do_crc: bool, do_struct: bool, cl_dir: str) -> Problem | None:
    """The problem a damaged range of the walk is, None when its check is not selected."""
    check = "crc" if DamageKind.CRC in (item.kind, item.cause) else "structure"
    if check == "crc" and not do_crc or check == "structure" and not do_struct:
        return None
    return Problem(check, item.kind, item.start, item.end,
                   os.path.join(cl_dir, item.file) if item.file else cl_dir, item.position,
                   item.reason + (f" ({item.cause})" if item.cause and item.cause not in item.reason else ""))


def _run_problems(item, cl_dir: str, outliers: _StoreTimeOutliers | None) -> Iterator[Problem]:
    """A checked run's __CRC32# mismatches, and (``outliers``: the structure check) its store-time outliers."""
    for pos, end, stored, actual in item.property_crc:
        yield Problem("crc", "property_crc", item.start + pos, item.start + end, os.path.join(cl_dir, item.name),
                      pos, f"__CRC32# says {stored}, the record's CRC is {actual}")
    if outliers is None:
        return
    for t, name, pos, size, start, why in outliers.feed(_FileName(item.name, item.start), item.outliers):
        yield Problem("structure", "store_time_outlier", start + pos, start + pos + size, os.path.join(cl_dir, name),
                      pos, f"STORETIMESTAMP {t} is {why}: a damaged header field (the body CRC does not cover it), "
                      "not a store time")


def _add_to_window(window: _Records, item, topics: dict[str, int]) -> int:
    """A checked run's record columns added to the window (topic names as the walk's ids); returns how many of
    its records are transaction records (PREPARED, or in the half topic)."""
    cols = item.cols
    lut = np.array([topics.setdefault(t, len(topics)) for t in item.topics], dtype=np.int32)
    tids = lut[cols[4]] if len(lut) else cols[4]
    window.add_columns((*cols[:4], tids, cols[5]), item.keys)
    tx = (cols[5] & TRANSACTION_MASK) == int(TransactionType.PREPARED)
    half = topics.get(RMQ_SYS_TRANS_HALF_TOPIC)
    return int(np.count_nonzero(tx | (tids == half) if half is not None else tx))


def _joins_beside(stack: ExitStack, make: Callable[[ExitStack], tuple], then: Callable[[], None] | None):
    """verify's cq and index joins (``make(maps)``: every queue file and index file read, each index geometry
    proven; for a store's many full-size index files, seconds) made in a thread (``parallel.Beside``) that starts
    with the walk, after its workers are forked: the walk's first window fills meanwhile, and the joins are needed
    only when it is full. Returns (the thread, the walk's on_start: the thread started, then ``then()``); the
    thread ends before the maps it opened (``maps``, inside ``stack``) are closed. A walk that takes no records for
    the joins need not start the thread: ``result()`` then makes the (empty) joins in the caller."""
    from ..store.walk.parallel import Beside

    maps = stack.enter_context(ExitStack())
    joins = Beside(make, maps, name="verify-joins")
    stack.callback(joins.wait)  # LIFO: before ``maps`` is closed

    def started() -> None:
        joins.start()
        if then is not None:
            then()
    return joins, started


# full windows that may wait for the joins (made beside the walk) before the walk itself waits: the walk's results
# keep being taken (its workers busy, the progress moving) while the joins are still being made; ~15 MB each
_WINDOWS_WAITING = 2


class _Windows:
    """The walk's records one window (``_WINDOW_BYTES``) at a time: when a window is full, the queue entries and
    index items pointing into it are joined with it (``_CqJoin.window``, ``_IndexJoin.window``); while the joins
    are still being made, up to ``_WINDOWS_WAITING`` full windows wait for them (the same windows, joined in
    order: tests/test_verify_windows.py holds the answer the same for any window size)."""

    def __init__(self, recs: _Records, joins):
        self.recs, self.joins = recs, joins
        self.done: list[tuple[int, int]] = []  # the windows joined: [first record, end of the last record)
        self.window = _Records(recs)
        self.full: list[_Records] = []

    def add(self, item, topics: dict[str, int]) -> int:
        """A checked run's records into the window; returns its transaction records (``_add_to_window``)."""
        if self.window.bytes >= _WINDOW_BYTES:
            self.full.append(self.window)
            self.window = _Records(self.recs)
            if len(self.full) > _WINDOWS_WAITING or not self.joins.alive():
                self._join_full()
        return _add_to_window(self.window, item, topics)

    def _join_full(self) -> None:
        for w in self.full:
            self._join(w)
        self.full = []

    def _join(self, w: _Records) -> None:
        w.finish()
        lo, hi = int(w.np_offset[0]), int(w.np_offset[-1] + w.np_size[-1])
        cq, ix = self.joins.result()
        if cq is not None:
            cq.window(w, lo, hi)
        if ix is not None:
            ix.window(w, lo, hi)
        self.done.append((lo, hi))

    def finish(self) -> list[tuple[int, int]]:
        """The last window joined; the windows' ranges."""
        self._join_full()
        if len(self.window):
            self._join(self.window)
        self.window = _Records(self.recs)  # the last window's columns released
        return self.done


def _verify_dledger_entries(store: Store, rep: VerifyReport, rel) -> None:
    from .dledger import entry_problems

    rep.counts["dledger_entries"] = 0
    for ep in entry_problems(store.dledger, rep.counts):
        rep.add(Problem("structure", ep.kind, ep.start, ep.end, rel(ep.file), ep.position, ep.reason), merge=False)


def verify(store: Store, checks=ALL_CHECKS, *, max_errors: int | None = None, accept_v2: bool = True,
           progress=None, index_slots: int | None = None, index_max: int | None = None,
           jobs: int | None = None, read_progress=None, tap=None, on_start=None) -> VerifyReport:
    """Every selected check over ``store``; ``jobs`` (default ``parallel.resolve_jobs``) > 1 walks the commit log
    in worker processes, the report the same. ``progress(offset)`` is called at each commit-log file;
    ``read_progress(done)`` with the bytes read so far, out of the sum of ``read_bytes(store, checks)``, at least
    after every run of records, queue phase and index chunk.

    The cq and index checks join the queues' entries and the index items with the records of one window of the
    commit log at a time (``_WINDOW_BYTES``), as the walk passes it; what points outside every window is settled
    at the end. Their problems are in queue and item order, as a join over the whole store reports them.

    ``tap`` = (convert, feed): another pass over the walk: a module-level ``convert(run, named)`` (``named``: see
    ``_check_run_and``) and what takes its items in order (converted runs, blank records, ``Damage``).
    ``on_start()``: called once the walk's workers are forked (threads start then)."""
    checks = tuple(c for c in ALL_CHECKS if c in checks)
    rep = VerifyReport(store.root, checks, max_errors=max_errors)
    cl = store.commitlog
    rep.notes.extend(cl.notes)
    rel = lambda p, root=store.root: os.path.relpath(p, root) if p else p  # noqa: E731
    # where problems say the log files are (DLedger mode: the member's data/ directory)
    cl_dir = rel(store.layout.dledger.data_dir) if store.layout.dledger else "commitlog"
    need_records = any(c in checks for c in ("cq", "index", "checkpoint"))
    sizes = read_bytes(store, checks) if read_progress is not None else {}
    span = sizes.get("commitlog", 0)
    recs = _Records()  # the walk's topic ids and damaged ranges; the record columns are the window's
    do_crc = "crc" in checks
    do_struct = "structure" in checks
    topics = recs.topics
    n_msgs = 0
    max_ts = None
    last_file = None
    data_end = cl.min_offset
    n_tx = 0
    outliers = _StoreTimeOutliers()
    with ExitStack() as stack:
        joins, started = _joins_beside(stack, lambda maps: (
            _CqJoin(store, rel, maps) if "cq" in checks else None,
            _IndexJoin(store, rep, rel, index_slots, index_max, maps) if "index" in checks else None), on_start)
        windows = _Windows(recs, joins)
        convert, args = _check_run, (do_crc, do_struct, need_records, "index" in checks)
        feed = None
        if tap is not None:
            convert, args, feed = _check_run_and, (tap[0], *args), tap[1]
        for item in walk_batches(cl, None, check_crc=do_crc, accept_v2=accept_v2, jobs=jobs, convert=convert,
                                 convert_args=args, on_start=started if need_records else on_start):
            if feed is not None:
                item = _fed(item, feed)
            if type(item) is Damage:
                recs.damaged.append(item.start)
                recs.damaged_end.append(item.end)
                p = _damage_problem(item, do_crc, do_struct, cl_dir)
                if p is not None:
                    rep.add(p, merge=False)
                continue
            if type(item) is BlankRecord:
                continue
            n_msgs += item.records
            if read_progress is not None:
                read_progress(min(max(item.start + item.end - cl.min_offset, 0), span))
            if item.start != last_file:
                if progress is not None:
                    progress(item.start)
                last_file = item.start
            for p in _run_problems(item, cl_dir, outliers if do_struct else None):
                rep.add(p, merge=False)
            if max_ts is None or item.max_ts > max_ts:
                max_ts = item.max_ts
            if need_records:
                cols = item.cols
                if not len(cols[0]):
                    continue
                n_tx += windows.add(item, topics)
                data_end = int(cols[0][-1] + cols[1][-1])
        done = windows.finish()
        cq, ix = joins.result()
        rep.counts["records"] = n_msgs
        rep.transaction_records = n_tx if need_records else None
        rep.damaged = list(zip(recs.damaged, recs.damaged_end, strict=True))
        if do_struct and store.dledger is not None:  # DLedger mode: the entry rules (analyses.dledger)
            _verify_dledger_entries(store, rep, rel)
        outside = _Records(recs)  # what points outside every window: no record starts there
        outside.finish()
        if read_progress is not None:
            read_progress(span)
        if cq is not None:
            cq.finish(rep, outside, done, data_end)
        if read_progress is not None:
            read_progress(span + sizes["cq"])
        if ix is not None:
            ix.finish(rep, outside, done)
            if read_progress is not None:
                read_progress(span + sizes["cq"] + sizes["index"])
            if n_msgs:
                ix.behind(rep)
    if "checkpoint" in checks:
        _verify_checkpoint(store, rep, max_ts)
        # the broker's recovery stops at the first damage: the end it serves, not the resynchronised walk's
        _verify_controller(store, rep, min([data_end] + [d for d in recs.damaged if d >= cl.min_offset]))
    return rep


_SAMPLE = 1024  # a queue file's entries: every 1024th physical offset kept, to find a window's entries


def _samples(arr: np.ndarray) -> np.ndarray | None:
    """Every ``_SAMPLE``-th physical offset of a queue chunk whose offsets never decrease (a queue as the
    dispatcher writes it; pre-blank padding, offset 0, comes first), else None. A window's entries are then found
    between two samples instead of by a pass over the whole chunk in every window (a queue's entries spread over
    the whole log: every window would read every queue file)."""
    po = arr["physical_offset"]
    if len(po) > 1 and bool((po[1:] < po[:-1]).any()):
        return None
    return po[::_SAMPLE].astype(np.int64)


def _rows_between(samples: np.ndarray | None, n: int, lo: int, hi: int) -> tuple[int, int]:
    """The entries [r0, r1) of a chunk of ``n`` that can point into [lo, hi): with ``samples`` (offsets never
    decreasing), from the last sample below ``lo`` to the first sample at or past ``hi``; without, all."""
    if samples is None:
        return 0, n
    i0 = max(int(np.searchsorted(samples, lo, side="left")) - 1, 0)
    i1 = int(np.searchsorted(samples, hi, side="left"))
    return i0 * _SAMPLE, min(i1 * _SAMPLE, n)


def _inside_one(lo: int, hi: int, done: list[tuple[int, int]]) -> bool:
    """Whether [lo, hi] lies inside one joined window (then nothing in it is left for the end)."""
    import bisect

    k = bisect.bisect_right(done, (lo, 1 << 63)) - 1
    return k >= 0 and done[k][0] <= lo and hi < done[k][1]


def _in_windows(offsets: np.ndarray, done: list[tuple[int, int]]) -> np.ndarray:
    """Which offsets fall in one of the joined windows (sorted, disjoint [lo, hi) ranges)."""
    if not done:
        return np.zeros(len(offsets), dtype=bool)
    lo = np.array([a for a, _ in done], dtype=np.int64)
    hi = np.array([b for _, b in done], dtype=np.int64)
    k = np.searchsorted(lo, offsets, side="right") - 1
    return (k >= 0) & (offsets < hi[np.maximum(k, 0)])


def _verify_controller(store: Store, rep: VerifyReport, data_end: int) -> None:
    """Controller mode (AutoSwitch HA): the epoch file, confirmPhyOffset and whether load() succeeds."""
    if store.dledger is not None:
        return
    from .recovery.controller import controller_findings

    for f in controller_findings(store, data_end):
        if f.problem:
            rep.add(Problem("checkpoint", f.kind, f.start, f.end, f.file, f.position, f.reason), merge=False)
        else:
            rep.notes.append(f"controller mode: {f.reason}")


def _queue_chunks(cq, rel):
    """(first logical offset, valid CQ_DTYPE entries, path, file start or None) of a file or RocksDB queue."""
    from ..formats.consumequeue import CQ_STORE_UNIT_SIZE

    if cq.files:
        for f in cq.files:
            arr = cq.file_entries(f)
            yield f.start // CQ_STORE_UNIT_SIZE, arr[:cq.valid_length(arr)], rel(f.path), f.start
    else:  # RocksDB: rows as stored, no file positions
        for base, arr in cq.chunks():
            yield base, arr, f"consumequeue (RocksDB) {cq.topic}/{cq.queue_id}", None


ENTRY_REASONS = {
    "cq_ahead": "entry points at or beyond the end of valid commit-log data ({data_end}): the consume queue is ahead "
                "of the commit log",
    "cq_dangling": "entry points where no valid record starts",
    "cq_size": "entry size differs from the record's TOTALSIZE",
    "cq_wrong_queue": "record at this offset belongs to another queue",
    "cq_queue_offset": "record's QUEUEOFFSET differs from the entry's logical offset",
}
UNIT_REASONS = {
    "cq_ahead": "unit points at or beyond the end of valid commit-log data ({data_end})",
    "cq_dangling": "unit points where no valid record starts",
    "cq_size": "unit size differs from the record's TOTALSIZE",
    "cq_wrong_queue": "record at this offset belongs to another queue",
    "cq_queue_offset": "record's QUEUEOFFSET (INNER_BASE) differs from the unit's msgBaseOffset",
}


def _entry_checks(recs: _Records, po: np.ndarray, sz: np.ndarray, want_qoff: np.ndarray, tid: int, queue_id: int,
                  cl_min: int, data_end: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """What every consume-queue entry and BatchCQ unit is checked for against the record it points to: (the
    record index of each, {kind: mask} in report order). Entries below the commit log's min offset are expired."""
    expired = po < cl_min
    ahead = (po >= data_end) & ~expired
    ri = recs.find(po)
    ok = ri >= 0
    rr = np.where(ok, ri, 0)
    none = np.zeros(len(po), bool)
    have = recs.np_size.size > 0
    bad_topic = ok & ((recs.np_topic[rr] != tid) | (recs.np_qid[rr] != queue_id)) if have else none
    return rr, {"cq_ahead": ahead, "cq_dangling": (ri < 0) & ~expired & ~ahead,
                "cq_size": ok & (recs.np_size[rr] != sz) if have else none, "cq_wrong_queue": bad_topic,
                "cq_queue_offset": ok & ~bad_topic & (recs.np_qoff[rr] != want_qoff) if have else none}


def _damage_instead(recs: _Records, kind: str, phys: int, noun: str) -> tuple[str, str] | None:
    """An entry that points at nothing valid but into a damaged range is reported as pointing to damage."""
    if kind not in ("cq_dangling", "cq_ahead"):
        return None
    dmg = recs.in_damage(phys)
    if dmg is None:
        return None
    return "cq_points_to_damage", f"{noun} points into the damaged range [{dmg[0]}, {dmg[1]})"


class _CqJoin:
    """verify's cq check, window by window: every queue's entries (file queues, RocksDB rows, BatchCQ units) that
    point into a window are checked against its records; what points elsewhere is checked at the end against no
    record (dangling, ahead of the data, into damage, or expired). cq_behind is counted per queue as the windows
    pass. The problems are put back in queue, file, kind and entry order at the end."""

    def __init__(self, store: Store, rel, stack: ExitStack):
        from ..formats.consumequeue import BCQ_STORE_UNIT_SIZE
        from ..store.batch import BatchConsumeQueue, list_batch_queues
        from ..store.consumequeue import list_queues, pre_blank_mask
        from ..store.rocksdb_cq import ConsumeQueues, is_rocksdb_dir

        self.store, self.rel = store, rel
        self.cl_min = store.commitlog.min_offset
        self.notes: list[str] = []
        self.mode = "queues"  # queues | rocksdb_empty (every dispatchable record behind) | none (no check)
        # (order, topic, queue id, batch, first logical offset / unit, entries, path, file start, min, max offset)
        self.chunks: list[tuple] = []
        self.hi: dict[tuple[str, int], int] = {}  # each queue's end (entries or messages) by (topic, queue id)
        self.found: list[tuple[tuple, Problem]] = []
        self.checked = 0
        self.behind: dict[tuple[int, int], list[int]] = {}  # (topic id, queue id) -> first, qoff, end, n, bytes
        self.confirm: int | None = None
        cqdir = store.layout.consumequeue_dir
        batch = [BatchConsumeQueue(t, q, d, store.conf) for t, q, d in list_batch_queues(store.root)]
        queues: list = []
        if not os.path.isdir(cqdir):
            if not batch:
                self.notes.append("no consumequeue/ directory: the broker rebuilds every queue from the commit log")
                self.mode = "none"
                return
        else:
            qs = stack.enter_context(ConsumeQueues(cqdir, conf=store.conf))
            if qs.kind == "rocksdb":
                self.notes.append("RocksDB consume queue (5.x): entries read from a private snapshot of "
                                  "consumequeue/")
            queues = list(qs)
        if not queues and not batch:
            # (a combined store keeps its file queues beside the database: those are read as queues elsewhere)
            if is_rocksdb_dir(cqdir) and not any(True for _ in list_queues(cqdir)):
                # RocksDB rows are written with the WAL off: a crash can leave none, and the restart re-dispatches
                # every record; that queue is behind the commit log as a file queue would be (counted in entries)
                self.notes.append("RocksDB consume queue without a row: every dispatchable record is cq_behind")
                self.mode = "rocksdb_empty"
            else:
                self.notes.append("consumequeue/ holds no queue: the broker rebuilds every queue from the commit log")
                self.mode = "none"
            return
        for qi, q in enumerate(queues):
            hi = 0
            for ci, (base, arr, path, fstart) in enumerate(_queue_chunks(q, rel)):
                if not len(arr):
                    continue
                hi = base + len(arr)
                po = arr["physical_offset"][~pre_blank_mask(arr)]
                self.checked += po.size
                if po.size:
                    self.chunks.append(((qi, ci), q.topic, q.queue_id, False, base, arr, path, fstart,
                                        int(po.min()), int(po.max()), _samples(arr)))
            self.hi[(q.topic, q.queue_id)] = hi
        for bi, bcq in enumerate(batch):
            paths = {f.start // BCQ_STORE_UNIT_SIZE: (rel(f.path), f.start) for f in bcq.files}
            hi = 0
            for ci, (first, arr) in enumerate(bcq.chunks()):
                if not len(arr):
                    continue
                path, fstart = paths[first]
                hi = int(arr["msg_base_offset"][-1]) + int(arr["batch_size"][-1])
                self.checked += len(arr)
                po = arr["physical_offset"]
                self.chunks.append(((len(queues) + bi, ci), bcq.topic, bcq.queue_id, True, first, arr, path, fstart,
                                    int(po.min()), int(po.max()), _samples(arr)))
            self.hi[(bcq.topic, bcq.queue_id)] = hi

    def window(self, recs: _Records, lo: int, hi: int) -> None:
        """The entries pointing into [lo, hi) against the window's records ``recs``, and its cq_behind records."""
        if self.mode == "none":
            return
        for c in self.chunks:
            if c[8] < hi and c[9] >= lo:
                r0, r1 = _rows_between(c[10], len(c[5]), lo, hi)
                if r1 > r0:
                    self._check(recs, c, lambda po: (po >= lo) & (po < hi), hi, r0, r1)
        self._behind(recs)

    def finish(self, rep: VerifyReport, outside: _Records, done: list[tuple[int, int]], data_end: int) -> None:
        """The entries no window holds (against no record), then every problem in order, the count and cq_behind."""
        rep.notes.extend(self.notes)
        if self.mode == "none":
            return
        for c in self.chunks:
            if not _inside_one(c[8], c[9], done):
                self._check(outside, c, lambda po: ~_in_windows(po, done), data_end)
        self.found.sort(key=lambda kp: kp[0])
        for _, p in self.found:
            rep.add(p)
        self.found = []
        rep.counts["cq_entries"] = self.checked
        names = {v: k for k, v in outside.topics.items()}
        for (tid, qid), (first, qoff, end, n, size) in sorted(self.behind.items()):
            t = names.get(tid, "?")
            rep.add(Problem("cq", "cq_behind", first, end, f"consumequeue/{t}/{qid}", None,
                            f"{n} record(s) of {t}/{qid} from queue offset {qoff} have no consume-queue entry (queue "
                            f"ends at {self.hi.get((t, qid), 0)}): the consume queue is behind the commit log",
                            count=n, size=size), merge=False)

    def _check(self, recs: _Records, c: tuple, wanted, data_end: int, r0: int = 0, r1: int | None = None) -> None:
        """The entries ``r0``..``r1`` of chunk ``c`` whose physical offset is ``wanted``, against ``recs``."""
        from ..formats.consumequeue import BCQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE
        from ..store.consumequeue import pre_blank_mask

        (qi, ci), topic, queue_id, batch, first, arr, path, fstart = c[:8]
        tid = recs.topics.get(topic, -2)
        r1 = len(arr) if r1 is None else r1
        if batch:
            rows = np.arange(r0, r1)
        else:
            rows = r0 + np.flatnonzero(~pre_blank_mask(arr[r0:r1]))
        po_all = arr["physical_offset"][rows].astype(np.int64)
        sel = np.flatnonzero(wanted(po_all))
        if not sel.size:
            return
        rows = rows[sel]
        po = po_all[sel]
        sz = arr["size"][rows].astype(np.int64)
        if batch:
            base = arr["msg_base_offset"][rows].astype(np.int64)
            _, masks = _entry_checks(recs, po, sz, base, tid, queue_id, self.cl_min, data_end)
        else:
            logical = rows + first
            rr, masks = _entry_checks(recs, po, sz, logical, tid, queue_id, self.cl_min, data_end)
        topic_names = None
        for ki, (kind, mask) in enumerate(masks.items()):
            for j in np.flatnonzero(mask).tolist():
                phys = int(po[j])
                order = (qi, ci, ki, int(rows[j]))
                if batch:
                    unit = first + int(rows[j])
                    k, reason = _damage_instead(recs, kind, phys, "unit") or (kind, UNIT_REASONS[kind])
                    if k == "cq_ahead":
                        reason = reason.format(data_end=data_end)
                    self.found.append((order, Problem(
                        "cq", k, unit * BCQ_STORE_UNIT_SIZE, (unit + 1) * BCQ_STORE_UNIT_SIZE, path,
                        unit * BCQ_STORE_UNIT_SIZE - fstart,
                        f"{reason} (batch unit {unit}, msgBaseOffset {int(base[j])}, physical offset {phys})")))
                    continue
                lo = int(logical[j])
                kind2, reason = _damage_instead(recs, kind, phys, "entry") or (kind, ENTRY_REASONS[kind])
                if kind2 == "cq_ahead":
                    reason = reason.format(data_end=data_end)
                if kind == "cq_wrong_queue":
                    if topic_names is None:
                        topic_names = {v: k for k, v in recs.topics.items()}
                    r = int(rr[j])
                    reason = f"record at {phys} is {topic_names.get(int(recs.np_topic[r]), '?')}/{int(recs.np_qid[r])}"
                self.found.append((order, Problem(
                    "cq", kind2, lo * CQ_STORE_UNIT_SIZE, (lo + 1) * CQ_STORE_UNIT_SIZE, path,
                    None if fstart is None else lo * CQ_STORE_UNIT_SIZE - fstart,
                    f"{reason} (queue offset {lo}, physical offset {phys})")))

    def _behind(self, recs: _Records) -> None:
        """CQ behind: dispatchable records whose queue offset is at or past their queue's end (``hi``; a queue not
        in it has none), summed per (topic id, queue id): one problem per queue, counted in entries, its bytes the
        size of its records, each counted once (a queue's records interleave with the others')."""
        from .dispatch_rules import goes_to_consume_queue

        if not recs.np_offset.size:
            return
        names = {v: k for k, v in recs.topics.items()}
        flags = distinct(recs.np_sysflag)
        disp = np.array([goes_to_consume_queue(int(s)) for s in flags], dtype=bool)
        key = (recs.np_topic.astype(np.int64) << 32) | (recs.np_qid.astype(np.int64) & 0xFFFFFFFF)
        ukeys, inv = np.unique(key, return_inverse=True)
        hi_u = np.array([self.hi.get((names.get(int(k) >> 32, ""), int(np.int32(np.uint32(int(k) & 0xFFFFFFFF)))), 0)
                         for k in ukeys.tolist()], dtype=np.int64)
        behind = (np.isin(recs.np_sysflag, flags[disp]) & (recs.np_qoff >= hi_u[inv.ravel()])
                  & (recs.np_offset >= self.cl_min))
        if self.store.dledger is None:
            if self.confirm is None:
                from .recovery.controller import detect_confirm_offset

                self.confirm = detect_confirm_offset(self.store)
            if self.confirm >= 0:  # controller mode: the reput never dispatches past confirmPhyOffset
                behind &= recs.np_offset + recs.np_size <= self.confirm
        sel = np.flatnonzero(behind)
        if not sel.size:
            return
        # grouped by (topic id, queue id), each group in commit-log order
        sel = sel[np.lexsort((recs.np_qid[sel], recs.np_topic[sel]))]
        t_sel, q_sel = recs.np_topic[sel], recs.np_qid[sel]
        cut = np.flatnonzero((t_sel[1:] != t_sel[:-1]) | (q_sel[1:] != q_sel[:-1])) + 1
        for a, b in zip([0] + cut.tolist(), cut.tolist() + [sel.size]):
            first, last = int(sel[a]), int(sel[b - 1])
            k = (int(recs.np_topic[first]), int(recs.np_qid[first]))
            end = int(recs.np_offset[last] + recs.np_size[last])
            size = int(recs.np_size[sel[a:b]].sum())
            got = self.behind.get(k)
            if got is None:
                self.behind[k] = [int(recs.np_offset[first]), int(recs.np_qoff[first]), end, b - a, size]
            else:
                got[2] = end
                got[3] += b - a
                got[4] += size


class _IndexJoin:
    """verify's index check, window by window: the items of every index file that point into a window are checked
    against its records (in bulk, ``_items_fine``; the rest one by one, ``_item_problem``); what points elsewhere is
    checked at the end against no record. The problems are put back in file and item order at the end.
    index_behind collects the offsets of the records past the last index file's endPhyOffset."""

    def __init__(self, store: Store, rep: VerifyReport, rel, slots: int | None, max_items: int | None,
                 stack: ExitStack):
        from ..errors import RmqInspectError
        from ..store.indexfile import IndexFile, IndexGeometryError, prove_geometry_of

        self.cl = store.commitlog
        self.store, self.rel = store, rel
        idir = store.layout.index_dir
        self.present = os.path.isdir(idir)
        self.files: list[tuple] = []  # (file number, header, items base, path, items, [(first, min, max)])
        self.found: list[tuple[tuple, Problem, bool]] = []
        self.checked = 0
        self.keys_cache: dict[int, tuple[set[int], int]] = {}
        self.end_phy: int | None = None  # endPhyOffset of the last index file (index_behind)
        self.last_path: str | None = None
        self.past: list[np.ndarray] = []  # offsets of the records past it
        self.past_end = 0
        if not self.present:
            return
        names = sorted(n for n in os.listdir(idir) if os.path.isfile(os.path.join(idir, n)))
        for fi, name in enumerate(names):
            path = os.path.join(idir, name)
            try:
                # flag > broker.conf > proof: an unproven geometry is reported, never used (a wrong one would
                # make every item look dangling)
                idx = IndexFile(path, slots, max_items, store.conf)
            except IndexGeometryError as e:
                rep.index_geometry[name] = prove_geometry_of(path).to_dict()
                self.found.append(((fi, -1), Problem("index", "index_geometry_unknown", 0, 0, rel(path), 0,
                                                     e.message), False))
                continue
            except RmqInspectError as e:
                self.found.append(((fi, -1), Problem("index", "index_unreadable", 0, 0, rel(path), 0, e.message),
                                   False))
                continue
            stack.callback(idx.close)
            rep.index_geometry[name] = idx.geometry.to_dict()
            items = idx.items()
            self.checked += len(items)
            phy_name = items.dtype.names[1]
            spans = []
            for c0 in range(0, len(items), _INDEX_CHUNK):
                phy = items[phy_name][c0:c0 + _INDEX_CHUNK]
                spans.append((c0, int(phy.min()), int(phy.max())))
            self.files.append((fi, idx.header, idx.items_base, rel(path), items, spans))
        if names:
            from ..formats.indexfile import INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_HEADER_TABLE

            self.last_path = os.path.join(idir, names[-1])
            with open(self.last_path, "rb") as fh:
                head = fh.read(INDEX_HEADER_SIZE)
            if len(head) == INDEX_HEADER_SIZE:
                self.end_phy = int(INDEX_HEADER.unpack_from(head, 0)[INDEX_HEADER_TABLE.index("end_phy_offset")])

    def window(self, recs: _Records, lo: int, hi: int) -> None:
        """The items pointing into [lo, hi) against the window's records ``recs``."""
        for fi, h, base, path, items, spans in self.files:
            phy_name = items.dtype.names[1]
            for c0, pmin, pmax in spans:
                if pmin >= lo and pmax < hi:  # the whole chunk points into this window: no selection to make
                    sub = items[c0:c0 + _INDEX_CHUNK]
                    self._check(recs, fi, h, base, path, sub, sub[phy_name].astype(np.int64),
                                np.arange(c0 + 1, c0 + 1 + len(sub)))
                elif pmin < hi and pmax >= lo:
                    sub = items[c0:c0 + _INDEX_CHUNK]
                    phy = sub[phy_name].astype(np.int64)
                    sel = np.flatnonzero((phy >= lo) & (phy < hi))
                    if sel.size:
                        self._check(recs, fi, h, base, path, sub[sel], phy[sel], sel + c0 + 1)
        if self.end_phy is not None and recs.np_offset.size:
            past = np.flatnonzero(recs.np_offset > self.end_phy)
            if past.size:
                self.past.append(recs.np_offset[past])
                self.past_end = int(recs.np_offset[past[-1]] + recs.np_size[past[-1]])

    def finish(self, rep: VerifyReport, outside: _Records, done: list[tuple[int, int]]) -> None:
        """The items no window holds (against no record), then every problem in order and the count."""
        if not self.present:
            rep.notes.append("no index/ directory")
            return
        for fi, h, base, path, items, spans in self.files:
            phy_name = items.dtype.names[1]
            for c0, pmin, pmax in spans:
                if _inside_one(pmin, pmax, done):
                    continue
                sub = items[c0:c0 + _INDEX_CHUNK]
                phy = sub[phy_name].astype(np.int64)
                sel = np.flatnonzero(~_in_windows(phy, done))
                if sel.size:
                    self._check(outside, fi, h, base, path, sub[sel], phy[sel], sel + c0 + 1)
        self.found.sort(key=lambda kp: kp[0])
        for _, p, merge in self.found:
            rep.add(p, merge=merge)
        self.found = []
        rep.counts["index_items"] = self.checked

    def _check(self, recs: _Records, fi: int, h, base: int, path: str, items: np.ndarray, phy: np.ndarray,
               numbers: np.ndarray) -> None:
        # the record behind every item, found in bulk (searchsorted on the record offsets)
        rec_of = recs.find(phy)
        fine = _items_fine(recs, items, numbers, rec_of, h.begin_timestamp, h.end_timestamp, self.cl.min_offset)
        for i in np.flatnonzero(~fine).tolist():
            kh, ph, tdiff, _prev = items[i].tolist()
            n = int(numbers[i])
            p = _item_problem(self.cl, recs, self.keys_cache, h, n, base + n * 20, kh, ph, tdiff, int(rec_of[i]),
                              path)
            if p is not None:
                self.found.append(((fi, n), p, True))

    def behind(self, rep: VerifyReport) -> None:
        """index_behind over the records past the last index file's endPhyOffset (``_index_behind``)."""
        if self.end_phy is None or not self.past or self.last_path is None:
            return
        valid = np.concatenate(self.past)
        self.past = []
        _index_behind(self.store, rep, valid, self.past_end, self.end_phy, self.rel(self.last_path))


_INDEX_CHUNK = 1 << 16  # items compared at a time: bounded temporaries whatever the index file's size; most chunks
# then lie inside one window of records and are compared whole
_FAST_KEYS = 16  # records with more index keys than this have their unmatched items checked one by one
_TS_SANE = 1 << 62  # store times and header times below this: no int64 overflow in the vectorised arithmetic


def _items_fine(recs: _Records, items: np.ndarray, numbers: np.ndarray, rec_of: np.ndarray, begin: int, end: int,
                min_offset: int) -> np.ndarray:
    """Which items (their item numbers ``numbers``) need no word: expired (below the commit log's min offset), or
    pointing at the start of a valid record whose dispatched index keys include the item's keyHash, with the
    record's store time inside the header range and giving the item's timeDiff. Everything else goes through
    ``_item_problem``, which says what is wrong (or finds nothing, exactly as before)."""
    kh_name, phy_name, td_name = items.dtype.names[:3]
    phy = items[phy_name].astype(np.int64)
    expired = phy < min_offset
    ok = rec_of >= 0
    if not recs.np_offset.size or not recs.np_nkeys.size or not (0 <= begin < _TS_SANE and 0 <= end < _TS_SANE):
        return expired
    j = np.where(ok, rec_of, 0)
    kh = items[kh_name].astype(np.int64)
    nk = recs.np_nkeys[j]
    k0 = recs.np_kstart[j]
    last = recs.np_keyh.size - 1
    match = np.zeros(len(items), dtype=bool)
    if last >= 0:
        for k in range(min(int(nk.max(initial=0)), _FAST_KEYS)):
            match |= (nk > k) & (recs.np_keyh[np.minimum(k0 + k, last)] == kh)
    ts = recs.np_ts[j]
    in_range = (ts >= begin) & (ts <= end)
    exp = (np.where(in_range, ts, begin) - begin) // 1000
    n = numbers
    tdiff_ok = (items[td_name].astype(np.int64) == exp) | ((n == 1) & (ts == begin))
    return expired | (ok & match & in_range & tdiff_ok)


def _index_behind(store: Store, rep: VerifyReport, valid: np.ndarray, hi: int, end_phy: int, path: str) -> None:
    """index_behind: records the broker's buildIndex would put keys for (not ROLLBACK, a UNIQ_KEY or a KEYS token)
    that lie past the last index file's endPhyOffset (the offset of the last record it indexed): the index is
    behind the commit log. ``valid``: the offsets of the records verify's walk found intact past it (damage is
    verify's other findings), ``hi`` the end of the last; only those records are read."""
    from ..store.walk.records import RecordRun
    from .dispatcher import dispatch_fields
    from .recovery.controller import detect_confirm_offset

    # controller mode: the reput dispatches (and indexes) only up to confirmPhyOffset; the unconfirmed tail past it
    # is its own note, not an index that fell behind
    confirm = detect_confirm_offset(store) if store.layout.dledger is None else -1
    first = last = None
    n = size = 0
    # in bulk, as IndexService.buildIndex would see them: every record but ROLLBACK ones (3 << 2) with a key
    for ev in store.commitlog.walk(int(valid[0]), hi, check_crc=False, accept_v2=True, stop_at_end=True):
        if type(ev) is not RecordRun:
            continue
        r = ev.records
        pos = r["position"].astype(np.int64) + ev.file.start
        end = pos + r["total_size"]
        ok = ((r["sys_flag"] & 0xC) != 0xC) & np.isin(pos, valid)
        if confirm >= 0:
            ok &= end <= confirm
        sel = np.flatnonzero(ok)
        if sel.size:
            sub = ev if sel.size == len(r) else ev[sel]
            fields, _, _ = dispatch_fields(sub.file.buffer, sub.rows, want_keys=True)
            has = np.flatnonzero(fields[:, 2] > 0)
            if has.size:
                p, e = pos[sel][has], end[sel][has]
                first = int(p[0]) if first is None else first
                last = int(e[-1])
                n += int(has.size)
                size += int((e - p).sum())
        if 0 <= confirm < int(end[-1]):
            break
    if first is None or last is None:
        return
    rep.add(Problem("index", "index_behind", first, last, path, None,
                    f"{n} record(s) with keys lie past the last index file's endPhyOffset {end_phy}: the index is "
                    "behind the commit log (a key look-up does not find them until the broker dispatches them again; "
                    "`recover --dry-run` says whether its restart does)", count=n, size=size), merge=False)


def _item_problem(cl, recs: _Records, keys_cache: dict, h, n: int, pos: int, kh: int, phy: int, tdiff: int, j: int,
                  path: str) -> Problem | None:
    """What is wrong with index item ``n`` (at ``pos`` in the file), from the record decoded one by one."""
    from ..errors import RmqInspectError
    from ..formats.javahash import build_index_key, index_key_hash
    from .dispatch_rules import index_keys

    if phy < cl.min_offset:
        return None  # expired data (retention), normal
    info = keys_cache.get(phy)
    if info is None:
        if j < 0:
            dmg = recs.in_damage(phy)
            kind = "index_points_to_damage" if dmg else "index_dangling"
            why = (f"item points into the damaged range [{dmg[0]}, {dmg[1]})" if dmg else
                   "item points where no valid record starts")
            return Problem("index", kind, pos, pos + 20, path, pos, f"item {n}: {why} (physical offset {phy})")
        try:
            msg = cl.read_message(phy)
        except RmqInspectError as e:
            return Problem("index", "index_dangling", pos, pos + 20, path, pos, f"item {n}: {e.message}")
        hashes = {index_key_hash(build_index_key(msg.topic, k)) for k in index_keys(msg.properties)}
        info = (hashes, msg.store_timestamp)
        keys_cache[phy] = info
    hashes, ts = info
    if kh not in hashes:
        return Problem("index", "index_hash", pos, pos + 20, path, pos,
                       f"item {n}: keyHash {kh} matches no key of the record at {phy}")
    if not (h.begin_timestamp <= ts <= h.end_timestamp):
        return Problem("index", "index_time", pos, pos + 20, path, pos,
                       f"item {n}: record store time {ts} outside the file's range "
                       f"[{h.begin_timestamp}, {h.end_timestamp}]")
    # IndexFile.putKey: timeDiff in whole seconds from beginTimestamp; the first item of a
    # non-first file was computed against the previous file's end (FORMATS.md §5.3 quirk)
    exp = (ts - h.begin_timestamp) // 1000
    if tdiff != exp and not (n == 1 and ts == h.begin_timestamp):
        return Problem("index", "index_time", pos, pos + 20, path, pos,
                       f"item {n}: timeDiff {tdiff}s, record store time gives {exp}s")
    return None


def _verify_checkpoint(store: Store, rep: VerifyReport, max_ts: int | None) -> None:
    cp = store.checkpoint
    if cp is None:
        rep.notes.append("no checkpoint file")
        return
    rep.counts["checkpoint_fields"] = 3
    if max_ts is None:
        return
    for name, v in (("physicMsgTimestamp", cp.physic_msg_timestamp), ("logicsMsgTimestamp", cp.logics_msg_timestamp),
                    ("indexMsgTimestamp", cp.index_msg_timestamp)):
        if v > max_ts:
            rep.add(Problem("checkpoint", "checkpoint_ahead", 0, 24, "checkpoint", 0,
                            f"{name} {v} is newer than the newest valid record ({max_ts}): data the broker had "
                            "flushed is missing"), merge=False)
