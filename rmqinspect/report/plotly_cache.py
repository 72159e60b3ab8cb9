"""A per-user cache of plotly.js as the page embeds it (gzip-compressed, then base64): compressing the 4.8 MB bundle
costs ~0.2 s of CPU on every report and gives the same bytes each time on one machine.

The cache holds that one string, never anything read from a store. Its file's name carries everything the bytes
depend on: a SHA-256 of plotly.min.js itself (a plotly upgrade gets another file), the compression level and
mtime, the zlib that compresses (another zlib may write other bytes at the same level) and the Python (3.11's
``gzip.compress`` with mtime 0 writes zlib's header, OS byte 3; later ones write 255). A file is taken only if it
proves itself: canonical base64 of one gzip member, with the header this Python writes, that unpacks to exactly the
bundle. Anything else is compressed as without a cache and written afresh, best-effort: the page is the same bytes
either way, so a read-only home or a full disk is no error.

Runs in the report's assets thread beside a walk that forks: it imports nothing when it runs (an import lock held
across a fork would hang the worker) and takes no lock a worker could need.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import sys
import time
import zlib
from collections.abc import Mapping

CACHE_DIR_ENV = "RMQINSPECT_CACHE_DIR"  # set to "" for no cache at all
LEVEL = 6
MTIME = 0  # the same bytes every run
GZIP_HEADER = gzip.compress(b"", LEVEL, mtime=MTIME)[:10]  # the header this Python writes: magic, mtime, flags, OS
NAME_PREFIX = "plotly.min.js-"
TEMP_SUFFIX = ".tmp"
STALE_TEMP_SECONDS = 3600  # a temp file this old was left by a process that died mid-write (a younger one may be live)


def cache_dir_from_environ(environ: Mapping[str, str]) -> str | None:
    """Where the cache lives: ``$RMQINSPECT_CACHE_DIR`` when set (empty: no cache), else
    ``$XDG_CACHE_HOME/rmqinspect`` (an absolute path, as the XDG spec wants), else ``~/.cache/rmqinspect``; None when
    there is no home to put it in."""
    if CACHE_DIR_ENV in environ:
        return environ[CACHE_DIR_ENV] or None
    xdg = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "rmqinspect")
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".cache", "rmqinspect") if os.path.isabs(home) else None


def cache_file_name(js: bytes) -> str:
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return (f"{NAME_PREFIX}{hashlib.sha256(js).hexdigest()}-gzip{LEVEL}-mtime{MTIME}"
            f"-zlib{zlib.ZLIB_RUNTIME_VERSION}-py{py}.b64")


def compress(js: bytes) -> str:
    return base64.b64encode(gzip.compress(js, LEVEL, mtime=MTIME)).decode("ascii")


def gzip_base64(js: bytes, cache_dir: str | None) -> str:
    """``js`` gzip-compressed (level 6, mtime 0) and base64-encoded: from ``cache_dir`` when a file there proves to
    be exactly that, else compressed here and written there for the next run. ``cache_dir`` None: no cache."""
    if not cache_dir:
        return compress(js)
    path = os.path.join(cache_dir, cache_file_name(js))
    text = read_proven(path, js)
    if text is None:
        text = compress(js)
        write_atomically(cache_dir, path, text.encode("ascii"))
    return text


def read_proven(path: str, js: bytes) -> str | None:
    """The cached text at ``path`` if it is canonical base64 of one gzip member, with the header this Python's
    ``gzip.compress`` writes, unpacking to exactly ``js``; None for anything else (missing, unreadable, truncated,
    garbage, a directory)."""
    limit = 2 * len(js) + 4096  # base64 of deflate's worst case is ~1.34x the input: a larger file is not ours
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit + 1)
        if len(raw) > limit:
            return None
        blob = base64.b64decode(raw, validate=True)
        if base64.b64encode(blob) != raw or blob[:10] != GZIP_HEADER:
            return None
        unpack = zlib.decompressobj(wbits=31)  # checks the member's CRC-32 and length at its end
        if unpack.decompress(blob, len(js) + 1) != js or not unpack.eof or unpack.unused_data:
            return None
        return raw.decode("ascii")
    except (OSError, ValueError, zlib.error):  # binascii.Error is a ValueError
        return None


def write_atomically(cache_dir: str, path: str, data: bytes) -> None:
    """``data`` at ``path`` through a temp file in the same directory and a rename, so a reader sees the old file or
    the whole new one; any OSError gives up silently and removes the temp file."""
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{os.urandom(6).hex()}{TEMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return
    done = False
    try:
        with open(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        done = True
    except OSError:
        pass
    finally:
        if not done:
            _remove(tmp)
    _remove_stale_temps(cache_dir)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_stale_temps(cache_dir: str) -> None:
    """Temp files of a run killed between its open and its rename (a report that failed while its assets thread,
    a daemon, was writing): removed once they are an hour old."""
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return
    now = time.time()
    for name in names:
        if name.startswith(NAME_PREFIX) and name.endswith(TEMP_SUFFIX):
            p = os.path.join(cache_dir, name)
            try:
                if now - os.stat(p).st_mtime > STALE_TEMP_SECONDS:
                    os.unlink(p)
            except OSError:
                pass
