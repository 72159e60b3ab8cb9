"""Every error rmqinspect raises, at the bottom of the layers: each carries the file and offset it is about and
its process exit code, so the exit codes are mapped here and nowhere else.

The CLI turns one into one stderr line and its exit code (``cli.output.handle_errors``, listed by ``rmqinspect
--help``); library callers catch ``RmqInspectError``. Bytes are read through one chokepoint, ``unpack_at``: a
read past the end of a buffer becomes ``CorruptDataError`` naming the file and offset, never a bare
``struct.error``. ``formats/`` has no file to name: it raises ``DecodeError`` (damage, place unknown there; still a
``ValueError`` for the callers that test for one), and the reader that called it knows where it was.

    RmqInspectError
    ├── StoreNotFoundError, OffsetOutOfStoreError          3 not found
    ├── CorruptDataError                                   4 damage at the place named
    │   └── DecodeError (+ ValueError)                       bytes formats/ cannot decode
    │       ├── DelayLevelError                              a DELAY property Integer.parseInt refuses
    │       └── ConfigSyntaxError                            a config/*.json no broker writes
    ├── StoreIOError                                       5 the operating system refused
    ├── EngineUnavailableError                             5 pyarrow / Spark / Java missing
    │   └── SparkUnavailableError, ClusterUnavailableError (+ RuntimeError)
    ├── UnsafeOutputError, StoreLiveError                  6 refused
    └── BrokerConfigError, IndexGeometryError,             2 the user must settle it (a flag, broker.conf)
        ReportDependencyError
"""

from __future__ import annotations

import os
import struct
from typing import Any, Protocol

EXIT_OK = 0
EXIT_PROBLEMS = 1  # the command ran and found problems (verify, cq --join mismatches, ...)
EXIT_USAGE = 2  # bad command line (click's own code)
EXIT_NOT_FOUND = 3  # path missing / not a RocketMQ store / offset outside the store
EXIT_CORRUPT = 4  # a record or file at the requested place is damaged (bad magic, torn, absurd length)
EXIT_IO = 5  # the operating system refused to read (permissions, I/O error)
EXIT_UNSAFE_OUTPUT = 6  # an output path would land inside the inspected store or outside the output dir

EXIT_CODES_HELP = """Exit codes:
  0  success, nothing wrong found
  1  finished, problems found (verify, cq --join, rebuild --dry-run differences)
  2  usage error
  3  not found: path, store layout, offset outside the store, key
  4  corrupt data at the requested place (bad magic, torn record, absurd length, bad properties)
  5  I/O error: reading refused (permissions, I/O error), or writing an output (full disk, quota, size limit)
  6  refused: output would write into the inspected store or escape the output directory, or a running
     broker holds the store (its lock file) and --live was not given
130  interrupted by SIGINT (143: SIGTERM); outputs not yet complete are removed"""


class RmqInspectError(Exception):
    exit_code = EXIT_CORRUPT

    def __init__(self, message: str, path: str | os.PathLike | None = None, offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.offset = offset

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.offset is not None:
                where += f" @ {self.offset}"
            where += ": "
        elif self.offset is not None:
            where = f"offset {self.offset}: "
        return where + self.message


class StoreNotFoundError(RmqInspectError):
    exit_code = EXIT_NOT_FOUND


class OffsetOutOfStoreError(RmqInspectError):
    exit_code = EXIT_NOT_FOUND


class CorruptDataError(RmqInspectError):
    exit_code = EXIT_CORRUPT

    def __init__(self, message, path=None, offset=None, kind: str = "corrupt"):
        super().__init__(message, path, offset)
        self.kind = kind


class StoreIOError(RmqInspectError):
    exit_code = EXIT_IO


class UnsafeOutputError(RmqInspectError):
    exit_code = EXIT_UNSAFE_OUTPUT


class DecodeError(CorruptDataError, ValueError):
    """Bytes ``formats/`` cannot decode (a body that does not decompress, a key of the wrong shape): damage whose
    file and offset the caller adds, or names itself."""


class DelayLevelError(DecodeError):
    """Integer.parseInt(DELAY) failed: the broker treats the record as illegal (-1)."""


class ConfigSyntaxError(DecodeError):
    """A config file that is not the JSON a broker writes: nested too deep, a number too long."""

    def __init__(self, message: str, pos: int | None = None):
        super().__init__(message + (f" at char {pos}" if pos is not None else ""))
        self.pos = pos


class EngineUnavailableError(RmqInspectError):
    """The environment lacks what the engine needs (pyarrow, pyspark, Java): not the data's fault."""

    exit_code = EXIT_IO


class SparkUnavailableError(EngineUnavailableError, RuntimeError):
    """pyspark is not installed or Java cannot be started."""


class ClusterUnavailableError(EngineUnavailableError, RuntimeError):
    """Java or pyspark is missing, or the cluster did not come up in time."""


class StoreLiveError(RmqInspectError):
    """A running broker holds the store's lock and ``--live`` was not given (exit code 6: refused)."""

    exit_code = EXIT_UNSAFE_OUTPUT


class BrokerConfigError(RmqInspectError):
    """A broker.conf the analyses cannot trust: a usage error, naming the file and line."""

    exit_code = EXIT_USAGE


class IndexGeometryError(RmqInspectError):
    """The file's geometry cannot be proven from its data: the user must give it (a usage matter)."""

    exit_code = EXIT_USAGE


class ReportDependencyError(RmqInspectError):
    """The optional plotting library is not installed (exit code 2: the command cannot run as installed)."""

    exit_code = EXIT_USAGE


class _Layout(Protocol):
    @property
    def size(self) -> int: ...

    def unpack_from(self, buffer: Any, offset: int = ...) -> tuple[Any, ...]: ...


def unpack_at(layout: _Layout, buf: Any, offset: int, path: str | os.PathLike | None, what: str = "",
              base: int = 0) -> tuple:
    """``layout.unpack_from(buf, offset)`` (a ``struct.Struct``, e.g. a FieldTable's ``struct``): the one place a
    read that does not fit the buffer becomes ``CorruptDataError`` naming ``path`` and ``base + offset`` (``base``:
    the file's first physical offset when offsets are said as the broker's) instead of a ``struct.error``."""
    try:
        return layout.unpack_from(buf, offset)
    except struct.error:
        left = max(0, memoryview(buf).nbytes - offset)
        raise CorruptDataError(f"{what or 'field'} needs {layout.size} bytes, {left} left", path, base + offset,
                               kind="truncated") from None
