"""`index-lookup`, `msgid` and `explain-missing`: finding a message the way the broker does, and saying why
it cannot be found."""

from __future__ import annotations

import dataclasses
import os
import string

import click

from ..analyses.lookup.query import DEFAULT_MAX_MSGS_NUM_BATCH, JAVA_LONG_MAX, IndexService, query_message
from ..errors import RmqInspectError, StoreNotFoundError
from ..store import Store
from ._params import (
    INDEX_MAX,
    INDEX_SLOTS,
    NON_NEGATIVE_LONG,
    POSITIVE_INT,
    TIME,
    TIME_FORMS,
    broker_conf,
    check_index_geometry,
    conf_setting,
    key_needs_topic,
    release_option,
    resolve_store_callback,
    store_argument,
)
from .output import (
    emit,
    format_option,
    handle_errors,
    ms_to_iso,
    no_match,
    note,
    print_kv,
    render,
    warn,
)

HIT_COLUMNS = ("physical_offset", "verified", "fate", "topic", "keys", "uniq_key", "store_time", "index_file", "note")


def _index_options(fn):
    fn = click.option("--index-dir", type=click.Path(file_okay=False), default=None,
                      help="Read IndexFiles from this directory instead of STORE/index (e.g. a rebuilt copy).")(fn)
    fn = click.option("--index-slots", type=INDEX_SLOTS, default=None,
                      help="maxHashSlotNum (default: inferred from the file size and slot table).")(fn)
    fn = click.option("--index-max", type=INDEX_MAX, default=None, help="maxIndexNum (default: inferred).")(fn)
    fn = click.option("--max-batch", type=POSITIVE_INT, default=None,
                      help=f"maxMsgsNumBatch of the broker: the cap applied to --max (default: --broker-config's, "
                           f"else {DEFAULT_MAX_MSGS_NUM_BATCH}).")(fn)
    return fn


def _max_batch(flag) -> int:
    return conf_setting(flag, "maxMsgsNumBatch", default=DEFAULT_MAX_MSGS_NUM_BATCH).value


def _recovery_view(st: Store, required: bool = False, version=None):
    from ..analyses.lookup.fates import recovery_view

    try:
        return recovery_view(st) if version is None else recovery_view(st, version=version)
    except RmqInspectError as e:  # the fate is then unknown, the hits are still listed
        if required:  # --as-recovered cannot answer without the model
            raise
        warn(f"recovery not modelled ({e}): hits carry no fate after restart")
        return None


def _service(st: Store, index_dir, slots, max_items) -> IndexService:
    check_index_geometry(slots, max_items)
    svc = IndexService.for_store(st, os.path.abspath(index_dir) if index_dir else None, slots, max_items)
    for info in svc.infos:
        if info.error:
            warn(f"{info.path}: {info.error}")
    if not svc.infos:
        warn(f"no index files in {svc.index_dir}")
    return svc


def _hit_row(h, dropped_note: bool) -> dict:
    notes = []
    if h.has_key is False:
        notes.append("hash collision: the record does not carry this key in this topic")
    if h.from_dropped_file and dropped_note:
        notes.append("from an index file the broker deletes on this abnormal restart (FORMATS §5.6)")
    if h.beyond_truncation:
        notes.append("at or past the recovery's truncation offset: gone after the broker restarts")
    return {"physical_offset": h.physical_offset, "verified": h.has_key, "topic": h.topic, "keys": h.keys,
            "uniq_key": h.uniq_key, "store_timestamp": h.store_timestamp, "store_time": ms_to_iso(h.store_timestamp),
            "index_file": h.index_file, "from_dropped_index_file": h.from_dropped_file,
            "beyond_truncation": h.beyond_truncation, "fate": h.fate, "note": "; ".join(notes)}


def _walk_rows(q):
    for rnd, r in enumerate(q.rounds, 1):
        for w in r.walks:
            lk = w.lookup
            yield {"type": "file", "round": rnd, "file": w.file, "consulted": w.consulted, "why": w.why,
                   "slot": lk.slot if lk else None, "slot_value": lk.slot_value if lk else None,
                   "stopped": lk.stopped if lk else None}
            if lk:
                for s in lk.steps:
                    yield {"type": "item", "round": rnd, "file": w.file, **dataclasses.asdict(s)}


