"""`cq`: ConsumeQueue entries, optionally joined with the CommitLog records they point to."""

from __future__ import annotations

import os
import sys

import click

from ..analyses.compare.cq_vs_commitlog import join_queue, queue_bounds
from ..store import Store
from ..store.consumequeue import ConsumeQueue, list_queues
from ..store.errors import EXIT_PROBLEMS, StoreNotFoundError
from ..store.rocksdb_cq import ConsumeQueues
from ._params import store_argument
from .output import emit, format_option, handle_errors, ms_to_iso, warn

COLUMNS = ("queue_offset", "physical_offset", "size", "tags_code")
JOIN_COLUMNS = COLUMNS + ("store_time", "record", "problems")
ALL_COLUMNS = ("topic", "queue_id", "min_offset", "max_offset", "entries", "files", "min_offset_for_commitlog")


def _cq_dir(st: Store, cq_dir: str | None) -> str:
    return os.path.abspath(cq_dir) if cq_dir else st.layout.consumequeue_dir


@click.command("cq")
@store_argument
@click.option("--topic", help="Topic of the queue.")
@click.option("--queue", "queue_id", type=int, help="Queue id.")
@click.option("--from", "from_", type=int, default=None, help="First logical queue offset to show.")
@click.option("--count", type=int, default=None, help="Number of entries to show.")
@click.option("--join", is_flag=True, help="Decode the record each entry points to and flag every mismatch.")
@click.option("--all", "all_", is_flag=True, help="List every queue with min/max offsets and entry counts.")
@click.option("--cq-dir", type=click.Path(file_okay=False), default=None,
              help="Read consume queues from this directory instead of STORE/consumequeue (e.g. a rebuilt copy).")
@click.option("--cq-file-size", type=int, default=None,
              help="mappedFileSizeConsumeQueue in bytes (default: inferred from the files).")
@click.option("--cq-format", type=click.Choice(("auto", "file", "rocksdb")), default="auto", show_default=True,
              help="File consume queues or the 5.x RocksDB consume queue (auto: what the directory holds; "
                   "RocksDB is read from a private snapshot, never in place).")
@format_option
@handle_errors
def cq(store, topic, queue_id, from_, count, join, all_, cq_dir, cq_file_size, cq_format, fmt):
    """ConsumeQueue entries of one queue: queue_offset, physical_offset, size, tags_code.

    Pre-blank padding entries are skipped. With --join each entry's record is decoded and checked
    (size, topic, queue id, queue offset, tagsCode; a SCHEDULE_TOPIC_XXXX delivery time is recognised).
    Exit code 1 when --join found problems.

    \b
    Examples:
      rmqinspect cq STORE --all
      rmqinspect cq STORE --topic OrderTopic --queue 0 --from 100 --count 10 --join
    """
    st = Store.open(store)
    d = _cq_dir(st, cq_dir)
    if not os.path.isdir(d):
        raise StoreNotFoundError("no consumequeue directory", d)
    with ConsumeQueues(d, None if cq_format == "auto" else cq_format) as queues:
        _cq(st, d, queues, topic, queue_id, from_, count, join, all_, cq_file_size, fmt)


def _cq(st, d, queues, topic, queue_id, from_, count, join, all_, cq_file_size, fmt):
    if all_:
        try:
            clmin = st.commitlog.min_offset
        except StoreNotFoundError:
            clmin = None
        if queues.kind == "file":
            qs = (ConsumeQueue(q.topic, q.queue_id, q.path, cq_file_size) for q in list_queues(d))
        else:
            qs = iter(queues)
        rows = (vars(b) for b in queue_bounds(qs, clmin))
        if emit(rows, fmt, ALL_COLUMNS) == 0:
            warn(f"no consume queues under {d}")
        return
    if topic is None or queue_id is None:
        raise click.UsageError("give --topic and --queue, or --all")
    if topic in (".", "..") or "/" in topic or "\\" in topic or "\0" in topic:
        raise click.BadParameter(f"{topic!r} is not a topic name (path separators are not allowed)",
                                 param_hint="--topic")
    q = ConsumeQueue.open(d, topic, queue_id, cq_file_size) if queues.kind == "file" else queues.get(topic, queue_id)
    if not join:
        rows = ({"topic": topic, "queue_id": queue_id, "queue_offset": a, "physical_offset": b, "size": c,
                 "tags_code": t} for a, b, c, t in q.entries(from_, count))
        emit(rows, fmt, COLUMNS)
        return
    cl = st.commitlog
    bad = [0]

    def rows():
        for e in join_queue(q, cl, from_, count):
            if e.problems:
                bad[0] += 1
            d = e.to_dict()
            if fmt == "table":
                m = e.message
                d["store_time"] = ms_to_iso(m.store_timestamp) if m else ""
                d["record"] = f"{m.topic}/{m.queue_id}@{m.queue_offset} tags={m.tags!r}" if m else ""
                d["problems"] = "; ".join(e.problems + e.notes)
            yield d

    emit(rows(), fmt, JOIN_COLUMNS, cell_width=140)
    if bad[0]:
        warn(f"{bad[0]} entries disagree with the commitlog")
        sys.exit(EXIT_PROBLEMS)


COMMANDS = [cq]
