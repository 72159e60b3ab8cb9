"""A whole broker-faithful store: commitlog, consume queues, index files, checkpoint, optional abort file
and ``config/``, for fixtures and benchmarks.

Records are appended with ``CommitLogWriter``. At ``close()`` the consume queues and index files are
produced by walking the written CommitLog through ``analyses.rebuild.dispatch_commitlog`` - the very code
path of ``rmqinspect rebuild``, which is checked byte for byte against the broker's own rebuild in the
oracle. So a fixture's CQ/index are what a broker's ReputMessageService would have written.

This writes only into a directory the caller names; it is never pointed at an inspected store.
"""

from __future__ import annotations

import os

from ..analyses.dispatch import DEFAULT_DELAY_TABLE, DelayTable
from ..analyses.rebuild import RebuildOptions, RebuildReport, close_sinks, dispatch_commitlog
from ..formats.checkpoint import CHECKPOINT_FILE_SIZE
from ..formats.constants import (
    DEFAULT_COMMITLOG_FILE_SIZE,
    DEFAULT_CQ_FILE_SIZE,
    DEFAULT_INDEX_MAX,
    DEFAULT_INDEX_SLOTS,
)
from ..sinks.consumequeue import ConsumeQueueSet
from ..sinks.indexfile import IndexFileSet
from .commitlog import AppendResult, CommitLogWriter, MessageSpec


class StoreWriter:
    """``with StoreWriter(root, ...) as w: w.append(MessageSpec(...))`` -> a complete store under ``root``.

    ``checkpoint_fields``: 3 writes the 4.x checkpoint (physic/logics/index timestamps), 5 adds the 5.1.1+
    masterFlushedOffset and confirmPhyOffset (both = the commitlog write offset). ``abort=True`` leaves an
    empty ``abort`` file as a crashed broker does. ``config`` maps file names under ``config/`` to content.
    ``dispatch_to``: the ReputMessageService had dispatched only the records before this physical offset when
    the broker stopped (consume queues and index stop there; the checkpoint's times are the last dispatched
    record's): a dispatcher behind at a crash.
    """

    def __init__(self, root: str, *, commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE,
                 cq_file_size: int = DEFAULT_CQ_FILE_SIZE, index_slots: int = DEFAULT_INDEX_SLOTS,
                 index_max: int = DEFAULT_INDEX_MAX, build_cq: bool = True, build_index: bool = True,
                 abort: bool = False, config: dict[str, str | bytes] | None = None, checkpoint_fields: int = 3,
                 delay_table: DelayTable = DEFAULT_DELAY_TABLE, count_every_put: bool = False,
                 start_offset: int = 0, records=None, dispatch_to: int | None = None):
        if os.path.exists(root) and os.listdir(root):
            raise FileExistsError(f"{root} exists and is not empty; StoreWriter only creates new stores")
        self.root = root
        self.cq_file_size = cq_file_size
        self.index_slots = index_slots
        self.index_max = index_max
        self.build_cq = build_cq
        self.build_index = build_index
        self.abort = abort
        self.config = dict(config or {})
        self.checkpoint_fields = checkpoint_fields
        self.delay_table = delay_table
        self.count_every_put = count_every_put
        self.dispatch_to = dispatch_to
        self.last_dispatched_ts = 0  # store time of the last record before dispatch_to
        # ``records``: another writer of the messages with CommitLogWriter's calls (writer.dledger: DLedger entries)
        self.commitlog = records if records is not None else CommitLogWriter(os.path.join(root, "commitlog"),
                                                                             commitlog_file_size, start_offset)
        self.last_store_ts = 0
        self.last_cq_store_ts = 0
        self.report: RebuildReport | None = None
        self.index_names: list[str] = []
        self._closed = False

    def append(self, spec: MessageSpec) -> AppendResult:
        res = self.commitlog.append(spec)
        if self.dispatch_to is None or res.physical_offset < self.dispatch_to:
            self.last_dispatched_ts = spec.store_timestamp
        self.last_store_ts = spec.store_timestamp
        if spec.sys_flag & 0xC in (0, 8):
            self.last_cq_store_ts = spec.store_timestamp
        return res

    @property
    def write_offset(self) -> int:
        return self.commitlog.write_offset

    def close(self) -> RebuildReport:
        if self._closed:
            return self.report
        self._closed = True
        self.commitlog.close()
        from ..store import Store

        store = Store.open(self.root)
        cq = ConsumeQueueSet(os.path.join(self.root, "consumequeue"), self.cq_file_size) if self.build_cq else None
        index = (IndexFileSet(os.path.join(self.root, "index"), self.index_slots, self.index_max,
                              self.count_every_put) if self.build_index else None)
        try:
            rep = dispatch_commitlog(store.commitlog, cq, index,
                                     RebuildOptions(self.build_cq, self.build_index, delay_table=self.delay_table,
                                                    to_offset=self.dispatch_to))
            close_sinks(cq, index, rep)
        finally:
            store.close()
        self.report = rep
        index_ts = 0
        if index is not None:
            self.index_names = list(index.names)
            full = [h for h in index.headers if h[5] >= self.index_max]
            if full:
                index_ts = full[-1][1]  # IndexService.flush of a full file sets indexMsgTimestamp
        self._write_checkpoint(index_ts)
        if self.abort:
            open(os.path.join(self.root, "abort"), "wb").close()
        if self.config:
            cdir = os.path.join(self.root, "config")
            os.makedirs(cdir, exist_ok=True)
            for name, content in self.config.items():
                if os.sep in name or name in ("", ".", ".."):
                    raise ValueError(f"config file name {name!r} must be a plain file name")
                data = content.encode("utf-8") if isinstance(content, str) else content
                with open(os.path.join(cdir, name), "wb") as f:
                    f.write(data)
        return rep

    def _write_checkpoint(self, index_ts: int) -> None:
        vals = [self.last_store_ts, self.last_cq_store_ts, index_ts]
        if self.dispatch_to is not None:  # the checkpoint was flushed while the dispatcher was there
            vals = [self.last_dispatched_ts, self.last_dispatched_ts, index_ts]
        if self.checkpoint_fields >= 5:
            vals += [self.commitlog.write_offset, self.commitlog.write_offset]
        data = b"".join(v.to_bytes(8, "big", signed=True) for v in vals)
        with open(os.path.join(self.root, "checkpoint"), "wb") as f:
            f.write(data.ljust(CHECKPOINT_FILE_SIZE, b"\0"))

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.commitlog.close()