@click.command("index-lookup")
@store_argument
@click.option("--key", help="The key (a KEYS token or a UNIQ_KEY).")
@click.option("--topic", help="Topic the message was stored under (the index key is TOPIC#KEY).")
@click.option("--begin", type=TIME, default=0, show_default=True, help=f"Store time >= this: {TIME_FORMS}.")
@click.option("--end", type=TIME, default=JAVA_LONG_MAX, help="Store time <= (default Long.MAX_VALUE).")
@click.option("--max", "max_num", type=NON_NEGATIVE_LONG, default=DEFAULT_MAX_MSGS_NUM_BATCH, show_default=True,
              help="maxNum of the query (capped by --max-batch).")
@click.option("--explain", is_flag=True, help="Show the walk (files, slots, items) and the dropped collisions.")
@click.option("--keep-collisions", is_flag=True, help="List hash collisions among the hits (the broker's raw answer).")
@click.option("--tiered", is_flag=True,
              help="Search the 5.x tiered-store index (tiered_index_file/, unsealed or compacted) instead of index/ "
                   "(automatic when the store has only a tiered index).")
@click.option("--rip82", is_flag=True,
              help="Search the index column family of RocksDBMessageStore/ (RIP-82, 5.4.0+; modelled from the change "
                   "descriptions) instead of index/ (automatic when the store has no index files, "
                   "indexFileWriteEnable=false). Each hit is checked against its record.")
@click.option("--as-recovered", is_flag=True,
              help="The broker's answer once it has recovered this directory: hits whose fate after restart is "
                   "survives or redispatched, plus the records the restart indexes (reindexed: dispatched again "
                   "past the surviving index's endPhyOffset); the recovery modelled in memory, nothing is written.")
@click.option("--no-fate", is_flag=True,
              help="Do not model the recovery: the hits carry no fate after restart. On a full-size store the fate "
                   "costs a scan of the commit-log files the broker's recovery reads (seconds per GiB); a script "
                   "looping over keys may not need it.")
