"""`cq`: ConsumeQueue entries, optionally joined with the CommitLog records they point to."""

from __future__ import annotations

import itertools
import os
import sys
from typing import TYPE_CHECKING

import click

from ..errors import EXIT_PROBLEMS, RmqInspectError, StoreNotFoundError
from ..store import Store
from ..store.consumequeue import ConsumeQueue, list_queues
from ._params import (
    CQ_FILE_SIZE,
    NON_NEGATIVE_LONG,
    QUEUE_ID,
    broker_conf,
    refuse_together,
    release_option,
    store_argument,
)
from .output import emit, format_option, handle_errors, ms_to_iso, nearest_topics, no_match, note, render, warn

if TYPE_CHECKING:
    from ..store.batch import BatchConsumeQueue

COLUMNS = ("queue_offset", "physical_offset", "size", "tags_code")
JOIN_COLUMNS = COLUMNS + ("store_time", "record", "problems")
ALL_COLUMNS = ("topic", "queue_id", "cq_type", "min_offset", "max_offset", "entries", "files",
               "min_offset_for_commitlog")
BATCH_COLUMNS = ("queue_offset", "batch_size", "physical_offset", "size", "tags_code", "store_timestamp")


def _cq_dir(st: Store, cq_dir: str | None) -> str:
    return os.path.abspath(cq_dir) if cq_dir else st.layout.consumequeue_dir


@click.command("cq")
@store_argument
@click.option("--topic", help="Topic of the queue.")
@click.option("--queue", "queue_id", type=QUEUE_ID, help="Queue id.")
@click.option("--from", "from_", type=NON_NEGATIVE_LONG, default=None, help="First logical queue offset to show.")
@click.option("--count", type=NON_NEGATIVE_LONG, default=None, help="Number of entries to show.")
@click.option("--join", is_flag=True, help="Decode the record each entry points to and flag every mismatch.")
@click.option("--all", "all_", is_flag=True, help="List every queue with min/max offsets and entry counts.")
@click.option("--cq-dir", type=click.Path(file_okay=False), default=None,
              help="Read consume queues from this directory instead of STORE/consumequeue (e.g. a rebuilt copy).")
@click.option("--cq-file-size", type=CQ_FILE_SIZE, default=None,
              help="mappedFileSizeConsumeQueue in bytes (default: inferred from the files).")
@click.option("--cq-format", type=click.Choice(("auto", "file", "rocksdb")), default="auto", show_default=True,
              help="File consume queues or the 5.x RocksDB consume queue (auto: what the directory holds; "
                   "RocksDB is read from a private snapshot, never in place). A 5.3.4+ combined store "
                   "(rocksdbCQDoubleWriteEnable) holds both: auto is the one the broker serves "
                   "(combineCQPreferCQType), the other is read by naming it, with --as-recovered too.")
@click.option("--as-recovered", is_flag=True,
              help="The queue as the broker will hold it once it has loaded and started on this directory "
                   "(recover --dry-run's model: truncation, truncateDirtyLogicFiles, re-dispatch), in memory.")
