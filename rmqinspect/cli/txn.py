"""`txn`: every transaction of a store with its verdict (analyses.txn)."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS
from ._params import TIME, TIME_FORMS, broker_conf, broker_version_option_for, offsets_file_option, store_argument
from .output import emit, emit_document, format_option, handle_errors, ms_to_iso, no_match, note, print_kv, render, warn

TABLE_COLUMNS = ("physical_offset", "state", "real_topic", "uniq_key", "check_count", "after_restart")
STATE_NAMES = ("committed", "rolled_back", "in_doubt", "open", "given_up")
# problems of the store itself (exit code 1); the other notes describe what the records prove
DAMAGE_NOTES = ("damage", "gaps", "op bodies", "op tags", "halves without REAL_TOPIC")


@click.command("txn")
@store_argument
@click.option("--topic", help="Only transactions of this real topic (REAL_TOPIC of the half; a PREPARED record's "
              "own topic).")
@click.option("--key", help="Only transactions whose half carries this KEYS token.")
@click.option("--msgid", "msg_id", help="Only the transaction with this UNIQ_KEY or __transactionId__ (any case).")
@click.option("--state", "states", multiple=True, type=click.Choice(STATE_NAMES),
              help="Only transactions in this state (repeatable).")
@click.option("--since", type=TIME, default=None, help=f"Only transactions whose half (or a copy of it) was stored "
              f"at or after this: {TIME_FORMS}.")
@click.option("--until", type=TIME, default=None, help="Only transactions whose half (or a copy of it) was stored "
              "at or before this.")
@click.option("--summary", "summary_only", is_flag=True, help="Only the counts by state and real topic.")
@click.option("--no-restart", is_flag=True, help="Skip the recovery model (no 'after restart' verdicts).")
@offsets_file_option
@broker_version_option_for("RocketMQ version whose recovery rules decide 'after restart' (e.g. 4.9.8, 5.x). "
                           "Default: detected from the files; a note names the one used.")
@format_option
@handle_errors
def txn(store, topic, key, msg_id, states, since, until, summary_only, no_restart, offsets_file, broker_version,
        fmt):
    """Every transaction in STORE with its verdict, from the commit log alone: one row per half message
    (RMQ_SYS_TRANS_HALF_TOPIC) or 4.x PREPARED record, physical_offset being that record's.

    \b
    committed    op and COMMIT (4.x: a COMMIT record names the PREPARED one)
    rolled_back  op, no COMMIT (4.x: a ROLLBACK record names it)
    in_doubt     COMMIT, no op: a crash between the two writes; the checker asks again
    open         neither; check_count from the re-appended copies, checker_passed from
                 CID_RMQ_SYS_TRANS's offset in consumerOffset.json
    given_up     copied to TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks

    After the rows, the counts by state and real topic. A verdict the broker's recovery would change (its
    records lie past the cut of `recover --dry-run`) says so in after_restart. Exit code 1 when the commit log
    is damaged or holds malformed op messages, 3 when no transaction matches.

    \b
    Examples:
      rmqinspect txn STORE --state open --state in_doubt
      rmqinspect txn STORE --msgid C0A80A0B3E8F1B6D358600A1BDBB00D8 --format json
    """
    from ..analyses.txn import checker_progress, scan_transactions
    from ..store import Store

    st = Store.open(store, conf=broker_conf())
    plan = None
    if not no_restart:
        from ..analyses.recovery import RecoveryOptions, plan_recovery

        plan = plan_recovery(st, RecoveryOptions(version=broker_version, with_salvage=False, keep_redispatch=False))
        va = plan.version
        note(f"'after restart' follows the recovery of RocketMQ {va.version.text} ("
             + {"option": "--broker-version", "detected": "detected", "default": "assumed"}[va.source]
             + ("" if va.source == "option" else "; --broker-version overrides")
             + f"): the commit log is cut at {plan.truncate_offset}")
    offsets, source = checker_progress(st, offsets_file)
    if offsets is None:
        note("no consumer offsets (config/consumerOffset.json absent; --offsets FILE gives them): whether the "
             "checker has passed an open half is unknown")
    elif not offsets:
        note(f"{source} holds no offset of CID_RMQ_SYS_TRANS on RMQ_SYS_TRANS_HALF_TOPIC: the checker has not "
             "committed progress")
    scan = scan_transactions(st, plan=plan, checker_offsets=offsets, checker_source=source)
    groups = scan.select(topic=topic, states=set(states) or None, since=since, until=until)
    want = msg_id.strip().upper() if msg_id else None

    def rows(human: bool):
        for t in scan.transactions(groups):
            if key is not None and key not in t.keys:
                continue
            if want is not None and want not in ((t.uniq_key or "").upper(), (t.transaction_id or "").upper()):
                continue
            d = t.to_dict()
            d["first_store"] = ms_to_iso(t.first_store_time)
            d["last_store"] = ms_to_iso(t.last_store_time)
            if human and t.after_restart:
                # the sentence is in JSON; a table cell says what the verdict becomes
                d["after_restart"] = f"{t.state_after_restart} (cut at {scan.truncate_offset})"
            yield d

    total, by_topic = scan.summary()
    n = 0
    if summary_only:
        doc = {"transactions": total, "by_topic": [{"topic": r.topic, **r.counts} for r in by_topic]}
        emit_document(doc, fmt, lambda d: _print_summary(total, by_topic))
    else:
        def table(scan) -> int:
            shown = emit(rows(True), "table", TABLE_COLUMNS)
            if len(scan):
                _print_summary(total, by_topic)
            return shown

        n = render(scan, fmt, table, rows=lambda scan: rows(False)) or 0
    _rip82_trans_notes(st, scan)
    problems = False
    for kind, count in scan.notes.counts.items():
        problems |= kind in DAMAGE_NOTES and count > 0
    for line in scan.notes.all():
        (warn if problems else note)(line)
    if problems:
        sys.exit(EXIT_PROBLEMS)
    if not summary_only and n == 0:
        filters = " ".join(f for f, on in ((f"--topic {topic}", topic is not None), (f"--key {key}", key is not None),
                                           (f"--msgid {msg_id}", msg_id is not None),
                                           (" ".join(f"--state {s}" for s in states), bool(states)),
                                           (f"--since {ms_to_iso(since)}", since is not None),
                                           (f"--until {ms_to_iso(until)}", until is not None)) if on)
        no_match(f"no transaction matches {filters}" if filters else
                 "the commit log holds no transaction (no half or PREPARED record)",
                 topic=topic, names=scan.real_topic_names if topic is not None else None)


def _print_summary(total: dict[str, int], by_topic) -> None:
    click.echo()
    print_kv("Transactions by state", [(s, total[s]) for s in STATE_NAMES] + [("total", sum(total.values()))])
    emit(({"real_topic": r.topic, **r.counts} for r in by_topic), "table", ("real_topic",) + STATE_NAMES,
         title="By real topic")


COMMANDS = [txn]


def _rip82_trans_notes(st, scan) -> None:
    """5.4.0+ (RIP-82) keeps the half messages no op has deleted yet in RocksDBMessageStore/'s trans column family:
    each row against the commit log's verdict of the transaction it names (a row whose transaction the log shows
    ended is an op the broker had not yet applied to RocksDB; a row naming no half is a broken row)."""
    from ..analyses.rip82 import open_rip82_transactions

    got = open_rip82_transactions(st)
    if got is None:
        return
    rows, modelled = got
    if not rows:
        note(f"RocksDBMessageStore/ trans column family: no open half ({modelled})")
        return
    by_offset = {}
    for t in scan.transactions(scan.select()):
        for off in [t.physical_offset, *t.copies]:
            by_offset[off] = t.state
    agree = [r for r in rows if r.matches and by_offset.get(r.offset_py) == "open"]
    note(f"RocksDBMessageStore/ trans column family ({modelled}): {len(rows)} open half(s), {len(agree)} open in the "
         "commit log too")
    for r in rows:
        state = by_offset.get(r.offset_py)
        if not r.matches:
            warn(f"RocksDBMessageStore/ trans row at {r.offset_py} (UNIQ_KEY {r.uniq_key}): no half of "
                 f"{r.size_py} bytes with that UNIQ_KEY there ({r.record})")
        elif state is None:
            warn(f"RocksDBMessageStore/ trans row at {r.offset_py} (UNIQ_KEY {r.uniq_key}): the commit log holds no "
                 "transaction there")
        elif state != "open":
            note(f"RocksDBMessageStore/ trans row at {r.offset_py} (UNIQ_KEY {r.uniq_key}) still lists it open; the "
                 f"commit log says {state} (the op had not reached RocksDB)")
