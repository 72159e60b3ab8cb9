"""`recover --dry-run`, `salvage` and `consumer-lag`: what the broker keeps and discards on restart."""

from __future__ import annotations

import os
import sys

import click

from ..analyses.offsets import lost_window
from ..analyses.parallel import default_jobs
from ..analyses.recovery import RecoveryOptions, plan_recovery
from ..analyses.salvage import salvage
from ..store import Store
from ..store.errors import EXIT_PROBLEMS, EXIT_USAGE
from ..store.layout import ensure_output_outside
from ._params import (
    CQ_FILE_SIZE,
    broker_version_option_for,
    jobs_option,
    max_body_option,
    offsets_file_option,
    store_argument,
)
from .output import dumps, emit, emit_document, format_option, handle_errors, no_match, print_kv, warn

version_option = broker_version_option_for(
    "RocketMQ version whose recovery rules apply (e.g. 4.9.8, 5.3.1, 5.3.3, HEAD). Default: detected "
    "from the files (V2 records, abort content, checkpoint length, 5.x directories); the assumption used "
    "is printed.")
mode_option = click.option("--mode", type=click.Choice(("auto", "normal", "abnormal")), default="auto",
                           show_default=True, help="Override the abort-file decision (what-if).")


def _plan(store, broker_version, check_crc=True, index_safe=False, mode="auto", keep_redispatch=False,
          cq_file_size=None, jobs=None):
    st = Store.open(store)
    plan = plan_recovery(st, RecoveryOptions(version=broker_version, check_crc=check_crc, index_safe=index_safe,
                                             force_mode=None if mode == "auto" else mode,
                                             keep_redispatch=keep_redispatch, cq_file_size=cq_file_size,
                                             jobs=jobs or default_jobs()))
    return st, plan


def _after(plan) -> dict[str, int]:
    """What consumers see once the broker is up: the queues after start() (recovery + ReputMessageService)."""
    return plan.consume_queue_max_offsets_after_start or plan.consume_queue_max_offsets


@click.command("recover")
@store_argument
@click.option("--dry-run", is_flag=True, help="Required: compute the recovery without touching the store.")
@version_option
@click.option("--check-crc/--no-check-crc", default=True, show_default=True,
              help="checkCRCOnRecover: a body-CRC mismatch ends the scan.")
@click.option("--message-index-safe", is_flag=True, help="messageIndexSafe=true (abnormal start-file rule).")
@mode_option
@click.option("--cq-file-size", type=CQ_FILE_SIZE, default=None,
              help="mappedFileSizeConsumeQueue for queues the recovery creates (default: as existing queues, "
                   "else 6000000).")
@click.option("--redispatch", is_flag=True, help="List every re-dispatched record (JSON output).")
@click.option("--consumers", is_flag=True, help="Add the per-consumer-group lost window (consumerOffset.json).")
@offsets_file_option
@jobs_option
@format_option
@handle_errors
def recover_cmd(store, dry_run, broker_version, check_crc, message_index_safe, mode, cq_file_size, redispatch,
                consumers, jobs, fmt, offsets_file=None):
    """The recovery RocketMQ runs when it loads STORE, reproduced offline (never writes).

    Normal or abnormal mode (abort file), start file by version, the record scan and where it stops
    (truncate_offset), commit-log files deleted / truncated, consume-queue entries cut per queue and
    max offsets afterwards, records re-dispatched, index files dropped, and the messages lost past the
    truncation point (intact ones can be exported with `salvage`).

    \b
    Examples:
      rmqinspect recover STORE --dry-run
      rmqinspect recover STORE --dry-run --broker-version 5.3.1 --format json
    """
    if not dry_run:
        click.echo("rmqinspect: error: recover only runs with --dry-run (rmqinspect never writes into a store)",
                   err=True)
        sys.exit(EXIT_USAGE)
    st, plan = _plan(store, broker_version, check_crc, message_index_safe, mode, keep_redispatch=redispatch,
                     cq_file_size=cq_file_size, jobs=jobs)
    doc = plan.to_dict(with_redispatch=redispatch)
    doc["totals"] = _totals(plan)
    lw = None
    if consumers:
        lw = lost_window(st, plan.consume_queue_max_offsets_before, _after(plan), offsets_file)
        doc["consumer_lost_window"] = lw.to_dict()
    warn(plan.version.describe())
    emit_document(doc, fmt, lambda d: _render(plan, lw))
    if plan.messages_lost.get("count") or any(q.entries_cut for q in plan.queues):
        sys.exit(EXIT_PROBLEMS)


