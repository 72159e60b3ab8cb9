"""The RocksDB consume queue (5.2.0+, storeType=defaultRocksDB) as recovery sees it (FORMATS.md §10.1).

Read with ``store.rocksdb_cq`` from a private snapshot: RocksDB never opens the store's own directory.
Rows are keyed by queue offset and the offset table keeps each queue's last dispatched entry, so recovery
models a RocksDB queue by its max offset and the physical offset of its last entry only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import RmqInspectError
from ...store import Store
from ...store.detect import SEPARATE_ROCKSDB_CQ_DIRS
from ...store.rocksdb_cq import RocksDBConsumeQueueStore, RocksQueueId, is_rocksdb_dir
from .queues import QueueRecovery


def rocksdb_cq_dir(store: Store) -> str:
    """Where the store's RocksDB consume queue lives: a 5.5 separate directory when one holds a database, else
    consumequeue/ (5.2.0-5.4: the database files beside, or instead of, the file queues)."""
    import os

    for name in SEPARATE_ROCKSDB_CQ_DIRS:
        p = os.path.join(store.layout.root, name)
        if is_rocksdb_dir(p):
            return p
    return store.layout.consumequeue_dir


def has_rocksdb_consume_queue(store: Store) -> bool:
    return is_rocksdb_dir(rocksdb_cq_dir(store))


@dataclass
class RocksDBQueues:
    """What recovery needs of a RocksDB consume queue, read once."""

    checkpoint: int | None  # CHECKPOINT_TOPIC max: the dispatch-from offset
    max: dict  # (topic, queueId) -> (physical offset of the last entry, max offset (exclusive))
    problems: list[str] = field(default_factory=list)


def read_rocksdb_queues(store: Store) -> tuple[RocksDBQueues | None, str]:
    """The offset table of the RocksDB consume queue: per queue the ``max`` row (RocksDBConsumeQueue
    getMaxOffsetInQueue = cq offset + 1; a queue without one falls back to its last row) and the
    CHECKPOINT_TOPIC value. Returns (None, why) when the database cannot be read."""
    try:
        with RocksDBConsumeQueueStore(rocksdb_cq_dir(store)) as db:
            table = db.offset_table
            out = {}
            for q in db.queue_ids():
                mx = table.max.get((q.topic, q.queue_id))
                if mx is not None:
                    out[(q.topic, q.queue_id)] = (mx[0], mx[1] + 1)
                else:
                    qq = db.queue(q.topic, q.queue_id)
                    out[(q.topic, q.queue_id)] = (qq.max_physical_offset, qq.bounds()[1])
            for (topic, qid), mx in table.max.items():
                out.setdefault((topic, qid), (mx[0], mx[1] + 1))
            return RocksDBQueues(table.checkpoint, out, list(table.problems)), \
                "RocksDB consume queue read from a private snapshot (store.rocksdb_cq)"
    except RmqInspectError as e:
        return None, f"cannot read the RocksDB consume queue: {e}"
    except Exception as e:  # a damaged database must not abort the plan
        return None, f"cannot read the RocksDB consume queue: {type(e).__name__}: {e}"


class RocksDBQueueModel:
    """One RocksDB consume queue while recovery runs: only its max offset (and the physical offset of its last
    entry) is modelled; ``dispatch_many`` and ``truncate_to`` keep the same interface as the file model."""

    def __init__(self, topic: str, queue_id: int, max_phys: int = -1, max_offset: int = 0):
        self.cq = RocksQueueId(topic, queue_id)
        self.max_phys = max_phys
        self.max_off = max_offset
        self.rec = QueueRecovery(topic, queue_id, 0, [], max_offset_on_disk=max_offset, max_physic_offset=max_phys)
        # the rows recovery puts (queue offset, physical offset, size, tagsCode), in dispatch order: a RocksDB put
        # replaces the row of the same queue offset; ``rows_cut_from`` is where truncateDirtyLogicFiles cut the
        # database's own rows (None: not cut)
        self.puts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.rows_cut_from: int | None = None
        # initializeWithOffset (the combine store's start()): min = max = this offset, rows below it not served
        self.initialized_at: int | None = None

    def max_offset(self) -> int:
        return self.max_off

    def dispatch_many(self, phys: np.ndarray, size: np.ndarray, cq_offset: np.ndarray, tags_code: np.ndarray) -> int:
        if len(phys):
            self.max_off = int(cq_offset[-1]) + 1
            self.max_phys = int(phys[-1])
            self.puts.append((np.array(cq_offset, dtype=np.int64), np.array(phys, dtype=np.int64),
                              np.array(size, dtype=np.int64), np.array(tags_code, dtype=np.int64)))
        return len(phys)

    def initialize_with_offset(self, offset: int) -> None:
        """RocksDBConsumeQueue.initializeWithOffset: max offset = ``offset``, the last entry's physical offset 0,
        the min offset corrected lazily to the max."""
        self.max_off = offset
        self.max_phys = 0
        self.initialized_at = offset

    def truncate_to(self, max_offset: int) -> None:
        self.rec.entries_cut = max(0, self.max_off - max_offset)
        self.max_off = max_offset
        self.rec.max_offset_after_truncate = max_offset
        self.rows_cut_from = max_offset if self.rows_cut_from is None else min(self.rows_cut_from, max_offset)
        kept = []
        for q, p, z, t in self.puts:
            k = q < max_offset
            if k.any():
                kept.append((q[k], p[k], z[k], t[k]))
        self.puts = kept

    def entries(self, db_rows) -> list[tuple[int, int, int, int]]:
        """(queue offset, physical offset, size, tagsCode) of the queue after recovery, in queue order: the
        database's rows ``db_rows`` (queue offset, physical offset, size, tagsCode), cut where
        truncateDirtyLogicFiles cut them, overwritten by the rows recovery put, up to the queue's max offset."""
        out: dict[int, tuple[int, int, int, int]] = {}
        for e in db_rows:
            if self.rows_cut_from is None or e[0] < self.rows_cut_from:
                out[e[0]] = e
        for q, p, z, t in self.puts:
            for e in zip(q.tolist(), p.tolist(), z.tolist(), t.tolist(), strict=True):
                out[e[0]] = e
        low = self.initialized_at if self.initialized_at is not None else -1
        return [out[k] for k in sorted(out) if low <= k < self.max_off]

    def bounds(self, entries: list[tuple[int, int, int, int]]) -> tuple[int, int]:
        """(minOffset, maxOffset) of the queue whose ``entries`` are given: min is the first entry's offset (an
        initialised or empty queue: its max offset)."""
        return (entries[0][0] if entries else self.max_off), self.max_off


