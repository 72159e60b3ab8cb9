"""Past the damage: resynchronise on magic codes, validate candidates, classify damaged regions.

The broker stops at the first record that fails its check and throws away everything after it
(FORMATS.md §7.2, §7.3). This module goes further, for forensics only: it looks for the next record start
after damage (a V1/V2 magic code four bytes in, or a blank end-of-file record that reaches exactly to the
end of the file) and accepts a candidate only if it is self-consistent: size bounds, every length inside
the record adding up to TOTALSIZE, the body CRC, and the stored PHYSICALOFFSET equal to file start +
position (a record copied from elsewhere, or stale bytes of an older generation, fail that test).
Queue-offset monotonicity per queue is checked on what is salvaged.

This is the walk's resynchronising policy over the reader's events (``walk.file.walk_file``): ``walk_batches``
yields typed events only, ``RecordRun`` / ``Record`` / ``Damage`` (``walk.kinds``' one vocabulary). ``verify``,
``summary`` and ``report`` consume it; ``analyses.salvage`` applies it after the recovery's truncation point.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass

import numpy as np

from ...formats.constants import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from .. import Store
from ..mapped import MappedFile
from ..scanner import compiled
from .file import walk_file
from .kinds import BLANK, DAMAGE_OF_KIND, END, FILE_END, MESSAGE, Damage, DamageKind
from .parallel import chunk_bytes, map_files, resolve_jobs
from .records import MIN_RECORD_SIZE, Record, RecordHeader, RecordRun, scan_buffer

_V1B = MESSAGE_MAGIC_CODE_V1.to_bytes(4, "big", signed=True)
_V2B = MESSAGE_MAGIC_CODE_V2.to_bytes(4, "big", signed=True)
_BLB = BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)

@dataclass(frozen=True, slots=True)
class BlankRecord:
    """A blank end-of-file record as a converted walk (``walk_batches(convert=...)``) reports it: where, without
    the file's map (it crosses processes)."""

    file: str  # the file's name
    offset: int
    size: int


def _converted(ev, convert: Callable, convert_args: tuple):
    """A per-file walk event as a converted walk hands it on: a run through ``convert``, a blank record as a
    ``BlankRecord``, the held damage as it is (for ``ResyncJoin``)."""
    if type(ev) is RecordRun:
        return convert(ev, *convert_args)
    if type(ev) is Record:  # file_events' only Record: the blank end-of-file record
        return BlankRecord(ev.file.name, ev.offset, ev.size)
    return ev


