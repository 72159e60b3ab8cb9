"""`recover --dry-run`, `salvage` and `consumer-lag`: what the broker keeps and discards on restart."""

from __future__ import annotations

import os
import sys

import click

from ..analyses.offsets import lost_window
from ..errors import EXIT_PROBLEMS, EXIT_USAGE
from ..store import Store
from ..store.layout import ensure_output_outside
from ..store.walk.parallel import default_jobs
from ._params import (
    CQ_FILE_SIZE,
    RELEASE_RULES_HELP,
    broker_conf,
    broker_version_option_for,
    jobs_option,
    max_body_option,
    offsets_file_option,
    store_argument,
)
from .output import dumps, emit, emit_document, format_option, handle_errors, no_match, print_kv, render, warn

version_option = broker_version_option_for(RELEASE_RULES_HELP + " The assumption used is printed.")
mode_option = click.option("--mode", type=click.Choice(("auto", "normal", "abnormal")), default="auto",
                           show_default=True, help="Override the abort-file decision (what-if).")


def _plan(store, broker_version, check_crc=None, index_safe=None, mode="auto", keep_redispatch=False,
          cq_file_size=None, jobs=None):
    from ..analyses.recovery import RecoveryOptions, plan_recovery  # imports numpy: not at --help

    st = Store.open(store, conf=broker_conf())
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
    ha = _controller_view(st, plan)
    if ha is not None:
        doc["controller"] = ha
    lw = None
    if consumers:
        lw = lost_window(st, plan.consume_queue_max_offsets_before, _after(plan), offsets_file)
        doc["consumer_lost_window"] = lw.to_dict()
    if fmt != "table":  # the table says it in its "broker version" line: once is enough
        warn(plan.version.describe())
    emit_document(doc, fmt, lambda d: (_render(plan, lw), _render_controller(ha)))
    if plan.messages_lost.get("count") or any(q.entries_cut for q in plan.queues) or (ha and not ha["will_start"]):
        sys.exit(EXIT_PROBLEMS)


def _controller_view(st, plan) -> dict | None:
    """Controller mode (AutoSwitch HA): the confirm offset after the recovery's clamp, the unconfirmed tail (on
    disk, in no queue), the epochs, and whether load() succeeds at all (compensateForHA); None in classic mode."""
    from ..analyses.peers import open_replica
    from ._params import broker_conf

    if plan.dledger is not None:
        return None
    conf = broker_conf()
    if conf is None and not any(os.path.isfile(os.path.join(st.root, n)) for n in
                                ("epochFileCheckpoint", "epochFileCheckpoint.bak", "brokerIdentity")):
        return None  # nothing says HA: no second walk for the common case
    rep = open_replica(st, st.root, conf, plan=plan, count_messages=False)
    if rep.identity.mode != "controller":
        if rep.identity.role == "SLAVE":
            warn("classic SLAVE (" + rep.identity.role_evidence + "): its checkpoint physicMsgTimestamp follows its "
                 "own consume-queue dispatch (appendData does not set the file's store time), so the abnormal "
                 "recovery start file above is its own, not its master's; its config/*.json are periodic copies of "
                 "the master's (SlaveSynchronize)")
        return None
    d = rep.to_dict(with_lists=False)
    d.pop("messages", None)
    return d


def _render_controller(ha: dict | None) -> None:
    if ha is None:
        return
    u = ha["unconfirmed"]
    print_kv("Controller mode (AutoSwitch HA)", [
        ("mode", ha["ha"]["mode_evidence"]),
        ("role", f"{ha['ha']['role'] or 'unknown'} ({ha['ha']['role_evidence']})"),
        ("epochs", " ".join(f"{e['epoch']}@[{e['start_offset']}, {e['end_offset']})" for e in
                            ha["epoch_ranges"]) or "none"),
        ("checkpoint confirmPhyOffset", ha["checkpoint_confirm_phy_offset"]),
        ("confirm offset after recovery", f"{ha['confirm_offset']} (clamped to [min offset, recovered end]; the "
                                          "reput dispatches only up to it)"),
        ("unconfirmed tail", f"[{u['from_offset']}, {u['to_offset']}) {u['bytes']} bytes, {u['messages']} messages: "
                             "on disk, in no consume queue; recovery does not cut it" if u else "none"),
        ("will it start", "yes" if ha["will_start"] else "NO: " + ha["load_failure"]["sentence"]),
        ("records past the end", f"{ha['stale_records']['count']} CRC-valid records the broker never serves"
         if ha["stale_records"]["count"] else "none"),
    ] + [("problem", p) for p in ha["problems"]])


def _totals(plan) -> dict:
    """The headline numbers, each the sum of the details it labels (a headline that is not the sum of the table
    under it reads as a contradiction)."""
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
        # entries start()'s ReputMessageService writes (max offsets after start over after load)
        "cq_entries_written_by_start": plan.cq_entries_written_by_start(),
    }