@_index_options
@release_option
@format_option
@click.pass_context
@handle_errors
def index_lookup(ctx, store, key, topic, begin, end, max_num, explain, keep_collisions, tiered, rip82, as_recovered,
                 no_fate, index_dir, index_slots, index_max, max_batch, broker_version, fmt):
    """DefaultMessageStore.queryMessage over the IndexFiles (what `mqadmin queryMsgByKey` gets), then the client
    step: each hit is re-read and hash collisions are dropped.

    Exit code 3 when no record carrying the key is found.
    """
    # what each command of this module runs is imported when it runs: not when --help or another of them loads it
    from ..analyses.lookup.fates import mark_fates, restore_as_recovered
    from ..store.rip82 import rip82_dir

    key_needs_topic(key, topic, required=True)
    if as_recovered and no_fate:
        raise click.UsageError("--as-recovered needs the recovery model, which --no-fate turns off")
    st = Store.open(store, conf=broker_conf())
    if tiered or (index_dir is None and not os.path.isdir(st.layout.index_dir)
                  and os.path.isdir(os.path.join(st.root, "tiered_index_file"))):
        from .tiered_index import tiered_index_lookup

        return ctx.invoke(tiered_index_lookup, path=store, topic=topic, key=key, begin=begin, end=end,
                          max_num=max_num, stats=explain, hash_slots=index_slots, max_items=index_max,
                          broker_version=broker_version,
                          fmt=fmt)
    if rip82 or (index_dir is None and not _has_index_files(st) and rip82_dir(st.root) is not None):
        _rip82_lookup(st, topic, key, begin, end, min(max_num, _max_batch(max_batch)), fmt)
        return
    svc = _service(st, index_dir, index_slots, index_max)
    q = query_message(svc, st.commitlog, topic, key, max_num, begin, end, _max_batch(max_batch), explain=explain)
    if not q.verified and len(key) == 32 and key != key.upper() and all(c in string.hexdigits for c in key):
        # a pasted UNIQ_KEY in lower case: the broker indexes it upper case (ids are case-insensitive; a KEYS
        # token is not, so the key as typed is asked first and the upper-case one only when it finds nothing)
        upper = query_message(svc, st.commitlog, topic, key.upper(), max_num, begin, end, _max_batch(max_batch),
                              explain=explain)
        if upper.verified:
            note(f"no record carries the key {key!r} as typed; {key.upper()!r}, the UNIQ_KEY as the broker writes "
                 "it, finds them")
            key, q = key.upper(), upper
    view = (_recovery_view(st, required=as_recovered, version=broker_version)
            if (q.hits or as_recovered) and not no_fate else None)
    mark_fates(q, view)
    truncate_offset = view.truncate_offset if view else None
    if as_recovered:
        restore_as_recovered(q, st.commitlog, view)
    if any(h.beyond_truncation for h in q.hits):
        warn(f"hits marked beyond_truncation lie at or past {truncate_offset}, where the broker's recovery of this "
             "directory truncates the commit log: it will not return them after a restart")
    shown = [h for h in q.hits if h.has_key or keep_collisions or explain]
    if svc.abort_present and any(h.from_dropped_file for h in q.hits):
        warn("abort file present: hits marked from_dropped_index_file come from an index file the broker deletes "
             "and rebuilds on restart")
    def document(q) -> dict:
        doc = {"query": {"topic": topic, "key": key, "max_num": q.max_num, "begin": begin, "end": end,
                         "key_string": q.key_string, "key_hash": q.key_hash},
               "phy_offsets": q.phy_offsets, "raw": q.raw, "recovery_truncate_offset": truncate_offset,
               "verified_offsets": [h.physical_offset for h in q.verified],
               "collisions": [h.physical_offset for h in q.collisions],
               "index_last_update_timestamp": q.index_last_update_timestamp,
               "index_last_update_phy_offset": q.index_last_update_phy_offset,
               "hits": [_hit_row(h, svc.abort_present) for h in shown], "notes": q.notes,
               "geometry": svc.geometry(), "index_files": [dataclasses.asdict(i) for i in svc.infos]}
        if explain:
            doc["walk"] = list(_walk_rows(q))
        return doc

    def lines(q):
        yield from (dict(type="hit", **_hit_row(h, svc.abort_present)) for h in shown)
        if explain:
            yield from _walk_rows(q)

    def table(q) -> None:
        print_kv("Query", [("key string", q.key_string), ("key hash", q.key_hash), ("maxNum", q.max_num),
                           ("window", f"[{begin}, {end}]"), ("broker result (queryMessage)", q.phy_offsets),
                           ("raw (IndexService.queryOffset)", q.raw),
                           ("verified", [h.physical_offset for h in q.verified]),
                           ("hash collisions dropped", [h.physical_offset for h in q.collisions])]
                 + [("note", n) for n in q.notes])
        emit((_hit_row(h, svc.abort_present) for h in shown), "table", HIT_COLUMNS, title="Hits")
        if explain:
            emit((r for r in _walk_rows(q) if r["type"] == "file"), "table",
                 ("round", "file", "consulted", "slot", "slot_value", "stopped", "why"),
                 title="Index files (newest first)")
            emit((r for r in _walk_rows(q) if r["type"] == "item"), "table",
                 ("round", "file", "item", "key_hash", "phy_offset", "time_read", "prev_index", "matched", "reason"),
                 title="Items visited")

    render(q, fmt, table, document=document, lines=lines)
    if not q.verified and not as_recovered and not no_fate:
        pending = _carried_but_not_indexed(st, topic, key, begin, end, broker_version)
        if pending:
            where = ", ".join(str(h.physical_offset) for h in pending[:5]) + (" ..." if len(pending) > 5 else "")
            no_match(f"the index holds no item for the key {key!r} in topic {topic!r}, but the commit log does: the "
                     f"record(s) at {where} carry it; the index does not hold them yet (they lie past the surviving "
                     "index's endPhyOffset), and the broker indexes them when it restarts (`--as-recovered` shows "
                     "its answer then)", topic=topic, store_root=st.root)
    if not q.verified:
        no_match(f"no record in topic {topic!r} carries the key {key!r}"
                 + (f" (the index returned {len(q.raw)} candidate(s), none with the key)" if q.raw else "")
                 + (" in the window" if (begin, end) != (0, JAVA_LONG_MAX) else "")
                 + "; `explain-missing` says why", topic=topic, store_root=st.root)


def _carried_but_not_indexed(st: Store, topic: str, key: str, begin: int, end: int, version=None) -> list:
    """Records the restart model says the broker indexes on restart (``reindexed_hits``) that carry the key. A
    look-up that found nothing reads at most PENDING_SCAN_BYTES of them (`--as-recovered` reads them all)."""
    from ..analyses.lookup.fates import recovery_view, reindexed_hits

    try:
        view = recovery_view(st, version=version)
    except RmqInspectError:
        return []
    span = sum(b - a for a, b in view.reindex_ranges())
    if span > PENDING_SCAN_BYTES:
        note(f"the restart indexes {span} bytes of records the index does not hold yet; `--as-recovered` looks "
             "for the key there")
        return []
    return [h for h in reindexed_hits(st.commitlog, view, topic, key, begin, end) if h.has_key]


