"""`rebuild`: ConsumeQueue and IndexFile regenerated from the CommitLog, as the broker's dispatcher writes
them; `--dry-run` reconciles them with the files in the store instead."""

from __future__ import annotations

import collections
import json
import os
import shutil

import click

from ..analyses.rebuild import RebuildOptions, dispatch_commitlog
from ..analyses.reconcile import CompareConsumeQueueSet, CompareIndexFileSet, Reconciliation
from ..formats.constants import DEFAULT_CQ_FILE_SIZE, DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
from ..store import Store
from ..store.consumequeue import list_queues
from ..store.errors import EXIT_PROBLEMS, UnsafeOutputError
from ..store.indexfile import IndexFile
from ..store.layout import is_offset_file_name
from ..writer.rocksdb_cq import file_cq_to_rocksdb
from ..writer.consumequeue import ConsumeQueueSet, round_cq_file_size
from ..writer.indexfile import IndexFileSet
from ._params import OFFSET, broker_version_option_for, store_argument
from .output import emit, emit_document, format_option, handle_errors, print_kv, progress, warn

QUEUE_COLUMNS = ("topic", "queue_id", "rebuilt_entries", "store_entries", "matching", "missing", "extra", "wrong",
                 "status", "note")
INDEX_COLUMNS = ("ordinal", "store_file", "rebuilt_items", "header_diffs", "slot_diffs", "item_diffs", "status", "note")
DIFF_COLUMNS = ("topic", "queue_id", "queue_offset", "index_file", "item", "kind", "rebuilt", "store", "fields")


