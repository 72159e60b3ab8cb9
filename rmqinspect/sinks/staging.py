"""Outputs written under a temporary name and renamed into place at the end: the one mechanism every command
that writes (rebuild, export, salvage, report, compact-index) uses, so that a full disk, a quota, a file-size
limit, an error or an interrupt never leaves a partial output behind, least of all one that looks complete.

``Staged(final)`` creates ``.<name>.rmqinspect-<pid>-<random>`` beside ``final`` (same directory, so same file
system and the rename is atomic); the command writes there and calls ``commit()``, which renames it to ``final``.
Until then it is *pending*: ``discard_pending()`` (called by the CLI's error contract on any error or signal, and
at interpreter exit) removes it. A write that fails for lack of room (ENOSPC, EDQUOT, EFBIG) is described by
``describe_write_error``: which output file was being written, how far it got, and that nothing was left.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import tempfile

# errors that mean "no room to write": a full file system, a quota, a file-size limit (RLIMIT_FSIZE, with
# SIGXFSZ ignored so the write fails instead of the process dying)
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

_pending: list[Staged] = []


class Staged:
    """A file or directory written at a temporary name beside ``final`` and renamed to it by ``commit``.

    ``what`` says what the output is, for messages ("the rebuild output"). A directory output may replace an
    empty directory of that name (the caller checked it is new or empty); a file output replaces nothing unless
    ``replace`` (report --force)."""

    def __init__(self, final: str | os.PathLike, what: str, *, directory: bool, replace: bool = False):
        self.final = os.fspath(final)
        self.what = what
        self.directory = directory
        self.replace = replace
        parent = os.path.dirname(os.path.abspath(self.final))
        os.makedirs(parent, exist_ok=True)
        prefix = f".{os.path.basename(os.path.normpath(self.final))}.rmqinspect-{os.getpid()}-"
        if directory:
            self.path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        else:
            fd, self.path = tempfile.mkstemp(prefix=prefix, dir=parent)
            os.close(fd)
        _pending.append(self)

    def commit(self) -> str:
        """Rename the finished output to its final name (atomically: it appears whole or not at all)."""
        if self.directory:
            if os.path.isdir(self.final) and not os.listdir(self.final):
                os.rmdir(self.final)  # the empty directory the user made for it
            os.rename(self.path, self.final)
        else:
            if not self.replace and os.path.lexists(self.final):
                raise FileExistsError(errno.EEXIST, "output file appeared while it was written", self.final)
            os.replace(self.path, self.final)
        if self in _pending:
            _pending.remove(self)
        return self.final

    def discard(self) -> None:
        if self in _pending:
            _pending.remove(self)
        if self.directory:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def final_name(self, path: str) -> str:
        """``path`` (inside the temporary output) as it would be named in the final output."""
        if path == self.path or path.startswith(self.path + os.sep):
            return self.final + path[len(self.path):]
        return path

    def last_written(self) -> tuple[str, int] | None:
        """The output file written last (the one a failed write was writing) and its size."""
        if not self.directory:
            try:
                return self.path, os.stat(self.path).st_size
            except OSError:
                return None
        best: tuple[float, str, int] | None = None
        for d, _, names in os.walk(self.path):
            for n in names:
                p = os.path.join(d, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                if best is None or (st.st_mtime_ns, st.st_size) > (best[0], best[2]):
                    best = (st.st_mtime_ns, p, st.st_size)
        return (best[1], best[2]) if best else None


def pending() -> list[Staged]:
    return list(_pending)


def discard_pending() -> None:
    """Remove every output not yet committed (an error, a signal, the interpreter exiting)."""
    for s in list(_pending):
        s.discard()


atexit.register(discard_pending)


def kind_of_output(path: str) -> str:
    """What an output file is, in RocketMQ's words, from where it lies."""
    parts = os.path.normpath(path).split(os.sep)
    name = parts[-1]
    if "index" in parts[:-1]:
        return "an IndexFile"
    if "consumequeue" in parts[:-1] and (name.endswith((".sst", ".log")) or name in ("CURRENT", "IDENTITY")
                                          or name.startswith(("MANIFEST", "OPTIONS"))):
        return "the RocksDB consume queue"
    if "consumequeue" in parts[:-1]:
        return "a ConsumeQueue file"
    if name.endswith(".parquet"):
        return "a Parquet file"
    if name.endswith(".json"):
        return "the manifest"
    return "a file"


def describe_write_error(e: OSError) -> str | None:
    """One line for a write that failed for lack of room while an output was pending: the output file, what it
    is, how far it got, and that nothing was left; None for any other error (or when no output is pending)."""
    if e.errno not in NO_ROOM:
        return None
    why = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
           errno.EFBIG: "file too large (file-size limit)"}[e.errno]
    if not _pending:  # no output file being written: the answer itself (stdout redirected to a full disk)
        return f"{e.filename or 'standard output'}: {why} while writing the answer"
    st = _pending[-1]
    last = st.last_written()
    if last is None:
        where = f"{st.final}: {why} while writing {st.what}"
    else:
        name = st.final_name(last[0]) if st.directory else st.final
        kind = f"{kind_of_output(last[0])} of {st.what}" if st.directory else st.what
        for outer in _pending[-2::-1]:  # a file staged inside a staged directory: named as it will be
            name = outer.final_name(name)
        where = f"{name}: {why} while writing {kind}" + (f" (after {last[1]} bytes)" if last[1] else "")
    return where + f"; nothing was left at {_pending[0].final}"


def utf8_json(obj, **kw) -> str:
    """JSON text that encodes as UTF-8 whatever names it holds: a path with bytes that are not UTF-8 (held as
    surrogate escapes) is written escaped (``\\udcff``), where raw it would make the file fail to encode."""
    text = json.dumps(obj, ensure_ascii=False, **kw)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, **kw)
    return text
