"""`dledger-peers`: members of one DLedger group side by side (analyses.dledger.compare_peers)."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS
from ..store import Store
from ._params import broker_conf
from .output import emit, emit_document, format_option, handle_errors, print_kv

PEER_COLUMNS = ("peer", "self_id", "role", "entries", "last_index", "last_term", "data_end", "committed_index",
                "curr_term", "matches_leader_to", "would_truncate", "truncate_from", "would_receive", "walk_stop")


@click.command("dledger-peers")
@click.argument("stores", nargs=-1, required=True, type=click.Path(exists=False, file_okay=False, dir_okay=True))
@format_option
@handle_errors
def dledger_peers(stores, fmt):
    """Compare the DLedger members STORES (two or more copies of one group's stores, each a store root or a
    dledger-<selfId> directory): last index and term per peer, the common prefix, the first index where
    they differ and how (term, pos, size, bytes, missing), and what a new leader - the peer DLedger's vote
    elects: highest last term, then highest last index - would make each follower truncate and receive.

    Exit code 1 when the peers diverge (a first divergent index exists), 0 when every peer holds the same log.
    """
    if len(stores) < 2:
        raise click.UsageError("give at least two stores (peers of one DLedger group)")
    from ..analyses.dledger import compare_peers  # imports numpy: not at --help

    opened = [Store.open(s, conf=broker_conf()) for s in stores]
    try:
        rep = compare_peers(opened, labels=list(stores))
    finally:
        for st in opened:
            st.close()
    doc = rep.to_dict()

    def render(d):
        div = d["divergence"]
        print_kv("DLedger peers", [("leader (would be elected)", d["leader"]),
                                   ("common prefix up to index", d["common_prefix_last_index"]),
                                   ("first divergent index", d["first_divergent_index"]),
                                   ("how", f"{div['how']}: {div['detail']}" if div else "no divergence")]
                 + [("note", n) for n in d["notes"]])
        # store paths are identifiers: never cut (a wide cell)
        emit(({"peer": p["label"], **p} for p in d["peers"]), "table", PEER_COLUMNS, cell_width=4096)

    emit_document(doc, fmt, render)
    if rep.first_divergent_index is not None:
        sys.exit(EXIT_PROBLEMS)


COMMANDS = [dledger_peers]
