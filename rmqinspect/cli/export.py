"""`export`: every message of one or more stores as a Parquet dataset (local pyarrow or Spark engine)."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS, EngineUnavailableError
from ._params import TIME, TIME_FORMS, broker_conf, jobs_option
from .output import (
    emit_document,
    format_option,
    handle_errors,
    ms_to_iso,
    nearest_topics,
    no_match,
    note,
    print_kv,
    progress,
    topic_names,
    warn,
)


@click.command("export")
@click.argument("stores", nargs=-1, required=True, type=click.Path(exists=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="New (or empty) output directory.")
@click.option("--engine", type=click.Choice(("local", "spark")), default="local", show_default=True,
              help="local: pyarrow, one commitlog file per task on --jobs worker processes; spark: one Spark task "
                   "per commitlog file.")
@click.option("--master", default=None, help="Spark master URL (engine spark). Default local[*], or what "
                                             "spark-submit configured.")
@click.option("--with-body", is_flag=True, help="Add the stored body bytes as a binary column.")
@click.option("--topic", "topics", multiple=True, help="Only these topics (repeatable).")
@click.option("--since", type=TIME, help=f"Store time >= this: {TIME_FORMS}.")
@click.option("--until", type=TIME, help=f"Store time <= this: {TIME_FORMS}.")
@click.option("--label", "labels", multiple=True, help="Value of the source column, one per STORE, in order "
                                                       "(default: the store directory names).")
@jobs_option
@format_option
@handle_errors
def export(stores, out, engine, master, with_body, topics, since, until, labels, jobs, fmt):
    """Write every message of STORE... as rows of a Parquet dataset partitioned by topic and store date
    (hive layout OUT/topic_partition=…/store_date=YYYY-MM-DD/). The schema is in docs/spark.md.

    \b
    Examples:
      rmqinspect export broker-a/store broker-b/store --out /data/msgs
      rmqinspect export /mnt/store --out /data/msgs --engine spark --master 'local[*]' --with-body
    """
    from ..analyses.rows import RowFilter  # the record readers: not at --help

    flt = RowFilter(frozenset(topics) if topics else None, since, until)
    if labels and len(labels) != len(stores):
        raise click.UsageError(f"{len(labels)} --label for {len(stores)} stores")
    try:
        if engine == "local":
            try:
                import pyarrow  # noqa: F401
            except ImportError as e:
                raise EngineUnavailableError("pyarrow is not installed: pip install 'rmqinspect[parquet]'") from e
            from ..analyses.export import export_local, file_tasks
            from ..store.walk.parallel import default_jobs

            total = sum(t.size for t in file_tasks(stores, labels or None, conf=broker_conf()))
            with progress(total, "exporting", fmt == "table") as advance:
                res = export_local(stores, out, labels=labels or None, with_body=with_body, flt=flt,
                                   advance=advance, jobs=jobs or default_jobs(), conf=broker_conf())
        else:
            from ..spark.session import SparkUnavailableError

            try:
                from ..spark.jobs import export_spark
                from ..spark.session import get_session

                spark = get_session(master)
            except (ImportError, SparkUnavailableError) as e:
                raise EngineUnavailableError(str(e)) from e
            res = export_spark(spark, stores, out, labels=labels or None, with_body=with_body, flt=flt,
                               conf=broker_conf())
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    for d in res.damage:
        warn(f"{d.file} @ {d.physical_offset}: {d.kind}: {d.reason} (record not exported)")
    emit_document(res.to_dict(), fmt, _render)
    if res.rows == 0 and (topics or since is not None or until is not None):
        _no_rows(stores, topics, since, until)
    # rows came from some topics: one that no store has (a typo) would otherwise go unnoticed. The cheap sources
    # first (queue directories, topics.json); a RocksDB consume queue's rows only for a topic they do not name.
    cheap = {n for s in stores for n in topic_names(s, rocksdb_rows=False)} if topics else set()
    if any(t not in cheap for t in topics):
        known = sorted({t for s in stores for t in topic_names(s)})
        for t in topics:
            if known and t not in known:
                note(f"--topic {t}: " + nearest_topics(t, "", known).strip(" ()") + "; it contributed no rows")
    if res.damage:
        sys.exit(EXIT_PROBLEMS)


def _render(d: dict) -> None:
    print_kv("Export", [("engine", d["engine"]), ("out", d["out"]), ("stores", ", ".join(d["stores"])),
                        ("commitlog files", d["files"]), ("rows", d["rows"]),
                        ("damaged records skipped", len(d["damage"]))])


def _no_rows(stores, topics, since, until) -> None:
    """A filter that kept nothing: the no-match rule (one sentence, nearest topic names, exit 3)."""
    known = sorted({t for s in stores for t in topic_names(s)})
    filters = [f"--topic {t}" for t in topics] + [f"--since {ms_to_iso(since)}"] * (since is not None) + [
        f"--until {ms_to_iso(until)}"] * (until is not None)
    absent = [t for t in topics if t not in known]
    no_match(f"no message matches {' '.join(filters)}; the dataset has no rows", topic=absent[0] if absent else None,
             names=known)


COMMANDS = [export]
