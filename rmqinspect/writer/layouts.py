"""The layouts of 5.3.4 and later releases added to a store the project's writer made (VERSIONS.md §1.3-§1.8),
so that tests and benchmarks can make such stores: the combine store's RocksDB consume queue beside the file one,
the 5.5 separate RocksDB consume-queue directory, RIP-82's RocksDBMessageStore/, the single metadata RocksDB,
config files left only as ``.bak`` and TimerWheel snapshots. Everything 5.4+ here is modelled from the change
descriptions, not from a broker-written store. Only new files and directories are created."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable

from ..formats.rip82 import (
    CF_TIMER,
    CF_TRANS,
    INDEX_UNIQUE_TYPE,
    IndexRecord,
    TimerRecord,
    TransRecord,
    index_key,
    index_value,
    timer_key,
    timer_value,
    trans_key,
    trans_value,
)
from ..sinks.rocksdb_cq import rows_from_consume_queues, write_rocksdb_consume_queue
from ..store import Store
from ..store.rip82 import RIP82_DIR
from ..store.rocksdb_cq import ConsumeQueues

_ROCKSDB_FILES = ("CURRENT", "IDENTITY", "MANIFEST-", "OPTIONS-", ".sst", ".log")


def add_rocksdb_consume_queue(root: str, *, separate_dir: str | None = None,
                              rows: Iterable[tuple] | None = None) -> dict:
    """Write a RocksDB consume queue holding ``rows`` (default: every entry of the store's file queues) into
    consumequeue/ beside the file queues (the 5.3.4 CombineConsumeQueueStore) or into ``separate_dir`` (5.5's
    useSeparateStorePathForRocksdbCQ, e.g. ``consumequeue_rocksdb``)."""
    st = Store.open(root)
    if rows is None:
        with ConsumeQueues(st.layout.consumequeue_dir, "file") as qs:
            rows = list(rows_from_consume_queues(qs, st.commitlog))
    if separate_dir is not None:
        return write_rocksdb_consume_queue(os.path.join(root, separate_dir), rows, write_min=True)
    tmp = tempfile.mkdtemp(prefix="rmqinspect-combine-")
    try:
        out = os.path.join(tmp, "db")
        res = write_rocksdb_consume_queue(out, rows, write_min=True)
        for name in os.listdir(out):
            dst = os.path.join(st.layout.consumequeue_dir, name)
            if os.path.exists(dst):
                raise FileExistsError(dst)
            shutil.move(os.path.join(out, name), dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def write_rip82_store(root: str, index: Iterable[IndexRecord] = (), timers: Iterable[TimerRecord] = (),
                      trans: Iterable[TransRecord] = ()) -> str:
    """RocksDBMessageStore/ with the index (default), timer and trans column families."""
    from rocksdict import Options, Rdict

    path = os.path.join(root, RIP82_DIR)
    os.makedirs(path)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    db = Rdict(path, options=opts, column_families={CF_TIMER: Options(raw_mode=True),
                                                     CF_TRANS: Options(raw_mode=True)})
    try:
        last = 0
        for r in index:
            value = "" if r.kind == INDEX_UNIQUE_TYPE else r.value
            db[index_key(r.topic, r.kind, value, r.uniq_key, r.store_time, r.offset_py)] = index_value(r.store_time)
            last = max(last, r.offset_py)
        db[b"lastOffsetPy"] = last.to_bytes(8, "big", signed=True)
        cf = db.get_column_family(CF_TIMER)
        for t in timers:
            cf[timer_key(t.delay_time, t.uniq_key)] = timer_value(t.size_py, t.offset_py)
        cf = db.get_column_family(CF_TRANS)
        for x in trans:
            cf[trans_key(x.offset_py, x.topic, x.uniq_key)] = trans_value(x.check_times, x.size_py)
        db.flush()
    finally:
        db.close()
    _drop_rocksdict_config(path)
    return path


def write_metadata_rocksdb(root: str) -> str:
    """config/metadata/: one RocksDB for topics, groups and offsets (useSingleRocksDBForAllConfigs); here empty
    but for one topic row, enough for its layout."""
    from rocksdict import Options, Rdict

    path = os.path.join(Store.open(root).layout.config_dir, "metadata")
    os.makedirs(path)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(path, options=opts)
    try:
        db[b"topic@T"] = b"{}"
        db.flush()
    finally:
        db.close()
    _drop_rocksdict_config(path)
    return path


def leave_bak_only(root: str, name: str) -> str:
    """config/<name> moved to <name>.bak, as a copy taken between ConfigManager#persist's move and its write."""
    cfg = Store.open(root).layout.config_dir
    src = os.path.join(cfg, name)
    dst = src + ".bak"
    if os.path.exists(dst):
        raise FileExistsError(dst)
    os.rename(src, dst)
    return dst


def write_timerwheel_snapshot(root: str, offset: int) -> str:
    """timerwheel.<offset>: a copy of the store's timerwheel as a TimerWheel snapshot (timerWheelSnapshotFlush)."""
    src = os.path.join(root, "timerwheel")
    dst = f"{src}.{offset}"
    if os.path.exists(dst):
        raise FileExistsError(dst)
    shutil.copyfile(src, dst)
    return dst


def _drop_rocksdict_config(path: str) -> None:
    try:
        os.remove(os.path.join(path, "rocksdict-config.json"))
    except FileNotFoundError:
        pass


__all__ = ["add_rocksdb_consume_queue", "leave_bak_only", "write_metadata_rocksdb", "write_rip82_store",
           "write_timerwheel_snapshot"]
