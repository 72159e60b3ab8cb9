"""Write a RocksDB consume queue (FORMATS.md §10.1) into a NEW directory: the ``default`` (CQ) and
``offset`` column families with the broker's key/value layouts, so RocketMQ 5.x
(``storeType=defaultRocksDB``) can load it as ``ROOT/consumequeue``.

Used by ``rebuild --cq-format rocksdb`` (``file_cq_to_rocksdb``) and for fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..formats.rocksdb_cq import (
    CF_OFFSET,
    CHECKPOINT_TOPIC,
    MAX,
    MIN,
    cq_key,
    encode_checkpoint_value,
    encode_cq_value,
    encode_offset_value,
    offset_key,
)
from ..store.consumequeue import ConsumeQueue, list_queues
from ..store.layout import ensure_new_directory
from ..store.walk.records import unpack_header

# rocksdict keeps its own settings next to the database; RocketMQ does not need it and it is not RocksDB's.
_ROCKSDICT_CONFIG = "rocksdict-config.json"


def write_rocksdb_consume_queue(out_dir: str, entries: Iterable[tuple], *, write_min: bool = False,
                                batch_rows: int = 10000) -> dict:
    """Write CQ rows ``(topic, queue_id, cq_offset, physical_offset, size, tags_code, store_timestamp)``.

    Per queue the offset table gets the ``max`` row (last entry: its physical offset and cq offset), and,
    with ``write_min``, a ``min`` row (first entry); the CHECKPOINT_TOPIC row holds the highest
    ``physical_offset + size``. Returns counts. ``out_dir`` must not exist or be empty."""
    from rocksdict import Options, Rdict, WriteBatch

    ensure_new_directory(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    db = Rdict(out_dir, options=opts, column_families={CF_OFFSET: Options(raw_mode=True)})
    try:
        cf_off = db.get_column_family_handle(CF_OFFSET)
        maxes: dict = {}
        mins: dict = {}
        checkpoint = None
        rows = 0
        wb = WriteBatch(raw_mode=True)
        for topic, qid, cq_off, phy, size, tags, ts in entries:
            wb.put(cq_key(topic, qid, cq_off), encode_cq_value(phy, size, tags, ts))
            k = (topic, qid)
            if k not in maxes or cq_off > maxes[k][1]:
                maxes[k] = (phy, cq_off)
            if k not in mins or cq_off < mins[k][1]:
                mins[k] = (phy, cq_off)
            end = phy + size
            checkpoint = end if checkpoint is None else max(checkpoint, end)
            rows += 1
            if rows % batch_rows == 0:
                db.write(wb)
                wb = WriteBatch(raw_mode=True)
        for (topic, qid), (phy, off) in maxes.items():
            wb.put(offset_key(topic, MAX, qid), encode_offset_value(phy, off), cf_off)
            if write_min:
                p, o = mins[(topic, qid)]
                wb.put(offset_key(topic, MIN, qid), encode_offset_value(p, o), cf_off)
        if checkpoint is not None:
            wb.put(offset_key(CHECKPOINT_TOPIC, MAX, 0), encode_checkpoint_value(checkpoint), cf_off)
        db.write(wb)
        db.flush()
    finally:
        db.close()
    try:
        os.remove(os.path.join(out_dir, _ROCKSDICT_CONFIG))
    except FileNotFoundError:
        pass
    return {"rows": rows, "queues": len(maxes), "checkpoint": checkpoint}


def rows_from_consume_queues(queues, commitlog=None) -> Iterable[tuple]:
    """CQ rows from readers with the ConsumeQueue interface. The store timestamp is taken from the
    RocksDB reader when it has one, else read from the commitlog record (0 when unreadable)."""
    for q in queues:
        if getattr(q, "kind", "file") == "rocksdb":
            for off, phy, size, tags, ts in q.entries(with_timestamp=True):
                yield q.topic, q.queue_id, off, phy, size, tags, ts
            continue
        for off, phy, size, tags in q.entries():
            ts = 0
            if commitlog is not None:
                try:
                    f, pos = commitlog.locate(phy)
                    ts = unpack_header(f.buffer, pos)[11]
                except Exception:  # deleted/damaged record: the broker would also lack the time
                    ts = 0
            yield q.topic, q.queue_id, off, phy, size, tags, ts


def file_cq_to_rocksdb(file_cq_dir: str, out_dir: str, commitlog) -> dict:
    """Load file consume queues (``<dir>/<topic>/<queueId>/…``) into a new RocksDB consume queue, taking
    each entry's store timestamp from its commitlog record."""
    queues = [ConsumeQueue(q.topic, q.queue_id, q.path) for q in list_queues(file_cq_dir)]
    try:
        return write_rocksdb_consume_queue(out_dir, rows_from_consume_queues(queues, commitlog))
    finally:
        for q in queues:
            q.close()
