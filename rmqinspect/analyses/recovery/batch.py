"""BatchConsumeQueues while the broker recovers (5.x ``queue.type=BatchCQ``, ``batchconsumequeue/``).

The broker loads them beside the file consume queues and takes their ``getMaxPhysicOffset`` into
maxPhyOffsetOfConsumeQueue. Two differences from a file ConsumeQueue matter to recovery:
``BatchConsumeQueue.recover`` keeps the *start* of the last unit's record as its max physical offset
(a ConsumeQueue keeps the end), and a queue's max offset counts messages, not units: the last unit's
``msgBaseOffset + batchSize``. Only the bounds are modelled (nothing reads BatchCQ bytes after recovery here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ...errors import RmqInspectError
from ...formats.constants import PROPERTY_INNER_NUM
from ...formats.consumequeue import BCQ_STORE_UNIT_SIZE
from ...store.batch import BatchConsumeQueue, list_batch_queues
from ...store.broker_conf import BrokerConf
from .queues import QueueRecovery


def batch_queue_topics(root: str) -> set[str]:
    """Topics whose queues the broker keeps as BatchConsumeQueues (a ``batchconsumequeue/<topic>`` directory)."""
    d = os.path.join(root, "batchconsumequeue")
    return {t for t in os.listdir(d) if os.path.isdir(os.path.join(d, t))} if os.path.isdir(d) else set()


@dataclass(frozen=True)
class BatchQueueId:
    topic: str
    queue_id: int


class BatchQueueModel:
    """One BatchConsumeQueue through recover, truncateDirtyLogicFiles and dispatch: its units' record starts,
    base offsets and batch sizes, in queue order, over the store's read-only maps. ``bcq`` None: a queue the
    recovery's dispatch creates."""

    def __init__(self, topic: str, queue_id: int, bcq: BatchConsumeQueue | None = None, commitlog=None):
        self.cq = BatchQueueId(topic, queue_id)
        self.bcq = bcq
        self.commitlog = commitlog
        self.phys = np.zeros(0, dtype=np.int64)
        self.base = np.zeros(0, dtype=np.int64)
        self.batch = np.zeros(0, dtype=np.int64)
        self.max_phys = -1
        self.rec = QueueRecovery(topic, queue_id, 0, [f.name for f in bcq.files] if bcq else [])

    def max_offset(self) -> int:
        return int(self.base[-1] + self.batch[-1]) if len(self.base) else 0

    def recover(self) -> None:
        """BatchConsumeQueue.recover: from the third-last file, valid units while a file is full; files past
        the first short one are deleted (truncateDirtyFiles)."""
        if self.bcq is None or not self.bcq.files:
            return
        chunks = list(self.bcq.chunks())
        files = self.bcq.files
        if not files:
            return
        i = max(0, len(files) - 3)
        self.rec.recover_start_file = files[i].name
        keep: list[np.ndarray] = [arr for _, arr in chunks[:i]]
        while i < len(chunks):
            arr = chunks[i][1]
            keep.append(arr)
            full = len(arr) * BCQ_STORE_UNIT_SIZE >= files[i].size
            i += 1
            if not full:
                break
        self.rec.files_deleted = [f.name for f in files[i:]]
        units = np.concatenate(keep) if keep else np.zeros(0)
        if len(units):
            self.phys = units["physical_offset"].astype(np.int64)
            self.base = units["msg_base_offset"].astype(np.int64)
            self.batch = units["batch_size"].astype(np.int64)
            self.max_phys = int(self.phys[-1])
        self.rec.max_offset_on_disk = self.max_offset()
        self.rec.max_physic_offset = self.max_phys

    def truncate_dirty(self, t: int) -> None:
        """truncateDirtyLogicFiles(T): units whose record starts at or after T go."""
        keep = int(np.searchsorted(self.phys, t, side="left")) if len(self.phys) else 0
        cut = len(self.phys) - keep
        if cut:
            self.rec.entries_cut = cut
            self.rec.cut_offsets = self.phys[keep:keep + 10000].tolist()
            self.phys, self.base, self.batch = self.phys[:keep], self.base[:keep], self.batch[:keep]
        self.max_phys = int(self.phys[-1]) if keep else t - 1
        self.rec.max_offset_after_truncate = self.max_offset()

    def _batch_size(self, phys: int) -> int:
        """INNER_NUM of the inner-batch record at ``phys`` (1 when it cannot be read: a plain message)."""
        if self.commitlog is None:
            return 1
        try:
            v = self.commitlog.read_message(phys).properties.get(PROPERTY_INNER_NUM)
        except RmqInspectError:
            return 1
        return int(v) if v and v.isdigit() and 0 < int(v) <= 0x7FFF else 1

    def dispatch_many(self, phys: np.ndarray, size: np.ndarray, cq_offset: np.ndarray, tags_code: np.ndarray) -> int:
        """putBatchMessagePositionInfo for records in queue order; a unit whose base is below the queue's max
        offset is already there and is not written again."""
        new = np.flatnonzero(cq_offset >= self.max_offset())
        if not new.size:
            return 0
        p = phys[new].astype(np.int64)
        sizes = np.array([self._batch_size(int(x)) for x in p.tolist()], dtype=np.int64)
        self.phys = np.concatenate([self.phys, p])
        self.base = np.concatenate([self.base, cq_offset[new].astype(np.int64)])
        self.batch = np.concatenate([self.batch, sizes])
        self.max_phys = int(self.phys[-1])
        return int(new.size)


def load_batch_queues(root: str, commitlog, conf: BrokerConf | None = None) -> list[BatchQueueModel]:
    out = []
    for topic, qid, d in list_batch_queues(root):
        m = BatchQueueModel(topic, qid, BatchConsumeQueue(topic, qid, d, conf), commitlog)
        m.recover()
        out.append(m)
    return out


__all__ = ["BatchQueueModel", "batch_queue_topics", "load_batch_queues"]