PENDING_SCAN_BYTES = 1 << 30  # about half a crc32 pass: the bulk key-hash walk runs at ~0.7x one


def _has_index_files(st: Store) -> bool:
    d = st.layout.index_dir
    return os.path.isdir(d) and any(os.path.isfile(os.path.join(d, n)) for n in os.listdir(d))


def _rip82_lookup(st: Store, topic: str, key: str, begin: int, end: int, max_num: int, fmt: str) -> None:
    """index-lookup answered from RIP-82's index column family (analyses.rip82)."""
    from ..analyses.rip82 import query_rip82_index
    from ..store.rip82 import RIP82_DIR

    ans = query_rip82_index(st, topic, key, begin, end, max_num)
    if ans is None:
        raise StoreNotFoundError("no RocksDBMessageStore/ (RIP-82) database", os.path.join(st.root, RIP82_DIR))
    note(ans.note)
    if ans.malformed:
        warn(f"{ans.malformed} malformed record(s) in RocksDBMessageStore/ skipped")
    def rows(a):
        return ({"physical_offset": h.physical_offset, "store_time": ms_to_iso(h.store_time), "kind": h.kind,
                 "uniq_key": h.uniq_key, "record": h.record, "has_key": h.has_key} for h in a.hits)

    render(ans, fmt, lambda a: emit(rows(a), "table", ("physical_offset", "store_time", "kind", "uniq_key", "record",
                                                         "has_key")),
           document=lambda a: a.to_dict(), lines=rows)
    if not ans.phy_offsets:
        no_match(f"no record in topic {topic!r} carries the key {key!r} (RocksDBMessageStore/ index)", topic=topic,
                 store_root=st.root)


@click.command("msgid")
@click.argument("args", nargs=-1, metavar="[STORE] MSG_ID")
@click.option("--store", "store_opt", type=click.Path(exists=False), default=None,
              help="Store to decode the record from / search the UNIQ_KEY in (or give it first: msgid STORE ID).")
@click.option("--topic", help="Topic for the UNIQ_KEY look-up (default: every topic with a consume queue).")
@click.option("--as-recovered", is_flag=True,
              help="What the broker serves once it has recovered this directory (needs --store): the record at the "
                   "offset only before the recovery's truncation, UNIQ_KEY hits only if they survive or are "
                   "re-dispatched. Without it each answer carries its fate after restart.")
@_index_options
@release_option
@format_option
@click.pass_context
@handle_errors
def msgid(ctx, args, store_opt, topic, as_recovered, index_dir, index_slots, index_max, max_batch, broker_version,
          fmt):
    """Decode a message id: offsetMsgId (store host + physical offset, IPv4/IPv6) and UNIQ_KEY (client ip, pid,
    time since month start, counter). With a store (first, as every command takes it, or --store), decode the
    record at the offset and find the UNIQ_KEY through the index (topic#uniqkey).

    \b
    Examples:
      rmqinspect msgid STORE C0A80A0B3E8F1B6D3586510323690001
      rmqinspect msgid 0A0A000500002A9F0000000000000000 --store STORE

    Exit code 3 when a store is given and no record matches the id.
    """
    from ..analyses.lookup.msgid import MsgIdReport, decode_msg_id, find_msg_id

    msg_id, store = _msgid_args(ctx, args, store_opt)
    msg_id = msg_id.strip().upper()  # hex: the broker writes upper case, a pasted id may not be
    interpretations = decode_msg_id(msg_id)
    if all("error" in i for i in interpretations):
        raise click.BadParameter(interpretations[0]["error"], param_hint="MSG_ID")
    rep = MsgIdReport(msg_id, interpretations)
    if store:
        st = Store.open(store, conf=broker_conf())
        view = _recovery_view(st, required=as_recovered, version=broker_version)
        rep = find_msg_id(st, _service(st, index_dir, index_slots, index_max), msg_id, topic, _max_batch(max_batch),
                          view, as_recovered)
    elif as_recovered:
        raise click.UsageError("--as-recovered needs a store (msgid STORE ID)")
    render(rep.to_dict(), fmt, _render_msgid)
    if store and not rep.found:
        no_match(f"no record in {store} matches the id {msg_id} (as offsetMsgId or UNIQ_KEY)",
                 topic=topic, store_root=st.root)