def _totals(plan) -> dict:
    """The headline numbers, each the sum of the details it labels (issue 11: a headline that is not the sum
    of the table under it reads as a contradiction)."""
    lost = plan.messages_lost
    return {
        # per queue: entries the recovery cuts from the consume queue (sum of consume_queues[].entries_cut)
        "cq_entries_cut": sum(q.entries_cut for q in plan.queues),
        # per queue: entries start()'s re-dispatch writes again (sum of consume_queues[].redispatched)
        "cq_entries_redispatched": sum(q.redispatched for q in plan.queues),
        # records the recovery walks from reput_from_offset; most already have their entry and are skipped
        "records_dispatched_again": plan.redispatch_count,
        # records past truncate_offset: intact + damaged (messages_lost.count)
        "records_past_truncation": lost.get("count", 0),
        "records_past_truncation_intact": lost.get("intact", 0),
        "records_past_truncation_damaged": lost.get("damaged", 0),
        "bytes_past_truncation": lost.get("bytes", 0),
    }


def _render(plan, lw) -> None:
    lost = plan.messages_lost
    t = _totals(plan)
    print_kv("Recovery (dry run)", [
        ("store", plan.store),
        ("mode", plan.mode + (" (abort file present)" if plan.mode == "abnormal" else " (no abort file)")),
        ("broker version", plan.version.describe()),
        ("start file", f"{plan.start_file} - {plan.start_reason}"),
        ("scan stopped", f"{plan.stop_kind} at {plan.stop_file} position {plan.stop_position}: {plan.stop_reason}"),
        ("truncate_offset", plan.truncate_offset),
        ("maxPhyOffsetOfConsumeQueue", plan.max_phy_offset_of_consume_queue),
        ("consume queues truncated", plan.consume_queue_truncated),
        ("commit-log files deleted", ", ".join(plan.commitlog_files_deleted) or "none"),
        ("commit-log file truncated", f"{plan.commitlog_file_truncated['name']} to position "
         f"{plan.commitlog_file_truncated['position']}" if plan.commitlog_file_truncated else "none"),
        ("records dispatched again", f"{t['records_dispatched_again']} walked from the reput offset (most already "
         "had their entry)"),
        ("cq entries re-dispatched", f"{t['cq_entries_redispatched']} (sum of 'redispatched' in the table below)"),
        ("cq entries cut", f"{t['cq_entries_cut']} (sum of 'entries_cut' in the table below)"),
        ("index files dropped", ", ".join(plan.index_files_dropped) or "none"),
        ("records past truncation", f"{t['records_past_truncation']} = {t['records_past_truncation_intact']} intact "
         f"+ {t['records_past_truncation_damaged']} damaged; {t['bytes_past_truncation']} bytes discarded"),
        ("per topic", f"{lost.get('per_topic', {})} (intact records past truncation, plus damaged regions that "
         "held a cut consume-queue entry)"),
    ] + [("note", n) for n in plan.notes])
    if plan.dledger is not None:  # DLedger mode (issue 14): DLedger's own recovery decides the offsets
        d = plan.dledger
        print_kv("DLedger recovery", [
            ("member", d.self_id), ("ledger", f"index {d.ledger_begin_index} .. {d.ledger_end_index}, last term "
                                              f"{d.ledger_end_term}, data end {d.data_end}"),
            ("checkpoint committedIndex", d.checkpoint_committed_index if d.checkpoint_present else "no checkpoint"),
            ("committed", f"index {d.committed_index}, pos {d.committed_pos}"),
            ("max offset after load", d.max_offset_after_load),
            ("max offset after start", f"{d.max_offset_after_start} (once leader: everything committed)"),
            ("index rewritten from", d.index_rewritten_from if d.index_rewritten_from is not None else "none"),
            ("current term / vote", f"{d.curr_term} / {d.vote_leader}")])
    changed = [q for q in plan.queues if q.files_deleted or q.entries_cut or q.redispatched]
    if changed:
        emit(({"queue": q.key, "max_offset_before": plan.consume_queue_max_offsets_before.get(q.key),
               "entries_cut": q.entries_cut, "files_deleted": ",".join(q.files_deleted),
               "redispatched": q.redispatched, "max_offset_after": q.max_offset} for q in changed), "table",
             title="Consume queues changed by recovery")
    if lost.get("regions"):
        emit(lost["regions"], "table", ("kind", "start", "end", "size", "file", "position", "reason"),
             title="Damaged regions past the truncation point")
    if lw is not None:
        _render_lw(lw)


def _render_lw(lw) -> None:
    print_kv("Consumer offsets", [("source", lw.source or "none"), ("used .bak", lw.used_backup)]
             + [("problem", p) for p in lw.problems])
    if lw.rows:
        emit((r.to_dict() for r in lw.rows), "table", ("group", "topic", "queue_id", "committed",
                                                      "max_offset_before", "max_offset_after", "never_see",
                                                      "consumed_then_cut", "backlog", "status"),
             title="Lost window per consumer group")


