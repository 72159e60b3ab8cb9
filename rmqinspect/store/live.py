"""A store a running broker still owns: the broker's lock, and the ``--live`` read mode.

The broker takes a POSIX record lock on ``<storePathRootDir>/lock`` when it starts
(``DefaultMessageStore.start``: ``lockFile.getChannel().tryLock(0, 1, false)``; the JVM's ``FileChannel``
lock is ``fcntl(F_SETLK)`` with ``F_WRLCK``) and holds it while it runs. ``F_GETLK`` on a read-only descriptor
asks whether another process holds a lock there without taking one, so looking never disturbs the broker (a
lock taken by us, even for a moment, could make a broker starting at that moment refuse to start).

Reading a live store through a file map is unsafe: a broker (or a copy being replaced) that truncates a file
under the map kills the reader with SIGBUS at the first page past the new end. So a live store is refused
unless ``--live`` is given; in live mode every file is read with ``pread`` (never mapped) up to the size it had
when the command first looked at it, so the answer is the store as it was at that point, never past it.

The mode is process-wide (unlike the broker.conf, which travels with the store): the CLI sets it from ``--live`` for
the one command it runs, and the forked workers of ``store.walk.parallel`` inherit it and the recorded sizes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from ..errors import StoreLiveError

LOCK_FILE = "lock"  # StorePathConfigHelper.getLockFile: <storePathRootDir>/lock
# struct flock (Linux, glibc): short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = "hhqqi"

REFUSAL = "a running broker holds this store; copy it first, or pass --live"


_live = [False]
_checked: dict[str, int | None] = {}
_size_at_start: dict[str, int] = {}


def set_live(enabled: bool) -> None:
    """Live mode on or off for this process (the CLI: ``--live``). Forgets what an earlier command recorded."""
    _live[0] = bool(enabled)
    _checked.clear()
    _size_at_start.clear()


def is_live() -> bool:
    return _live[0]


def lock_holder(root: str | os.PathLike) -> int | None:
    """The pid of the process holding a POSIX lock on ``root/lock`` (a running broker), else None. Never takes
    a lock: ``F_GETLK`` on a read-only descriptor. A missing or unreadable lock file means no broker can be
    seen (a copied store usually has none)."""
    path = os.path.join(os.fspath(root), LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not os.path.isfile(path):
            return None
        # the whole file (l_len 0): whatever range a broker locked (the JVM's tryLock(0, 1) locks byte 0)
        query = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.ENOLCK, errno.EOPNOTSUPP):  # a file system without POSIX locks
                return None
            raise
        l_type, _, _, _, pid = struct.unpack(_FLOCK, answer[:struct.calcsize(_FLOCK)])
        return None if l_type == fcntl.F_UNLCK else pid
    finally:
        os.close(fd)


def check_store_lock(root: str | os.PathLike) -> None:
    """The one lock check, made when a store is opened (``StoreLayout.open``): raises ``StoreLiveError`` when a
    running broker holds ``root`` and live mode is off. Asked once per root and command."""
    key = os.path.abspath(os.fspath(root))
    if key not in _checked:
        _checked[key] = lock_holder(key)
    pid = _checked[key]
    if pid is not None and not _live[0]:
        raise StoreLiveError(f"{REFUSAL} (process {pid} holds {LOCK_FILE})", os.path.join(os.fspath(root), LOCK_FILE))


def size_at_start(path: str, size_now: int) -> int:
    """In live mode, the size ``path`` had when this command first looked at it (``size_now`` the first time);
    outside live mode, ``size_now``."""
    if not _live[0]:
        return size_now
    return _size_at_start.setdefault(os.path.abspath(path), size_now)


def read_snapshot(path: str, size: int, ranges: list[tuple[int, int]] | None = None) -> tuple[bytearray, int]:
    """The first ``size`` bytes of ``path`` read with ``pread`` (no map: a file truncated under us gives a short
    read, never SIGBUS), and how many of them the file still had. ``ranges``: the parts holding data (the rest
    of a sparse file reads as zeros and is not read; ``bytearray(size)``'s untouched pages cost no memory)."""
    buf = bytearray(size)
    view = memoryview(buf)
    have = size
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        for lo, hi in ranges if ranges is not None else [(0, size)]:
            pos = lo
            while pos < min(hi, size):
                n = os.preadv(fd, [view[pos:min(hi, size, pos + (8 << 20))]], pos)
                if n <= 0:  # the file ends here now (truncated since the command started)
                    have = min(have, pos)
                    break
                pos += n
    return buf, have
