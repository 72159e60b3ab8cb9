"""`decode-commitlog` and `summary`."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_CORRUPT, EXIT_PROBLEMS, CorruptDataError
from ..store import Store
from ..store.walk.parallel import default_jobs
from ._params import (
    NON_NEGATIVE_LONG,
    OFFSET,
    QUEUE_ID,
    TIME,
    TIME_FORMS,
    accepts_v2,
    broker_conf,
    broker_version_option_for,
    jobs_option,
    max_body_option,
    store_argument,
)
from .output import (
    emit,
    emit_document,
    handle_errors,
    ms_to_iso,
    no_match,
    note,
    paragraph,
    print_kv,
    progress,
    render,
    warn,
)

TABLE_COLUMNS = ("physical_offset", "total_size", "topic", "queue_id", "queue_offset", "store_time", "sys_flag",
                 "tags", "keys", "uniq_key", "crc_ok", "body_size")


class MessageFilter:
    """The walk filters of decode-commitlog."""

    def __init__(self, topic=None, queue=None, key=None, tag=None, since=None, until=None, uniq_key=None):
        from ..analyses.rows import RowFilter  # the record readers: not at --help

        self.topic, self.queue, self.key, self.tag = topic, queue, key, tag
        self.uniq_key = uniq_key.upper() if uniq_key else uniq_key  # hex: msgid and UNIQ_KEY are case-blind
        self.time = RowFilter(since=since, until=until)

    def message_ok(self, msg) -> bool:
        if self.queue is not None and msg.queue_id != self.queue:
            return False
        if not self.time.time_ok(msg.store_timestamp):
            return False
        if self.topic is not None and msg.topic != self.topic:
            return False
        if self.key is not None and self.key not in msg.keys:
            return False
        if self.tag is not None and msg.tags != self.tag:
            return False
        if self.uniq_key is not None and (msg.uniq_key or "").upper() != self.uniq_key:
            return False
        return True


def _row(msg, body: str, body_limit: int) -> dict:
    d = msg.to_dict(body, body_limit)
    d["store_time"] = ms_to_iso(msg.store_timestamp)
    return d


def _hexdump(buf, start: int, length: int, base: int) -> str:
    lines = []
    for i in range(0, length, 16):
        chunk = bytes(buf[start + i:start + min(i + 16, length)])
        hx = " ".join(f"{b:02x}" for b in chunk)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{base + i:016x}  {hx:<47}  |{asc}|")
    return "\n".join(lines)


@click.command("decode-commitlog")
@store_argument
@click.option("--offset", type=OFFSET, help="Decode the record at this physical offset (with --count, the next K).")
@click.option("--count", type=NON_NEGATIVE_LONG, default=None,
              help="Number of records to show (default 1 with --offset).")
@click.option("--from", "from_", type=OFFSET, help="Walk from this physical offset (a record boundary).")
@click.option("--to", type=OFFSET, help="Walk up to this physical offset (exclusive).")
@click.option("--topic", help="Only messages stored under this topic.")
@click.option("--queue", type=QUEUE_ID, help="Only this queue id.")
@click.option("--key", help="Only messages whose KEYS contain this key.")
@click.option("--tag", help="Only messages with this TAGS value.")
@click.option("--uniq-key", help="Only the message with this UNIQ_KEY (client msgId).")
@click.option("--since", type=TIME, help=f"Store time >= this: {TIME_FORMS}.")
@click.option("--until", type=TIME, help=f"Store time <= this: {TIME_FORMS}.")
@click.option("--format", "fmt", type=click.Choice(("table", "json", "ndjson", "hex")), default="table",
              show_default=True)
@click.option("--body", type=click.Choice(("none", "text", "hex", "base64")), default="none", show_default=True,
              help="Include the body (decompressed when the record says so; text falls back to hex).")
@max_body_option
@click.option("--keep-going", is_flag=True, help="Report damage and continue with the next file instead of stopping.")
@broker_version_option_for("Read as this RocketMQ version would: before 5.1.0 a V2 record (magic 0xDAA320AB) is "
                           "illegal data. Default: accept V1 and V2.")
@click.option("--snap", is_flag=True, help="With --offset inside a record: decode the record that contains it.")
@handle_errors
def decode_commitlog(store, offset, count, from_, to, topic, queue, key, tag, uniq_key, since, until, fmt, body,
                     max_body_bytes, keep_going, broker_version, snap):
    """Decode CommitLog records: one at --offset, or a walk over a range with filters.

    \b
    Examples:
      rmqinspect decode-commitlog STORE --offset 4660
      rmqinspect decode-commitlog STORE --topic OrderTopic --key ord-15 --format ndjson
    """
    accept_v2 = accepts_v2(broker_version)
    st = Store.open(store, conf=broker_conf())
    cl = st.commitlog
    flt = MessageFilter(topic, queue, key, tag, since, until, uniq_key)
    if offset is not None and from_ is None:
        from_ = offset
        if count is None:
            count = 1
    if offset is not None and count == 1:
        msg = _read_at(cl, offset, accept_v2, snap, fmt)
        _output_messages(iter([msg]), fmt, body, cl, max_body_bytes)
        if msg.problems:
            for p in msg.problems:
                warn(f"{msg.file} @ {msg.physical_offset}: {p}")
            sys.exit(EXIT_CORRUPT)
        return
    damage = []
    start = from_ if from_ is not None else cl.min_offset
    total = (to if to is not None else cl.end_offset) - start

    from ..store.walk.records import Gap

    def on_damage(d) -> None:
        if isinstance(d, Gap):
            warn(f"offsets [{d.start}, {d.end}) have no commitlog file (deleted or missing)")
        else:
            damage.append(d)
            warn(str(d))

    def walk():
        shown = 0
        with progress(total, "walking commitlog", fmt == "table" and count is None) as advance:
            try:
                for msg in cl.messages(from_, to, keep_going=keep_going, accept_v2=accept_v2, on_damage=on_damage):
                    advance(msg.physical_offset + msg.total_size - start)
                    if not flt.message_ok(msg):
                        continue
                    if msg.problems and not keep_going:  # a record the broker serves although it is torn
                        warn(f"{msg.file} @ {msg.physical_offset}: {'; '.join(msg.problems)}")
                    yield msg
                    shown += 1
                    if count is not None and shown >= count:
                        return
            except CorruptDataError as e:  # without --keep-going: what was decoded is shown, then the error
                if shown == 0 and from_ is not None and offset is None:
                    _not_a_boundary_hint(cl, from_, e)
                damage.append(e)

    shown = _output_messages(walk(), fmt, body, cl, max_body_bytes)
    if damage:
        if not keep_going:
            raise damage[0]
        sys.exit(EXIT_PROBLEMS)
    filters = [f"--{n} {v}" for n, v in (("topic", topic), ("queue", queue), ("key", key), ("tag", tag),
                                          ("uniq-key", uniq_key), ("since", since), ("until", until))
               if v is not None]
    if shown == 0 and count != 0:
        span = f" in [{start}, {to if to is not None else cl.end_offset})"
        no_match(f"no record{span} matches {' '.join(filters)}" if filters else f"no record{span}",
                 topic=topic, store_root=st.root)


def _not_a_boundary_hint(cl, from_: int, e: CorruptDataError) -> None:
    """--from inside a record (a DLedger entry's header or body, a message's middle): the error names the record
    that holds the offset, as --offset does."""
    from ..analyses.dump import enclosing_record

    try:
        rec = enclosing_record(cl, from_)
    except (CorruptDataError, ValueError):
        return
    if rec is not None and rec.start != from_:
        e.message += (f"; offset {from_} lies inside the {rec.kind} record at {rec.start} (size {rec.size}): "
                      f"--from {rec.start} walks from there, `dump --offset {from_}` shows the bytes")


def _read_at(cl, offset: int, accept_v2: bool, snap: bool, fmt: str):
    """The record at ``offset``; when none starts there, the error names the record that contains the offset
    (``--snap`` decodes that one instead), and ``--format hex`` still shows the bytes (`dump` shows more)."""
    try:
        return cl.read_message(offset, accept_v2)
    except CorruptDataError as e:
        from ..analyses.dump import enclosing_record, hexdump_lines

        rec = enclosing_record(cl, offset)
        if rec is not None and rec.start != offset:
            if snap:
                note(f"offset {offset} lies inside the record at {rec.start}: decoding that record (--snap)")
                return cl.read_message(rec.start, accept_v2)
            e.message += (f"; offset {offset} lies inside the {rec.kind} record at {rec.start} (size {rec.size}): "
                          f"--snap decodes it, `dump --offset {offset}` shows the bytes")
        if fmt == "hex":
            f, pos = cl.locate(offset)
            claimed = int.from_bytes(bytes(f.buffer[pos:pos + 4]), "big", signed=True) if pos + 4 <= f.size else 0
            n = claimed if 0 < claimed <= 4096 else 256
            click.echo(f"# {f.name} position {pos} physical_offset {offset}: not a readable record; {n} raw bytes")
            click.echo("\n".join(hexdump_lines(bytes(f.buffer[pos:min(pos + n, f.size)]), offset)))
        raise


def _output_messages(msgs, fmt, body, cl, body_limit: int) -> int:
    n = 0
    if fmt == "hex":
        for m in msgs:
            n += 1
            f, pos = cl.locate(m.physical_offset)
            click.echo(f"# {f.name} position {pos} physical_offset {m.physical_offset} total_size {m.total_size} "
                       f"topic {m.topic!r} queue {m.queue_id} queue_offset {m.queue_offset}")
            click.echo(_hexdump(f.buffer, pos, m.total_size, m.physical_offset))
        return n
    cols = TABLE_COLUMNS + (("body",) if body != "none" else ())
    if cl.dledger:  # DLedger mode: the entry around each record
        cols = cols[:1] + ("dledger_index", "dledger_term", "dledger_pos") + cols[1:]
    # people read the flags as words (sys_flag_names in JSON and --vertical); JSON keeps the number
    return render(msgs, fmt, lambda ms: emit(({**_row(m, body, body_limit), "sys_flag": sys_flag_words(m.flag_names)}
                                              for m in ms), "table", cols),
                  rows=lambda ms: (_row(m, body, body_limit) for m in ms)) or 0


_SHORT_FLAGS = {"TRANSACTION_PREPARED": "PREPARED", "TRANSACTION_COMMIT": "COMMIT", "TRANSACTION_ROLLBACK": "ROLLBACK",
                "BORNHOST_V6": "BORN_V6", "STOREHOSTADDRESS_V6": "STORE_V6"}


def sys_flag_words(names: list[str]) -> str:
    """MessageSysFlag bits as short words for a table cell, e.g. COMPRESSED_ZLIB|PREPARED|BORN_V6 (the compression
    flag and its codec bits are one word; 0 when no bit is set)."""
    codec = next((n.removeprefix("COMPRESSION_") for n in names if n.startswith("COMPRESSION_")), None)
    joined = codec is not None and "COMPRESSED" in names
    words = [f"COMPRESSED_{codec}" if n == "COMPRESSED" and joined else _SHORT_FLAGS.get(n, n) for n in names
             if not (joined and n.startswith("COMPRESSION_"))]
    return "|".join(words) or "0"


@click.command("summary")
@store_argument
@click.option("--format", "fmt", type=click.Choice(("table", "json", "ndjson")), default="table", show_default=True)
@broker_version_option_for("Override the detected RocketMQ version (e.g. 4.9.8, 5.3.3).")
@jobs_option
@handle_errors
def summary(store, fmt, broker_version, jobs):
    """File map, offsets, per-topic and per-queue counts, time range, checkpoint, abort file, and what the
    files say about the RocketMQ version that wrote them (4.x / 5.x evidence)."""
    from ..analyses.summary import summarize  # imports numpy: not at --help

    st = Store.open(store, conf=broker_conf())
    cl = st.commitlog
    with progress(cl.end_offset - cl.min_offset, "scanning commitlog", fmt == "table") as advance:
        s = summarize(st, advance, broker_version, jobs=jobs or default_jobs())
    emit_document(s, fmt, lambda doc: _render_summary(doc, _consume_queue_ends(st)))


def _consume_queue_ends(st: Store) -> dict[tuple[str, int], int]:
    """(topic, queue id) -> the consume queue's max offset (exclusive), from the file queues on disk: what the
    table compares with the commit log's to say which queues lag. Empty for a RocksDB queue (``cq --all``)."""
    import contextlib
    import os

    from ..analyses.compare.cq_vs_commitlog import queue_bounds
    from ..errors import RmqInspectError
    from ..store.consumequeue import ConsumeQueue, list_queues
    from ..store.rocksdb_cq import served_kind

    d = st.layout.consumequeue_dir
    ends: dict[tuple[str, int], int] = {}
    with contextlib.suppress(OSError, RmqInspectError):
        if os.path.isdir(d) and served_kind(d) == "file":
            for b in queue_bounds(ConsumeQueue(q.topic, q.queue_id, q.path) for q in list_queues(d)):
                ends[(b.topic, b.queue_id)] = b.max_offset
    return ends


