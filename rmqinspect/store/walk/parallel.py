"""The local parallel engine: one commitlog file per task, worker processes, results in file order.

Every command that walks the commit log (``verify``, ``rebuild``, ``recover``'s scan, ``salvage``,
``summary``, ``export``) can split its work at file boundaries, because the broker's walk restarts at every
file (a blank end-of-file record, or the file's end, ends a file's records). Each command supplies a
*per-file function* (the heavy part: scanning, CRCs, decoding, all in the worker) that returns a small
picklable result, and a *merge* that takes the results in file order and applies the rules that cross files
(stop at the first damage, a missing file, the torn tail, queue-offset monotonicity), the same code the
sequential walk runs. ``map_files`` is the only place processes are made.

Design rules:

* ``jobs`` <= 1, or fewer than two tasks: the per-file function runs in this process, one task after the
  other (no worker is started; start-up costs nothing).
* Workers are forked (``fork`` start method where the platform has it; ``RMQINSPECT_START_METHOD`` chooses
  another) and receive paths, never open maps: every task maps its own file in the worker and closes it.
* At most ``jobs + 2`` tasks are in flight or waiting and results are handed over in file order as soon as the next
  one is ready, so the parent holds a bounded number of per-file results (memory flat in the store size).
* A result's large arrays travel through shared memory, not the result pipe: with forked workers, through a few
  result slots mapped before the fork and used again task after task (``_ResultSlots``); otherwise, or when no slot
  is free or big enough, through a file in ``/dev/shm`` of its own (``_Handover``).
* An ``RmqInspectError`` raised in a worker is raised again in the parent with its file, offset and exit code.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

START_METHOD_ENV = "RMQINSPECT_START_METHOD"
JOBS_ENV = "RMQINSPECT_JOBS"
CHUNK_ENV = "RMQINSPECT_CHUNK_BYTES"
# A commitlog file is split into chunks of about this many bytes for the workers (a 1 GiB file is 16 tasks).
DEFAULT_CHUNK_BYTES = 64 << 20


def cores() -> int:
    """CPUs this process may run on (the affinity mask where the platform has one)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def _env_jobs() -> int | None:
    v = os.environ.get(JOBS_ENV, "").strip()
    return int(v) if v.isdigit() and int(v) > 0 else None


def default_jobs() -> int:
    """The commands' ``--jobs`` when not given: ``RMQINSPECT_JOBS`` if set, else the number of cores."""
    return _env_jobs() or cores()


def resolve_jobs(jobs: int | None) -> int:
    """A library call's ``jobs``: as given; None means ``RMQINSPECT_JOBS`` if set, else 1 (a library call
    starts no process unless asked to; the commands ask for every core)."""
    if jobs is not None and jobs > 0:
        return jobs
    return _env_jobs() or 1


def chunk_bytes(default: int = DEFAULT_CHUNK_BYTES) -> int:
    """The size a commitlog file's chunks aim at (``salvage.record_chunks``, ``rebuild``, ``export``):
    ``RMQINSPECT_CHUNK_BYTES`` if set (tests force tiny chunks), else ``default``."""
    v = os.environ.get(CHUNK_ENV, "").strip()
    return int(v) if v.isdigit() and int(v) > 0 else default


class _Failure:
    """An exception raised in a worker, carried back as plain data (RmqInspectError's constructor takes more
    than the message, so the default exception pickling would lose the file and offset)."""

    __slots__ = ("cls", "message", "attrs")

    def __init__(self, exc: BaseException):
        self.cls = type(exc)
        self.message = str(exc.args[0]) if exc.args else str(exc)
        self.attrs = dict(getattr(exc, "__dict__", {}))
        if isinstance(exc, OSError) and exc.errno is not None:  # a full disk in a worker (export) says which file
            self.attrs["oserror"] = (exc.errno, exc.strerror, exc.filename)

    def rebuild(self) -> BaseException:
        if issubclass(self.cls, OSError) and "oserror" in self.attrs:  # errno, strerror and filename kept
            return self.cls(*self.attrs["oserror"])
        try:
            exc = self.cls.__new__(self.cls)
            Exception.__init__(exc, self.message)
            exc.__dict__.update(self.attrs)
            return exc
        except Exception:  # an exception type that cannot be rebuilt this way: its text is kept
            return RuntimeError(f"{self.cls.__name__}: {self.message}")


