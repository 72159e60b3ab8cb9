"""`rocksdb-cq`: the 5.x RocksDB consume queue (storeType=defaultRocksDB), read from a private snapshot."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS
from ..store import Store
from ._params import NON_NEGATIVE_LONG, QUEUE_ID, broker_conf, broker_version_option, store_argument
from .output import emit, format_option, handle_errors, no_match, warn

CQ_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "size", "tags_code", "store_timestamp")


@click.command("rocksdb-cq")
@store_argument
@click.option("--topic", help="Only this topic.")
@click.option("--queue", "queue_id", type=QUEUE_ID, help="Only this queue id (with --topic).")
@click.option("--from", "from_", type=NON_NEGATIVE_LONG, default=None, help="First logical (queue) offset.")
@click.option("--count", type=NON_NEGATIVE_LONG, default=None, help="At most this many entries per queue.")
@click.option("--list", "list_only", is_flag=True, help="List queues with min/max offsets instead of entries.")
@click.option("--offsets", is_flag=True, help="Dump the offset column family (max/min rows, checkpoint).")
@click.option("--compare-file-cq", "compare_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Migration check: compare with the file consume queue in this consumequeue/ directory "
                   "(e.g. the same store's, written in double-write mode). Exit 1 on differences.")
@broker_version_option
@format_option
@handle_errors
def rocksdb_cq(store, topic, queue_id, from_, count, list_only, offsets, compare_dir, broker_version, fmt):
    """List a RocksDB ConsumeQueue (5.x storeType=defaultRocksDB): entries of one queue or all queues.

    Opens a private snapshot of consumequeue/ (RocksDB writes into any directory it opens), never the
    store itself. Columns and NDJSON keys are those of the file `cq` command, plus store_timestamp.
    """
    from ..store.rocksdb_cq import RocksDBConsumeQueueStore

    st = Store.open(store, conf=broker_conf())
    with RocksDBConsumeQueueStore(st.layout.consumequeue_dir) as db:
        every = list(db.queues())
        qs = [q for q in every if (topic is None or q.topic == topic) and (queue_id is None or q.queue_id == queue_id)]
        if not every:
            # RocketMQ writes the rows with the WAL disabled: a crash can leave none at all
            no_match(f"the RocksDB consume queue in {st.layout.consumequeue_dir} holds no row at all (RocketMQ writes "
                     "them with the write-ahead log off: a crash can lose every one); a restart dispatches every "
                     "record of the commit log again (`recover --dry-run` says how many, `verify` counts them as "
                     "cq_behind)")
        if not qs:
            # the topics are rows inside the database, not directories: the nearest names come from its rows
            what = (f"topic {topic!r}" if topic is not None else "any topic") + (
                f" queue {queue_id}" if queue_id is not None else "")
            no_match(f"the RocksDB consume queue in {st.layout.consumequeue_dir} has no rows for {what} "
                     "(`rocksdb-cq --list` lists its queues)", topic=topic, names=[q.topic for q in every])
        if compare_dir:
            from ..analyses.compare.cq_vs_cq import compare_consume_queues
            from ..store.rocksdb_cq import ConsumeQueues

            files = [q for q in ConsumeQueues(compare_dir, "file") if (topic is None or q.topic == topic)
                     and (queue_id is None or q.queue_id == queue_id)]
            res = compare_consume_queues(qs, files)
            rows = [{"topic": d.topic, "queue_id": d.queue_id, "only_in": {"left": "rocksdb", "right": "file"}.get(
                d.only_in), "rocksdb_bounds": d.left_bounds, "file_bounds": d.right_bounds,
                "mismatches": d.mismatch_count, "examples": d.mismatches} for d in res.diffs]
            emit(rows, fmt, ("topic", "queue_id", "only_in", "rocksdb_bounds", "file_bounds", "mismatches"))
            click.echo(f"{res.queues_compared} queues, {res.entries_compared} entries compared, "
                       f"{len(res.diffs)} queues differ", err=True)
            if res.diffs:
                sys.exit(EXIT_PROBLEMS)
            return
        if offsets:
            ot = db.offset_table
            rows = []
            for kind, table in (("max", ot.max), ("min", ot.min)):
                for (t, q), (phy, off) in sorted(table.items()):
                    if (topic is None or t == topic) and (queue_id is None or q == queue_id):
                        rows.append({"topic": t, "queue_id": q, "kind": kind, "physical_offset": phy,
                                     "queue_offset": off})
            if ot.checkpoint is not None and topic is None:
                rows.append({"topic": "CHECKPOINT_TOPIC", "queue_id": 0, "kind": "max",
                             "physical_offset": ot.checkpoint, "queue_offset": None})
            emit(rows, fmt, ("topic", "queue_id", "kind", "physical_offset", "queue_offset"))
            for p in ot.problems:
                warn(p)
            return
        if list_only:
            def qrows():
                for q in qs:
                    lo, hi, n = q.bounds()
                    yield {"topic": q.topic, "queue_id": q.queue_id, "min_offset": lo, "max_offset": hi,
                           "entries": n, "max_physical_offset": q.max_physical_offset}
            emit(qrows(), fmt, ("topic", "queue_id", "min_offset", "max_offset", "entries", "max_physical_offset"))
            return

        def erows():
            for q in qs:
                for off, phy, size, tags, ts in q.entries(from_, count, with_timestamp=True):
                    yield {"topic": q.topic, "queue_id": q.queue_id, "queue_offset": off, "physical_offset": phy,
                           "size": size, "tags_code": tags, "store_timestamp": ts}
        if emit(erows(), fmt, CQ_COLUMNS) == 0 and count != 0:
            where = f"at or after queue offset {from_}" if from_ else "in them"
            which = f"{qs[0].topic}/{qs[0].queue_id}" if len(qs) == 1 else f"{len(qs)} RocksDB consume queues"
            no_match(f"{which}: no RocksDB consume-queue entry {where} "
                     "(`rocksdb-cq --list` gives each queue's offsets)")


COMMANDS = [rocksdb_cq]
