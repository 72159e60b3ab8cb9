"""`fate`: one message's fate in one command (analyses.fate)."""

from __future__ import annotations

import click

from ._params import (
    OFFSET,
    broker_conf,
    broker_version_option_for,
    key_needs_topic,
    offsets_file_option,
    store_argument,
)
from .output import (
    current,
    emit,
    format_option,
    handle_errors,
    ms_to_iso,
    no_match,
    note,
    print_kv,
    render,
)

TABLE_COLUMNS = ("physical_offset", "file", "position", "record", "topic", "queue_id", "queue_offset", "uniq_key")


@click.command("fate")
@store_argument
@click.option("--key", help="A KEYS token (with --topic): every record the broker's index returns for it.")
@click.option("--topic", help="The topic of --key (and of --uniq-key, to search one topic only).")
@click.option("--msgid", "msg_id", help="An offsetMsgId (server id) or a UNIQ_KEY (client id), any case.")
@click.option("--uniq-key", help="A UNIQ_KEY (client message id), any case.")
@click.option("--offset", type=OFFSET, help="The record at this physical offset.")
@offsets_file_option
@broker_version_option_for("RocketMQ version whose recovery rules decide 'after restart' (e.g. 4.4.0, 4.9.8, 5.x). "
                           "Default: detected from the files; a note names the one used.")
@format_option
@handle_errors
def fate(store, key, topic, msg_id, uniq_key, offset, offsets_file, broker_version, fmt):
    """One message's fate: where its record is (file, position, intact or how damaged), its consume-queue entry
    or why it has none (transaction half / rollback, delayed to SCHEDULE_TOPIC_XXXX, not dispatched yet), its
    index items, whether it survives a restart of this directory (the recovery model of `recover --dry-run`),
    and, per consumer group, whether it was already consumed. One answer per matching record.

    JSON: ``after_restart_fate`` is one of survives, redispatched, cut, replaced, not_served, no_record (see
    docs; ``after_restart`` says it in a sentence); ``reindexed_after_restart`` whether the restart indexes it.

    Exit code 3 when no record matches.

    \b
    Examples:
      rmqinspect fate STORE --key ord-15 --topic LogTopic
      rmqinspect fate STORE --msgid AC10FE0100417FFFAAAA00A1F7780549 --offsets consumerOffset.json
    """
    from ..analyses.fate import fates_of, records_asked
    from ..analyses.lookup.query import IndexService
    from ..store import Store

    given = [n for n, v in (("--key", key), ("--msgid", msg_id), ("--uniq-key", uniq_key), ("--offset", offset))
             if v is not None]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --key (with --topic), --msgid, --uniq-key, --offset")
    key_needs_topic(key, topic or None)  # an empty --topic names no topic either
    st = Store.open(store, conf=broker_conf())
    svc = IndexService.for_store(st)
    asked = records_asked(st, svc, key=key, topic=topic, msg_id=msg_id, uniq_key=uniq_key, offset=offset,
                          broker_version=broker_version)
    if not asked.offsets:
        no_match(f"no record found for {given[0]} {key or msg_id or uniq_key or offset} through the index "
                 "(`explain-missing` says why and scans the commit log)", topic=topic, store_root=st.root)
    # the restart depends on the version's recovery rules: say which one answered (never guess silently)
    va = asked.plan.version
    note(f"'after restart' follows the recovery of RocketMQ {va.version.text} ("
         + {"option": "--broker-version", "detected": "detected", "default": "assumed"}[va.source]
         + ("" if va.source == "option" else "; --broker-version overrides") + ")")
    if asked.plan.accelerated_from is not None:
        from ..analyses.recovery.combine import accelerated_note

        note(accelerated_note(asked.plan.accelerated_from, asked.offsets)
             .replace("problem(s) shown", "record(s) asked about"))
    rep = fates_of(st, asked, svc, offsets_file)
    if rep.consumer_offsets_source is None:
        note("no consumer offsets (config/consumerOffset.json absent; --offsets FILE gives them): "
             "consumption unknown")
    else:
        note(f"consumer offsets from {rep.consumer_offsets_source}")
    render(rep.fates, fmt, _render_fates, document=lambda fs: [f.to_dict() for f in fs],
           lines=lambda fs: (f.to_dict() for f in fs))


def _render_fates(fates) -> None:
    if current().columns:
        # --columns asks for columns: one row per record (the key/value blocks below have none to pick)
        emit((f.to_dict() for f in fates), "table", TABLE_COLUMNS)
        return
    for f in fates:
        print_kv(f"Record at {f.physical_offset}", [
            ("where", f"{f.file} position {f.position}"), ("record", f.record),
            ("topic / queue", f"{f.topic} / {f.queue_id} @ {f.queue_offset}" if f.topic is not None else ""),
            ("store time", ms_to_iso(f.store_timestamp)), ("keys", f.keys), ("uniq_key", f.uniq_key),
            ("consume queue", f.consume_queue),
            ("real topic", f.real_topic),
            ("delivery due", f"{f.delivery_due} ({ms_to_iso(f.delivery_due)})" if f.delivery_due else None),
            ("index items", "; ".join(f"{i['key']} in {i['file']} #{i['item']}"
                                      + ("" if i["reachable"] else " (unreachable)") for i in f.index_items)
             or "none"),
            ("after restart", f.after_restart if not f.after_restart_fate
             or f.after_restart.startswith(f.after_restart_fate) else f"[{f.after_restart_fate}] {f.after_restart}"),
        ] + [("note", n) for n in f.notes], skip_empty=True)
        if f.transaction is not None:
            print_kv(f"Its transaction (the {f.transaction['role']} record)", transaction_pairs(f.transaction),
                     skip_empty=True)
        if f.consumers:
            emit(({"group": c.group, "committed": c.committed, "consumed": c.consumed} for c in f.consumers),
                 "table", title="Consumer groups")


def transaction_pairs(t: dict) -> list[tuple[str, object]]:
    return [("half", f"{t['physical_offset']} ({t['convention']})"), ("state", t["state"]),
            ("real topic / queue", f"{t['real_topic']} / {t['real_queue_id']}"),
            ("producer group", t["producer_group"]), ("transaction id", t["transaction_id"]),
            ("check count", t["check_count"] or None), ("copies", t["copies"]), ("op", t["op_offset"]),
            ("commit", f"{t['commit_offset']} in {t['commit_queue']}" if t["commit_offset"] is not None else None),
            ("rollback", t["rollback_offset"]), ("given up", t["given_up_offset"]),
            ("after restart", t["after_restart"])] + [("note", n) for n in t["notes"]]


COMMANDS = [fate]
