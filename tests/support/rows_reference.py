"""The per-record row builder: the oracle the row decoder (``rmqinspect.analyses.rows.file_batches``) is proven
equal to, row for row. Each record is scanned by ``scan_buffer`` and decoded by ``decode_slot`` into a
``Message`` (what ``CommitLog.messages`` yields), and every column is read off that Message one by one."""

from __future__ import annotations

import zlib

from rmqinspect.analyses.dispatch_rules import DelayLevelError, dispatch_tags_code
from rmqinspect.analyses.rows import (
    BODY,
    MAX_TIMESTAMP_MS,
    MIN_TIMESTAMP_MS,
    FileDamage,
    FileResult,
    FileTask,
    RowFilter,
    arrow_schema,
    column_names,
    store_date,
    topic_partition,
)
from rmqinspect.store.mapped import MappedFile
from rmqinspect.store.walk.kinds import BLANK, CRC_MISMATCH, END, HALF, ILLEGAL, MESSAGE
from rmqinspect.store.walk.records import decode_slot, scan_buffer
from support.dledger_ref import entry_record_tuples


def append_message(cols: dict[str, list], msg, task: FileTask, record) -> None:
    """Append one decoded ``Message`` to the column lists."""
    props = msg.properties
    try:
        tcode = dispatch_tags_code(msg.topic, props, msg.store_timestamp)[0]
    except DelayLevelError:
        tcode = None
    bts, sts = msg.born_timestamp, msg.store_timestamp
    row = {
        "source": task.source, "store_path": task.store_path, "file": msg.file, "file_position": msg.position,
        "physical_offset": msg.physical_offset, "physical_offset_field": msg.physical_offset_field,
        "total_size": msg.total_size, "magic_version": msg.magic_version, "topic": msg.topic,
        "queue_id": msg.queue_id, "queue_offset": msg.queue_offset, "flag": msg.flag, "sys_flag": msg.sys_flag,
        "transaction_type": msg.transaction_type.name,
        "born_timestamp": bts * 1000 if MIN_TIMESTAMP_MS <= bts <= MAX_TIMESTAMP_MS else None,
        "born_timestamp_ms": bts, "born_host": msg.born_host,
        "store_timestamp": sts * 1000 if MIN_TIMESTAMP_MS <= sts <= MAX_TIMESTAMP_MS else None,
        "store_timestamp_ms": sts, "store_host": msg.store_host, "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset, "tags": msg.tags, "tags_code": tcode,
        "keys": msg.keys, "uniq_key": msg.uniq_key, "offset_msg_id": msg.offset_msg_id,
        "properties": list(props.items()), "body_size": len(msg.body), "body_crc": msg.body_crc,
        "crc_ok": msg.crc_ok, "record_crc32": zlib.crc32(record), "problems": list(msg.problems), BODY: msg.body,
        "store_date": store_date(sts), "topic_partition": topic_partition(msg.topic),
        "txn_state": dict(zip(*task.txn)).get(msg.physical_offset) if task.txn else None,
    }
    for name, values in cols.items():
        values.append(row[name])


def file_column_chunks(task: FileTask, *, with_body: bool = False, flt: RowFilter | None = None,
                       result: FileResult | None = None, batch_rows: int = 4096):
    """Column dicts of at most ``batch_rows`` rows for one commitlog file, one record at a time."""
    mf = MappedFile(task.path, task.start)
    try:
        buf = mf.buffer
        mv = memoryview(buf)
        cols: dict[str, list] = {name: [] for name in column_names(with_body)}
        n = 0
        tuples = entry_record_tuples(buf, mf.size) if mf.dledger else scan_buffer(buf, 0, mf.size, False, True)
        for kind, pos, size, hdr, bpos, _, reason in tuples:
            if kind == MESSAGE:
                if flt is not None and not flt.time_ok(hdr[11]):
                    continue
                msg = decode_slot(buf, task.start, pos, hdr, bpos, None, task.name)
                if flt is not None and not flt.topic_ok(msg.topic):
                    continue
                append_message(cols, msg, task, mv[pos:pos + size])
                n += 1
                if result is not None:
                    result.rows += 1
                if n >= batch_rows:
                    yield cols
                    cols = {name: [] for name in cols}
                    n = 0
            elif kind in (ILLEGAL, HALF, CRC_MISMATCH) and result is not None:
                result.damage.append(FileDamage(task.source, task.path, task.start + pos, kind, reason))
            elif kind in (BLANK, END):
                break
        mv.release()
        if n:
            yield cols
    finally:
        mf.close()


def file_batches(task: FileTask, *, with_body: bool = False, flt: RowFilter | None = None,
                 result: FileResult | None = None, batch_rows: int = 4096):
    """The reference rows as Arrow RecordBatches of the export schema."""
    import pyarrow as pa

    schema = arrow_schema(with_body)
    for cols in file_column_chunks(task, with_body=with_body, flt=flt, result=result, batch_rows=batch_rows):
        yield pa.RecordBatch.from_arrays([pa.array(cols[f.name], type=f.type) for f in schema], schema=schema)