def _combine_rows(plan) -> list[tuple[str, str]]:
    """A combine store's part of the table (5.3.4+ CombineConsumeQueueStore)."""
    if plan.combine is None:
        return []
    c = plan.to_dict()["combine"]
    wp = c["write_progress"]
    first = wp["mismatches"][0] if wp["mismatches"] else None
    return [
        ("combine store", f"served: {c['served']}, offsets assigned by: {c['assigns_offsets']}; RocksDB side "
         f"dispatchFromPhyOffset {c['rocksdb_dispatch_from_phy_offset']}; extra files left "
         f"{c['extra_files_left']}" + (f" (spent at {c['extra_files_spent_at']})" if c["extra_files_spent_at"]
                                       else "")),
        ("initialised at start", ", ".join(f"{i['queue']} to {i['maxOffsetInAssign']}"
                                           for i in c["initialized_at_start"]) or "none"),
        ("write progress", f"{wp['status']} over {wp['queues_checked']} queue(s)" + (
            f"; first: {first['queue']} offset {first['offset']}" if first else "") +
         " (offline checkRocksdbCqWriteProgress after restart)"),
    ]


def _render(plan, lw) -> None:
    lost = plan.messages_lost
    t = _totals(plan)
    tr = plan.commitlog_file_truncated
    if tr is None:
        cl_line = "none"
    elif plan.bytes_cut:
        cl_line = f"{tr['name']} cut at position {tr['position']} ({plan.bytes_cut} bytes holding data removed)"
    else:
        cl_line = f"nothing cut: {tr['name']} ends at position {tr['position']}, where its data ends"
    if not plan.consume_queue_truncated:
        cq_line = "not run (the consume queues end before truncate_offset)"
    elif t["cq_entries_cut"]:
        cq_line = f"ran: {t['cq_entries_cut']} entries cut"
    else:
        cq_line = "ran: nothing cut (no entry at or past truncate_offset)"
    print_kv("Recovery (dry run)", [
        ("restart", plan.headline_text()),
        ("store", plan.store),
        ("mode", plan.mode + (" (abort file present)" if plan.mode == "abnormal" else " (no abort file)")),
        ("broker version", plan.version.describe()),
        ("start file", f"{plan.start_file} - {plan.start_reason}"),
        ("scan stopped", f"{plan.stop_kind} at {plan.stop_file} position {plan.stop_position}: {plan.stop_reason}"),
        ("truncate_offset", f"{plan.truncate_offset} (where the recovery cuts the log; its data end when nothing "
         "is cut)"),
        ("max offset after load / start", f"{plan.max_offset_after_load} / {plan.max_offset_after_start}"),
        ("maxPhyOffsetOfConsumeQueue", plan.max_phy_offset_of_consume_queue
         if plan.max_phy_offset_of_consume_queue >= 0 else "none (no consume-queue entry)"),
        ("truncateDirtyLogicFiles", cq_line),
        ("commit-log files deleted", ", ".join(plan.commitlog_files_deleted) or "none"),
        ("commit-log file", cl_line),
        ("records dispatched again", f"{t['records_dispatched_again']} walked from the reput offset (most already "
         "had their entry)"),
        ("cq entries re-dispatched", f"{t['cq_entries_redispatched']} (sum of 'redispatched' in the table below)"),
        ("cq entries cut", f"{t['cq_entries_cut']} (sum of 'entries_cut' in the table below)"),
        ("cq entries written by start()", t["cq_entries_written_by_start"]),
        ("index files dropped", ", ".join(plan.index_files_dropped) or "none"),
        ("records indexed again", ", ".join(f"[{a}, {b})" for a, b in plan.reindex_ranges()) or "none"),
        ("records past truncation", f"{t['records_past_truncation']} = {t['records_past_truncation_intact']} intact "
         f"+ {t['records_past_truncation_damaged']} damaged; {t['bytes_past_truncation']} bytes discarded"),
        ("per topic", (", ".join(f"{t}: {n}" for t, n in lost.get("per_topic", {}).items()) or "none")
         + " (intact records past truncation, plus damaged regions that held a cut consume-queue entry)"),
    ] + _combine_rows(plan) + [("note", n) for n in plan.notes])
    if plan.dledger is not None:  # DLedger mode: DLedger's own recovery decides the offsets
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
    render(lw, fmt, _render_lw, document=lambda w: w.to_dict(), lines=lambda w: (r.to_dict() for r in w.rows))
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
    from ..analyses.recovery import RecoveryOptions, plan_recovery  # imports numpy: not at --help
    from ..analyses.salvage import salvage

    st = Store.open(store, conf=broker_conf())
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
    render(rep, fmt, lambda r: _render_salvage(r, doc, out_path),
           document=lambda r: {**doc, "messages": [m.to_dict() for m in r.messages]},
           lines=lambda r: [*({"region": x.to_dict()} for x in r.regions),
                            *({"message": m.to_dict()} for m in r.messages), {"summary": doc}])
    if rep.messages or rep.regions:
        sys.exit(EXIT_PROBLEMS)


def _render_salvage(rep, doc: dict, out_path) -> None:
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


COMMANDS = [recover_cmd, salvage_cmd, consumer_lag_cmd]
