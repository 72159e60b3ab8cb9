"""`peers`: replicas of one broker group side by side (analyses.peers.compare_replicas); DLedger stores go to
``dledger-peers``."""

from __future__ import annotations

import os
import sys

import click

from ..errors import EXIT_PROBLEMS
from ..store import Store
from ..store.broker_conf import read_broker_conf
from ._params import broker_conf
from .output import emit, emit_document, format_option, handle_errors, print_kv, render

REPLICA_COLUMNS = ("replica", "mode", "role", "broker_id", "min_offset", "max_offset", "messages", "confirm",
                   "last_epoch", "epochs", "will_start", "stale_records")
PAIR_COLUMNS = ("a", "b", "verdict", "common_prefix_end", "common_msgs", "consistent_point", "only_on_a",
                "only_on_b")
TRUNC_COLUMNS = ("replica", "kind", "point", "cuts_msgs", "cut_from", "cut_to", "receives")
LOST_COLUMNS = ("holder", "physical_offset", "topic", "queue_id", "queue_offset", "keys", "uniq_key", "in_cq",
                "epoch")


def short_labels(paths: list[str]) -> list[str]:
    """The fewest trailing path components that tell the stores apart (``master/store``, ``slave/store``): the
    tables stay readable; the legend and the JSON keep the whole paths."""
    parts = [os.path.normpath(p).split(os.sep) for p in paths]
    for k in range(1, max(len(x) for x in parts) + 1):
        labels = ["/".join(x[-k:]) for x in parts]
        if len(set(labels)) == len(labels):
            return labels
    return list(paths)


def _per_topic(per_queue: dict[str, int]) -> str:
    """``LogTopic 38 (0: 6, 1: 9, ...)`` per topic: each topic name once."""
    topics: dict[str, list[tuple[int, int]]] = {}
    for key, n in per_queue.items():
        t, _, q = key.rpartition("/")
        topics.setdefault(t, []).append((int(q), n))
    return "; ".join(f"{t} {sum(n for _, n in qs)} ({', '.join(f'{q}: {n}' for q, n in sorted(qs))})"
                     for t, qs in sorted(topics.items()))


def _epochs_text(r: dict) -> str:
    ents = r["epochs"]["entries"]
    if not ents:
        return "-"
    return " ".join(f"{e['epoch']}@{e['start_offset']}" for e in ents) + (" (.bak)" if r["epochs"]["used"] == "bak"
                                                                         else "")


@click.command("peers")
@click.argument("stores", nargs=-1, required=True, type=click.Path(exists=False, file_okay=False, dir_okay=True))
@click.option("--conf", "confs", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="Each copy's broker.conf, in the order of STORES (brokerRole, brokerId, enableControllerMode, "
                   "duplicationEnable); repeat once per store, or leave out.")
@click.option("--master", default=None, help="The STORE the others rejoin (default: the one with the newest "
                                             "confirmed data).")
@click.option("--list", "list_messages", is_flag=True, help="List every message of the loss windows and cuts in "
                                                            "the table output (JSON always has them).")
