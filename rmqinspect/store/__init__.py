"""A store directory: its files, read-only maps and iterators. Never writes."""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING

from ..errors import RmqInspectError
from .layout import StoreLayout

if TYPE_CHECKING:
    from .broker_conf import BrokerConf
    from .checkpoint import CheckpointData
    from .commitlog import CommitLog
    from .dledger import DLedgerLog


class Store:
    """Entry point for library users: ``Store.open(path, conf=read_broker_conf(...))``; everything is read lazily.

    ``conf`` is the broker's broker.conf (``store.broker_conf.BrokerConf``) when the caller has it: the readers
    and analyses take its settings before inferring them from the files (a flag given to an analysis wins over
    it). It travels with the store (``store.conf``, ``store.layout.conf``), never through process state."""

    def __init__(self, layout: StoreLayout, commitlog_file_size: int | None = None):
        self.layout = layout
        self._commitlog_file_size = commitlog_file_size

    @classmethod
    def open(cls, path: str | os.PathLike, *, conf: BrokerConf | None = None,
             commitlog_file_size: int | None = None) -> Store:
        return cls(StoreLayout.open(path, conf=conf), commitlog_file_size)

    @property
    def root(self) -> str:
        return self.layout.root

    @property
    def conf(self) -> BrokerConf | None:
        """The broker.conf the store was opened with, or None."""
        return self.layout.conf

    @cached_property
    def commitlog(self) -> CommitLog:
        from .broker_conf import configured
        from .commitlog import CommitLog

        size = self._commitlog_file_size
        if size is None and (conf := configured(self.conf, "mappedFileSizeCommitLog")) is not None:
            size = conf.value  # the broker.conf (--broker-config) before inference from the files
        return CommitLog.open(self.layout, size)

    @cached_property
    def dledger(self) -> DLedgerLog | None:
        """The DLedger member (index, checkpoint, currterm) when the store is in DLedger mode, else None."""
        if self.layout.dledger is None:  # before the import: a plain store never loads the DLedger modules
            return None
        from .dledger import DLedgerLog

        return DLedgerLog(self.layout.dledger, self.commitlog.files)

    @cached_property
    def checkpoint(self) -> CheckpointData | None:
        from .checkpoint import read_checkpoint

        return read_checkpoint(self.layout.checkpoint_path)

    @property
    def abort_present(self) -> bool:
        return self.layout.abort_present

    def close(self) -> None:
        if "dledger" in self.__dict__ and self.dledger is not None:
            self.dledger.close()
        if "commitlog" in self.__dict__:
            self.commitlog.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def __getattr__(name: str):
    # CommitLog and CheckpointData pull in numpy; importing the package (errors, store.version) must not
    if name == "CommitLog":
        from .commitlog import CommitLog

        return CommitLog
    if name == "CheckpointData":
        from .checkpoint import CheckpointData

        return CheckpointData
    raise AttributeError(name)


__all__ = ["Store", "StoreLayout", "CommitLog", "CheckpointData", "RmqInspectError"]
