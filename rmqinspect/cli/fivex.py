"""RocketMQ 5.x structures: `store-info` (4.x/5.x detection), `config`, `rocksdb-cq`, `timers`,
`tiered-index-lookup`, `compact-index`, `batch-cq`, `gc`."""

from __future__ import annotations

import sys

import click

from ..store import Store
from ..store.detect import detect_store
from ..store.errors import EXIT_PROBLEMS, StoreNotFoundError, UnsafeOutputError
from ._params import TIME, store_argument
from .output import emit, emit_document, format_option, handle_errors, ms_to_iso, print_kv, warn

broker_version_option = click.option(
    "--broker-version", default=None, metavar="VERSION",
    help="Override store detection (e.g. 4.9.8, 5.3.3, 4.x, 5.x).")

CQ_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "size", "tags_code", "store_timestamp")


def _detect(st: Store, broker_version: str | None):
    return detect_store(st, broker_version)


# -- store-info ------------------------------------------------------------------------------------
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
    d = _detect(st, broker_version)

    def render(doc):
        print_kv("store", [("root", st.root), ("version guess", d.version_guess), ("version used", d.version),
                           ("consume queue", d.consume_queue_kind)])
        emit(({"signal": e.signal, "found": "yes" if e.found else "no", "implies": e.implies, "detail": e.detail}
              for e in d.evidence), "table", ("signal", "found", "implies", "detail"), cell_width=90)

    emit_document(d.to_dict(), fmt, render)


# -- config ----------------------------------------------------------------------------------------
@click.command("config")
@store_argument
@click.option("--only", type=click.Choice(("topics", "subscriptionGroups", "consumerOffsets", "delayOffsets")),
              help="Show one table only.")
@broker_version_option
@format_option
@handle_errors
def config_cmd(store, only, broker_version, fmt):
    """Decode config/*.json (topics, subscription groups, consumer offsets, delay offsets).

    fastjson's unquoted integer keys are accepted; when a main file is missing, empty or corrupt the
    .bak file is used (as ConfigManager.load does) and a warning says so.
    """
    from ..store.brokerconfig import read_broker_config

    st = Store.open(store)
    cfg = read_broker_config(st.layout.config_dir)
    for ld in cfg.loads.values():
        if ld.source == "bak":
            warn(f"{ld.path}: {ld.reason}")
    for p in cfg.problems:
        warn(p)
    doc = cfg.to_dict()
    if only:
        doc = {"files": {only: doc["files"][only]}, only: doc[only], "problems": cfg.problems}
    if fmt != "table":
        emit_document(doc, fmt)
    else:
        emit(({"file": ld.name, "source": ld.source, "used": ld.used or "", "reason": ld.reason}
              for k, ld in cfg.loads.items() if not only or k == only), "table",
             ("file", "source", "used", "reason"), title="config files", cell_width=100)
        for key in ("topics", "subscriptionGroups", "consumerOffsets", "delayOffsets"):
            if key in doc and doc[key]:
                click.echo("")
                emit(doc[key], "table", title=key)
    if any(ld.source == "bak" for ld in cfg.loads.values()) or cfg.problems:
        sys.exit(EXIT_PROBLEMS)


# -- rocksdb-cq ------------------------------------------------------------------------------------
@click.command("rocksdb-cq")
@store_argument
@click.option("--topic", help="Only this topic.")
@click.option("--queue", "queue_id", type=int, help="Only this queue id (with --topic).")
@click.option("--from", "from_", type=int, default=None, help="First logical (queue) offset.")
@click.option("--count", type=int, default=None, help="At most this many entries per queue.")
@click.option("--list", "list_only", is_flag=True, help="List queues with min/max offsets instead of entries.")
@click.option("--offsets", is_flag=True, help="Dump the offset column family (max/min rows, checkpoint).")
@click.option("--compare-file-cq", "compare_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Migration check: compare with the file consume queue in this consumequeue/ directory "
                   "(e.g. the same store's, written in double-write mode). Exit 1 on differences.")