@click.command("consumer-lag")
@store_argument
@version_option
@mode_option
@offsets_file_option
@format_option
@handle_errors
def consumer_lag_cmd(store, broker_version, mode, fmt, offsets_file=None):
    """Per consumer group and queue: committed offset (config/consumerOffset.json, .bak fallback) against
    the queue's max offset before and after the broker's recovery - what the group will never see, what
    it consumed that is now gone, and what it will be delivered (possibly again) after a restart."""
    st, plan = _plan(store, broker_version, mode=mode)
    lw = lost_window(st, plan.consume_queue_max_offsets_before, _after(plan), offsets_file)
    if lw.used_backup:
        warn(f"consumerOffset.json unusable, read {lw.source}: {'; '.join(lw.problems)}")
    if fmt == "table":
        _render_lw(lw)
    elif fmt == "ndjson":
        emit((r.to_dict() for r in lw.rows), "ndjson")
    else:
        emit_document(lw.to_dict(), fmt)
    if lw.source is None and offsets_file is None and not any(
            os.path.exists(os.path.join(st.layout.config_dir, n)) for n in ("consumerOffset.json",
                                                                           "consumerOffset.json.bak")):
        # no file at all (copied stores often lack config/): nothing to answer with; a file that is there but
        # unusable is a problem the document already reports, not a miss
        no_match(f"no consumer offsets: {'; '.join(lw.problems) or 'no consumerOffset.json'} (--offsets FILE reads "
                 "a consumerOffset.json from elsewhere)")


@click.command("salvage")
@store_argument
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Write the intact discarded messages (with base64 bodies) to this NDJSON file for replay. "
                   "Must not be inside STORE.")
@version_option
@click.option("--body", type=click.Choice(("base64", "hex", "text")), default="base64", show_default=True,
              help="Body encoding in the export (decompressed when the record says so).")
@max_body_option
@jobs_option
@format_option
@handle_errors
def salvage_cmd(store, out_path, broker_version, body, max_body_bytes, jobs, fmt):
    """Find the intact messages the broker would discard: past the truncation point, resynchronise on magic
    codes, keep candidates that are self-consistent (size bounds, stored physical offset, CRC, queue-offset
    monotonicity), classify each damaged region (torn tail, zero page, CRC mismatch, stale data, missing
    file). Never writes into STORE. Exit 1 when messages would be lost."""
    st = Store.open(store)
    if out_path is not None:
        ensure_output_outside(st, out_path)
    jobs = jobs or default_jobs()
    plan = plan_recovery(st, RecoveryOptions(version=broker_version, with_salvage=False, keep_redispatch=False,
                                             jobs=jobs))
    rep = salvage(st, plan.truncate_offset, queue_next_offsets=plan.consume_queue_max_offsets, jobs=jobs)
    if out_path is not None:
        from ..sinks.staging import Staged

        staged = Staged(out_path, "the salvaged messages (NDJSON)", directory=False, replace=True)
        with open(staged.path, "w", encoding="utf-8") as fh:
            for m in rep.messages:
                fh.write(dumps(m.to_dict(body, max_body_bytes)) + "\n")
        staged.commit()
    doc = rep.to_dict()
    doc["broker_version"] = plan.version.to_dict()
    if out_path:
        doc["exported"] = {"path": os.path.abspath(out_path), "messages": len(rep.messages)}
    if fmt == "ndjson":
        for r in rep.regions:
            sys.stdout.write(dumps({"region": r.to_dict()}) + "\n")
        for m in rep.messages:
            sys.stdout.write(dumps({"message": m.to_dict()}) + "\n")
        sys.stdout.write(dumps({"summary": doc}) + "\n")
    elif fmt == "json":
        doc["messages"] = [m.to_dict() for m in rep.messages]
        emit_document(doc, "json")
    else:
        lost = doc["messages_lost"]
        print_kv("Salvage", [("truncate_offset", rep.truncate_offset),
                             ("intact messages past it", lost["intact"]),
                             ("damaged records", lost["damaged"]), ("bytes discarded", lost["bytes"]),
                             ("per topic", lost["per_topic"]),
                             ("suspects (queue offset went backwards)", len(rep.suspects))]
                 + ([("exported to", doc["exported"]["path"])] if out_path else []))
        if rep.regions:
            emit((r.to_dict() for r in rep.regions), "table",
                 ("kind", "start", "end", "size", "file", "position", "reason"), title="Damaged regions")
        if rep.messages:
            emit(({"physical_offset": m.physical_offset, "topic": m.topic, "queue_id": m.queue_id,
                   "queue_offset": m.queue_offset, "size": m.total_size, "uniq_key": m.uniq_key}
                  for m in rep.messages), "table", title="Intact messages the broker would discard")
    if rep.messages or rep.regions:
        sys.exit(EXIT_PROBLEMS)


COMMANDS = [recover_cmd, salvage_cmd, consumer_lag_cmd]
