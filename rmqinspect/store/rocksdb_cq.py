"""RocksDB ConsumeQueue (FORMATS.md §10.1): the database living directly in ``ROOT/consumequeue/``.

Evidence rule: opening a RocksDB directory, even read-only, writes into it (LOCK, LOG, rocksdict's
``rocksdict-config.json``, sometimes MANIFEST/OPTIONS). So we never open the store's directory: every
open takes a private snapshot in a ``tempfile.mkdtemp()`` directory (immutable ``*.sst`` files hard-linked
when the filesystem allows, everything else copied) and deletes it on close.

``RocksDBConsumeQueue`` has the interface of ``store.consumequeue.ConsumeQueue`` (topic, queue_id,
entries, bounds, chunks, min_offset_for) so commands work on either; ``open_consume_queues(store)`` picks
the right kind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..errors import CorruptDataError, StoreIOError, StoreNotFoundError
from ..formats.consumequeue import CQ_DTYPE, CQ_ENTRY_TABLE
from ..formats.rocksdb_cq import (
    CF_OFFSET,
    CHECKPOINT_TOPIC,
    CQ_KEY_TAIL,
    CQ_OFFSET_FROM_KEY_END,
    CQ_UNIT_SIZE,
    CQ_VALUE_DTYPE,
    CTRL_2,
    OFFSET_VALUE,
    parse_cq_key,
    parse_offset_key,
    queue_prefix,
)
from .broker_conf import BrokerConf, configured
from .consumequeue import ConsumeQueue, list_queues, pre_blank_mask
from .layout import is_rocksdb_dir
from .rocksdb_snapshot import SnapshotReader

# numpy view of many 28-byte CQ values joined together: the per-row fast path.
ROCKS_CQ_DTYPE = CQ_VALUE_DTYPE
_CQ_OFFSET_DTYPE = CQ_KEY_TAIL.dtype["cq_offset"]
assert ROCKS_CQ_DTYPE.itemsize == CQ_UNIT_SIZE
CHUNK_ROWS = 65536

def snapshot_rocksdb_dir(src: str) -> str:
    """Private copy of the database files of ``src``; the caller removes it."""
    tmp = tempfile.mkdtemp(prefix="rmqinspect-rocksdb-")
    try:
        for name in os.listdir(src):
            sp = os.path.join(src, name)
            if not os.path.isfile(sp) or name in ("LOCK", "rocksdict-config.json") or name.startswith("LOG"):
                continue  # topic directories (double-write stores) and lock/log files are not needed
            dp = os.path.join(tmp, name)
            if name.endswith(".sst"):
                try:
                    os.link(sp, dp)  # SST files are immutable; RocksDB opened read-only never rewrites them
                    continue
                except OSError:
                    pass
            shutil.copyfile(sp, dp)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StoreIOError(f"cannot snapshot RocksDB directory: {e.strerror or e}", src) from e
    return tmp


@dataclass
class OffsetTable:
    """The ``offset`` column family: per queue the max (last dispatched) and min entries."""

    max: dict = field(default_factory=dict)  # (topic, qid) -> (physical_offset, cq_offset)
    min: dict = field(default_factory=dict)
    checkpoint: int | None = None  # CHECKPOINT_TOPIC: highest physicalOffset + size dispatched
    problems: list = field(default_factory=list)


@dataclass
class RocksQueueId:
    topic: str
    queue_id: int


class RocksDBConsumeQueueStore(SnapshotReader):
    """A read-only view of a RocksDB consume-queue database through a private snapshot."""

    def __init__(self, consumequeue_dir: str):
        if not is_rocksdb_dir(consumequeue_dir):
            raise StoreNotFoundError("not a RocksDB consume queue (no CURRENT/MANIFEST-*)", consumequeue_dir)
        self.directory = consumequeue_dir
        self.snapshot_dir = snapshot_rocksdb_dir(consumequeue_dir)
        try:
            from rocksdict import AccessType, Options, Rdict

            opts = Options(raw_mode=True)
            cfs = Rdict.list_cf(self.snapshot_dir, opts)
            self._db = Rdict(self.snapshot_dir, options=opts, access_type=AccessType.read_only(),
                             column_families={n: Options(raw_mode=True) for n in cfs if n != "default"})
            self.column_families = list(cfs)
        except Exception as e:  # rocksdict raises plain Exceptions for corrupt/unsupported databases
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
            raise CorruptDataError(f"RocksDB refused to open the snapshot: {e}", consumequeue_dir) from e
        self._offset_table: OffsetTable | None = None

    # -- CQ table --------------------------------------------------------------------------------
    def queue_ids(self) -> list[RocksQueueId]:
        """Every (topic, queueId) with at least one row, skipping from queue to queue with seeks."""
        out = []
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            key = it.key()
            try:
                topic, qid, _ = parse_cq_key(key)
            except ValueError:
                it.next()
                continue
            out.append(RocksQueueId(topic, qid))
            # the broker's range-delete end key: prefix with the last CTRL_1 replaced by CTRL_2
            it.seek(queue_prefix(topic, qid)[:-1] + CTRL_2)
        out.sort(key=lambda q: (q.topic, q.queue_id))
        return out

    def rows(self, topic: str, queue_id: int, from_offset: int = 0) -> Iterator[tuple[bytes, bytes]]:
        prefix = queue_prefix(topic, queue_id)
        it = self._db.iter()
        it.seek(prefix + max(from_offset, 0).to_bytes(8, "big"))
        while it.valid():
            k = it.key()
            if not k.startswith(prefix) or len(k) != len(prefix) + 8:
                break
            yield k, it.value()
            it.next()

    def queue(self, topic: str, queue_id: int) -> RocksDBConsumeQueue:
        return RocksDBConsumeQueue(self, topic, queue_id)

    def queues(self) -> list[RocksDBConsumeQueue]:
        return [self.queue(q.topic, q.queue_id) for q in self.queue_ids()]

    # -- offset table ----------------------------------------------------------------------------
    @property
    def offset_table(self) -> OffsetTable:
        if self._offset_table is None:
            t = OffsetTable()
            if CF_OFFSET in self.column_families:
                cf = self._db.get_column_family(CF_OFFSET)
                for k, v in cf.items():
                    try:
                        topic, kind, qid = parse_offset_key(k)
                    except (ValueError, Exception):
                        t.problems.append(f"unparseable offset key {bytes(k).hex()}")
                        continue
                    if topic == CHECKPOINT_TOPIC and len(v) == 8:
                        t.checkpoint = int.from_bytes(v, "big", signed=True)
                        continue
                    if len(v) != OFFSET_VALUE.size:
                        t.problems.append(f"offset value of {topic}/{qid} {kind} has {len(v)} bytes, expected 16")
                        continue
                    (t.max if kind == "max" else t.min)[(topic, qid)] = OFFSET_VALUE.unpack(v)
            self._offset_table = t
        return self._offset_table


class RocksDBConsumeQueue:
    """One queue in a RocksDB consume queue, with ConsumeQueue's interface."""

    kind = "rocksdb"

    def __init__(self, db: RocksDBConsumeQueueStore, topic: str, queue_id: int):
        self.db = db
        self.topic = topic
        self.queue_id = queue_id
        self.directory = db.directory
        self.files: list = []

    def raw_chunks(self, from_offset: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """(first logical offset, ROCKS_CQ_DTYPE rows) for contiguous runs of logical offsets."""
        keys: list[bytes] = []
        vals: list[bytes] = []

        def flush():
            offs = np.frombuffer(b"".join(k[-CQ_OFFSET_FROM_KEY_END:] for k in keys), dtype=_CQ_OFFSET_DTYPE)
            arr = np.frombuffer(b"".join(vals), dtype=ROCKS_CQ_DTYPE)
            # split where the logical offsets are not consecutive (rows removed by the compaction filter)
            breaks = np.flatnonzero(np.diff(offs) != 1) + 1
            start = 0
            for b in list(breaks) + [len(offs)]:
                yield int(offs[start]), arr[start:b]
                start = b

        for k, v in self.db.rows(self.topic, self.queue_id, from_offset):
            if len(v) != CQ_UNIT_SIZE:
                off = int.from_bytes(k[-CQ_OFFSET_FROM_KEY_END:], "big", signed=True)
                raise CorruptDataError(f"CQ value of {self.topic}/{self.queue_id} offset {off} has {len(v)} bytes, "
                                       f"expected {CQ_UNIT_SIZE}", self.directory)
            keys.append(k)
            vals.append(v)
            if len(keys) >= CHUNK_ROWS:
                yield from flush()
                keys, vals = [], []
        if keys:
            yield from flush()

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """Same shape as ConsumeQueue.chunks: (first logical offset, CQ_DTYPE entries) per run of
        consecutive logical offsets (RocksDB has no zero-filled tail; rows are yielded as stored)."""
        for base, arr in self.raw_chunks():
            out = np.empty(len(arr), dtype=CQ_DTYPE)
            for n in CQ_ENTRY_TABLE.names:
                out[n] = arr[n]
            yield base, out

    def entries(self, from_offset: int | None = None, count: int | None = None,
                skip_pre_blank: bool = True, with_timestamp: bool = False) -> Iterator[tuple]:
        """(queue_offset, physical_offset, size, tags_code[, store_timestamp]) in logical order."""
        shown = 0
        lo = from_offset or 0
        for base, arr in self.raw_chunks(lo):
            keep = ~pre_blank_mask(arr) if skip_pre_blank else np.ones(len(arr), dtype=bool)
            idx = np.flatnonzero(keep)
            if count is not None:
                idx = idx[: count - shown]
            cols = [arr[n][idx].tolist() for n in ("physical_offset", "size", "tags_code", "store_timestamp")]
            for i, a, b, c, d in zip((idx + base).tolist(), *cols):
                yield (i, a, b, c, d) if with_timestamp else (i, a, b, c)
            shown += len(idx)
            if count is not None and shown >= count:
                return

    def bounds(self) -> tuple[int, int, int]:
        """(min logical offset, max logical offset (exclusive), entry count). The max comes from the offset
        table's ``max`` row when present (that is what RocksDBConsumeQueue.getMaxOffsetInQueue returns),
        else from the last row."""
        lo = None
        hi = 0
        count = 0
        for base, arr in self.raw_chunks():
            keep = np.flatnonzero(~pre_blank_mask(arr))
            if keep.size:
                if lo is None:
                    lo = base + int(keep[0])
                count += int(keep.size)
            hi = max(hi, base + len(arr))
        mx = self.db.offset_table.max.get((self.topic, self.queue_id))
        if mx is not None:
            hi = max(hi, mx[1] + 1)
        if lo is None:
            lo = hi
        return lo, hi, count

    @property
    def max_physical_offset(self) -> int:
        """Offset-table ``max`` physical offset (RocketMQ's maxPhysicOffset for this queue); -1 if absent."""
        mx = self.db.offset_table.max.get((self.topic, self.queue_id))
        if mx is not None:
            return mx[0]
        last = -1
        for _, arr in self.raw_chunks():
            if len(arr):
                last = int(arr["physical_offset"][-1])
        return last

    def min_offset_for(self, commitlog_min_offset: int) -> int:
        for base, arr in self.raw_chunks():
            ok = np.flatnonzero((arr["physical_offset"] >= commitlog_min_offset) & ~pre_blank_mask(arr))
            if ok.size:
                return base + int(ok[0])
        return self.bounds()[1]

    def close(self) -> None:
        pass


def list_rocksdb_queues(consumequeue_dir: str) -> list[RocksQueueId]:
    """Every (topic, queueId) in the RocksDB consume queue of ``consumequeue_dir`` (snapshot opened and removed)."""
    with RocksDBConsumeQueueStore(consumequeue_dir) as db:
        return db.queue_ids()


class ConsumeQueues:
    """All consume queues of a store, file-based or RocksDB; close() removes any RocksDB snapshot."""

    def __init__(self, consumequeue_dir: str, kind: str | None = None, conf: BrokerConf | None = None):
        self.directory = consumequeue_dir
        self.combined = is_rocksdb_dir(consumequeue_dir) and bool(list_queues(consumequeue_dir))
        if kind is None:
            kind = served_kind(consumequeue_dir, conf)
        self.kind = kind
        self.db = RocksDBConsumeQueueStore(consumequeue_dir) if kind == "rocksdb" else None

    def __iter__(self):
        if self.db is not None:
            yield from self.db.queues()
        else:
            for q in list_queues(self.directory):
                yield ConsumeQueue(q.topic, q.queue_id, q.path)

    def get(self, topic: str, queue_id: int):
        if self.db is not None:
            return self.db.queue(topic, queue_id)
        return ConsumeQueue.open(self.directory, topic, queue_id)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()

    def __enter__(self) -> ConsumeQueues:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def served_kind(consumequeue_dir: str, conf: BrokerConf | None = None) -> str:
    """'file' or 'rocksdb': the consume queue a broker serves from this directory. A directory holding both (the
    5.3.4+ CombineConsumeQueueStore, rocksdbCQDoubleWriteEnable=true) serves combineCQPreferCQType, from the
    broker.conf given (default: the file queue)."""
    if not is_rocksdb_dir(consumequeue_dir):
        return "file"
    if not list_queues(consumequeue_dir):
        return "rocksdb"
    st = configured(conf, "storeType")
    if st is not None and str(st.value).lower() == "defaultrocksdb":
        return "rocksdb"  # RocksDBMessageStore: the file queues are left-overs it never reads
    pref = configured(conf, "combineCQPreferCQType")
    return "rocksdb" if pref is not None and str(pref.value).lower() == "defaultrocksdb" else "file"


def open_consume_queues(store, kind: str | None = None) -> ConsumeQueues:
    """File or RocksDB consume queues of ``store`` (a Store or StoreLayout), chosen by what it holds and its
    broker.conf; ``kind`` ('file'|'rocksdb') forces one (a double-write store holds both)."""
    layout = getattr(store, "layout", store)
    return ConsumeQueues(layout.consumequeue_dir, kind, layout.conf)