@format_option
@handle_errors
def peers(stores, confs, master, list_messages, fmt):
    """Compare replicas of one broker group (classic master/slave or controller mode): each copy's recovered end,
    confirm offset and epochs; the overlap byte by byte (a difference below where both must agree is corruption or
    a wrong pairing); the loss window per direction as messages per topic/queue with keys and ids; which copy has
    the newest confirmed data; where each copy truncates when it rejoins (findConsistentPoint of both epoch files)
    and what that cuts; whether the broker would load each copy at all; consumer offsets past the survivor's
    queues. DLedger members get the `dledger-peers` answer (by entry index and term).

    Exit code 1 when a pair differs where it must not (corruption or a wrong pairing) or a copy would not load.

    \b
    Examples:
      rmqinspect peers master/store slave/store
      rmqinspect peers a/store b/store --conf a/broker.conf --conf b/broker.conf --format json
    """
    from ..analyses.peers import compare_replicas

    if len(stores) < 2:
        raise click.UsageError("give at least two stores (replicas of one broker group)")
    if confs and len(confs) != len(stores):
        raise click.UsageError(f"--conf given {len(confs)} times for {len(stores)} stores: give one per store, in "
                               "order, or none")
    parsed = [read_broker_conf(c) for c in confs] if confs else None
    opened = [Store.open(s, conf=broker_conf()) for s in stores]
    try:
        dledger = [st.layout.dledger is not None for st in opened]
        if all(dledger):
            # DLedger mode: the members are compared by entry index and term (analyses.dledger, `dledger-peers`)
            from ..analyses.dledger import compare_peers

            drep = compare_peers(opened, labels=list(stores))
            emit_document({"mode": "dledger", **drep.to_dict()}, fmt, lambda d: _render_dledger(d))
            if drep.first_divergent_index is not None:
                sys.exit(EXIT_PROBLEMS)
            return
        if any(dledger):
            raise click.UsageError("some STORES are DLedger members and some are not: DLedger replicates entries by "
                                   "index and term, not by commit-log offset; compare like with like")
        try:
            labels = short_labels(list(stores))
            if master is not None and master in stores:
                master = labels[list(stores).index(master)]
            rep = compare_replicas(opened, labels=labels, confs=parsed, master=master)
        except ValueError as e:
            raise click.UsageError(str(e)) from e
    finally:
        for st in opened:
            st.close()
    doc = rep.to_dict()

    def table(d):
        print_kv("Replicas", [("HA mode", d["mode"]),
                              ("newest confirmed data", f"{d['newest_confirmed']['replica']}: "
                                                        f"{d['newest_confirmed']['why']}"),
                              ("rejoin master", f"{d['rejoin_master']['replica']}: {d['rejoin_master']['why']}")]
                 + [(f"replica {r['label']}", r["root"]) for r in d["replicas"] if r["label"] != r["root"]]
                 + [("note", n) for n in d["notes"]])
        rows = []
        for r in d["replicas"]:
            rows.append({"replica": r["label"], "mode": r["ha"]["mode"], "role": r["ha"]["role"] or "?",
                         "broker_id": r["ha"]["broker_id"], "min_offset": r["min_offset"],
                         "max_offset": r["max_offset"], "messages": r["messages"], "confirm": r["confirm_offset"],
                         "last_epoch": r["last_epoch"], "epochs": _epochs_text(r), "will_start": r["will_start"],
                         "stale_records": r["stale_records"]["count"]})
        emit(rows, "table", REPLICA_COLUMNS, cell_width=4096)
        for r in d["replicas"]:
            if r["load_failure"]:
                print_kv(f"{r['label']}: will not start", [("why", r["load_failure"]["sentence"]),
                                                          ("rule", r["load_failure"]["rule"])])
            if r["unconfirmed"]:
                u = r["unconfirmed"]
                print_kv(f"{r['label']}: unconfirmed tail", [
                    ("range", f"[{u['from_offset']}, {u['to_offset']}) {u['bytes']} bytes, {u['messages']} messages"),
                    ("served", "none of it: the reput dispatches only up to the confirm offset")])
            if r["stale_records"]["count"]:
                s = r["stale_records"]
                print_kv(f"{r['label']}: records past the end", [
                    ("found", f"{s['count']} CRC-valid records in [{s['range'][0]}, {s['range'][1]}) past the "
                              f"recovered end {r['max_offset']}"),
                    ("served", "never: recovery stops at the end; a byte scan that resynchronises on magic codes "
                               "finds them (bytes a truncation reset only in memory, apache/rocketmq#10666)")])
            for p in r["problems"]:
                print_kv(f"{r['label']}: problem", [("what", p)])
        prow = [{"a": p["a"], "b": p["b"], "verdict": p["verdict"], "common_prefix_end": p["common_prefix_end"],
                 "common_msgs": p["common_prefix_messages"], "consistent_point": p["consistent_point"],
                 "only_on_a": p["only_on_a"]["messages"], "only_on_b": p["only_on_b"]["messages"]}
                for p in d["pairs"]]
        emit(prow, "table", PAIR_COLUMNS, cell_width=4096)
        for p in d["pairs"]:
            pairs = [("verdict", p["sentence"])]
            for w in (p["only_on_a"], p["only_on_b"]):
                if w["messages"]:
                    pairs.append((f"only on {w['holder']}", f"[{w['from_offset']}, {w['to_offset']}) {w['bytes']} "
                                                            f"bytes, {w['messages']} messages "
                                                            f"({w['in_consume_queue']} in its consume queues)"))
                    pairs.append(("  per topic (queue: n)", _per_topic(w["per_queue"])))
            print_kv(f"{p['a']} vs {p['b']}", pairs)
        trow = [{"replica": t["replica"], "kind": t["kind"], "point": t["point"],
                 "cuts_msgs": t["cut"]["messages"] if t["cut"] else 0,
                 "cut_from": t["cut"]["from_offset"] if t["cut"] else None,
                 "cut_to": t["cut"]["to_offset"] if t["cut"] else None,
                 "receives": "-" if not t["receives"] else f"[{t['receives'][0]}, {t['receives'][1]})"}
                for t in d["truncations"]]
        emit(trow, "table", TRUNC_COLUMNS, cell_width=4096)
        for t in d["truncations"]:
            print_kv(f"{t['replica']} on rejoin", [("what happens", t["sentence"])])
        for c in d["consumer_offsets_beyond_survivor"]:
            print_kv("consumer offset past the survivor", [("what", c["sentence"])])
        md = d["metadata"]
        if len(md.get("copies_with_config", ())) > 1:
            rows = [(f"topics only in {k}", ", ".join(v)) for k, v in md["topics_only_in"].items()]
            rows += [(f"groups only in {k}", ", ".join(v)) for k, v in md["subscription_groups_only_in"].items()]
            rows += [(f"offsets of {o['group']} on {o['topic']}/{o['queue_id']}",
                      ", ".join(f"{k}: {v}" for k, v in o["offsets"].items())) for o in
                     md["consumer_offset_differences"]]
            print_kv("config/*.json across the copies (a slave's is a periodic copy: differences are its lag)",
                     rows or [("differences", "none")])
        if list_messages:
            lost = [{"holder": w["holder"], **m, "in_cq": m["in_consume_queue"]}
                    for p in d["pairs"] for w in (p["only_on_a"], p["only_on_b"]) for m in w["list"]]
            emit(lost, "table", LOST_COLUMNS, cell_width=4096)

    def lines(doc):
        # one object per line: replicas, pairs, truncations, the messages of every loss window
        for r in doc["replicas"]:
            yield {"kind": "replica", **r}
        for p in doc["pairs"]:
            yield {"kind": "pair", **{k: v for k, v in p.items() if k not in ("only_on_a", "only_on_b")}}
            for w in (p["only_on_a"], p["only_on_b"]):
                for m in w["list"]:
                    yield {"kind": "only_on", "holder": w["holder"], "other": p["b"] if w is p["only_on_a"]
                           else p["a"], **m}
        for t in doc["truncations"]:
            yield {"kind": "truncation", **t}
        for c in doc["consumer_offsets_beyond_survivor"]:
            yield {"kind": "consumer_offset_beyond", **c}

    render(doc, fmt, table, lines=lines)
    if rep.problems or any(r.load_failure is not None for r in rep.replicas):
        sys.exit(EXIT_PROBLEMS)


def _render_dledger(d: dict) -> None:
    from .dledger import PEER_COLUMNS

    div = d["divergence"]
    print_kv("Replicas (DLedger mode: as `rmqinspect dledger-peers`)", [
        ("leader (would be elected)", d["leader"]), ("common prefix up to index", d["common_prefix_last_index"]),
        ("first divergent index", d["first_divergent_index"]),
        ("how", f"{div['how']}: {div['detail']}" if div else "no divergence")] + [("note", n) for n in d["notes"]])
    emit(({"peer": p["label"], **p} for p in d["peers"]), "table", PEER_COLUMNS, cell_width=4096)


COMMANDS = [peers]