@release_option
@format_option
@handle_errors
def cq(store, topic, queue_id, from_, count, join, all_, cq_dir, cq_file_size, cq_format, as_recovered,
       broker_version, fmt):
    """ConsumeQueue entries of one queue: queue_offset, physical_offset, size, tags_code.

    Pre-blank padding entries are skipped. With --join each entry's record is decoded and checked
    (size, topic, queue id, queue offset, tagsCode; a SCHEDULE_TOPIC_XXXX delivery time is recognised).
    Exit code 1 when --join found problems.

    \b
    Examples:
      rmqinspect cq STORE --all
      rmqinspect cq STORE --topic OrderTopic --queue 0 --from 100 --count 10 --join
    """
    refuse_together({"--as-recovered": as_recovered, "--join": join},
                     "--join checks the entries on disk against their records, --as-recovered lists the queue as "
                     "the broker holds it after a restart; run them one after the other")
    refuse_together({"--as-recovered": as_recovered, "--cq-dir": cq_dir},
                    "--as-recovered models the store's own consume queues (STORE/consumequeue)")
    refuse_together({"--all": all_, "--join": join},
                    "--all lists the queues; --join checks the entries of one (--topic and --queue)")
    st = Store.open(store, conf=broker_conf())
    if as_recovered:
        _as_recovered(st, topic, queue_id, from_, count, all_, cq_file_size, fmt, broker_version,
                      None if cq_format == "auto" else cq_format)
        return
    from ..store.batch import list_batch_queues  # numpy (BatchCQ, RocksDB): not at --help
    from ..store.rocksdb_cq import ConsumeQueues

    d = _cq_dir(st, cq_dir)
    # BatchCQ topics (5.x queue.type=BatchCQ) keep their queues in batchconsumequeue/, beside consumequeue/
    batch = [] if cq_dir else list_batch_queues(st.root)
    if not os.path.isdir(d):
        if not batch:
            raise StoreNotFoundError("no consumequeue directory", d)
        _cq(st, d, None, batch, topic, queue_id, from_, count, join, all_, cq_file_size, fmt)
        return
    with ConsumeQueues(d, None if cq_format == "auto" else cq_format, st.conf) as queues:
        if queues.combined and cq_format == "auto":
            other = "rocksdb" if queues.kind == "file" else "file"
            warn(f"consumequeue/ holds a file and a RocksDB consume queue (CombineConsumeQueueStore, 5.3.4+): "
                 f"showing the {queues.kind} queue the broker serves (combineCQPreferCQType); --cq-format {other} "
                 "reads the other")
        _cq(st, d, queues, batch, topic, queue_id, from_, count, join, all_, cq_file_size, fmt, broker_version)


def _cq(st, d, queues, batch, topic, queue_id, from_, count, join, all_, cq_file_size, fmt, broker_version=None):
    from ..analyses.compare.cq_vs_commitlog import join_queue, queue_bounds
    from ..analyses.cq_fates import EntryFates
    from ..store.batch import BatchConsumeQueue
    from ..store.rocksdb_cq import served_kind

    if all_:
        try:
            clmin = st.commitlog.min_offset
        except StoreNotFoundError:
            clmin = None
        if queues is None:
            qs = iter(())
        elif queues.kind == "file":
            qs = (ConsumeQueue(q.topic, q.queue_id, q.path, cq_file_size) for q in list_queues(d))
        else:
            qs = iter(queues)
        bqs = (BatchConsumeQueue(t, q, p, st.conf) for t, q, p in batch)
        rows = (vars(b) for b in queue_bounds(itertools.chain(qs, bqs), clmin))
        if emit(rows, fmt, ALL_COLUMNS) == 0:
            warn(f"no consume queues under {d}")
        return
    if topic is None or queue_id is None:
        raise click.UsageError("give --topic and --queue, or --all")
    if topic in (".", "..") or "/" in topic or "\\" in topic or "\0" in topic:
        raise click.BadParameter(f"{topic!r} is not a topic name (path separators are not allowed)",
                                 param_hint="--topic")
    bq = next((p for t, q, p in batch if (t, q) == (topic, queue_id)), None)
    if bq is not None:
        if join:
            raise click.UsageError(f"{topic}/{queue_id} is a BatchConsumeQueue: use `batch-cq --expand` to check "
                                   "its records")
        _batch_entries(BatchConsumeQueue(topic, queue_id, bq, st.conf), from_, count, fmt)
        return
    if queues is None:
        raise StoreNotFoundError(f"no consume queue for {topic!r} queue {queue_id}", d)
    try:
        q = ConsumeQueue.open(d, topic, queue_id, cq_file_size) if queues.kind == "file" \
            else queues.get(topic, queue_id)
    except StoreNotFoundError as e:
        raise StoreNotFoundError(e.message + nearest_topics(topic, st.root), e.path, e.offset) from None
    if not join:
        fates = EntryFates.of(st, d, topic, queue_id, cq_file_size, broker_version, on_note=warn) \
            if queues.kind == served_kind(d, st.conf) else None
        rows = ({"topic": topic, "queue_id": queue_id, "queue_offset": a, "physical_offset": b, "size": c,
                 "tags_code": t} | ({"fate": fates((a, b, c, t))} if fates else {})
                for a, b, c, t in q.entries(from_, count))
        n = emit(rows, fmt, COLUMNS + (("fate",) if fates else ()))
        if fates:
            fates.finish()
        if n == 0 and count != 0:
            _no_entries(topic, queue_id, from_, queues)
        return
    cl = st.commitlog
    bad = [0]

    def rows(human: bool):
        for e in join_queue(q, cl, from_, count):
            if e.problems:
                bad[0] += 1
            d = e.to_dict()
            if human:
                m = e.message
                d["store_time"] = ms_to_iso(m.store_timestamp) if m else ""
                d["record"] = f"{m.topic}/{m.queue_id}@{m.queue_offset} tags={m.tags!r}" if m else ""
                d["problems"] = "; ".join(e.problems + e.notes)
            yield d

    if not render(q, fmt, lambda q: emit(rows(True), "table", JOIN_COLUMNS), rows=lambda q: rows(False)) \
            and count != 0:
        _no_entries(topic, queue_id, from_, queues)
    behind = _behind(st, q, topic, queue_id) if queues.kind == "file" and count is None else 0
    if bad[0]:
        warn(f"{bad[0]} entries disagree with the commitlog")
    if bad[0] or behind:
        sys.exit(EXIT_PROBLEMS)