def store_geometry(store: Store, cq_file_size: int | None, index_slots: int | None, index_max: int | None) -> dict:
    """Explicit options, else what the store's existing files show, else RocketMQ's defaults."""
    src = {}
    if cq_file_size is None:
        sizes = collections.Counter()
        for q in list_queues(store.layout.consumequeue_dir)[:256]:
            for n in os.listdir(q.path):
                if is_offset_file_name(n):
                    sizes[os.path.getsize(os.path.join(q.path, n))] += 1
        if sizes:
            cq_file_size = sizes.most_common(1)[0][0]
            src["cq_file_size"] = "store's consume queue files"
        else:
            cq_file_size = DEFAULT_CQ_FILE_SIZE
            src["cq_file_size"] = "RocketMQ default"
    else:
        src["cq_file_size"] = "option"
    if index_slots is None or index_max is None:
        idir = store.layout.index_dir
        names = sorted(n for n in os.listdir(idir) if os.path.isfile(os.path.join(idir, n))) \
            if os.path.isdir(idir) else []
        inferred = None
        for n in names:
            try:
                ix = IndexFile(os.path.join(idir, n), slots=index_slots)
                inferred = (ix.slots, ix.max_items)
                ix.close()
                break
            except Exception:  # a damaged file says nothing about the geometry; try the next one
                continue
        if inferred:
            index_slots = index_slots or inferred[0]
            index_max = index_max or inferred[1]
            src["index"] = "store's index files"
        else:
            if index_slots is None:
                index_slots = DEFAULT_INDEX_SLOTS if index_max is None else max(index_max // 4, 1)
            if index_max is None:
                index_max = DEFAULT_INDEX_MAX if index_slots == DEFAULT_INDEX_SLOTS else index_slots * 4
            src["index"] = "RocketMQ default"
    else:
        src["index"] = "option"
    return {"cq_file_size": round_cq_file_size(cq_file_size), "index_slots": index_slots, "index_max": index_max,
            "source": src}


def _check_out(store: Store, out: str) -> None:
    if store.layout.within(out) or os.path.realpath(out) == os.path.realpath(store.root):
        raise UnsafeOutputError("output directory lies inside the store being inspected; choose a directory "
                                "outside it", out)
    # a symlinked commitlog dir elsewhere is evidence too
    for d in store.layout.commitlog_dirs:
        r = os.path.realpath(d)
        o = os.path.realpath(out)
        if o == r or o.startswith(r + os.sep):
            raise UnsafeOutputError("output directory lies inside the store's commitlog directory", out)
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise UnsafeOutputError("output directory exists and is not empty; rebuild only writes into a new "
                                "directory", out)


@click.command("rebuild")
@store_argument
@click.option("--out", "out", type=click.Path(file_okay=False), help="New directory for consumequeue/ and index/ "
              "(must not exist inside STORE). Not needed with --dry-run.")
@click.option("--what", default="cq,index", show_default=True, help="What to rebuild: cq, index or both.")
@click.option("--from", "from_", type=OFFSET, help="Start the dispatch at this physical offset (a record boundary).")
@click.option("--to", type=OFFSET, help="Stop the dispatch at this physical offset (exclusive).")
@click.option("--cq-file-size", type=int, help="mappedFileSizeConsumeQueue in bytes (rounded up to 20). "
              "Default: the store's CQ files, else 6000000.")
@click.option("--index-slots", type=int, help="maxHashSlotNum. Default: inferred from the store's index files, "
              "else 5000000.")
@click.option("--index-max", type=int, help="maxIndexNum. Default: the store's index files, else 20000000.")
@broker_version_option_for("Before 4.7.1 IndexFile counted hashSlotCount on every put; from 4.7.1 only newly used "
                           "slots.", default="4.9")
@click.option("--dry-run", is_flag=True, help="Write nothing: compare what would be written with the CQ and index "
              "files in STORE and report every difference, queue by queue.")
@click.option("--details", type=int, default=1000, show_default=True,
              help="With --dry-run: how many individual differences to list (all are counted).")
@click.option("--engine", type=click.Choice(("local", "spark")), default="local", show_default=True,
              help="spark: one Spark task per commitlog file, results assembled in commitlog order (same bytes).")
@click.option("--master", default=None, help="Spark master URL with --engine spark (default local[*]).")
@click.option("--cq-format", type=click.Choice(("file", "rocksdb")), default="file", show_default=True,
              help="rocksdb: write OUT/consumequeue as the 5.x RocksDB consume queue (storeType=defaultRocksDB) "
                   "instead of files; same dispatch, entries carry the record's store timestamp.")
@format_option
@handle_errors
def rebuild_cmd(store, out, what, from_, to, cq_file_size, index_slots, index_max, broker_version, dry_run,
                details, engine, master, cq_format, fmt):
    """Regenerate ConsumeQueue and IndexFile from the CommitLog exactly as the broker's dispatcher writes them
    (ReputMessageService), into a new directory; or, with --dry-run, reconcile them with STORE's files.

    Topics that are not valid RocketMQ topic names (or would escape the output directory) get no consume
    queue: they are reported and skipped. Index file names are derived from the data (beginTimestamp in UTC).
    """
    parts = {p.strip() for p in what.split(",") if p.strip()}
    if not parts or parts - {"cq", "index"}:
        raise click.BadParameter("use cq, index or cq,index", param_hint="--what")
    if not dry_run and not out:
        raise click.UsageError("--out DIR is required (or use --dry-run)")
    if engine == "spark" and (from_ is not None or to is not None):
        raise click.UsageError("--from/--to are not supported with --engine spark")
    st = Store.open(store)
    try:
        geo = store_geometry(st, cq_file_size, index_slots, index_max)
        opts = RebuildOptions(build_cq="cq" in parts, build_index="index" in parts, from_offset=from_, to_offset=to)
        every = broker_version.index_counts_every_put
        cl = st.commitlog
        total = cl.end_offset - (from_ if from_ is not None else cl.min_offset)
        recon = None
        if dry_run:
            recon = Reconciliation()
            cq = CompareConsumeQueueSet(st.layout.consumequeue_dir, geo["cq_file_size"], recon, details) \
                if opts.build_cq else None
            index = CompareIndexFileSet(st.layout.index_dir, geo["index_slots"], geo["index_max"], recon, every,
                                        details) if opts.build_index else None
        else:
            _check_out(st, out)
            os.makedirs(out, exist_ok=True)
            cq = ConsumeQueueSet(os.path.join(out, "consumequeue"), geo["cq_file_size"]) if opts.build_cq else None
            index = IndexFileSet(os.path.join(out, "index"), geo["index_slots"], geo["index_max"], every) \
                if opts.build_index else None
        if engine == "spark":
            from .spark import _session
            from ..spark.rebuild import rebuild_spark

            spark = _session(master)
        with progress(total, "rebuild", fmt == "table") as advance:
            if engine == "spark":
                rep = rebuild_spark(spark, cl, cq, index, opts, progress=advance)
            else:
                rep = dispatch_commitlog(cl, cq, index, opts, progress=advance)
        if cq is not None:
            if dry_run:
                cq.close(whole_commitlog=from_ is None and to is None)
            else:
                cq.close()
        if index is not None:
            index.close(rep.after_last_put_ts)
        rocks_result = None
        if cq_format == "rocksdb" and cq is not None and not dry_run:
            files_dir = os.path.join(out, ".consumequeue-files")
            os.rename(os.path.join(out, "consumequeue"), files_dir)
            try:
                rocks_result = file_cq_to_rocksdb(files_dir, os.path.join(out, "consumequeue"), cl)
            finally:
                shutil.rmtree(files_dir, ignore_errors=True)
    finally:
        st.close()
    doc = {
        "store": st.root, "out": None if dry_run else os.path.abspath(out), "dry_run": dry_run,
        "geometry": geo, "broker_version": broker_version.text, **rep.to_dict(),
        "queues": len(cq.queues) if cq is not None else 0,
        "index_files": list(index.names) if index is not None else [],
        "cq_format": cq_format,
    }
    if rocks_result is not None:
        doc["rocksdb"] = rocks_result
    doc.pop("after_last_put_ts", None)
    problems = bool(rep.skipped_topics or rep.half_records or rep.stop_kind in ("illegal", "gap"))
    if rep.skipped_topics:
        for t, n in rep.skipped_topics.items():
            warn(f"topic {t!r} is not a valid RocketMQ topic name: {n} record(s) got no consume queue entry")
    if rep.stop_kind in ("illegal", "gap"):
        warn(f"{rep.stop_file} @ {rep.end_offset}: dispatch stopped: {rep.stop_reason}")
    for h in rep.half_records[:20]:
        warn(f"{h['file']} @ {h['offset']}: record skipped as the dispatcher does: {h['reason']}")
    rocks = os.path.isfile(os.path.join(st.layout.consumequeue_dir, "CURRENT"))
    if dry_run and rocks and opts.build_cq:
        doc["note"] = ("the store keeps its consume queues in RocksDB (5.x storeType=defaultRocksDB): there are no "
                       "CQ files to compare, so every entry shows as missing")
        warn(doc["note"])
    if dry_run:
        doc["reconciliation"] = {
            "ok": recon.ok,
            "queues": [q.to_dict() for q in recon.queues],
            "index_files": [i.to_dict() for i in recon.index_files],
            "differences_total": recon.differences_total,
            "differences": recon.differences,
        }
        problems = problems or not recon.ok
    else:
        manifest = dict(doc)
        manifest["index_file_naming"] = ("beginTimestamp of each file (UTC yyyyMMddHHmmssSSS), +1 ms when needed "
                                         "to keep names strictly increasing; the broker used wall-clock time")
        with open(os.path.join(out, "rebuild.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2, ensure_ascii=False)

    def render(d):
        pairs = [("store", d["store"]), ("out", d["out"] or "(dry run, nothing written)"),
                 ("geometry", f"cq file {geo['cq_file_size']} B, index {geo['index_slots']} slots / "
                              f"{geo['index_max']} items ({', '.join(f'{k}: {v}' for k, v in geo['source'].items())})"),
                 ("walked", f"{d['start_offset']} .. {d['end_offset']} ({d['bytes_walked']} bytes), "
                            f"stopped: {d['stop_kind']} {d['stop_reason']}"),
                 ("messages", d["messages"]), ("cq entries", f"{d['cq_entries']} in {d['queues']} queues "
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
    if problems:
        raise SystemExit(EXIT_PROBLEMS)


COMMANDS = [rebuild_cmd]
