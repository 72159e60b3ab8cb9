"""`spark stats|find|verify|diff|dledger-peers`: fleet-scale analytics over many stores on Apache Spark."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS
from ._params import NON_NEGATIVE_LONG, TIME, TIME_FORMS, broker_conf
from .export import EngineUnavailableError
from .output import emit, emit_document, format_option, handle_errors, ms_to_iso, no_match, print_kv

stores_argument = click.argument("stores", nargs=-1, required=True, type=click.Path(exists=False))
master_option = click.option("--master", default=None,
                             help="Spark master URL (default local[*], or what spark-submit configured).")
label_option = click.option("--label", "labels", multiple=True,
                            help="Name of each STORE in the output (source column), in order.")


def spark_session(master):
    from ..spark.session import SparkUnavailableError

    try:
        from ..spark.session import get_session

        return get_session(master)
    except (ImportError, SparkUnavailableError) as e:
        raise EngineUnavailableError(str(e)) from e


def _labels(labels, stores):
    if labels and len(labels) != len(stores):
        raise click.UsageError(f"{len(labels)} --label for {len(stores)} stores")
    return list(labels) or None


@click.group("spark")
def spark_group() -> None:
    """Fleet analytics on Apache Spark (pip install 'rmqinspect[spark]', Java 17+).

    Every STORE path must be readable by the executors (local disk for local[*]; a shared filesystem
    mounted at the same path on every node for a cluster). One Spark task per commitlog file.
    """


@spark_group.command("stats")
@stores_argument
@master_option
@label_option
@click.option("--topic", "topics", multiple=True, help="Only these topics (repeatable).")
@click.option("--since", type=TIME, help=f"Store time >= this: {TIME_FORMS}.")
@click.option("--until", type=TIME, help=f"Store time <= this: {TIME_FORMS}.")
@format_option
@handle_errors
def stats_cmd(stores, master, labels, topics, since, until, fmt):
    """Per source, topic, queue and store hour: messages, bytes, store lag (store - born time) percentiles."""
    from ..analyses.rows import RowFilter  # the record readers: not at --help
    from ..spark.jobs import stats

    rows = stats(spark_session(master), stores, labels=_labels(labels, stores),
                 flt=RowFilter(frozenset(topics) if topics else None, since, until))
    n = emit(rows, fmt, ("source", "topic", "queue_id", "hour", "messages", "bytes", "lag_p50_ms", "lag_p90_ms",
                         "lag_p99_ms", "lag_max_ms"))
    if n == 0 and (topics or since is not None or until is not None):
        filters = [f"--topic {t}" for t in topics] + [f"--since {ms_to_iso(since)}"] * (since is not None) + [
            f"--until {ms_to_iso(until)}"] * (until is not None)
        no_match(f"no message in {len(stores)} store(s) matches {' '.join(filters)}")


@spark_group.command("find")
@stores_argument
@click.option("--value", "values", multiple=True, required=True,
              help="Key, UNIQ_KEY or offsetMsgId to look for (repeatable).")
@click.option("--by", type=click.Choice(("any", "key", "uniq", "msgid")), default="any", show_default=True)
@click.option("--topic", "topics", multiple=True, help="Only these topics (repeatable).")
@master_option
@label_option
@format_option
@handle_errors
def find_cmd(stores, values, by, topics, master, labels, fmt):
    """Messages carrying a key (KEYS token), UNIQ_KEY (client msgId) or offsetMsgId, across every STORE.
    Exit 3 when nothing is found."""
    from ..analyses.rows import RowFilter  # the record readers: not at --help
    from ..spark.jobs import FIND_COLUMNS, find

    rows = find(spark_session(master), stores, values, by=by, labels=_labels(labels, stores),
                flt=RowFilter(frozenset(topics)) if topics else None)
    for r in rows:
        r["store_time"] = ms_to_iso(r["store_timestamp_ms"])
    emit(rows, fmt, tuple(c for c in FIND_COLUMNS if c not in ("store_timestamp_ms", "file")) + ("store_time",
                                                                                                   "matched"))
    if not rows:
        no_match(f"no message in {len(stores)} store(s) carries {' or '.join(map(repr, values))}"
                 + (f" in topic {' or '.join(map(repr, topics))}" if topics else ""))


@spark_group.command("verify")
@stores_argument
@master_option
@label_option
@format_option
@handle_errors
def verify_cmd(stores, master, labels, fmt):
    """Record checks of every commitlog file as parallel tasks (structure, body CRC, stored PHYSICALOFFSET,
    blank record and zero tail) plus file geometry, as one report. Exit 1 when problems are found."""
    from ..spark.jobs import verify

    rep = verify(spark_session(master), stores, labels=_labels(labels, stores), conf=broker_conf())
    emit_document(rep, fmt, _render_verify)
    if not rep["ok"]:
        sys.exit(EXIT_PROBLEMS)


def _render_verify(rep) -> None:
    emit(rep["files"], "table", ("source", "file", "messages", "data_end", "end_kind", "problems"),
         title="CommitLog files")
    if rep["problems"]:
        emit(rep["problems"], "table", ("source", "physical_offset", "check", "detail", "file"), title="Problems")
    print_kv("Verify", [("messages", rep["messages"]), ("problems", len(rep["problems"])),
                        ("result", "OK" if rep["ok"] else "PROBLEMS FOUND")])


@spark_group.command("diff")
@stores_argument
@master_option
@label_option
@click.option("--limit", type=NON_NEGATIVE_LONG, default=None, help="At most this many differing offsets / UNIQ_KEYs.")
@format_option
@handle_errors
def diff_cmd(stores, master, labels, limit, fmt):
    """Replicas of one broker (master and slaves): where their commitlogs diverge, and which messages exist on
    one and not another, by physical offset and by UNIQ_KEY. Exit 1 when they differ."""
    from ..spark.jobs import diff

    if len(stores) < 2:
        raise click.UsageError("diff needs at least two replica stores")
    rep = diff(spark_session(master), stores, labels=_labels(labels, stores), limit=limit,
               conf=broker_conf()).to_dict()
    emit_document(rep, fmt, _render_diff)
    if rep["by_offset"] or rep["by_uniq_key"]:
        sys.exit(EXIT_PROBLEMS)


def _render_diff(rep) -> None:
    emit(rep["replicas"], "table", ("source", "messages", "min_offset", "data_end"), title="Replicas")
    print_kv("Divergence", [("first differing physical offset",
                             rep["first_divergence"] if rep["first_divergence"] is not None else "none")])
    rows = [{"physical_offset": r["physical_offset"], "missing_on": r["missing_on"],
             "variants": "; ".join(f"{','.join(v['sources'])}: {v['topic']} q{v['queue_id']}@{v['queue_offset']} "
                                   f"{v['uniq_key']} crc={v['record_crc32']}" for v in r["variants"])}
            for r in rep["by_offset"]]
    if rows:
        emit(rows, "table", ("physical_offset", "missing_on", "variants"), title="By physical offset",
             cell_width=120)
    if rep["by_uniq_key"]:
        emit(rep["by_uniq_key"], "table", ("uniq_key", "topic", "physical_offset", "on", "missing_on"),
             title="By UNIQ_KEY")


@spark_group.command("dledger-peers")
@click.argument("group_dirs", nargs=-1, type=click.Path(exists=False, file_okay=False, dir_okay=True))
@click.option("--group", "group_specs", multiple=True, metavar="NAME=PEER,PEER[,...]",
              help="A group given by name and its peers' store copies (repeatable), for copies not laid out as "
                   "one directory per group.")
@master_option
@format_option
@handle_errors
def dledger_peers_cmd(group_dirs, group_specs, master, fmt):
    """`dledger-peers` for many DLedger groups, one Spark task per group. Each GROUP_DIR holds one group's
    member copies - one subdirectory per peer (a store root or its dledger-<selfId> directory), or the
    dledger-<selfId> directories themselves - and names the group; --group NAME=PEER,PEER,... names the peers
    directly. One row per group: last index and term per peer, the common prefix, the first divergent index
    and how, what the elected leader makes each follower truncate (JSON: the `dledger-peers` document plus
    "group").

    Exit code 1 when a group's peers diverge; a group whose data cannot be read gives a row with "error" and
    the run exits with that error's code."""
    from ..spark.jobs import DLedgerGroup, dledger_group_dir, dledger_peers

    groups = [dledger_group_dir(d, broker_conf()) for d in group_dirs]
    for spec in group_specs:
        name, sep, peers = spec.partition("=")
        if not sep or not name or not peers:
            raise click.UsageError(f"--group {spec!r}: expected NAME=PEER,PEER[,...]")
        groups.append(DLedgerGroup(name, [p for p in peers.split(",") if p]))
    if not groups:
        raise click.UsageError("give GROUP_DIR arguments or --group NAME=PEER,PEER,...")
    for g in groups:
        if len(g.peers) < 2:
            raise click.UsageError(f"group {g.name}: {len(g.peers)} peer(s) found; give two or more")
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise click.UsageError(f"group names repeat ({', '.join(names)}): name them with --group")
    rows = dledger_peers(spark_session(master), groups, broker_conf())
    emit_document(rows, fmt, _render_dledger_peers)
    errors = [r["exit_code"] for r in rows if "error" in r]
    if errors:
        sys.exit(max(errors))
    if any(r["first_divergent_index"] is not None for r in rows):
        sys.exit(EXIT_PROBLEMS)