def _behind(st, q, topic: str, queue_id: int) -> int:
    """Records of this queue that the commit log holds past its consume queue's last entry (what verify calls
    cq_behind): the walk from the end of the last entry's record to the end of the log. Returns 1 (a problem)
    when there are any."""
    from ..analyses.dispatch_rules import goes_to_consume_queue

    last = None
    for e in q.entries(None, None):
        last = e
    cl = st.commitlog
    start = cl.min_offset
    end_offset = 0
    if last is not None:
        start, end_offset = last[1] + last[2], last[0] + 1
    missing, first = 0, None
    unconfirmed, confirm = 0, -1
    if st.layout.dledger is None:
        from ..analyses.recovery.controller import detect_confirm_offset

        confirm = detect_confirm_offset(st)  # controller mode: the reput stops at confirmPhyOffset
    try:
        for m in cl.messages(start):
            if m.topic == topic and m.queue_id == queue_id and m.queue_offset >= end_offset \
                    and goes_to_consume_queue(m.sys_flag):
                if 0 <= confirm < m.physical_offset + m.total_size:
                    unconfirmed += 1
                    continue
                missing += 1
                first = m.physical_offset if first is None else first
    except RmqInspectError:
        pass  # the walk ends at damage as the dispatcher's does
    if unconfirmed:
        note(f"{topic}/{queue_id}: {unconfirmed} more record(s) of this queue lie past confirmPhyOffset {confirm} "
             "(controller mode): unconfirmed, on disk, in no consume queue until confirmed")
    if not missing:
        return 0
    warn(f"{topic}/{queue_id}: the consume queue ends at queue offset {end_offset} but the commit log holds "
         f"{missing} more record(s) of this queue from physical offset {first}: the consume queue is behind the "
         "commit log (verify: cq_behind)")
    return 1


def _no_entries(topic: str, queue_id: int, from_: int | None, queues=None):
    where = f"at or after queue offset {from_}" if from_ else "in it"
    # a RocksDB consume queue answers any (topic, queue) with an empty queue: its rows name the topics it has
    names = [q.topic for q in queues] if queues is not None and queues.kind != "file" else None
    no_match(f"{topic}/{queue_id}: no consume-queue entry {where} (`cq --all` gives each queue's offsets)",
             topic=topic if names is not None else None, names=names)