@broker_version_option
@format_option
@handle_errors
def rocksdb_cq(store, topic, queue_id, from_, count, list_only, offsets, compare_dir, broker_version, fmt):
    """List a RocksDB ConsumeQueue (5.x storeType=defaultRocksDB): entries of one queue or all queues.

    Opens a private snapshot of consumequeue/ (RocksDB writes into any directory it opens), never the
    store itself. Columns and NDJSON keys are those of the file `cq` command, plus store_timestamp.
    """
    from ..store.rocksdb_cq import RocksDBConsumeQueueStore

    st = Store.open(store)
    with RocksDBConsumeQueueStore(st.layout.consumequeue_dir) as db:
        qs = [q for q in db.queues() if (topic is None or q.topic == topic)
              and (queue_id is None or q.queue_id == queue_id)]
        if topic is not None and not qs:
            raise StoreNotFoundError(f"no RocksDB consume queue rows for topic {topic!r}"
                                     + (f" queue {queue_id}" if queue_id is not None else ""),
                                     st.layout.consumequeue_dir)
        if compare_dir:
            from ..analyses.cq_compare import compare_consume_queues
            from ..store.rocksdb_cq import ConsumeQueues

            files = [q for q in ConsumeQueues(compare_dir, "file") if (topic is None or q.topic == topic)
                     and (queue_id is None or q.queue_id == queue_id)]
            res = compare_consume_queues(qs, files)
            rows = [{"topic": d.topic, "queue_id": d.queue_id, "only_in": {"left": "rocksdb", "right": "file"}.get(
                d.only_in), "rocksdb_bounds": d.left_bounds, "file_bounds": d.right_bounds,
                "mismatches": d.mismatch_count, "examples": d.mismatches} for d in res.diffs]
            emit(rows, fmt, ("topic", "queue_id", "only_in", "rocksdb_bounds", "file_bounds", "mismatches"))
            click.echo(f"{res.queues_compared} queues, {res.entries_compared} entries compared, "
                       f"{len(res.diffs)} queues differ", err=True)
            if res.diffs:
                sys.exit(EXIT_PROBLEMS)
            return
        if offsets:
            ot = db.offset_table
            rows = []
            for kind, table in (("max", ot.max), ("min", ot.min)):
                for (t, q), (phy, off) in sorted(table.items()):
                    if (topic is None or t == topic) and (queue_id is None or q == queue_id):
                        rows.append({"topic": t, "queue_id": q, "kind": kind, "physical_offset": phy,
                                     "queue_offset": off})
            if ot.checkpoint is not None and topic is None:
                rows.append({"topic": "CHECKPOINT_TOPIC", "queue_id": 0, "kind": "max",
                             "physical_offset": ot.checkpoint, "queue_offset": None})
            emit(rows, fmt, ("topic", "queue_id", "kind", "physical_offset", "queue_offset"))
            for p in ot.problems:
                warn(p)
            return
        if list_only:
            def qrows():
                for q in qs:
                    lo, hi, n = q.bounds()
                    yield {"topic": q.topic, "queue_id": q.queue_id, "min_offset": lo, "max_offset": hi,
                           "entries": n, "max_physical_offset": q.max_physical_offset}
            emit(qrows(), fmt, ("topic", "queue_id", "min_offset", "max_offset", "entries", "max_physical_offset"))
            return

        def erows():
            for q in qs:
                for off, phy, size, tags, ts in q.entries(from_, count, with_timestamp=True):
                    yield {"topic": q.topic, "queue_id": q.queue_id, "queue_offset": off, "physical_offset": phy,
                           "size": size, "tags_code": tags, "store_timestamp": ts}
        emit(erows(), fmt, CQ_COLUMNS)



# -- tiered index --------------------------------------------------------------------------------
def _open_tiered(path, hash_slots, max_items):
    from ..store.tiered_index import TieredIndexFile, tiered_index_paths

    return [TieredIndexFile(p, hash_slots, max_items) for p in tiered_index_paths(path)]


tiered_geometry = [
    click.option("--hash-slots", type=int, default=None,
                 help="tieredStoreIndexFileMaxHashSlotNum of the broker (inferred when omitted)."),
    click.option("--max-items", type=int, default=None, help="tieredStoreIndexFileMaxIndexNum (unsealed files)."),
]


