"""Read-only memory maps of store files. Nothing here ever opens a file for writing."""

from __future__ import annotations

import mmap
import os

from ..errors import StoreIOError
from .layout import is_dledger_data_dir
from .live import is_live, read_snapshot, size_at_start


class MappedFile:
    """One file of a store, mapped read-only on first use (``mmap.ACCESS_READ``)."""

    __slots__ = ("path", "name", "start", "size", "_fd", "_map", "dledger")

    def __init__(self, path: str, start: int = 0, dledger: bool | None = None):
        self.path = path
        self.name = os.path.basename(path)
        self.start = start
        # a DLedger data file (entries around the records, store.dledger): by default when it lies in a
        # dledger-<selfId>/data directory, where DLedger creates every one of them; a reader that knows better
        # (CommitLog.open from the layout and its broker.conf, a worker's task) says so
        self.dledger = is_dledger_data_dir(os.path.dirname(path) or ".") if dledger is None else dledger
        try:
            self.size = size_at_start(path, os.stat(path).st_size)
        except OSError as e:
            raise StoreIOError(f"cannot stat: {e.strerror}", path) from e
        self._map: mmap.mmap | bytes | bytearray | None = None

    @classmethod
    def of_buffer(cls, buf, start: int = 0, name: str = "<buffer>", dledger: bool = False) -> MappedFile:
        """A buffer already in memory (bytes, mmap) posing as a file starting at physical offset ``start``."""
        self = cls.__new__(cls)
        self.path = self.name = name
        self.start = start
        self.dledger = dledger
        self.size = memoryview(buf).nbytes
        self._map = buf
        return self

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def buffer(self):
        """The whole file as a read-only buffer (mmap, or b"" for an empty file)."""
        if self._map is None:
            if self.size == 0:
                self._map = b""
            elif is_live():
                self._map = self._snapshot()
            else:
                try:
                    with open(self.path, "rb") as f:
                        self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except OSError as e:
                    raise StoreIOError(f"cannot map: {e.strerror}", self.path) from e
                try:
                    self._map.madvise(mmap.MADV_SEQUENTIAL)
                except (AttributeError, OSError):
                    pass
        return self._map

    def _snapshot(self) -> bytearray:
        """--live: the file read, not mapped, up to its size at the start (store.live)."""
        try:
            buf, have = read_snapshot(self.path, self.size, self._file_data_ranges(0, self.size))
        except OSError as e:
            raise StoreIOError(f"cannot read: {e.strerror}", self.path) from e
        if have < self.size:
            from .fileset_checks import notice

            notice([], f"{self.path}: shrank from {self.size} to {have} bytes while the command ran (--live); "
                   f"bytes {have}..{self.size} read as zeros")
        return buf

    def data_ranges(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of [lo, hi) that are not holes of a sparse file (``SEEK_DATA``/``SEEK_HOLE``): a hole
        reads as zeros by definition, so a search for the last non-zero byte need not read it. The broker
        pre-allocates every commitlog and consume-queue file with ``setLength`` (a hole unless
        ``warmMapedFileEnable``), so the unwritten rest of the newest file is usually one. Where the platform
        or file system cannot tell (or the file is a buffer), the whole range."""
        if isinstance(self._map, (bytes, bytearray)):  # a buffer, or a --live snapshot (the file may differ now)
            return [(lo, hi)] if hi > lo else []
        return self._file_data_ranges(lo, hi)

    def _file_data_ranges(self, lo: int, hi: int) -> list[tuple[int, int]]:
        whole = [(lo, hi)] if hi > lo else []
        seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
        if hi <= lo or seek_data is None or seek_hole is None or not os.path.isfile(self.path):
            return whole
        out = []
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return whole
        try:
            pos = lo
            while pos < hi:
                try:
                    a = os.lseek(fd, pos, seek_data)
                except OSError:  # ENXIO: no data at or after pos
                    break
                if a >= hi:
                    break
                b = min(os.lseek(fd, a, seek_hole), hi)
                if b <= a:  # a file system that answers nonsense: read everything
                    return whole
                out.append((a, b))
                pos = b
        except OSError:
            return whole
        finally:
            os.close(fd)
        return out

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            try:
                self._map.close()
            except BufferError:
                # a memoryview still references the map; it is freed with the view
                pass
        self._map = None

    def __repr__(self) -> str:
        return f"MappedFile({self.name!r}, start={self.start}, size={self.size})"