def _msgid_args(ctx, args: tuple[str, ...], store_opt: str | None) -> tuple[str, str | None]:
    """``msgid STORE ID`` (the store first, as in every command) or ``msgid ID [--store STORE]``."""
    if len(args) == 2 and store_opt is None:
        store, msg_id = args
    elif len(args) == 1:
        msg_id, store = args[0], store_opt
    elif not args:
        raise click.UsageError("give the message id: msgid STORE ID, or msgid ID (decoded without a store)")
    else:
        raise click.UsageError(f"msgid takes STORE and ID, or ID with --store; got {len(args)} arguments"
                               + (" and --store" if store_opt else "") + ": " + " ".join(args))
    if store is not None:
        store = resolve_store_callback(ctx, ctx.command.params[0], store)
    return msg_id, store


def _born_about(u: dict, doc: dict) -> str | None:
    """The UNIQ_KEY's approximate born time (mqadmin DecodeMessageId's getNearlyTimeFromID), against the store time
    of the record found with it, else now, with month starts in UTC (the producer's time zone is not in the id)."""
    import time

    from ..formats.msgid import nearly_born_time

    if u.get("plausible") is not True:
        return None
    hits = (doc.get("as_uniq_key") or {}).get("hits") or []
    stored = [h["message"]["store_timestamp"] for h in hits if h.get("message")]
    ref = max(stored) if stored else int(time.time() * 1000)
    born = nearly_born_time(u["millis_since_month_start"], ref)
    against = f"the store time of the record found, {ms_to_iso(ref)}" if stored else "now"
    return (f"{ms_to_iso(born)} ({u['millis_since_month_start']} ms into the month before {against}; month "
            "starts taken in UTC: the producer's own time zone shifts it)")


def _render_msgid(doc) -> None:
    implausible = []
    for i in doc["interpretations"]:
        pairs = [(k, v) for k, v in i.items() if k != "kind"]
        if i["kind"] == "UNIQ_KEY" and (born := _born_about(i, doc)):
            pairs.insert(pairs.index(("millis_since_month_start", i["millis_since_month_start"])) + 1,
                         ("born about", born))
        if i.get("plausible") is False:
            implausible.append(i["kind"])
        print_kv(f"As {i['kind']}", pairs)
    a = doc.get("as_offset_msg_id")
    if a:
        if "error" in a and "offsetMsgId" in implausible:
            # the id is a UNIQ_KEY: read as an offsetMsgId it names no record, which is no error of the store
            note(f"read as an offsetMsgId the id names no record ({a['error']}); it is not plausible as one "
                 "(port above 65535 or an offset past 2^50): a UNIQ_KEY")
        elif "error" in a:
            print_kv("Record at the offset", [("error", a["error"])]
                     + ([("fate after restart", a["fate"])] if "fate" in a else []))
        else:
            m = a["message"]
            print_kv("Record at the offset", [("matches offsetMsgId", a["matches"]), ("topic", m["topic"]),
                                              ("queue", f"{m['queue_id']} @ {m['queue_offset']}"),
                                              ("store time", ms_to_iso(m["store_timestamp"])),
                                              ("keys", m["keys"]), ("uniq_key", m["uniq_key"])]
                     + ([("fate after restart", a["fate"])] if "fate" in a else []))
    u = doc.get("as_uniq_key")
    if u is not None:
        emit(({"topic": h["topic"], "physical_offset": h["physical_offset"], "index_file": h["index_file"],
               "store_time": ms_to_iso(h["message"]["store_timestamp"]), "keys": h["message"]["keys"]}
              | ({"fate": h["fate"]} if "fate" in h else {})
              for h in u["hits"]), "table",
             title=f"UNIQ_KEY hits through the index (topics: {len(u['topics_searched'])})")


@click.command("explain-missing")
@store_argument
@click.option("--key", help="A KEYS token.")
@click.option("--uniq-key", help="A UNIQ_KEY (client message id).")
@click.option("--msg-id", help="An offsetMsgId (server message id).")
@click.option("--topic", help="Topic the message was sent to (the index key is TOPIC#KEY).")
@click.option("--begin", type=TIME, default=0, show_default=True, help=f"Query window start: {TIME_FORMS}.")
@click.option("--end", type=TIME, default=JAVA_LONG_MAX, help="Query window end (default Long.MAX_VALUE).")
@click.option("--max", "max_num", type=NON_NEGATIVE_LONG, default=DEFAULT_MAX_MSGS_NUM_BATCH, show_default=True,
              help="maxNum of the query.")