# A result whose arrays add up to more than this goes through a shared-memory file instead of the result pipe
# (``_Handover``): a rebuild chunk's puts are ~6 MB, and pickling them into the pipe, copying them through it 64 KiB
# at a time and unpickling them cost both processes more CPU than the work they carry needs.
_HANDOVER_BYTES = 1 << 20
_SHM_DIR = "/dev/shm"


class _Handover:
    """A worker's result with its large buffers (numpy arrays: pickle protocol 5's out-of-band buffers) written to a
    file in shared memory; the parent maps the file, removes it at once and unpickles the result over the map, so the
    arrays are not copied again. Never inside a store: ``/dev/shm`` (or the temporary directory)."""

    __slots__ = ("meta", "path", "sizes")

    def __init__(self, meta: bytes, path: str, sizes: list[int]):
        self.meta, self.path, self.sizes = meta, path, sizes

    def __reduce__(self):
        return _Handover, (self.meta, self.path, self.sizes)

    @staticmethod
    def pack(res: Any, slot: int | None = None) -> Any:
        """``res`` as it goes back to the parent: itself (small), in result slot ``slot`` (``_InSlot``) when given
        and big enough, else in a shared-memory file of its own; the result pipe when none can be written."""
        import pickle

        buffers: list = []
        meta = pickle.dumps(res, protocol=5, buffer_callback=buffers.append)
        raws = [b.raw() for b in buffers]
        if sum(r.nbytes for r in raws) < _HANDOVER_BYTES:
            return res
        in_slot = _pack_into_slot(meta, raws, slot)
        if in_slot is not None:
            return in_slot
        import tempfile

        try:
            fd, path = tempfile.mkstemp(prefix="rmqinspect-", dir=_SHM_DIR if os.path.isdir(_SHM_DIR) else None)
        except OSError:
            return res  # no shared memory to write (full, read-only): the result pipe still works
        try:
            with os.fdopen(fd, "wb") as f:
                for r in raws:
                    f.write(r)
        except OSError:
            os.unlink(path)
            return res
        except BaseException:
            os.unlink(path)
            raise
        return _Handover(meta, path, [r.nbytes for r in raws])

    def unpack(self) -> Any:
        import mmap
        import pickle

        try:
            with open(self.path, "rb") as f:
                total = sum(self.sizes)
                m = mmap.mmap(f.fileno(), total, access=mmap.ACCESS_READ) if total else b""
        finally:
            os.unlink(self.path)
        views, at = [], 0
        mv = memoryview(m)
        for n in self.sizes:
            views.append(mv[at:at + n])
            at += n
        return pickle.loads(self.meta, buffers=views)

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


# Result slots: anonymous shared memory mapped by the parent before it forks the workers, so every worker has the
# same pages mapped. A worker writes a result's buffers into the slot its task was given; the parent unpickles the
# result over the slot (no copy) and gives the slot to a later task once nothing refers to those arrays any more.
# Against a file per result (_Handover) this spares the worker the fresh tmpfs pages it fills (zeroed, then
# copied into) and the parent mapping, faulting and freeing them: ~2.4 ms of CPU per 7 MB rebuild chunk, both
# processes together, once each worker has touched each slot's pages (docs/parallel.md). The pages are touched
# only as results need them and go with the last reference to their slot.
_SLOT_BYTES = 64 << 20
_SLOTS_TOTAL = 1 << 30  # address space for all slots of one call together (jobs + 3 slots of at most _SLOT_BYTES)
# the slots of the running map_files call, as the workers forked for it see them (set before their fork)
_worker_slots: list = []