def _render_checkpoint(cp: dict) -> None:
    """The checkpoint's times in two or three lines (the date said once when they share it); every field, in
    epoch ms, is in --format json."""
    day = ""
    parts = []
    for k in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "min_timestamp"):
        if k not in cp:
            continue
        t = ms_to_iso(cp[k]) if cp[k] else "0"
        if t[:11] == day:
            t = t[11:]
        elif cp[k]:
            day = t[:11]
        parts.append(f"{k.removesuffix('_timestamp').removesuffix('_msg')} {t}")
    extra = [f"{k} {v}" for k, v in cp.items() if k.endswith("offset") and v]
    print_kv(f"Checkpoint ({cp.get('file_size')}-byte file, {cp.get('used_length')} bytes used)",
             [("times", ", ".join(parts))] + ([("offsets", ", ".join(extra))] if extra else []))


def _render_summary(s, cq_ends: dict[tuple[str, int], int]) -> None:
    det = s.detection or {}
    times = [ms_to_iso(t) for t in (s.first_store_timestamp, s.last_store_timestamp)]
    if times[0][:11] == times[1][:11]:
        times[1] = times[1][11:]  # same day: the end without the date
    lagging = [q for q in s.queues if q.max_queue_offset is not None
               and cq_ends.get((q.topic, q.queue_id), q.max_queue_offset + 1) < q.max_queue_offset + 1]
    behind = sum(q.max_queue_offset + 1 - cq_ends[(q.topic, q.queue_id)] for q in lagging)
    ahead = [q for q in s.queues if q.max_queue_offset is not None
             and cq_ends.get((q.topic, q.queue_id), 0) > q.max_queue_offset + 1]
    print_kv("Store", [
        ("root", s.root),
        ("commitlog files", f"{len(s.files)} of {s.mapped_file_size} bytes"),
        ("messages", f"{s.messages} ({s.message_bytes} bytes) at physical offsets {s.min_physical_offset} .. "
                     f"{s.max_physical_offset}"),
        ("store times", f"{times[0]} .. {times[1]}" if s.first_store_timestamp is not None else ""),
        ("last shutdown", ("abnormal: the abort file is present" + (f" (pid {s.abort_content})" if s.abort_content
                                                                    else "") + "; a restart runs abnormal recovery")
         if s.abort_present else "clean (no abort file)"),
        *([("consume queues", f"{len(lagging)} of {len(s.queues)} queues end before the commit log's last entry "
                              f"for them ({behind} entries behind; `recover` says what a restart re-dispatches)")]
          if lagging else []),
        *([("consume queues", f"{len(ahead)} of {len(s.queues)} queues hold entries past the commit log's last "
                              "valid record for them (`recover` says what a restart truncates)")] if ahead else []),
        ("version", det.get("version", "") + (" (override)" if det.get("override") else " (detected)")
         + (f", {det['consume_queue_kind']} consume queue" if det.get("consume_queue_kind") else "")
         + "".join(f"; {e['detail']}" for e in det.get("evidence", []) if e["found"])),
        ("release", det.get("release", "")),
        *[("layout", x) for x in det.get("layouts", [])],
    ] + [("note", n) for n in s.notes])
    if s.checkpoint:
        _render_checkpoint(s.checkpoint)
    emit(({"file": f.name, "start": f.start_offset, "records": f.records, "data_end": f.data_end,
           "after_data": (f"blank {f.blank_size}" if f.blank_at is not None
                          else f"zeros {f.zero_tail_size}" if f.zero_tail_size
                          else f"{f.start_offset + f.size - f.data_end} bytes" if f.data_end is not None
                          and f.data_end < f.start_offset + f.size else "none"),
           "damage": f.damage}
          for f in s.files), "table", title="CommitLog files (data_end: end of its records; after_data: the rest)")
    if s.gaps:
        emit(s.gaps, "table", title="Missing offset ranges (no file)")
    emit(({"topic": t, **v} for t, v in s.topics.items()), "table", title="Topics")
    # the broker's bounds (getMinOffsetInQueue / getMaxOffsetInQueue, max exclusive), as `cq --all` shows them
    rows = [{"topic": q.topic, "queue_id": q.queue_id, "messages": q.messages, "bytes": q.bytes,
             "min_offset": q.min_queue_offset,
             "max_offset": None if q.max_queue_offset is None else q.max_queue_offset + 1,
             **({"cq_max": cq_ends.get((q.topic, q.queue_id))} if cq_ends else {})} for q in s.queues]
    emit(rows, "table", title="Queues (commit log offsets, max exclusive as cq --all"
                              + ("; cq_max: the CQ's end)" if cq_ends else ")"))
    if any(r["max_offset"] is not None and r["messages"] != r["max_offset"] - (r["min_offset"] or 0) for r in rows):
        paragraph("messages counts every record; max_offset only those given a queue offset (prepared and "
                  "rolled-back transaction records get no consume-queue entry).")


COMMANDS = [decode_commitlog, summary]