def rocksdb_queue_entries(store: Store, model: RocksDBQueueModel,
                          db_dir: str | None = None) -> list[tuple[int, int, int, int]]:
    """A RocksDB queue as the broker holds it after recovery (``RocksDBQueueModel.entries``), its rows read from
    a private snapshot of the database (``db_dir``, default consumequeue/)."""
    with RocksDBConsumeQueueStore(db_dir or rocksdb_cq_dir(store)) as db:
        return model.entries(db.queue(model.cq.topic, model.cq.queue_id).entries())


def truncate_rocksdb_queues(store: Store, models: list[RocksDBQueueModel], t: int) -> str | None:
    """truncateDirtyLogicFiles(T) on RocksDB queues whose last entry starts at or after T: the queue's max
    offset goes back to just after its last entry starting before T. Returns why it could not be modelled."""
    hit = [m for m in models if m.max_phys >= t]
    if not hit:
        return None
    try:
        with RocksDBConsumeQueueStore(rocksdb_cq_dir(store)) as db:
            for m in hit:
                keep = 0
                for base, arr in db.queue(m.cq.topic, m.cq.queue_id).raw_chunks():
                    ok = np.flatnonzero(arr["physical_offset"] < t)
                    if ok.size:
                        keep = base + int(ok[-1]) + 1
                        m.max_phys = int(arr["physical_offset"][ok[-1]])
                m.truncate_to(keep)
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        return f"RocksDB truncateDirtyLogicFiles not modelled: {e}"
    return None


def queue_entries_after_recovery(store: Store, plan, key: str) -> list[tuple[int, int, int, int]] | None:
    """Queue ``key`` ("topic/queueId") as the broker holds it after load() and start() of ``plan``
    (a RecoveryPlan): file queues from the plan's model, RocksDB queues from the database's rows with what the
    recovery put and cut; None for a queue the plan does not model (absent or BatchCQ)."""
    m = plan.queue_models.get(key)
    if isinstance(m, RocksDBQueueModel):
        return rocksdb_queue_entries(store, m)
    return plan.consume_queue_entries(key)


__all__ = ["RocksDBQueueModel", "RocksDBQueues", "has_rocksdb_consume_queue", "queue_entries_after_recovery",
           "read_rocksdb_queues", "rocksdb_cq_dir", "rocksdb_queue_entries", "truncate_rocksdb_queues"]