class _InSlot:
    """A result whose buffers a worker wrote into result slot ``slot`` (``_ResultSlots``), one after the other."""

    __slots__ = ("meta", "slot", "sizes")

    def __init__(self, meta: bytes, slot: int, sizes: list[int]):
        self.meta, self.slot, self.sizes = meta, slot, sizes

    def __reduce__(self):
        return _InSlot, (self.meta, self.slot, self.sizes)


class _ResultSlots:
    """The parent's side of the result slots of one ``map_files`` call. A slot is free when no submitted task holds
    it and nothing refers to the arrays of the last result read from it: the arrays keep the slot's map alive
    through their buffers, so its reference count says so exactly (a consumer that keeps results, e.g. verify's
    record columns, keeps their slots; later tasks then hand over through files, and nothing is overwritten)."""

    def __init__(self, count: int, size: int):
        import mmap

        self.maps = [mmap.mmap(-1, size) for _ in range(count)]
        self.base = sys.getrefcount(self.maps[0]) if self.maps else 0
        self.held: set[int] = set()

    def take(self) -> int | None:
        """A free slot for the next task (held until its result is read), or None: that task uses a file."""
        for k in range(len(self.maps)):  # no name bound to a map here: the count is the one ``base`` was taken as
            if k not in self.held and sys.getrefcount(self.maps[k]) <= self.base:
                self.held.add(k)
                return k
        return None

    def release(self, k: int | None) -> None:
        if k is not None:
            self.held.discard(k)

    def unpack(self, res: _InSlot) -> Any:
        import pickle

        self.held.discard(res.slot)
        mv = memoryview(self.maps[res.slot]).toreadonly()  # read-only arrays, as a mapped file gives them
        views, at = [], 0
        for n in res.sizes:
            views.append(mv[at:at + n])
            at += n
        return pickle.loads(res.meta, buffers=views)


def _pack_into_slot(meta: bytes, raws: list, slot: int | None) -> _InSlot | None:
    if slot is None or slot >= len(_worker_slots):
        return None
    m = _worker_slots[slot]
    sizes = [r.nbytes for r in raws]
    if sum(sizes) > len(m):
        return None
    at = 0
    for r, n in zip(raws, sizes):
        m[at:at + n] = r
        at += n
    return _InSlot(meta, slot, sizes)


def _call(fn: Callable[[Any], Any], item: Any, slot: int | None = None) -> Any:
    try:
        return _Handover.pack(fn(item), slot)
    except Exception as e:  # carried to the parent and raised there (see _Failure)
        return _Failure(e)


class Beside:
    """``fn(*args)`` in a daemon thread beside the caller's work, with the caller's context (its broker.conf
    settings): ``result()`` waits for it and returns what it returned or raises what it raised, in the caller's
    thread; a daemon thread never holds up an exit. Started by ``start()`` (at once with ``start=True``): a thread
    that must not be copied into forked workers is started after the fork (``map_files``' ``on_start``)."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "rmqinspect-beside", start: bool = False):
        import contextvars
        import threading

        self._got: list = []
        self._call = (fn, args)
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._run, fn, args),
                                        name=name, daemon=True)
        if start:
            self.start()

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._got.append(fn(*args))
        except BaseException as e:  # raised in the caller by result()
            self._got.append(_Raised(e))

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        if not self.started and not self._got:
            self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a started thread (``timeout`` seconds at most); one never started is not waited for."""
        if self.started:
            self._thread.join(timeout)

    def result(self) -> Any:
        """What the call returned, or the exception it raised, raised here; a call never started runs here, in the
        caller's thread (no thread is made for it)."""
        if self.started:
            self._thread.join()
        elif not self._got:
            self._run(*self._call)
        got = self._got[0]
        if type(got) is _Raised:
            raise got.error
        return got


