"""`tiered-index-lookup` and `compact-index`: the 5.x tiered-store index files (unsealed or compacted)."""

from __future__ import annotations

import os
import string

import click

from ..store.layout import ensure_output_outside
from ._params import (
    INDEX_MAX,
    INDEX_SLOTS,
    NON_NEGATIVE_LONG,
    TIME,
    TIME_FORMS,
    broker_version_option,
    check_index_geometry,
)
from .output import emit, format_option, handle_errors, ms_to_iso, no_match, note, warn


def _open_tiered(path, hash_slots, max_items):
    check_index_geometry(hash_slots, max_items, "--hash-slots", "--max-items")
    from ..store.tiered_index import TieredIndexFile, tiered_index_paths

    return [TieredIndexFile(p, hash_slots, max_items) for p in tiered_index_paths(path)]


tiered_geometry = [
    click.option("--hash-slots", type=INDEX_SLOTS, default=None,
                 help="tieredStoreIndexFileMaxHashSlotNum of the broker (inferred when omitted)."),
    click.option("--max-items", type=INDEX_MAX, default=None, help="tieredStoreIndexFileMaxIndexNum (unsealed files)."),
]


def _geometry(fn):
    for opt in reversed(tiered_geometry):
        fn = opt(fn)
    return fn


@click.command("tiered-index-lookup")
@click.argument("path", type=click.Path(exists=False))
@click.option("--topic", required=True, help="Topic of the key.")
@click.option("--key", required=True, help="UNIQ_KEY (client msgId) or one KEYS token.")
@click.option("--begin", type=TIME, default=0, help=f"Store time lower bound: {TIME_FORMS}.")
@click.option("--end", type=TIME, default=(1 << 63) - 1, help=f"Store time upper bound: {TIME_FORMS}.")
@click.option("--max-num", type=NON_NEGATIVE_LONG, default=64, show_default=True, help="Stop after this many items.")
@click.option("--stats", is_flag=True, help="Report reads per lookup (slot/item reads, 4 KiB pages) on stderr.")
@_geometry
@broker_version_option
@format_option
@handle_errors
def tiered_index_lookup(path, topic, key, begin, end, max_num, stats, hash_slots, max_items, broker_version, fmt):
    """Look a key up in tiered-store index files (unsealed or compacted layout).

    PATH is a store root (uses tiered_index_file/), a directory of index files, or one file. Items are
    returned in hash-chain order (newest first), newest file first, filtered by hash and time as
    IndexStoreFile does (unsealed: at most 512 chain items; compacted: at most 1024 items per slot).
    Offsets are commit-log offsets in the tiered flat file.
    """
    from ..store.tiered_index import ReadStats, lookup_files

    files = _open_tiered(path, hash_slots, max_items)
    rs = ReadStats()
    found = lookup_files(files, topic, key, max_num, begin, end, rs)
    if not found and len(key) == 32 and key != key.upper() and all(c in string.hexdigits for c in key):
        # a pasted UNIQ_KEY in lower case: the broker indexes it upper case (a KEYS token is case-sensitive, so
        # the key as typed goes first)
        found = lookup_files(files, topic, key.upper(), max_num, begin, end, rs)
        if found:
            note(f"no item carries the key {key!r} as typed; {key.upper()!r}, the UNIQ_KEY as the broker writes it, "
                 "finds them")
    rows = [{"file": f.name, "layout": f.layout, "item": it.item, "hash_code": it.hash_code,
             "topic_id": it.topic_id, "queue_id": it.queue_id, "offset": it.offset, "size": it.size,
             "time_diff": it.time_diff, "store_timestamp": it.store_timestamp(f.begin_timestamp),
             "store_time": ms_to_iso(it.store_timestamp(f.begin_timestamp))} for f, it in found]
    emit(rows, fmt, ("file", "layout", "topic_id", "queue_id", "offset", "size", "store_time"))
    if stats:
        click.echo(f"reads: {rs.read_calls} read calls, {rs.pages} distinct 4 KiB pages, {rs.bytes} bytes",
                   err=True)
    if not rows:
        window = "" if (begin, end) == (0, (1 << 63) - 1) else f" in [{ms_to_iso(begin)}, {ms_to_iso(end)}]"
        # PATH is the store, its tiered_index_file/ or one file in it: the topics are the store's queues
        up = os.path.abspath(path)
        root = next((d for d in (up, os.path.dirname(up), os.path.dirname(os.path.dirname(up)))
                     if os.path.isdir(os.path.join(d, "consumequeue"))), None)
        no_match(f"no item for the key {key!r} of topic {topic!r}{window} in {len(files)} tiered index file(s)",
                 topic=topic, store_root=root)


@click.command("compact-index")
@click.argument("path", type=click.Path(exists=False))
@click.option("--out", "out_dir", required=True, type=click.Path(), help="NEW directory for the compacted files.")
@_geometry
@broker_version_option
@format_option
@handle_errors
def compact_index(path, out_dir, hash_slots, max_items, broker_version, fmt):
    """Convert unsealed tiered index files into the compacted layout (IndexStoreFile.compactToNewFile).

    Each slot's hash chain becomes one contiguous run of 28-byte items (newest first); the slot holds
    (position, length). Output goes to --out, which must not be inside the inspected store.
    """
    from ..analyses.compact_index import compact_index_file
    from ..store.tiered_index import COMPACTED

    # PATH is a store root, its tiered_index_file/ or one file in it: the store is the first of these
    # directories that holds a commitlog/, else PATH's directory
    root = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    parent = os.path.dirname(root)
    ensure_output_outside(parent if os.path.isdir(os.path.join(parent, "commitlog")) else root, out_dir)
    files = _open_tiered(path, hash_slots, max_items)
    from ..sinks.staging import Staged
    from ..store.layout import ensure_new_directory

    ensure_new_directory(out_dir)
    staged = Staged(out_dir, "the compacted index files", directory=True)  # all of them or none (sinks.staging)
    rows = []
    for f in files:
        if f.layout == COMPACTED:
            warn(f"{f.path}: already compacted, skipped")
            continue
        row = compact_index_file(f, staged.path).to_dict()
        row["output"] = staged.final_name(row["output"])
        rows.append(row)
    staged.commit()
    emit(rows, fmt, ("source", "output", "hash_slots", "items", "slots_used", "source_size", "output_size"))


COMMANDS = [tiered_index_lookup, compact_index]