def _data_end(f: MappedFile, lo: int, hi: int) -> int:
    """Position after the last non-zero byte of ``f`` in [lo, hi) (lo if all zero), scanning backwards in
    chunks (a pre-allocated 1 GiB file is mostly zeros: ``any()`` per chunk runs at memory speed) over the
    parts that are not holes (``MappedFile.data_ranges``: a hole is zeros without being read)."""
    buf = f.buffer
    chunk = 4 << 20
    for r_lo, r_hi in reversed(f.data_ranges(lo, hi)):
        end = r_hi
        while end > r_lo:
            a = max(r_lo, end - chunk)
            # eight bytes at a time while the chunk is a whole number of words (any() is per element)
            words = (end - a) % 8 == 0
            arr = np.frombuffer(buf, dtype=np.uint64 if words else np.uint8,
                                count=(end - a) // 8 if words else end - a, offset=a)
            if arr.any():
                arr = np.frombuffer(buf, dtype=np.uint8, count=end - a, offset=a)
                nz = np.flatnonzero(arr)
                return a + int(nz[-1]) + 1
            del arr
            _drop_pages(buf, a, end)
            end = a
    return lo


def _drop_pages(buf, lo: int, hi: int) -> None:
    """Drop the whole pages of ``buf[lo:hi]`` from a read-only map (MADV_DONTNEED): the zero tail just read
    leaves the process' RSS instead of growing it by the pre-allocated rest of the file."""
    import mmap

    if not isinstance(buf, mmap.mmap) or not hasattr(buf, "madvise"):
        return
    a = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE
    b = hi - hi % mmap.PAGESIZE
    if b > a:
        try:
            buf.madvise(mmap.MADV_DONTNEED, a, b - a)
        except (OSError, ValueError):
            pass


def validate_at(f: MappedFile, pos: int, check_crc: bool, accept_v2: bool):
    """The first slot at ``pos`` if it is a fully valid record lying where it says, else None."""
    buf = f.buffer
    for kind, p, size, hdr, bpos, crc_ok, _reason in scan_buffer(buf, pos, f.size, check_crc, accept_v2):
        if kind == MESSAGE:
            hdr = RecordHeader._make(hdr)
            if hdr.physical_offset == f.start + p:
                return Record(MESSAGE, f.start + p, size, f, p, hdr, bpos, crc_ok)
            return None
        if kind == BLANK and size == f.size - p and p > 0:
            return Record(BLANK, f.start + p, size, f, p)
        return None
    return None


def find_next_valid(f: MappedFile, frm: int, check_crc: bool, accept_v2: bool,
                    search_end: int | None = None) -> Record | None:
    """Resynchronise: the first position >= frm holding a valid record (or the file's closing blank).
    Only magic codes before ``search_end`` (default: the file's last non-zero byte) are tried."""
    buf = f.buffer
    limit = f.size
    if search_end is None:
        search_end = _data_end(f, frm, limit)
    if search_end <= frm:
        return None
    needles = [_V1B, _BLB] + ([_V2B] if accept_v2 else [])
    nxt = {n: buf.find(n, frm + 4, search_end) if frm + 4 < search_end else -1 for n in needles}
    while True:
        live = [(h, n) for n, h in nxt.items() if h >= 0]
        if not live:
            return None
        h, n = min(live)
        cand = h - 4
        if cand + MIN_RECORD_SIZE <= limit or n == _BLB:
            g = validate_at(f, cand, check_crc, accept_v2)
            if g is not None:
                return g
        nxt[n] = buf.find(n, h + 1, search_end)


# Records per walked run (verify's per-run numpy work is amortised over large runs).
_RECORDS_PER_RUN = 1 << 16
# A chunk walk's first run, before any record size is known (file_events' stops).
_AIM_PROBE = 256


def walk_with_resync(store_or_files, start: int | None = None, *, check_crc: bool = True, accept_v2: bool = True,
                     file_size: int | None = None) -> Iterator[Record | Damage]:
    """Every valid record and every damaged range from ``start`` to the end of the last file's data.

    Unlike the broker, keeps going: after damage it resynchronises on the next valid record in the same
    file; a file that ends in zeros without its blank record while later files hold data is damage too.
    The final damaged range(s) with nothing valid after them are re-labelled ``torn_tail``.
    """
    for item in walk_batches(store_or_files, start, check_crc=check_crc, accept_v2=accept_v2, file_size=file_size):
        if isinstance(item, RecordRun):
            f = item.file
            base = f.start
            r = item.records
            # the header is unpacked when a consumer asks for it (Record.header)
            for p, size, bpos, c in zip(r["position"].tolist(), r["total_size"].tolist(), r["body_pos"].tolist(),
                                        r["crc_ok"].tolist()):
                yield Record(MESSAGE, base + p, size, f, p, None, bpos, None if c < 0 else c == 1)
        else:
            yield item


def walk_batches(store_or_files, start: int | None = None, *, check_crc: bool = True, accept_v2: bool = True,
                 file_size: int | None = None, jobs: int | None = 1, convert=None,
                 convert_args: tuple = (), on_start: Callable[[], None] | None = None) -> Iterator:
    """``walk_with_resync`` with the valid records in bulk: the ``RecordRun``s of ``walk_file`` (every
    record's stored PHYSICALOFFSET equals file start + position), ``Record`` only for blank end-of-file
    records, ``Damage`` as in ``walk_with_resync``. The resync policy is this module's: the walk reports
    the first damage of a stretch, ``find_next_valid`` finds where valid records start again.

    The walk is made of one walk per file (``file_events``) joined by ``ResyncJoin`` (the damage held back
    until a valid record follows, the torn tail at the end). ``convert(run, *convert_args)`` turns every
    ``RecordRun`` into what is yielded instead, inside the file's own walk, and a blank end-of-file record then
    comes as a ``BlankRecord`` (a converted walk yields converted runs, ``BlankRecord`` and ``Damage`` only): with
    ``jobs`` > 1 the files
    are walked by worker processes (``store.walk.parallel``), ``convert`` must then be a module-level function
    returning picklable data (the records' maps stay in the worker). ``on_start()``: called once the walk has
    begun, its worker processes forked (``parallel.map_files``)."""
    cl = store_or_files.commitlog if isinstance(store_or_files, Store) else store_or_files
    tasks = walk_tasks(cl, start, check_crc=check_crc, accept_v2=accept_v2, file_size=file_size, convert=convert,
                       convert_args=convert_args)
    join = ResyncJoin()
    # a RecordRun cannot leave its process: only converted walks go to workers, split inside the files
    chunks = chunk_tasks(cl, tasks) if convert is not None and resolve_jobs(jobs) > 1 else []
    if len(chunks) > 1:
        for events in join_chunks(map_files(run_walk_task, chunks, jobs, on_start)):
            yield from join.feed_all(events)
    else:
        if on_start is not None:
            on_start()
        files = cl.files
        for t in tasks:
            for ev in file_events(files[t.index], t.pos, t.file_size, t.check_crc, t.accept_v2,
                                  files[t.index - 1] if t.check_previous else None,
                                  functools.partial(_has_data_after, files, t.index)):
                yield from join.feed(ev if convert is None else _converted(ev, convert, convert_args))
    yield from join.finish()


# file_events' damage events: Held(ADD, Damage) merges a stale range with the one before it (``_add``),
# Held(APPEND, Damage) never merges
ADD = "add"
APPEND = "append"


class Held:
    """Damage the walk of one file met, for ``ResyncJoin`` to hold back until a valid record follows."""

    __slots__ = ("how", "damage")

    def __init__(self, how: str, damage: Damage):
        self.how, self.damage = how, damage

    def __reduce__(self):
        return Held, (self.how, self.damage)


class ResyncJoin:
    """The rules of the resynchronising walk that cross files, applied to the per-file events in file order:
    damage is held back until a valid record follows it (adjacent stale ranges merged), and the damage with
    nothing valid after it is re-labelled ``torn_tail`` at the end."""

    def __init__(self):
        self.pending: list[Damage] = []

    def feed(self, ev) -> list:
        if type(ev) is Held:
            if ev.how == ADD:
                _add(self.pending, ev.damage)
            else:
                self.pending.append(ev.damage)
            return []
        if self.pending:
            out = self.pending + [ev]
            self.pending = []
            return out
        return [ev]

    def feed_all(self, events) -> Iterator:
        for ev in events:
            yield from self.feed(ev)

    def finish(self) -> list[Damage]:
        # nothing valid after these: the torn tail
        for d in self.pending:
            if d.kind in (DamageKind.CRC, DamageKind.HALF, DamageKind.GARBAGE, DamageKind.STALE):
                d.cause = d.kind
                d.kind = DamageKind.TORN_TAIL
        out, self.pending = self.pending, []
        return out


@dataclass(frozen=True)
class WalkTask:
    """One file's part of ``walk_batches``, as data a worker process can take: the files as (start, path) so
    the worker maps them itself, and the converter of its records."""

    files: tuple[tuple[int, str], ...]
    index: int
    pos: int
    file_size: int
    check_crc: bool
    accept_v2: bool
    check_previous: bool  # the missing / overlapping file check against the file before (not for the first)
    convert: Callable | None = None
    convert_args: tuple = ()
    # a chunk of the file (chunk_tasks): the later chunks' starts, where this walk ends when it lands on one
    stops: tuple[int, ...] = ()
    # DLedger data files (entries around the records), as the parent's CommitLog knows them from its layout and
    # broker.conf; None: from the path (a dledger-<selfId>/data directory)
    dledger: bool | None = None


def walk_tasks(cl, start: int | None = None, *, check_crc: bool = True, accept_v2: bool = True,
               file_size: int | None = None, convert=None, convert_args: tuple = ()) -> list[WalkTask]:
    files = cl.files
    fsize = file_size or cl.file_size
    if start is None:
        start = files[0].start
    paths = tuple((f.start, f.path) for f in files)
    tasks: list[WalkTask] = []
    for i, f in enumerate(files):
        if f.start + f.size <= start:
            continue
        first = not tasks
        tasks.append(WalkTask(paths, i, max(0, start - f.start) if first else 0, fsize, check_crc, accept_v2,
                              i > 0 and not first, convert, convert_args, dledger=f.dledger))
    return tasks


# How far past the aimed-at position a chunk start is looked for: a record of the broker's largest default size
# (maxMessageSize, 4 MiB) starts in it.
_CHUNK_SEARCH = (4 << 20) + 4096


def record_chunks(f: MappedFile, start: int, *, accept_v2: bool = True, step: int | None = None) -> list[int]:
    """Positions that split the walk of ``f`` from ``start`` into chunks of about ``step`` bytes (default
    ``parallel.chunk_bytes()``), ``start`` first: at each aimed-at position, the next fully valid record
    (``find_next_valid``: magic code, every length adding up, the body CRC, the stored PHYSICALOFFSET equal to
    where it lies). A few pages read per chunk start, nothing walked: the split costs nothing serial.
    Where none is found within ``_CHUNK_SEARCH`` (damage, the blank end-of-file record) the chunk before grows
    by a step; zeros at the aimed-at position (the pre-allocated rest of the newest file) end the split there.

    A valid record is where the file's walk goes through when nothing before it is damaged; whether it does is
    the chunk walks' business (``file_events``' ``stops``, ``join_chunks``), so a start the walk passes over
    costs work, never correctness."""
    step = step or chunk_bytes()
    out = [start]
    at = start + step
    buf = f.buffer
    while at < f.size:
        if not any(bytes(buf[at:min(f.size, at + 4096)])):
            # zeros: most likely the pre-allocated rest of the newest file (read further, its pages would come
            # from disk one by one for nothing); the rest of the file is the last chunk
            break
        # a near window first: each magic code not found makes find() read the whole window
        g = find_next_valid(f, at, True, accept_v2, min(f.size, at + (64 << 10))) \
            or find_next_valid(f, at, True, accept_v2, min(f.size, at + _CHUNK_SEARCH))
        if g is None or g.kind != MESSAGE:
            at += step  # none here: the chunk before grows by a step
            continue
        out.append(g.position)
        at = g.position + step
    return out


def chunk_tasks(cl, tasks: list[WalkTask]) -> list[WalkTask]:
    """``tasks`` (one per file) split inside each file (``record_chunks``): the parallel engine balances by
    bytes, not files. Each chunk's walk is the file's walk from the chunk's start (the walk carries nothing but
    its position), it ends where it lands on a later chunk's start (``stops``) or at the file's end, and
    ``join_chunks`` keeps exactly the chunks the file's walk goes through."""
    files = cl.files
    out = []
    for t in tasks:
        starts = tuple(record_chunks(files[t.index], t.pos, accept_v2=t.accept_v2))
        for k, b in enumerate(starts):
            out.append(dataclasses.replace(t, pos=b, check_previous=t.check_previous and k == 0,
                                           stops=starts[k + 1:]))
    return out


class ChunkJoin:
    """Which chunk walks, taken in task order, the walk of whole files goes through: a chunk whose start the chunk
    before walked past (damage resynchronised over it, or the file ended) is dropped; the next chunk kept starts
    where the one before landed. One rule for every chunked walk's results (verify's events, export's rows)."""

    def __init__(self) -> None:
        self.cur: tuple[object, int] | None = None

    def keeps(self, file: object, start: int, landed: int) -> bool:
        """Whether the chunk of ``file`` (any key naming it) from ``start``, whose walk landed at ``landed``, is
        kept."""
        if self.cur is not None and self.cur[0] == file and start < self.cur[1]:
            return False
        self.cur = (file, landed)
        return True


def join_chunks(results) -> Iterator[list]:
    """The events of ``run_walk_task`` results taken in task order, as the walk of whole files gives them
    (``ChunkJoin``)."""
    join = ChunkJoin()
    for index, pos, landed, events in results:
        if join.keeps(index, pos, landed):
            yield events


def run_walk_task(task: WalkTask) -> tuple[int, int, int, list]:
    """A worker's walk of one file or chunk: (file index, start, position it landed on, events), records
    converted (``task.convert``), the maps closed."""
    own: dict[int, MappedFile] = {}

    def mapped(i: int) -> MappedFile:
        f = own.get(i)
        if f is None:
            start, path = task.files[i]
            f = own[i] = MappedFile(path, start, dledger=task.dledger)
        return f

    def has_after() -> bool:
        return _has_data_after([mapped(j) for j in range(task.index + 1, len(task.files))], -1)

    try:
        out = []
        landed: list[int] = []
        for ev in file_events(mapped(task.index), task.pos, task.file_size, task.check_crc, task.accept_v2,
                              mapped(task.index - 1) if task.check_previous else None, has_after,
                              stops=task.stops, landed=landed):
            out.append(ev if task.convert is None else _converted(ev, task.convert, task.convert_args))
        return task.index, task.pos, landed[0], out
    finally:
        for f in own.values():
            f.close()


def _has_data_after(files, i: int) -> bool:
    for g in files[i + 1:]:
        if g.size >= 8 and any(bytes(g.buffer[0:8])):
            return True
    return False


def first_at(positions: np.ndarray, stops: np.ndarray) -> int:
    """Index of the first of a run's (ascending) record positions that is one of ``stops``; -1 if none. A binary
    search per stop (np.isin would sort the stops and, the first time, import numpy.ma: 15 ms of every worker)."""
    k = np.searchsorted(positions, stops)
    inside = k < len(positions)
    k = k[inside]
    k = k[positions[k] == stops[inside]]
    return int(k.min()) if k.size else -1


def run_stats(run: RecordRun, base: int) -> tuple[int, int, int, int]:
    """(index of the first record whose stored PHYSICALOFFSET is not ``base`` + its position, -1 if none; the
    smallest and largest STORETIMESTAMP, 0 and 0 for no record; the records' bytes) of a run. One pass of the
    compiled ``run_stats`` over the rows where it is built: numpy reads each column as a strided pass over the
    rows (~2 ms a run of 64 k records, a tenth of a chunk walk's time); else numpy, the same values."""
    ext = compiled()
    if ext is not None and hasattr(ext, "run_stats"):
        return ext.run_stats(run.rows, base)
    r = run.records
    if not len(r):
        return -1, 0, 0, 0
    stale = np.flatnonzero(r["physical_offset_field"] != r["position"] + base)
    ts = r["store_timestamp"]
    return int(stale[0]) if stale.size else -1, int(ts.min()), int(ts.max()), int(r["total_size"].sum())


def file_events(f: MappedFile, pos: int, fsize: int, check_crc: bool, accept_v2: bool, prev: MappedFile | None,
                has_data_after: Callable[[], bool], *, stops: tuple[int, ...] = (),
                landed: list[int] | None = None) -> Iterator:
    """The resynchronising walk of one file from ``pos``: ``RecordRun``s, ``Record`` blank records, and damage
    as (ADD|APPEND, Damage) events for ``ResyncJoin``. ``prev``: the file before, to report a missing or
    overlapping file; ``has_data_after()``: whether a later file holds data (zeros up to this file's end are
    then damage).

    A chunk's walk (``chunk_tasks``): the walk ends as soon as it lands on a position in ``stops`` (a run of
    records is cut before the record starting there), and the position it ended at (a stop, or the file's
    size) is appended to ``landed``. Its runs are sized to reach the next stop (the scanner is never asked for
    records far past it)."""
    seq = _sequence_damage(f, prev, fsize) if prev is not None else None
    if seq is not None:
        yield Held(APPEND, seq)
    stop_set = set(stops)
    stop_arr = np.asarray(stops, dtype=np.int64)
    # records and bytes walked so far: a run aimed at the next stop asks for the records of average size that fit
    # before it (a record far larger than the average must not shrink the runs to a few records each)
    seen_n = seen_bytes = 0
    while pos < f.size and pos not in stop_set:
        resync_from = None
        dmg = None
        cut = None
        aim = next((s for s in stops if s > pos), None)
        run_records = _RECORDS_PER_RUN
        if aim is not None:
            run_records = min(_RECORDS_PER_RUN, max(1, (aim - pos) * seen_n // seen_bytes)) if seen_n else _AIM_PROBE
        # walked pages are dropped from the map as the walk goes (PageReleaser): RSS stays flat in the file size
        for ev in walk_file(f, pos, f.size, check_crc=check_crc, accept_v2=accept_v2, run_records=run_records,
                            release_pages=True):
            if isinstance(ev, RecordRun):
                if stop_arr.size:
                    first = first_at(ev.records["position"], stop_arr)
                    if first >= 0:  # the walk reaches a later chunk's start: this chunk's walk ends there
                        cut = int(ev.records["position"][first])
                        ev = ev[:first]
                r = ev.records
                # a valid-looking record in the wrong place: stale bytes (or a copied file)
                stale, _, _, run_bytes = run_stats(ev, f.start)
                good = ev[:stale] if stale >= 0 else ev
                if len(good):
                    yield good
                    pos = good.end
                if stale >= 0:
                    bad = r[stale]
                    p, size = int(bad["position"]), int(bad["total_size"])
                    claimed = int(bad["physical_offset_field"])
                    dmg = Damage(DamageKind.STALE, f.start + p, f.start + p + size, f.name, p,
                                 f"record claims PHYSICALOFFSET {claimed} but lies at {f.start + p}")
                    resync_from = p + 1
                    break
                if cut is not None:
                    pos = cut
                    break
                if aim is not None:  # the next run aimed at the next stop again
                    seen_n += len(r)
                    seen_bytes += run_bytes
                    break
                continue
            kind, p, size, reason = ev.kind, ev.position, ev.size, ev.reason
            if kind == BLANK:
                yield Record(BLANK, f.start + p, size, f, p)
                pos = f.size
                break
            if kind == FILE_END:
                pos = f.size
                break
            if kind == END:
                pos = yield from _after_zeros(f, p, check_crc, accept_v2, has_data_after)
                break
            dmg = Damage(DAMAGE_OF_KIND.get(kind, DamageKind.GARBAGE), f.start + p, f.start + p, f.name, p, reason)
            resync_from = p + 1
            break
        else:
            pos = f.size
        if dmg is not None:
            assert resync_from is not None  # set with every dmg above
            pos = yield from _resync(f, dmg, resync_from, check_crc, accept_v2, has_data_after)
    if landed is not None:
        landed.append(min(pos, f.size))


def _sequence_damage(f: MappedFile, prev: MappedFile, fsize: int) -> Damage | None:
    """A file missing between ``prev`` and ``f``, or ``f`` overlapping ``prev``, by their names and the file size."""
    if f.start > prev.start + fsize:
        return Damage(DamageKind.MISSING_FILE, prev.start + fsize, f.start, None, None,
                      f"no commit-log file covers [{prev.start + fsize}, {f.start}) "
                      f"({(f.start - prev.start - fsize) // fsize or 1} file(s) missing)")
    if f.start < prev.start + fsize:
        return Damage(DamageKind.NOT_CONTIGUOUS, f.start, prev.start + fsize, f.name, 0,
                      f"{f.name} overlaps {prev.name}")
    return None


def _after_zeros(f: MappedFile, p: int, check_crc: bool, accept_v2: bool,
                 has_data_after: Callable[[], bool]) -> Generator[Held, None, int]:
    """Zero-filled space at position ``p``: where the walk of ``f`` goes on (the next valid record, or the file's
    end), and the damage the zeros are when data follows them (in this file, or in a later one)."""
    data_end = _data_end(f, p, f.size)
    nxt = find_next_valid(f, p, check_crc, accept_v2, data_end) if data_end > p else None
    if nxt is None:
        if data_end > p:
            yield Held(APPEND, Damage(DamageKind.GARBAGE, f.start + p, f.start + data_end, f.name, p,
                                      "zero-filled space followed by unreadable bytes"))
        elif p < f.size and has_data_after():
            yield Held(APPEND, Damage(DamageKind.ZERO_PAGE, f.start + p, f.start + f.size, f.name, p,
                                      "zeros up to the end of the file where a blank end-of-file "
                                      "record should be, and later files hold data"))
        return f.size
    yield Held(APPEND, Damage(DamageKind.ZERO_PAGE, f.start + p, nxt.offset, f.name, p,
                              f"{nxt.offset - f.start - p} zero bytes inside the data"))
    return nxt.position


def _resync(f: MappedFile, dmg: Damage, resync_from: int, check_crc: bool, accept_v2: bool,
            has_data_after: Callable[[], bool]) -> Generator[Held, None, int]:
    """After damage at ``dmg.position``: the damaged range up to the next valid record (``find_next_valid`` from
    ``resync_from``), where the walk of ``f`` goes on; without one, the range to the end of the data, and the
    zeros after it are damage too when a later file holds data."""
    buf = f.buffer
    at = dmg.position
    assert at is not None  # a damaged record lies in a file
    if dmg.kind in (DamageKind.CRC, DamageKind.HALF):
        known_end = at + _record_size(buf, at, f.size)
    elif dmg.kind == DamageKind.STALE:
        known_end = dmg.end - f.start
    else:
        known_end = at + 1
    nxt = find_next_valid(f, resync_from, check_crc, accept_v2)
    if nxt is not None:
        dmg.end = nxt.offset
        _zero_page_check(buf, f.start, dmg)
        yield Held(ADD, dmg)
        return nxt.position
    data_end = max(_data_end(f, at, f.size), known_end)
    dmg.end = f.start + data_end
    yield Held(ADD, dmg)
    if data_end < f.size and has_data_after():
        yield Held(APPEND, Damage(DamageKind.ZERO_PAGE, f.start + data_end, f.start + f.size, f.name, data_end,
                                  "no blank end-of-file record after the damage, later files hold data"))
    return f.size


ZERO_PAGE_MIN = 4096


def _zero_page_check(buf, base: int, d: Damage) -> None:
    """A damaged range holding a run of >= 4096 zero bytes (a lost page) is a zero page, whatever the
    record check said about its first bytes (that record merely had its tail zeroed)."""
    lo = d.start - base
    hi = min(d.end - base, lo + (16 << 20))
    if hi - lo < ZERO_PAGE_MIN:
        return
    arr = np.frombuffer(buf, dtype=np.uint8, count=hi - lo, offset=lo)
    z = np.concatenate(([0], (arr == 0).view(np.int8), [0]))
    edges = np.flatnonzero(np.diff(z))
    runs = edges[1::2] - edges[0::2]
    if runs.size and int(runs.max()) >= ZERO_PAGE_MIN:
        k = int(np.argmax(runs))
        d.cause = d.kind
        d.reason = (f"{int(runs[k])} zero bytes at position {lo + int(edges[2 * k])} inside the data "
                    f"(first record: {d.reason})")
        d.kind = DamageKind.ZERO_PAGE


def _add(pending: list[Damage], d: Damage) -> None:
    """Adjacent ranges of the same kind become one (a run of stale records is one region)."""
    if pending and pending[-1].kind == d.kind and pending[-1].end == d.start and d.kind == DamageKind.STALE:
        pending[-1].end = d.end
        return
    pending.append(d)


def _record_size(buf, pos: int, limit: int) -> int:
    if pos + 4 > limit:
        return limit - pos
    total = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
    return total if 0 < total <= limit - pos else limit - pos