class _Raised:
    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _worker_init() -> None:
    """Run once in each worker process. glibc gives a freed block above its mmap threshold back to the kernel at once,
    so the large numpy temporaries of every task (a rebuild chunk's record and key arrays: tens of MB) are mapped,
    faulted in and zeroed page by page again for the next task; a worker keeps them in its heap instead (blocks up
    to 32 MiB from the heap, which is trimmed only past 256 MiB): about half the worker's page faults. Its peak
    memory is that of its largest task, as before. Elsewhere than glibc nothing changes."""
    import signal

    # the parent alone handles Ctrl-C and SIGTERM (cli.lifecycle): it reaches the whole process group, and a worker
    # that died of it would print a traceback and break the pool; the parent shuts the workers down after their task
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, ImportError, TypeError):  # no C library to load by None (Windows), no mallopt
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)


def _context():
    import multiprocessing as mp

    method = os.environ.get(START_METHOD_ENV) or ("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    return mp.get_context(method)


def map_files(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int | None = 1,
              on_start: Callable[[], None] | None = None) -> Iterator[Any]:
    """``fn(item)`` for every item (one commitlog file's task each), results yielded in item order.

    ``fn`` must be a module-level function and items and results picklable when more than one worker runs.
    Workers are started only when ``jobs`` > 1 and there are at least two items, at most one per item.
    ``on_start()`` is called once the work has begun: after the workers are forked and the first tasks handed to
    them (a thread the caller starts then is never copied into a worker), or before the first item runs here."""
    items = list(items)
    jobs = resolve_jobs(jobs)
    if jobs <= 1 or len(items) < 2:
        if on_start is not None:
            on_start()
        for it in items:
            yield fn(it)
        return
    from concurrent.futures import ProcessPoolExecutor

    workers = min(jobs, len(items))
    window = workers + 1  # every worker busy, and the next result ready when the parent asks for it
    ctx = _context()
    slots = None
    count = window + 2  # the tasks in flight, the result being merged and the one before it
    size = min(_SLOT_BYTES, _SLOTS_TOTAL // count)
    if ctx.get_start_method() == "fork" and size > 0:  # only forked workers share the parent's anonymous maps
        global _worker_slots
        try:
            slots = _ResultSlots(count, size)
        except OSError:  # no address space or memory for them: every result goes through a file of its own
            slots = None
        _worker_slots = slots.maps if slots is not None else []
    try:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init)
    except OSError as e:
        # no semaphore for the pool's queues (/dev/shm full or not writable, a file-size limit): the work is the
        # same in this process, only slower; said once
        from ...store.fileset_checks import notice

        _worker_slots = []
        notice([], f"cannot start worker processes ({e.strerror or type(e).__name__}): running with --jobs 1")
        if on_start is not None:
            on_start()
        for it in items:
            yield fn(it)
        return
    pending: deque = deque()
    nxt = 0

    def submit() -> None:
        nonlocal nxt
        slot = slots.take() if slots is not None else None
        pending.append((pool.submit(_call, fn, items[nxt], slot), slot))
        nxt += 1

    try:
        while nxt < len(items) or pending:
            while nxt < len(items) and len(pending) < window:
                submit()
            if on_start is not None:  # the pool forks every worker at its first task (fork start method)
                on_start()
                on_start = None
            fut, slot = pending.popleft()
            res = fut.result()
            if type(res) is not _InSlot and slots is not None:
                slots.release(slot)  # the worker did not use it (a small result, a failure, a file)
            if nxt < len(items):  # keep the workers busy while the parent merges this result
                submit()
            if isinstance(res, _Failure):
                raise res.rebuild()
            if type(res) is _InSlot and slots is not None:
                yield slots.unpack(res)
            else:
                yield res.unpack() if type(res) is _Handover else res
            del res
    finally:
        # the caller may stop early (the walk ended at damage): tasks not started are dropped, and the shared-memory
        # files of results nobody will read are removed
        pool.shutdown(wait=True, cancel_futures=True)
        if slots is not None:
            # the workers (forked at the first task) are gone: the slots now live only as long as the arrays of the
            # results the caller keeps
            _worker_slots = []
        for fut, _ in pending:
            if fut.done() and not fut.cancelled() and fut.exception() is None and type(fut.result()) is _Handover:
                fut.result().discard()