def _as_recovered(st, topic, queue_id, from_, count, all_, cq_file_size, fmt, version=None, kind=None) -> None:
    from ..analyses.cq_fates import cq_recovery_plan
    from ..analyses.recovery.rocksdb import queue_entries_after_recovery

    plan = cq_recovery_plan(st, cq_file_size, version)
    if plan.combine is not None and kind is not None and kind != ("file" if plan.combine.served_is_file
                                                                   else "rocksdb"):
        _combine_other_side(st, plan, topic, queue_id, from_, count, all_, fmt, kind)
        return
    if all_:
        before = plan.consume_queue_max_offsets_before or {}
        after = plan.consume_queue_max_offsets_after_start or plan.consume_queue_max_offsets
        rows = ({"topic": k.rsplit("/", 1)[0], "queue_id": int(k.rsplit("/", 1)[1]),
                 "max_offset_on_disk": before.get(k), "max_offset_after_load": plan.consume_queue_max_offsets.get(k),
                 "max_offset_after_start": after.get(k)}
                for k in plan.consume_queue_keys())
        emit(rows, fmt, ("topic", "queue_id", "max_offset_on_disk", "max_offset_after_load", "max_offset_after_start"))
        return
    if topic is None or queue_id is None:
        raise click.UsageError("give --topic and --queue, or --all")
    entries = queue_entries_after_recovery(st, plan, f"{topic}/{queue_id}")
    if entries is None:
        raise click.UsageError(f"{topic}/{queue_id}: the recovery model holds no consume queue for it (absent, "
                               "or BatchCQ: `cq --all --as-recovered` gives their bounds)")
    lo = from_ or 0
    sel = [e for e in entries if e[0] >= lo][: count if count is not None else None]
    emit(({"topic": topic, "queue_id": queue_id, "queue_offset": a, "physical_offset": b, "size": c, "tags_code": t}
          for a, b, c, t in sel), fmt, COLUMNS)


def _combine_other_side(st, plan, topic, queue_id, from_, count, all_, fmt, kind) -> None:
    """A combine store's queue the broker does not serve, as recovery and start() leave it."""
    from ..analyses.recovery.combine import rocksdb_side_entries, side_bounds

    if kind != "rocksdb":
        raise click.UsageError("this combine store serves the RocksDB queue: the file queue after recovery is "
                               "not modelled apart from it (--cq-format rocksdb or auto)")
    side = plan.combine
    if all_:
        bounds = side_bounds(st, side)
        emit(({"topic": k.rsplit("/", 1)[0], "queue_id": int(k.rsplit("/", 1)[1]), "cq_type": "RocksDBCQ",
               "min_offset": lo, "max_offset": hi} for k, (lo, hi) in bounds.items()), fmt,
             ("topic", "queue_id", "cq_type", "min_offset", "max_offset"))
        return
    if topic is None or queue_id is None:
        raise click.UsageError("give --topic and --queue, or --all")
    entries = rocksdb_side_entries(st, side, f"{topic}/{queue_id}")
    if entries is None:
        raise click.UsageError(f"{topic}/{queue_id}: the RocksDB side holds no such queue after recovery")
    lo = from_ or 0
    sel = [e for e in entries if e[0] >= lo][: count if count is not None else None]
    emit(({"topic": topic, "queue_id": queue_id, "queue_offset": a, "physical_offset": b, "size": c, "tags_code": t}
          for a, b, c, t in sel), fmt, COLUMNS)


def _batch_entries(bcq: BatchConsumeQueue, from_: int | None, count: int | None, fmt: str) -> None:
    """A BatchConsumeQueue's units from the one containing logical offset ``from_``: queue_offset is the
    unit's msgBaseOffset, batch_size the messages it covers."""
    def rows():
        n = 0
        for e in bcq.entries():
            if from_ is not None and e["msg_base_offset"] + e["batch_size"] <= from_:
                continue
            if count is not None and n >= count:
                return
            n += 1
            yield {"topic": bcq.topic, "queue_id": bcq.queue_id, "queue_offset": e["msg_base_offset"],
                   "batch_size": e["batch_size"], "physical_offset": e["physical_offset"], "size": e["size"],
                   "tags_code": e["tags_code"], "store_timestamp": e["store_timestamp"]}

    emit(rows(), fmt, BATCH_COLUMNS)


COMMANDS = [cq]