@click.option("--scan-bytes", type=NON_NEGATIVE_LONG, default=None,
              help="Bound the commitlog fall-back scan to this many bytes from the first file (default: all).")
@click.option("--as-recovered", is_flag=True,
              help="Explain the answer of the broker once it has recovered this directory (hits beyond the "
                   "truncation or from a deleted, not re-dispatched index file are gone). Without it the broker "
                   "result carries each offset's fate after restart.")
@_index_options
@release_option
@format_option
@handle_errors
def explain_missing_cmd(store, key, uniq_key, msg_id, topic, begin, end, max_num, scan_bytes, as_recovered, index_dir,
                        index_slots, index_max, max_batch, broker_version, fmt):
    """Why can't a message be found? Runs the broker's look-up; when it finds nothing, says why (time window,
    index file destroyed or never written, key never indexed, other topic, delayed message, hash collisions,
    result cap) and falls back to a bounded commitlog scan to show where the message really is.

    Exit code 3 when the message is not on disk.
    """
    from ..analyses.lookup.explain import explain_missing

    # message ids are hex: any case means the same id (the broker writes upper case)
    uniq_key, msg_id = (uniq_key.upper() if uniq_key else uniq_key), (msg_id.upper() if msg_id else msg_id)
    given = [(k, v) for k, v in (("key", key), ("uniq_key", uniq_key), ("msg_id", msg_id)) if v]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --key, --uniq-key, --msg-id")
    if topic is None:
        raise click.UsageError("explain-missing needs --topic: the broker's look-up is by TOPIC#KEY (decode-commitlog "
                               "STORE --key KEY walks every topic's records)")
    kind, value = given[0]
    st = Store.open(store, conf=broker_conf())
    svc = _service(st, index_dir, index_slots, index_max)
    rep = explain_missing(st, svc, topic, value, kind, begin, end, max_num, _max_batch(max_batch), scan_bytes,
                          _recovery_view(st, required=as_recovered, version=broker_version), as_recovered)
    doc = {"topic": topic, kind: value, "found_by_index": rep.found_by_index,
           "broker_result": rep.query.phy_offsets if rep.query else None, "as_recovered": as_recovered,
           "recovery_truncate_offset": rep.recovery_truncate_offset,
           "broker_result_fates": {str(o): f for o, f in rep.fates.items()},
           "reasons": [dataclasses.asdict(r) for r in rep.reasons],
           "located": [dataclasses.asdict(x) for x in rep.located],
           "scanned": list(rep.scanned), "scan_complete": rep.scan_complete,
           "index_files": [{"name": i.name, "begin_timestamp": i.begin_timestamp, "end_timestamp": i.end_timestamp,
                            "begin_phy_offset": i.begin_phy_offset, "end_phy_offset": i.end_phy_offset,
                            "index_count": i.index_count, "error": i.error} for i in rep.index_files]}
    def table(doc) -> None:
        verdict = ("found by the broker's look-up" if rep.found_by_index else
                   "NOT found by the broker's look-up" + ("; on disk at " + ", ".join(
                       str(x.physical_offset) for x in rep.located) if rep.located else "; not on disk"))
        print_kv("Verdict", [("looked for", f"{kind} {value!r} in topic {topic!r}"), ("verdict", verdict),
                             ("broker result", doc["broker_result"])]
                 + [("view", "as recovered (after the broker restarts on this directory)" if as_recovered
                     else "on disk"), ("fates after restart", doc["broker_result_fates"] or None)])
        emit(doc["reasons"], "table", ("code", "detail"), title="Reasons", cell_width=400)
        emit(({k: x[k] for k in ("physical_offset", "fate", "topic", "queue_id", "queue_offset", "store_timestamp",
                                 "keys", "uniq_key")} | {"indexed_in": [f"{i['file']}#{i['item']}"
                                                                        for i in x["index_items"]]}
              for x in doc["located"]), "table", title="Where the message really is")
        emit(doc["index_files"], "table", title="Index files")

    render(doc, fmt, table)
    if not rep.found_by_index and not rep.located:
        no_match(f"{kind} {value!r} of topic {topic!r} is neither found by the broker's look-up nor on disk",
                 topic=topic, store_root=st.root)


COMMANDS = [index_lookup, msgid, explain_missing_cmd]
