"""`store-info`: which RocketMQ generation (4.x or 5.x) wrote a store, and the evidence."""

from __future__ import annotations

import click

from ..store import Store
from ..store.detect import detect_store
from ._params import broker_version_option, store_argument
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
    st = Store.open(store)
    d = detect_store(st, broker_version)

    def render(doc):
        print_kv("store", [("root", st.root), ("version guess", d.version_guess), ("version used", d.version),
                           ("consume queue", d.consume_queue_kind), ("release", d.release_sentence)]
                 + [("layout", x) for x in d.layout_sentences()])
        if d.dledger:  # DLedger mode (issue 14)
            print_kv("DLedger", [(k, v) for k, v in d.dledger.items() if not isinstance(v, list)])
        emit(({"signal": e.signal, "found": "yes" if e.found else "no", "implies": e.implies, "detail": e.detail}
              for e in d.evidence), "table", ("signal", "found", "implies", "detail"), cell_width=90)

    emit_document(d.to_dict(), fmt, render)


COMMANDS = [store_info]