def _geometry(fn):
    for opt in reversed(tiered_geometry):
        fn = opt(fn)
    return fn


@click.command("tiered-index-lookup")
@click.argument("path", type=click.Path(exists=False))
@click.option("--topic", required=True, help="Topic of the key.")
@click.option("--key", required=True, help="UNIQ_KEY (client msgId) or one KEYS token.")
@click.option("--begin", type=TIME, default=0, help="Store time lower bound (epoch ms or ISO).")
@click.option("--end", type=TIME, default=(1 << 63) - 1, help="Store time upper bound (epoch ms or ISO).")
@click.option("--max-num", type=int, default=64, show_default=True, help="Stop after this many items.")
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
    rows = [{"file": f.name, "layout": f.layout, "item": it.item, "hash_code": it.hash_code,
             "topic_id": it.topic_id, "queue_id": it.queue_id, "offset": it.offset, "size": it.size,
             "time_diff": it.time_diff, "store_timestamp": it.store_timestamp(f.begin_timestamp),
             "store_time": ms_to_iso(it.store_timestamp(f.begin_timestamp))} for f, it in found]
    emit(rows, fmt, ("file", "layout", "topic_id", "queue_id", "offset", "size", "store_time"))
    if stats:
        click.echo(f"reads: {rs.read_calls} read calls, {rs.pages} distinct 4 KiB pages, {rs.bytes} bytes",
                   err=True)
    if not rows:
        sys.exit(3)


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
    import os

    from ..analyses.compact_index import compact_index_file
    from ..store.layout import StoreLayout
    from ..store.tiered_index import COMPACTED

    root = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    for r in {root, os.path.dirname(root)}:
        if StoreLayout(r, [], "", "", "", "", "").within(out_dir) and (
                os.path.isdir(os.path.join(r, "commitlog")) or r == root):
            raise UnsafeOutputError("output directory is inside the inspected store", out_dir)
    files = _open_tiered(path, hash_slots, max_items)
    rows = []
    for f in files:
        if f.layout == COMPACTED:
            warn(f"{f.path}: already compacted, skipped")
            continue
        rows.append(compact_index_file(f, out_dir).to_dict())
    emit(rows, fmt, ("source", "output", "hash_slots", "items", "slots_used", "source_size", "output_size"))



# -- timers ---------------------------------------------------------------------------------------
@click.command("timers")
@store_argument
@click.option("--due-before", type=TIME, default=None, help="Only timers whose delivery time is before this.")
@click.option("--pending", is_flag=True, help="Only timers the wheel will still fire: not yet dequeued (delivery >= "
              "timercheck lastReadTimeMs) and not cancelled by a delete marker in their slot.")
@click.option("--precision-ms", type=int, default=1000, show_default=True, help="timerPrecisionMs of the broker.")
@broker_version_option
@format_option
@handle_errors
def timers(store, due_before, pending, precision_ms, broker_version, fmt):
    """List scheduled (timer) messages: timerlog/ units, their delivery time and the commit-log record
    in rmq_sys_wheel_timer each points to (REAL_TOPIC, UNIQ_KEY, TIMER_OUT_MS), checked against the
    timerwheel and config/timercheck.
    """
    from ..analyses.timers import list_timers

    st = Store.open(store)
    rep = list_timers(st, due_before, precision_ms)
    for p in rep.problems:
        warn(p)

    def rows():
        for r in rep.rows:
            if pending and r.state != "pending":
                continue
            d = r.to_dict()
            d["delivery"] = ms_to_iso(r.delivery_time)
            yield d

    emit(rows(), fmt, ("timerlog_pos", "kind", "state", "delivery", "commitlog_offset", "size", "real_topic",
                       "real_queue_id", "uniq_key", "in_wheel", "cancelled_by"))
    if fmt == "table":
        c = rep.counts()
        print_kv("the wheel after load", [
            ("pending (will fire)", f"{c['pending']} ({c['pending_normal']} normal, {c['pending_roll']} roll)"),
            ("cancelled by a delete marker", c["cancelled"]), ("dequeued (slot before lastReadTimeMs)", c["dequeued"]),
            ("delete markers", c["delete_markers"])])
    if rep.problems or any(r.problems for r in rep.rows):
        for r in rep.rows:
            for p in r.problems:
                warn(f"timerlog @ {r.timerlog_pos}: {p}")
        sys.exit(EXIT_PROBLEMS)