def _render_dledger_peers(rows) -> None:
    def per_peer(r, fn):
        return "; ".join(f"{p['label']}: {fn(p)}" for p in r["peers"])

    table = []
    for r in rows:
        if "error" in r:
            table.append({"group": r["group"], "how": f"error: {r['error']}"})
            continue
        div = r["divergence"]
        table.append({
            "group": r["group"], "peers": len(r["peers"]), "leader": r["leader"],
            "last_index/term": per_peer(r, lambda p: f"{p['last_index']}/{p['last_term']}"),
            "common_prefix": r["common_prefix_last_index"], "first_divergent": r["first_divergent_index"],
            "how": f"{div['how']}: {div['detail']}" if div else "no divergence",
            "truncations": per_peer(r, lambda p: f"{p['would_truncate']} from {p['truncate_from']}"
                                    if p["would_truncate"] else ("leader" if p["role"] == "leader" else "0"))})
    # peer labels are store paths (identifiers): never cut
    emit(table, "table", ("group", "peers", "leader", "last_index/term", "common_prefix", "first_divergent", "how",
                          "truncations"), title="DLedger groups", cell_width=4096)
    notes = [(r["group"], n) for r in rows for n in r.get("notes", [])]
    if notes:
        print_kv("Notes", [(g, n) for g, n in notes])


COMMANDS = [spark_group]
