"""`report`: the post-mortem of one or more stores as one self-contained HTML page."""

from __future__ import annotations

import os
import shlex
import time

import click

from .. import __version__
from ..errors import UnsafeOutputError
from ._params import TIME, accepts_v2, broker_conf, broker_version_option_for, jobs_option
from .output import handle_errors, progress, warn

SIZE_BUDGET = 5_000_000  # bytes; a page that large still opens, but it is said


@click.command("report")
@click.argument("stores", nargs=-1, required=True, type=click.Path(exists=False, file_okay=True, dir_okay=True),
                metavar="STORE [STORE...]")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="The HTML file to write: a new file outside every STORE.")
@click.option("--force", is_flag=True, help="Replace --out when it exists (said on stderr).")
@click.option("--as-of", "as_of", type=TIME, default=None,
              help="The time the report is written as of (epoch ms or ISO-8601, UTC unless it carries an offset): "
                   "shown in the header instead of the current time, so two runs give the same file.")
@click.option("--offsets", "offsets_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="consumerOffset.json to use for the consumer section instead of STORE/config/consumerOffset.json.")
@broker_version_option_for("RocketMQ version whose recovery rules and record formats apply (default: detected "
                           "from the files; the assumption is printed in the report).")
@jobs_option
@handle_errors
def report_cmd(stores, out_path, force, as_of, offsets_file, broker_version, jobs):
    """Write the post-mortem of STORE(s) as one HTML file that opens offline in a browser.

    Built from the analyses the other commands run (summary, verify, recover --dry-run, cq --all, the index
    headers, consumer-lag): the store and its evidence, a map of the commit log (files, tails, gaps, damage
    by kind, the truncation point a restart chooses), traffic per topic over store time, consume queues,
    consumer groups, index health, and every finding with the command that shows its bytes. Charts are
    plotly's, embedded in the file (needs `pip install 'rmqinspect[report]'`). Never writes into a STORE.
    Exit code 0 also when problems were found: the report is the answer.

    \b
    Examples:
      rmqinspect report STORE --out incident.html
      rmqinspect report broker-a/store broker-b/store --out fleet.html --as-of 2026-11-21T21:40:00Z
    """
    from ..report import plotly_cache_dir, render_html, start_page_assets

    # plotly missing is said before minutes of scanning; compressing plotly.js (~0.15 s, without the GIL; ~0.02 s
    # to check the per-user cache's copy) needs no store data: it runs beside the imports and the walk's start,
    # where a core is free
    pending = start_page_assets(plotly_cache_dir(os.environ))
    from ..analyses.report_data import ReportData, collect_store_report, report_read_bytes
    from ..store import Store
    from ..store.layout import ensure_output_outside
    from ..store.walk.parallel import default_jobs

    opened = [Store.open(p, conf=broker_conf()) for p in stores]
    for st in opened:
        ensure_output_outside(st, out_path)
    if os.path.isdir(out_path):
        raise UnsafeOutputError("output path is a directory; give a file name", out_path)
    if os.path.exists(out_path) and not force:
        raise UnsafeOutputError("output file exists; give --force to replace it, or a new name", out_path)
    # the bar's total: the bytes the report reads, each once (commit log, consume queues, index items)
    sizes = [report_read_bytes(st) for st in opened]
    reports = []
    with progress(sum(sizes), "report", True) as advance:
        done = 0
        for st, size in zip(opened, sizes):
            base = done
            reports.append(collect_store_report(st, broker_version=broker_version,
                                                accept_v2=accepts_v2(broker_version), offsets_file=offsets_file,
                                                progress=lambda d, phase=None, b=base: advance(b + d, phase),
                                                jobs=jobs or default_jobs()))
            done += size
    data = ReportData(reports, __version__, _command_line(stores, out_path, as_of, offsets_file, broker_version),
                      as_of if as_of is not None else int(time.time() * 1000), as_of is not None,
                      replicas=_replica_view(opened, list(stores)))
    page = render_html(data, pending)
    replaced = os.path.exists(out_path)
    from ..sinks.staging import Staged

    staged = Staged(out_path, "the HTML report", directory=False, replace=force)
    with open(staged.path, "w", encoding="utf-8", errors="backslashreplace") as fh:  # a non-UTF-8 path: escaped
        fh.write(page)
    staged.commit()
    if replaced:
        warn(f"replaced the existing {out_path} (--force)")
    size = os.path.getsize(out_path)
    if size > SIZE_BUDGET:
        warn(f"the report is {size} bytes, over {SIZE_BUDGET}: every one of its "
             f"{sum(len(r.damage) for r in reports)} damaged ranges is drawn (damage is never dropped)")
    click.echo(f"wrote {out_path} ({len(reports)} store(s), {sum(len(r.findings) for r in reports)} finding(s))",
               err=True)


def _replica_view(opened, labels: list[str]) -> dict | None:
    """Several stores of one broker group (classic or controller mode, not DLedger): the peers comparison, shown as
    the report's replica view. None for one store, DLedger stores, or stores with no record in common."""
    if len(opened) < 2 or any(st.layout.dledger is not None for st in opened):
        return None
    from ..analyses.peers import Verdict, compare_replicas
    from .peers import short_labels

    labels = short_labels(labels)
    rep = compare_replicas(opened, labels=labels)
    if all(p.verdict in (Verdict.NO_COMMON_RECORD, Verdict.NO_OVERLAP) for p in rep.pairs):
        return None  # a fleet of different brokers, not one group's copies
    return rep.to_dict()


def _command_line(stores, out_path, as_of, offsets_file, broker_version) -> str:
    """The command as it reads from its parsed options (the same text however it was spelled or invoked)."""
    args = ["rmqinspect", "report", *stores, "--out", out_path]
    if as_of is not None:
        args += ["--as-of", str(as_of)]
    if offsets_file is not None:
        args += ["--offsets", offsets_file]
    if broker_version is not None:
        args += ["--broker-version", broker_version.text]
    conf = broker_conf()
    if conf is not None:
        args += ["--broker-config", conf.path]
    return " ".join(shlex.quote(str(a)) for a in args)


COMMANDS = [report_cmd]
