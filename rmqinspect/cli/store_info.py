"""`store-info`: which RocketMQ generation (4.x or 5.x) wrote a store, and the evidence."""

from __future__ import annotations

import click

from ..store import Store
from ..store.detect import detect_store
from ._params import broker_conf, broker_version_option, store_argument
from .output import emit, emit_document, format_option, handle_errors, print_kv


@click.command("store-info")
@store_argument
@broker_version_option
@format_option
@handle_errors
def store_info(store, broker_version, fmt):
    """Detect which RocketMQ generation wrote STORE (4.x vs 5.x) and list the evidence.

    Signals: checkpoint fields in use, abort holding a pid, abort.bak, compaction/, V2 records,
    __CRC32# properties, RocksDB files in consumequeue/, timerlog/, timerwheel, batchconsumequeue/,
    tiered_index_file/.
    """
    st = Store.open(store, conf=broker_conf())
    d = detect_store(st, broker_version)
    doc = d.to_dict()
    doc["ha"] = _ha(st)

    def render(doc):
        print_kv("store", [("root", st.root), ("version guess", d.version_guess), ("version used", d.version),
                           ("consume queue", d.consume_queue_kind), ("release", d.release_sentence)]
                 + [("layout", x) for x in d.layout_sentences()])
        if d.dledger:  # DLedger mode
            print_kv("DLedger", [(k, v) for k, v in d.dledger.items() if not isinstance(v, list)])
        _render_ha(doc["ha"])
        emit(({"signal": e.signal, "found": "yes" if e.found else "no", "implies": e.implies, "detail": e.detail}
              for e in d.evidence), "table", ("signal", "found", "implies", "detail"), cell_width=90)

    emit_document(doc, fmt, render)


def _ha(st: Store) -> dict:
    """Which HA mode and role the store (and --broker-config's brokerRole, brokerId, enableControllerMode)
    shows, with the epoch file and the checkpoint's confirmPhyOffset."""
    from ..store.epoch import ha_identity, read_epoch_checkpoint
    from ._params import broker_conf

    epochs = read_epoch_checkpoint(st.root)
    cp = st.checkpoint
    confirm = cp.confirm_phy_offset if cp else None
    ident = ha_identity(st.root, dledger=st.layout.dledger is not None, epoch_file=epochs,
                        confirm_phy_offset=confirm, conf=broker_conf())
    return {**ident.to_dict(), "checkpoint_confirm_phy_offset": confirm, "epoch_file": epochs.to_dict()}


def _render_ha(ha: dict) -> None:
    """The HA block of the table output, when the store or broker.conf says something: controller mode, a role or
    brokerId from broker.conf, or a problem with the epoch file (a classic store with no evidence and a DLedger
    store, whose block is above, print none; the JSON always has ``ha``)."""
    if ha["mode"] == "dledger" or (ha["mode"] == "classic" and ha["role"] is None and ha["broker_id"] is None
                                   and not ha["epoch_file"]["problems"]):
        return
    ents = ha["epoch_file"]["entries"]
    rows = [("HA mode", f"{ha['mode']} ({ha['mode_evidence']})"),
            ("role", f"{ha['role'] or 'unknown'} ({ha['role_evidence']})"),
            ("brokerId", f"{ha['broker_id'] if ha['broker_id'] is not None else 'unknown'} "
                         f"({ha['broker_id_evidence']})")]
    if ha["mode"] == "controller":
        rows.append(("checkpoint confirmPhyOffset", ha["checkpoint_confirm_phy_offset"]))
        rows.append(("epochs", " ".join(f"{e['epoch']}-{e['start_offset']}" for e in ents) or "none"))
        rows.append(("epoch file read", ha["epoch_file"]["used"] or "no entries"))
    rows += [("problem", p) for p in ha["epoch_file"]["problems"]]
    print_kv("HA", rows)


COMMANDS = [store_info]
