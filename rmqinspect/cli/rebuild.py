"""`rebuild`: ConsumeQueue and IndexFile regenerated from the CommitLog, as the broker's dispatcher writes
them; `--dry-run` reconciles them with the files in the store instead."""

from __future__ import annotations

import functools

import click

from ..store import Store
from ..errors import EXIT_PROBLEMS
from ..store.walk.parallel import default_jobs
from ._params import (
    CQ_FILE_SIZE,
    INDEX_MAX,
    INDEX_SLOTS,
    NON_NEGATIVE_LONG,
    OFFSET,
    broker_conf,
    broker_version_option_for,
    check_index_geometry,
    jobs_option,
    store_argument,
)
from .output import emit, emit_document, format_option, handle_errors, note, print_kv, progress, warn

QUEUE_COLUMNS = ("topic", "queue_id", "rebuilt_entries", "store_entries", "matching", "missing", "extra", "wrong",
                 "status", "note")
INDEX_COLUMNS = ("ordinal", "store_file", "rebuilt_items", "header_diffs", "slot_diffs", "item_diffs", "status", "note")
DIFF_COLUMNS = ("topic", "queue_id", "queue_offset", "index_file", "item", "kind", "rebuilt", "store", "fields")


@click.command("rebuild")
@store_argument
@click.option("--out", "out", type=click.Path(file_okay=False), help="New directory for consumequeue/ and index/ "
              "(must not exist inside STORE). Not needed with --dry-run.")
@click.option("--what", default="cq,index", show_default=True, help="What to rebuild: cq, index or both.")
@click.option("--from", "from_", type=OFFSET, help="Start the dispatch at this physical offset (a record boundary).")
@click.option("--to", type=OFFSET, help="Stop the dispatch at this physical offset (exclusive).")
@click.option("--cq-file-size", type=CQ_FILE_SIZE, help="mappedFileSizeConsumeQueue in bytes (rounded up to 20). "
              "Default: the store's CQ files, else 6000000.")
@click.option("--index-slots", type=INDEX_SLOTS, help="maxHashSlotNum. Default: inferred from the store's index files, "
              "else 5000000.")
@click.option("--index-max", type=INDEX_MAX, help="maxIndexNum. Default: the store's index files, else 20000000.")
@broker_version_option_for("Before 4.7.1 IndexFile counted hashSlotCount on every put; from 4.7.1 only newly used "
                           "slots. Default: proven from STORE's index file headers, else 4.9 (with a note).")
@click.option("--dry-run", is_flag=True, help="Write nothing: compare what would be written with the CQ and index "
              "files in STORE and report every difference, queue by queue.")
@click.option("--details", type=NON_NEGATIVE_LONG, default=1000, show_default=True,
              help="With --dry-run: how many individual differences to list (all are counted).")
@click.option("--engine", type=click.Choice(("local", "spark")), default="local", show_default=True,
              help="spark: one Spark task per commitlog file, results assembled in commitlog order (same bytes).")
@click.option("--master", default=None, help="Spark master URL with --engine spark (default local[*]).")
@click.option("--cq-format", type=click.Choice(("file", "rocksdb")), default="file", show_default=True,
              help="rocksdb: write OUT/consumequeue as the 5.x RocksDB consume queue (storeType=defaultRocksDB) "
                   "instead of files; same dispatch, entries carry the record's store timestamp.")