# -- batch-cq -------------------------------------------------------------------------------------
@click.command("batch-cq")
@store_argument
@click.option("--topic", help="Only this topic.")
@click.option("--queue", "queue_id", type=int, help="Only this queue id.")
@click.option("--expand", is_flag=True, help="Decode each INNER_BATCH record and list its inner messages.")
@click.option("--get", "get_offset", type=click.IntRange(min=0), default=None, metavar="OFFSET",
              help="What a consumer pulling at OFFSET gets (DefaultMessageStore.getMessage): needs --topic and --queue.")
@click.option("--max", "max_msg_nums", type=click.IntRange(1, 1 << 20), default=32, show_default=True,
              help="maxMsgNums of the pull (--get).")
@click.option("--broker-role", type=click.Choice(("master", "slave")), default="master", show_default=True,
              help="--get: a SLAVE (offsetCheckInSlave=false) keeps the requested offset as nextBeginOffset on "
              "OFFSET_TOO_SMALL/OVERFLOW answers.")
@broker_version_option
@format_option
@handle_errors
def batch_cq(store, topic, queue_id, expand, get_offset, max_msg_nums, broker_role, broker_version, fmt):
    """List BatchConsumeQueue entries (batchconsumequeue/, 46-byte entries, 5.x queue.type=BatchCQ); with
    --expand, the inner messages of each INNER_BATCH record (logical offset = INNER_BASE + i); with --get, the
    broker's answer to a pull at that offset (whole batches from the base of the one containing it)."""
    from ..formats.constants import SysFlag
    from ..store.batch import BatchConsumeQueue, decode_inner_batch, list_batch_queues

    st = Store.open(store)
    qs = [q for q in list_batch_queues(st.root) if (topic is None or q[0] == topic)
          and (queue_id is None or q[1] == queue_id)]
    if not qs:
        raise StoreNotFoundError("no batch consume queue" + (f" for topic {topic!r}" if topic else ""),
                                 st.root)
    if get_offset is not None:
        from ..analyses.get_message import GetMessageOptions, batch_get_message

        if topic is None or queue_id is None:
            raise click.UsageError("--get needs --topic and --queue")
        res = batch_get_message(BatchConsumeQueue(*qs[0]), get_offset, max_msg_nums, st.commitlog,
                                GetMessageOptions(slave=broker_role == "slave"))

        def render(doc):
            print_kv(f"getMessage {topic}/{queue_id} @ {get_offset}", [
                ("status", res.status), ("nextBeginOffset", res.next_begin_offset),
                ("queue min / max", f"{res.min_offset} / {res.max_offset}"),
                ("batches / messages", f"{res.msg_count4commercial} / {res.message_count}"),
                ("batch base offsets", " ".join(map(str, res.message_queue_offsets))),
                ("commit-log offsets", " ".join(map(str, res.physical_offsets)))])
            for n in res.notes:
                warn(n)

        emit_document(res.to_dict(), fmt, render)
        return

    def rows():
        for t, q, d in qs:
            bcq = BatchConsumeQueue(t, q, d)
            for e in bcq.entries():
                base = {"topic": t, "queue_id": q, **e}
                if not expand:
                    yield base
                    continue
                m = st.commitlog.read_message(e["physical_offset"])
                if not m.sys_flag & SysFlag.INNER_BATCH:
                    yield {**base, "inner_index": None, "queue_offset": m.queue_offset,
                           "properties": m.properties, "body_size": len(m.body)}
                    continue
                for im in decode_inner_batch(m.body, m.queue_offset, m.file, m.physical_offset):
                    yield {**base, "inner_index": im.index, "queue_offset": im.queue_offset,
                           "properties": im.properties, "body_size": len(im.body)}

    cols = ("topic", "queue_id", "msg_base_offset", "batch_size", "physical_offset", "size", "tags_code")
    if expand:
        cols = ("topic", "queue_id", "queue_offset", "physical_offset", "inner_index", "body_size", "properties")
    emit(rows(), fmt, cols)



