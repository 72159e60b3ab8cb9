"""`gc --dry-run`: which files the broker's clean services would delete now, and the messages lost with them."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS
from ..store import Store
from ._params import (
    CALENDAR_TIME,
    JAVA_INT_MAX,
    TIME_FORMS,
    FiniteFloatRange,
    broker_conf,
    broker_version_option,
    offsets_file_option,
    store_argument,
)
from .output import emit, format_option, handle_errors, paragraph, print_kv, render


@click.command("gc")
@store_argument
@click.option("--dry-run", is_flag=True, required=True, help="Required: only report (nothing is ever deleted).")
@click.option("--now", type=CALENDAR_TIME, default=None,
              help=f"Pretend the clean services run at this time (default: now): {TIME_FORMS}.")
@click.option("--file-reserved-hours", type=FiniteFloatRange(0, JAVA_INT_MAX), default=72, show_default=True,
              help="fileReservedTime.")
@click.option("--delete-when", default="04", show_default=True, help="deleteWhen: ';'-separated local hours.")
@click.option("--disk-ratio", type=FiniteFloatRange(-1, 1), default=None,
              help="Disk used ratio 0..1 of the broker's partition (default: measured here, which is the copy's).")
@click.option("--disk-max-used-ratio", type=click.IntRange(0, 100), default=75, show_default=True,
              help="diskMaxUsedSpaceRatio (%).")
@click.option("--no-clean-forcibly", is_flag=True, help="cleanFileForciblyEnable=false.")
@click.option("--manual", is_flag=True, help="An admin triggered deletion (manualDeleteFileSeveralTimes).")
@click.option("--tz", default=None, help="Broker time zone for deleteWhen (IANA name; default: local).")
@click.option("--cq-format", type=click.Choice(("auto", "file", "rocksdb")), default="auto", show_default=True)
@broker_version_option
@offsets_file_option
@format_option
@handle_errors
def gc(store, dry_run, now, file_reserved_hours, delete_when, disk_ratio, disk_max_used_ratio, no_clean_forcibly,
       manual, tz, cq_format, broker_version, offsets_file, fmt):
    """Which CommitLog, ConsumeQueue and IndexFile files the broker's clean services would delete now and
    why (expiry by mtime + fileReservedTime, deleteWhen hour, disk-ratio forcing, batch of 10, never the
    newest file), the corrected CQ min offsets, and the unconsumed messages per consumer group
    (config/consumerOffset.json) that deletion destroys. File mtimes must be those of the broker: copy
    stores with `cp -a` / `rsync -t`.
    """
    import time as _time

    from ..analyses.gc import GcSettings, plan_gc
    from ..store.detect import detect_store
    from ..store.rocksdb_cq import open_consume_queues

    zone = None
    if tz:
        from zoneinfo import ZoneInfo

        try:
            zone = ZoneInfo(tz)
        except Exception:
            raise click.BadParameter(f"unknown time zone {tz!r}", param_hint="--tz") from None
    st = Store.open(store, conf=broker_conf())
    settings = GcSettings(now if now is not None else int(_time.time() * 1000), file_reserved_hours, delete_when,
                          disk_ratio, disk_max_used_ratio, clean_file_forcibly_enable=not no_clean_forcibly,
                          manual=manual, tz=zone, broker_major=detect_store(st, broker_version).major,
                          offsets_file=offsets_file)
    with open_consume_queues(st, None if cq_format == "auto" else cq_format) as qs:
        plan = plan_gc(st, settings, list(qs))
    render(plan, fmt, lambda p: _render_plan(st, p), document=lambda p: p.to_dict())
    if plan.losses:
        sys.exit(EXIT_PROBLEMS)


def _render_plan(st, plan) -> None:
    print_kv("gc dry run", [("triggered", ", ".join(plan.triggers) or "no"),
                            ("disk ratio", plan.disk_ratio), ("clean at once", plan.clean_at_once),
                            ("commitlog min offset", f"{plan.commitlog_min_offset_before} -> "
                                                     f"{plan.commitlog_min_offset_after}")])
    emit(({"kind": f.kind, "file": f.path[len(st.root) + 1:], "delete": "DELETE" if f.delete else "keep",
           "reason": f.reason} for f in plan.files), "table", ("kind", "file", "delete", "reason"),
         cell_width=100)
    if plan.losses:
        click.echo("")
        emit((x.to_dict() for x in plan.losses), "table", title="unconsumed messages destroyed")
    for n in plan.notes:
        paragraph(f"note: {n}")


COMMANDS = [gc]
