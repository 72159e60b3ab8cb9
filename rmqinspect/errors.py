"""Errors carry the file and offset they are about; each class has its own process exit code.

The CLI maps these to exit codes (documented in ``rmqinspect --help``); library callers catch them.
"""

from __future__ import annotations

import os

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