# -- gc ---------------------------------------------------------------------------------------------
@click.command("gc")
@store_argument
@click.option("--dry-run", is_flag=True, required=True, help="Required: only report (nothing is ever deleted).")
@click.option("--now", type=TIME, default=None, help="Pretend the clean services run at this time (default: now).")
@click.option("--file-reserved-hours", type=float, default=72, show_default=True, help="fileReservedTime.")
@click.option("--delete-when", default="04", show_default=True, help="deleteWhen: ';'-separated local hours.")
@click.option("--disk-ratio", type=float, default=None,
              help="Disk used ratio 0..1 of the broker's partition (default: measured here, which is the copy's).")
@click.option("--disk-max-used-ratio", type=int, default=75, show_default=True, help="diskMaxUsedSpaceRatio (%).")
@click.option("--no-clean-forcibly", is_flag=True, help="cleanFileForciblyEnable=false.")
@click.option("--manual", is_flag=True, help="An admin triggered deletion (manualDeleteFileSeveralTimes).")
@click.option("--tz", default=None, help="Broker time zone for deleteWhen (IANA name; default: local).")
@click.option("--cq-format", type=click.Choice(("auto", "file", "rocksdb")), default="auto", show_default=True)
@broker_version_option
@format_option
@handle_errors
def gc(store, dry_run, now, file_reserved_hours, delete_when, disk_ratio, disk_max_used_ratio, no_clean_forcibly,
       manual, tz, cq_format, broker_version, fmt):
    """Which CommitLog, ConsumeQueue and IndexFile files the broker's clean services would delete now and
    why (expiry by mtime + fileReservedTime, deleteWhen hour, disk-ratio forcing, batch of 10, never the
    newest file), the corrected CQ min offsets, and the unconsumed messages per consumer group
    (config/consumerOffset.json) that deletion destroys. File mtimes must be those of the broker: copy
    stores with `cp -a` / `rsync -t`.
    """
    import time as _time

    from ..analyses.gc import GcSettings, plan_gc
    from ..store.rocksdb_cq import open_consume_queues

    zone = None
    if tz:
        from zoneinfo import ZoneInfo

        try:
            zone = ZoneInfo(tz)
        except Exception:
            raise click.BadParameter(f"unknown time zone {tz!r}", param_hint="--tz")
    st = Store.open(store)
    settings = GcSettings(now if now is not None else int(_time.time() * 1000), file_reserved_hours, delete_when,
                          disk_ratio, disk_max_used_ratio, clean_file_forcibly_enable=not no_clean_forcibly,
                          manual=manual, tz=zone, broker_major=_detect(st, broker_version).major)
    with open_consume_queues(st, None if cq_format == "auto" else cq_format) as qs:
        plan = plan_gc(st, settings, list(qs))
    if fmt != "table":
        emit_document(plan.to_dict(), fmt)
    else:
        print_kv("gc dry run", [("triggered", ", ".join(plan.triggers) or "no"),
                                ("disk ratio", plan.disk_ratio), ("clean at once", plan.clean_at_once),
                                ("commitlog min offset", f"{plan.commitlog_min_offset_before} -> "
                                                         f"{plan.commitlog_min_offset_after}")])
        emit(({"kind": f.kind, "file": f.path[len(st.root) + 1:], "delete": "DELETE" if f.delete else "keep",
               "reason": f.reason} for f in plan.files), "table", ("kind", "file", "delete", "reason"),
             cell_width=100)
        if plan.losses:
            click.echo("")
            emit((x.to_dict() for x in plan.losses), "table", title="unconsumed messages destroyed")
        for n in plan.notes:
            click.echo(f"note: {n}")
    if plan.losses:
        sys.exit(EXIT_PROBLEMS)


COMMANDS = [store_info, config_cmd, rocksdb_cq, tiered_index_lookup, compact_index, timers, batch_cq, gc]