@jobs_option
@format_option
@handle_errors
def rebuild_cmd(store, out, what, from_, to, cq_file_size, index_slots, index_max, broker_version, dry_run,
                details, engine, master, cq_format, jobs, fmt):
    """Regenerate ConsumeQueue and IndexFile from the CommitLog exactly as the broker's dispatcher writes them
    (ReputMessageService), into a new directory; or, with --dry-run, reconcile them with STORE's files.

    Topics that are not valid RocketMQ topic names (or would escape the output directory) get no consume
    queue: they are reported and skipped. Index file names are derived from the data (beginTimestamp in UTC).
    """
    # imports numpy: here, not when --help loads the command
    from ..analyses.rebuild import PROBLEM_STOPS, dispatch_version, rebuild, record_around

    check_index_geometry(index_slots, index_max)
    parts = {p.strip() for p in what.split(",") if p.strip()}
    if not parts or parts - {"cq", "index"}:
        raise click.BadParameter("use cq, index or cq,index", param_hint="--what")
    if not dry_run and not out:
        raise click.UsageError("--out DIR is required (or use --dry-run)")
    if engine == "spark" and (from_ is not None or to is not None):
        raise click.UsageError("--from/--to are not supported with --engine spark")
    dispatch = None
    if engine == "spark":
        from ..spark.rebuild import rebuild_spark
        from .spark import spark_session

        dispatch = functools.partial(rebuild_spark, spark_session(master))
    with Store.open(store, conf=broker_conf()) as st:
        for name, at in (("--from", from_), ("--to", to)):  # a boundary inside a record is no boundary
            rec = record_around(st, at) if at is not None else None
            if rec is not None:
                raise click.BadParameter(f"{at} lies inside the {rec.kind} record at {rec.start} (size {rec.size}): "
                                         f"use {rec.start} or {rec.start + rec.size}", param_hint=name)
        dv = dispatch_version(st, broker_version)  # a 4.4.0 store's index headers count every put
        if dv.source == "assumed":
            note(f"--broker-version not given and not provable, 4.9 assumed ({dv.why})")
        elif dv.source == "index headers":
            note(f"--broker-version {dv.version} from the index headers ({dv.why})")
        cl = st.commitlog
        total = cl.end_offset - (from_ if from_ is not None else cl.min_offset)
        with progress(total, "rebuild", fmt == "table") as advance:
            run = rebuild(st, out, build_cq="cq" in parts, build_index="index" in parts, from_offset=from_,
                          to_offset=to, cq_file_size=cq_file_size, index_slots=index_slots, index_max=index_max,
                          broker_version=dv.version, dry_run=dry_run, details=details, cq_format=cq_format,
                          dispatch=dispatch, progress=advance, jobs=jobs or default_jobs())
    rep = run.report
    geo = run.geometry
    doc = run.to_dict()
    if rep.skipped_topics:
        for t, n in rep.skipped_topics.items():
            warn(f"topic {t!r} is not a valid RocketMQ topic name: {n} record(s) got no consume queue entry")
    if rep.stop_kind in PROBLEM_STOPS:
        warn(f"{rep.stop_file} @ {rep.end_offset}: dispatch stopped: {rep.stop_reason}")
    for h in rep.half_records[:20]:
        warn(f"{h['file']} @ {h['offset']}: record skipped as the dispatcher does: {h['reason']}")
    if run.note:
        warn(run.note)
    for line in geo.uncertain():
        warn(f"geometry {line}")

    def render(d):
        pairs = [("store", d["store"]), ("out", d["out"] or "(dry run, nothing written)"),
                 ("geometry", f"cq file {geo.cq_file_size} B, index {geo.index_slots} slots / "
                              f"{geo.index_max} items ({', '.join(f'{k}: {v}' for k, v in geo.source.items())})"),
                 ("walked", f"{d['start_offset']} .. {d['end_offset']} ({d['bytes_walked']} bytes), "
                            f"stopped: {d['stop_kind']} {d['stop_reason']}"),
                 ("messages", d["messages"]),
                 ("cq entries", f"{d['cq_entries']} in {d['queues']} queues "
                                f"({d['not_in_cq']} prepared/rollback records not in a CQ)"),
                 ("index", f"{d['index_puts']} puts from {d['index_records']} records into "
                           f"{len(d['index_files'])} files"),
                 ("skipped topics", d["skipped_topics"] or "none"), ("half records", len(d["half_records"]))]
        print_kv("rebuild --dry-run" if dry_run else "rebuild", pairs)
        if dry_run:
            r = d["reconciliation"]
            if r["queues"]:
                emit(r["queues"], "table", QUEUE_COLUMNS, title="ConsumeQueue vs CommitLog")
            if r["index_files"]:
                emit(r["index_files"], "table", INDEX_COLUMNS, title="IndexFile vs CommitLog")
            if r["differences"]:
                click.echo("")
                emit(r["differences"], "table", DIFF_COLUMNS,
                     title=f"differences (first {len(r['differences'])} of {r['differences_total']})")
            click.echo("\nresult: " + ("CQ and index match the CommitLog" if r["ok"] else
                                       f"{r['differences_total']} difference(s)"))

    emit_document(doc, fmt, render)
    if run.problems:
        raise SystemExit(EXIT_PROBLEMS)


COMMANDS = [rebuild_cmd]
