"""`verify`: structure, CRCs, consume queues, index and checkpoint checked against the commit log."""

from __future__ import annotations

import sys

import click

from ..analyses.verify_checks import ALL_CHECKS
from ..errors import EXIT_PROBLEMS
from ..store import Store
from ..store.walk.parallel import default_jobs
from ._params import POSITIVE_LONG, accepts_v2, broker_conf, broker_version_option_for, jobs_option, store_argument
from .output import emit, format_option, handle_errors, print_kv, progress, render

PROBLEM_COLUMNS = ("check", "kind", "start", "end", "count", "file", "position", "reason")
# one line per range at 80 columns: the kind (its check is in "Problems by kind" and --verbose), the range, and
# where: the queue (topic, queue id) or index file; the commit log's ranges are their offsets
SHORT_COLUMNS = ("kind", "start", "end", "count", "queue", "where")


def _checks(ctx, param, value):
    if value is None:
        return ALL_CHECKS
    got = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in got if v not in ALL_CHECKS]
    if bad:
        raise click.BadParameter(f"unknown check(s) {', '.join(bad)}; choose from {','.join(ALL_CHECKS)}")
    return got


@click.command("verify")
@store_argument
@click.option("--checks", callback=_checks, default=None, metavar="LIST",
              help=f"Comma-separated subset of {','.join(ALL_CHECKS)} (default: all).")
@click.option("--max-errors", type=POSITIVE_LONG, default=None,
              help="List at most N problem ranges (the rest are counted).")
@broker_version_option_for("Check as this RocketMQ version reads: before 5.1.0 V2 records (magic 0xDAA320AB) are "
                           "damage. Default: V1 and V2 are valid.")
@click.option("--index-slots", type=int, default=None,
              help="maxHashSlotNum (default: --broker-config's, else proven from each index file).")
@click.option("--index-max", type=int, default=None, help="maxIndexNum (default: as --index-slots).")
@jobs_option
@click.option("--verbose", "-v", is_flag=True,
              help="Each problem range as a block with its file, position and full reason (default: one line each).")
@format_option
@handle_errors
def verify_cmd(store, checks, max_errors, broker_version, index_slots, index_max, jobs, verbose, fmt):
    """Check every record (layout, body CRC, __CRC32#, stored physical offset), consecutive file names,
    every consume-queue entry and index item against its record, and the checkpoint against the data.

    Problems are [start, end) ranges (physical offsets for the commit log, logical byte offsets for a
    consume queue, byte positions for an index file). Damage does not stop the run: the walk resynchronises
    on the next valid record. Exit code 0 = clean, 1 = problems found, 3/4/5 = the store could not be read.

    \b
    Examples:
      rmqinspect verify STORE
      rmqinspect verify STORE --checks crc,structure --format ndjson
    """
    from ..analyses.verify import read_bytes, verify  # imports numpy: not at --help

    st = Store.open(store, conf=broker_conf())
    # the bar's total: the bytes verify reads (commit log, consume queues, index items), each once
    total = sum(read_bytes(st, checks).values()) if fmt == "table" else 0
    with progress(total, "verifying", fmt == "table") as advance:
        rep = verify(st, checks, max_errors=max_errors, accept_v2=accepts_v2(broker_version), read_progress=advance,
                     index_slots=index_slots, index_max=index_max, jobs=jobs or default_jobs())
    _accelerated_recovery_note(st, broker_version, rep)
    render(rep, fmt, lambda r: _render_report(r, verbose), document=_document,
           lines=lambda r: [*(p.to_dict() for p in r.problems), {"summary": r.to_dict()}])
    if not rep.ok:
        sys.exit(EXIT_PROBLEMS)


def _document(rep) -> dict:
    d = rep.to_dict()
    d["problem_ranges"] = [p.to_dict() for p in rep.problems]
    return d


def _where(p) -> dict:
    """The place of a range in a few words: a consume queue's topic and queue id, an index file's name; a
    commit-log range is its offsets."""
    parts = (p.file or "").split("/")
    if parts[0] in ("consumequeue", "batchconsumequeue") and len(parts) >= 3:
        return {"where": parts[1], "queue": parts[2]}
    return {"where": "" if parts[0] == "commitlog" else p.file or "", "queue": ""}


def _render_report(rep, verbose: bool) -> None:
    if rep.problems and verbose:
        emit((p.to_dict() for p in rep.problems), "table", PROBLEM_COLUMNS, title="Problems")
    elif rep.problems:
        emit(({**p.to_dict(), **_where(p)} for p in rep.problems), "table", SHORT_COLUMNS,
             title="Problems ([start, end): commit-log offsets, or bytes of the queue or index file named in "
                   "where; --verbose shows each in full)")
    checked = ", ".join(f"{k} {v}" for k, v in rep.counts.items())
    print_kv("Verify summary", [("store", rep.store), ("checks", ",".join(rep.checks)),
                                ("result", "clean" if rep.ok else f"{len(rep.problems)} problem range(s)"
                                 + (f", {rep.suppressed} more not listed" if rep.suppressed else "")),
                                ("checked", checked)] + [("note", n) for n in rep.notes])
    if rep.problems:
        emit(rep.summary(), "table", ("check", "kind", "ranges", "items", "bytes"), title="Problems by kind")


def _accelerated_recovery_note(st, broker_version, rep) -> None:
    """With enableAcceleratedRecovery (5.3.4+, storeType=defaultRocksDB) a restart does not check the records
    before the RocksDB queue's dispatch offset: commit-log damage there survives it (said, never hidden)."""
    if st.conf is None:  # the setting comes only from a broker.conf: none, no note (and no recovery modules imported)
        return
    from ..analyses.recovery.combine import accelerated_blind_spot, accelerated_note

    point = accelerated_blind_spot(st, broker_version)
    if point is not None:
        rep.notes.append(accelerated_note(point, [p.start for p in rep.problems if p.check in ("crc", "structure")]))


COMMANDS = [verify_cmd]
