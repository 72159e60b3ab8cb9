"""Messages as table rows: the per-commitlog-file scan shared by the local (pyarrow) and Spark engines.

Every commitlog file starts at a record boundary (the broker pads the end of a file with a blank record and
starts the next record at position 0 of the next file), so one file is a self-contained unit of work: a local
loop and a Spark task both call ``file_batches(task)`` and therefore produce the same rows. Rows are the
records the broker accepts (scan kind MESSAGE, exactly what ``CommitLog.messages`` decodes); torn or illegal
records are reported as ``FileDamage`` and the scan of the file goes on past a HALF record like the
dispatcher, and stops at an ILLEGAL one.

Two row builders produce the same batches: the per-record reference (``file_column_chunks``: ``scan_buffer``,
``decode_slot``, ``append_message``) and the fast path used whenever the compiled scanner is built, which
takes runs of records from it and fills the numeric columns with numpy (tests prove them equal row for row).

pyarrow is imported lazily: the rest of rmqinspect never needs it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from ..formats.commitlog import CRC32_RESERVED_LEN, decode_crc32_property
from ..formats.constants import (
    PROPERTY_CRC32,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RECORD_SIZE_CAP,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from ..formats.javahash import tags_code
from ..formats.msgid import host_string, offset_msg_id
from ..store.commitlog import BLANK, CRC_MISMATCH, END, HALF, ILLEGAL, MESSAGE, _fastscan, decode_slot, scan_buffer
from ..store.errors import StoreNotFoundError, UnsafeOutputError
from ..store.layout import StoreLayout
from ..store.mapped import MappedFile
from .dispatch import DelayLevelError, dispatch_tags_code

# (name, arrow type name, nullable, description) - the documented schema, in column order. The two
# partition columns come last; they are directory names in the dataset, not columns of its files.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("source", "string", "store label (broker/replica); default the store directory name"),
    ("store_path", "string", "absolute path of the store root"),
    ("file", "string", "commitlog file name (20-digit start offset)"),
    ("file_position", "int64", "position of the record in its file"),
    ("physical_offset", "int64", "file start + position"),
    ("physical_offset_field", "int64", "PHYSICALOFFSET stored in the record"),
    ("total_size", "int32", "TOTALSIZE"),
    ("magic_version", "int32", "1 (0xDAA320A7) or 2 (0xDAA320AB, 2-byte topic length)"),
    ("topic", "string", "topic as stored (SCHEDULE_TOPIC_XXXX / RMQ_SYS_TRANS_HALF_TOPIC for delayed/half msgs)"),
    ("queue_id", "int32", "QUEUEID"),
    ("queue_offset", "int64", "QUEUEOFFSET (consume-queue index)"),
    ("flag", "int32", "FLAG"),
    ("sys_flag", "int32", "SYSFLAG"),
    ("transaction_type", "string", "NOT_TYPE | PREPARED | COMMIT | ROLLBACK (sysFlag & 0xC)"),
    ("born_timestamp", "timestamp", "BORNTIMESTAMP (UTC, null when outside years 1..9999)"),
    ("born_timestamp_ms", "int64", "BORNTIMESTAMP raw epoch ms"),
    ("born_host", "string", "ip:port ([ipv6]:port)"),
    ("store_timestamp", "timestamp", "STORETIMESTAMP (UTC, null when outside years 1..9999)"),
    ("store_timestamp_ms", "int64", "STORETIMESTAMP raw epoch ms"),
    ("store_host", "string", "ip:port ([ipv6]:port)"),
    ("reconsume_times", "int32", "RECONSUMETIMES"),
    ("prepared_transaction_offset", "int64", "PREPAREDTRANSACTIONOFFSET"),
    ("tags", "string", "TAGS property"),
    ("tags_code", "int64", "tagsCode the dispatcher writes into the consume queue (delivery time for "
                           "SCHEDULE_TOPIC_XXXX); null when DELAY is not a number"),
    ("keys", "list<string>", "KEYS split on single spaces, empty tokens dropped"),
    ("uniq_key", "string", "UNIQ_KEY (client msgId)"),
    ("offset_msg_id", "string", "offsetMsgId: store host + PHYSICALOFFSET field, upper-case hex"),
    ("properties", "map<string,string>", "all properties"),
    ("body_size", "int32", "BODYLEN (stored, possibly compressed)"),
    ("body_crc", "int64", "BODYCRC"),
    ("crc_ok", "bool", "body CRC check (an empty body: stored CRC 0)"),
    ("record_crc32", "int64", "zlib crc32 of the whole record (replica comparison)"),
    ("problems", "list<string>", "decode problems (bad __CRC32#, malformed properties, CRC mismatch)"),
    ("body", "binary", "stored body bytes (only with --with-body)"),
    ("store_date", "string", "partition: UTC date of STORETIMESTAMP (YYYY-MM-DD, 'invalid' when out of range)"),
    ("topic_partition", "string", "partition: topic made safe as a directory name (see docs/spark.md)"),
)
PARTITION_COLUMNS = ("topic_partition", "store_date")
BATCH_ROWS = 4096
_FAST_RUN = 16384  # records per compiled-scanner call in the fast path

_MIN_MS = -62135596800000  # 0001-01-01T00:00:00Z
_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
_SAFE_TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_EPOCH = _dt.date(1970, 1, 1)


def column_names(with_body: bool = False) -> list[str]:
    return [c[0] for c in COLUMNS if with_body or c[0] != "body"]


@functools.lru_cache(maxsize=4096)
def topic_partition(topic: str) -> str:
    """A directory-name-safe stand-in for an untrusted topic.

    RocketMQ topic names are ``[%|a-zA-Z0-9_-]``, at most 127 chars (V1) - but a damaged or hostile store can
    hold anything, e.g. ``../../evil``. Safe names pass through unchanged; any other gets its unsafe characters
    replaced by ``_``, is cut to 60 characters and gets an 8-hex-digit sha1 suffix so two different topics can
    never share a partition. The real topic is always in the ``topic`` column.
    """
    if _SAFE_TOPIC.match(topic) and not topic.startswith("-"):
        return topic
    digest = hashlib.sha1(topic.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return "_" + _UNSAFE_CHARS.sub("_", topic)[:60] + "-" + digest


def _date_of(ms: int) -> str:
    if _MIN_MS <= ms <= _MAX_MS:
        return _day(ms // 86400000)
    return "invalid"


@functools.lru_cache(maxsize=4096)
def _day(days: int) -> str:
    return (_EPOCH + _dt.timedelta(days=days)).isoformat()


# --- work units ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileTask:
    """One commitlog file of one store: the unit a Spark task (or one local loop iteration) handles."""

    source: str
    store_path: str
    path: str
    start: int  # physical offset of position 0 (the file name)
    size: int
    index: int = 0  # position of the file in its store
    last: bool = False  # the newest file of its store

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def store_labels(stores: Sequence[str], labels: Sequence[str] | None = None) -> list[str]:
    """Labels for the ``source`` column: the given ones, else each store directory's name, disambiguated with
    the parent directory (``broker-a/store``) and finally the full path when names collide."""
    if labels:
        if len(labels) != len(stores):
            raise ValueError(f"{len(labels)} labels for {len(stores)} stores")
        return list(labels)
    roots = [StoreLayout.open(s).root for s in stores]
    out = [os.path.basename(r) or r for r in roots]
    if len(set(out)) < len(out):
        out = [os.path.join(os.path.basename(os.path.dirname(r)), os.path.basename(r)) for r in roots]
    if len(set(out)) < len(out):
        out = roots
    return out


def file_tasks(stores: Sequence[str], labels: Sequence[str] | None = None) -> list[FileTask]:
    """Every commitlog file of every store, in store order then commitlog order."""
    labels = store_labels(stores, labels)
    tasks = []
    for store, label in zip(stores, labels):
        lay = StoreLayout.open(store)
        entries = lay.commitlog_file_paths()
        if not entries:
            raise StoreNotFoundError("no commitlog files", lay.commitlog_dirs[0] if lay.commitlog_dirs else lay.root)
        for i, (start, path) in enumerate(entries):
            tasks.append(FileTask(label, lay.root, path, start, os.stat(path).st_size, i, i == len(entries) - 1))
    return tasks


def check_output_dir(out: str, stores: Iterable[str]) -> None:
    """Refuse an output directory inside any inspected store, or one that already holds files. A Hadoop URI
    (``hdfs://``, ``s3a://``; Spark engine only) cannot be inside a local store and is left to Spark."""
    if "://" in out:
        return
    for s in stores:
        lay = StoreLayout.open(s)
        if lay.within(out):
            raise UnsafeOutputError(f"output directory is inside the store {lay.root}; refusing to write there",
                                    out)
        # a store *inside* the output directory would be overwritten / mixed with output just the same
        if StoreLayout(os.path.realpath(out), [], "", "", "", "", "").within(lay.root):
            raise UnsafeOutputError(f"the store {lay.root} lies inside the output directory; refusing", out)
    if os.path.isdir(out) and os.listdir(out):
        raise UnsafeOutputError("output directory exists and is not empty; refusing to overwrite", out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UnsafeOutputError("output path exists and is not a directory", out)


# --- filters ---------------------------------------------------------------------------------------


@dataclass
class RowFilter:
    """Filters cheap enough to apply inside the scan: topic set and a store-time range (inclusive)."""

    topics: frozenset[str] | None = None
    since: int | None = None
    until: int | None = None

    def header_ok(self, hdr) -> bool:
        ts = hdr[11]
        if self.since is not None and ts < self.since:
            return False
        if self.until is not None and ts > self.until:
            return False
        return True

    def topic_ok(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    @property
    def empty(self) -> bool:
        return self.topics is None and self.since is None and self.until is None


@dataclass
class FileDamage:
    source: str
    file: str
    physical_offset: int
    kind: str
    reason: str

    def to_dict(self) -> dict:
        return {"source": self.source, "file": self.file, "physical_offset": self.physical_offset,
                "kind": self.kind, "reason": self.reason}


@dataclass
class FileResult:
    """What the scan of one file saw besides rows (for reports)."""

    task: FileTask
    rows: int = 0
    damage: list[FileDamage] = field(default_factory=list)


# --- rows ------------------------------------------------------------------------------------------


def _new_columns(with_body: bool) -> dict[str, list]:
    return {name: [] for name in column_names(with_body)}


def append_message(cols: dict[str, list], msg, task: FileTask, record: bytes | memoryview) -> None:
    """Append one decoded ``Message`` to the column lists."""
    props = msg.properties
    try:
        tcode = dispatch_tags_code(msg.topic, props, msg.store_timestamp)[0]
    except DelayLevelError:
        tcode = None
    bts, sts = msg.born_timestamp, msg.store_timestamp
    cols["source"].append(task.source)
    cols["store_path"].append(task.store_path)
    cols["file"].append(msg.file)
    cols["file_position"].append(msg.position)
    cols["physical_offset"].append(msg.physical_offset)
    cols["physical_offset_field"].append(msg.physical_offset_field)
    cols["total_size"].append(msg.total_size)
    cols["magic_version"].append(msg.magic_version)
    cols["topic"].append(msg.topic)
    cols["queue_id"].append(msg.queue_id)
    cols["queue_offset"].append(msg.queue_offset)
    cols["flag"].append(msg.flag)
    cols["sys_flag"].append(msg.sys_flag)
    cols["transaction_type"].append(msg.transaction_type.name)
    cols["born_timestamp"].append(bts * 1000 if _MIN_MS <= bts <= _MAX_MS else None)
    cols["born_timestamp_ms"].append(bts)
    cols["born_host"].append(msg.born_host)
    cols["store_timestamp"].append(sts * 1000 if _MIN_MS <= sts <= _MAX_MS else None)
    cols["store_timestamp_ms"].append(sts)
    cols["store_host"].append(msg.store_host)
    cols["reconsume_times"].append(msg.reconsume_times)
    cols["prepared_transaction_offset"].append(msg.prepared_transaction_offset)
    cols["tags"].append(msg.tags)
    cols["tags_code"].append(tcode)
    cols["keys"].append(msg.keys)
    cols["uniq_key"].append(msg.uniq_key)
    cols["offset_msg_id"].append(msg.offset_msg_id)
    cols["properties"].append(list(props.items()))
    cols["body_size"].append(len(msg.body))
    cols["body_crc"].append(msg.body_crc)
    cols["crc_ok"].append(msg.crc_ok)
    cols["record_crc32"].append(zlib.crc32(record))
    cols["problems"].append(list(msg.problems))
    if "body" in cols:
        cols["body"].append(msg.body)
    cols["store_date"].append(_date_of(sts))
    cols["topic_partition"].append(topic_partition(msg.topic))


def file_column_chunks(task: FileTask, *, with_body: bool = False, flt: RowFilter | None = None,
                       result: FileResult | None = None, batch_rows: int = BATCH_ROWS) -> Iterator[dict[str, list]]:
    """Scan one commitlog file from position 0 to its blank record / zero tail / end and yield column dicts
    of at most ``batch_rows`` rows. ``result`` (optional) receives the row count and the damage seen."""
    mf = MappedFile(task.path, task.start)
    try:
        buf = mf.buffer
        mv = memoryview(buf)
        cols = _new_columns(with_body)
        n = 0
        name = task.name
        for kind, pos, size, hdr, bpos, crc_ok, reason in scan_buffer(buf, 0, mf.size, False, True):
            if kind == MESSAGE:
                if flt is not None and not flt.header_ok(hdr):
                    continue
                msg = decode_slot(buf, task.start, pos, hdr, bpos, None, name)
                if flt is not None and not flt.topic_ok(msg.topic):
                    continue
                append_message(cols, msg, task, mv[pos:pos + size])
                n += 1
                if result is not None:
                    result.rows += 1
                if n >= batch_rows:
                    yield cols
                    cols = _new_columns(with_body)
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


def file_damage(task: FileTask) -> list[FileDamage]:
    """Only the damage ``file_column_chunks`` would report for this file (record scan, no decoding): the
    Spark engine gathers it in a side pass because a data source cannot hand anything but rows back."""
    mf = MappedFile(task.path, task.start)
    out = []
    try:
        if _fastscan is not None and os.environ.get("RMQINSPECT_EXPORT_REFERENCE") != "1":
            # the compiled scanner skips the well-formed runs; whatever stops it is re-read by scan_buffer
            buf, limit, pos = mf.buffer, mf.size, 0
            while True:
                _, n, pos = _fastscan.scan_messages(buf, pos, limit, False, True, _FAST_RUN, RECORD_SIZE_CAP)
                if n == _FAST_RUN:
                    continue
                kind, p, size, _, _, _, reason = next(scan_buffer(buf, pos, limit, False, True))
                if kind in (ILLEGAL, HALF, CRC_MISMATCH):
                    out.append(FileDamage(task.source, task.path, task.start + p, kind, reason))
                if kind not in (MESSAGE, HALF):
                    return out
                pos = p + size
        for kind, pos, size, hdr, bpos, crc_ok, reason in scan_buffer(mf.buffer, 0, mf.size, False, True):
            if kind in (ILLEGAL, HALF, CRC_MISMATCH):
                out.append(FileDamage(task.source, task.path, task.start + pos, kind, reason))
            elif kind in (BLANK, END):
                break
    finally:
        mf.close()
    return out


# --- Arrow -----------------------------------------------------------------------------------------


def arrow_type(name: str):
    import pyarrow as pa

    return {
        "string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "bool": pa.bool_(),
        "binary": pa.binary(), "timestamp": pa.timestamp("us", tz="UTC"), "list<string>": pa.list_(pa.string()),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
    }[name]


def arrow_schema(with_body: bool = False, partition_columns: bool = True):
    import pyarrow as pa

    return pa.schema([pa.field(n, arrow_type(t)) for n, t, _ in COLUMNS
                      if (with_body or n != "body") and (partition_columns or n not in PARTITION_COLUMNS)])


def spark_ddl(with_body: bool = False) -> str:
    """The same schema as a Spark DDL string (for the Python Data Source)."""
    sql = {"string": "STRING", "int64": "BIGINT", "int32": "INT", "bool": "BOOLEAN", "binary": "BINARY",
           "timestamp": "TIMESTAMP", "list<string>": "ARRAY<STRING>", "map<string,string>": "MAP<STRING,STRING>"}
    return ", ".join(f"`{n}` {sql[t]}" for n, t, _ in COLUMNS if with_body or n != "body")


def columns_to_batch(cols: dict[str, list], schema):
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(cols[f.name], type=f.type) for f in schema], schema=schema)


def file_batches(task: FileTask, *, with_body: bool = False, flt: RowFilter | None = None,
                 result: FileResult | None = None, batch_rows: int = BATCH_ROWS, _reference: bool | None = None):
    """Arrow RecordBatches for one commitlog file (the unit of work of both engines). ``_reference`` selects
    the per-record ``file_column_chunks`` path (the oracle for the fast path in the tests; the benchmark's
    baseline sets RMQINSPECT_EXPORT_REFERENCE=1 so that Spark's Python workers take it too)."""
    schema = arrow_schema(with_body)
    if _reference is None:
        _reference = os.environ.get("RMQINSPECT_EXPORT_REFERENCE") == "1"
    if _fastscan is not None and not _reference:
        yield from _fast_file_batches(task, schema, with_body, flt, result, batch_rows)
        return
    for cols in file_column_chunks(task, with_body=with_body, flt=flt, result=result, batch_rows=batch_rows):
        yield columns_to_batch(cols, schema)


# --- fast path -------------------------------------------------------------------------------------
# The compiled scanner finds runs of well-formed records (FAST_FIELDS rows, body CRC checked in C); every
# numeric column is sliced or gathered from those rows and the mapped file with numpy, and only what is
# text by nature (properties, keys, problems, topic) goes through per-record Python. Records the compiled
# scanner refuses are re-scanned with ``scan_buffer`` exactly as the reference path does: a body-CRC
# mismatch is still a row (crc_ok false) decoded by ``append_message``, HALF/ILLEGAL are damage.

_TX_NAMES = None


def _gather(u8, idx, width: int, dtype: str):
    """Big-endian integers of ``width`` bytes at byte positions ``idx`` of ``u8``."""
    import numpy as np

    m = u8[idx[:, None] + np.arange(width)]
    return np.ascontiguousarray(m).view(dtype).reshape(len(idx)).astype(np.int64)


def _host_column(buf, u8, pos, wide, off: int, cache: dict):
    """host strings of the 8-byte (IPv4) or 20-byte (IPv6) address at ``pos + off(row)``: distinct values are
    rendered once (a store has few hosts)."""
    import numpy as np

    n = len(pos)
    out = np.empty(n, dtype=object)
    narrow = ~wide
    if narrow.any():
        p = pos[narrow] + off if np.isscalar(off) else (pos + off)[narrow]
        raw = np.ascontiguousarray(u8[p[:, None] + np.arange(8)])
        keys = raw.view(">u8").reshape(-1)
        uniq, inv = np.unique(keys, return_inverse=True)
        strs = []
        for k in uniq.tolist():
            s = cache.get(k)
            if s is None:
                b = k.to_bytes(8, "big")
                s = cache[k] = host_string(b[:4], int.from_bytes(b[4:], "big", signed=True))
            strs.append(s)
        out[narrow] = np.array(strs, dtype=object)[inv.reshape(-1)]
    if wide.any():
        allp = pos + off
        for i in np.flatnonzero(wide).tolist():
            p = int(allp[i])
            out[i] = host_string(bytes(buf[p:p + 16]), int.from_bytes(buf[p + 16:p + 20], "big", signed=True))
    return out


def _fast_run_batch(buf, u8, mv, R, task: FileTask, schema, with_body: bool, flt: RowFilter | None, caches: dict):
    """One RecordBatch for a run of scanned records (rows of R), or None when the filter keeps nothing."""
    import numpy as np
    import pyarrow as pa

    global _TX_NAMES
    if flt is not None and (flt.since is not None or flt.until is not None):
        sts = R[:, 9]
        keep = np.ones(len(R), dtype=bool)
        if flt.since is not None:
            keep &= sts >= flt.since
        if flt.until is not None:
            keep &= sts <= flt.until
        R = R[keep]
    tcache = caches.setdefault("topic", {})
    topics = []
    for tp, tl in R[:, 11:13].tolist():
        tb = buf[tp:tp + tl]
        t = tcache.get(tb)
        if t is None:
            t = tcache[tb] = tb.decode("utf-8", "replace")
        topics.append(t)
    if flt is not None and flt.topics is not None:
        keep = np.fromiter((t in flt.topics for t in topics), dtype=bool, count=len(topics))
        R = R[keep]
        topics = [t for t, k in zip(topics, keep.tolist()) if k]
    n = len(R)
    if n == 0:
        return None
    pos, total, bpos = R[:, 0], R[:, 1], R[:, 2]
    sys_flag, sts, bts = R[:, 5], R[:, 9], R[:, 10]
    born_v6 = (sys_flag & 0x10) != 0
    store_v6 = (sys_flag & 0x20) != 0
    born_len = np.where(born_v6, 20, 8)
    store_off = 56 + born_len  # STOREHOST follows BORNHOST and STORETIMESTAMP

    # per-record text: properties (parse_properties and properties_well_formed in one pass: the same split
    # rules; \x01 and \x02 are ASCII, so splitting the decoded text equals splitting the bytes), problems
    crc32 = zlib.crc32
    dicts: list = []
    probs: list = []
    proffs = [0]
    malformed = False
    for p, tot, pp, pl in R[:, (0, 1, 13, 14)].tolist():
        props = {}
        if pl > 0:
            for piece in buf[pp:pp + pl].decode("utf-8", "replace").split("\x02"):
                name, sep, value = piece.partition("\x01")
                if name and value:
                    props[name] = value
                elif piece and not sep:
                    malformed = True
            if PROPERTY_CRC32 in props:
                stored = decode_crc32_property(props[PROPERTY_CRC32])
                actual = crc32(mv[p:p + tot - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
                if stored != actual:
                    probs.append(f"__CRC32# property {stored} != crc of record {actual}")
            if malformed:
                malformed = False
                probs.append("properties string has a piece without a name/value separator (\\x01)")
        dicts.append(props)
        proffs.append(len(probs))
    rcrc = [crc32(mv[p:p + tot]) for p, tot in R[:, :2].tolist()]
    bodies = [buf[bp:bp + bl] if bl > 0 else b"" for bp, bl in R[:, 2:4].tolist()] if with_body else None
    pkeys = [k for d in dicts for k in d]
    pvals = [v for d in dicts for v in d.values()]
    poffs = np.cumsum([0] + [len(d) for d in dicts], dtype=np.int64).astype(np.int32)
    tags = [d.get(PROPERTY_TAGS) for d in dicts]
    uniqs = [d.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for d in dicts]
    tccache = caches.setdefault("tags_code", {})
    for tg in set(tags):
        if tg not in tccache:
            tccache[tg] = tags_code(tg)
    tcodes = [tccache[tg] for tg in tags]
    kl = [[x for x in k.split(" ") if x] if k else [] for k in (d.get(PROPERTY_KEYS) for d in dicts)]
    kflat = [x for ks in kl for x in ks]
    koffs = np.cumsum([0] + [len(ks) for ks in kl], dtype=np.int64).astype(np.int32)
    delay_rows = [(i, d) for i, d in enumerate(dicts) if PROPERTY_DELAY_TIME_LEVEL in d]
    tcode_mask = None
    for i, props in delay_rows:
        if topics[i] != RMQ_SYS_SCHEDULE_TOPIC:
            continue
        try:
            tcodes[i] = dispatch_tags_code(topics[i], props, int(sts[i]))[0]
        except DelayLevelError:
            tcodes[i] = 0
            if tcode_mask is None:
                tcode_mask = np.zeros(n, dtype=bool)
            tcode_mask[i] = True

    i64, i32 = pa.int64(), pa.int32()

    def const(s):
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([s])).cast(pa.string())

    def ts(ms):
        bad = (ms < _MIN_MS) | (ms > _MAX_MS)
        return pa.array(np.where(bad, 0, ms) * 1000, type=schema.field("born_timestamp").type,
                        mask=bad if bad.any() else None)

    def strs(values):
        return pa.array(values, type=pa.string())

    def str_list(offs, flat):
        return pa.ListArray.from_arrays(pa.array(offs, type=i32), strs(flat))

    if _TX_NAMES is None:
        _TX_NAMES = np.array(["NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK"], dtype=object)
    hcache = caches.setdefault("host", {})
    store_host = _host_column(buf, u8, pos, store_v6, store_off, hcache)
    pof = R[:, 8]
    if not store_v6.any():
        sh = np.ascontiguousarray(u8[(pos + store_off)[:, None] + np.arange(8)])
        idb = np.hstack([sh, pof.astype(">i8").view(np.uint8).reshape(n, 8)]).tobytes().hex().upper().encode()
        msgid = pa.StringArray.from_buffers(n, pa.py_buffer(np.arange(0, 32 * n + 1, 32, dtype=np.int32)),
                                            pa.py_buffer(idb))
    else:
        msgid = strs([offset_msg_id(bytes(buf[p + so:p + so + 16]) if v6 else bytes(buf[p + so:p + so + 4]),
                                    int.from_bytes(buf[p + so + (16 if v6 else 4):p + so + (20 if v6 else 8)],
                                                   "big", signed=True), f)
                      for p, so, v6, f in zip(pos.tolist(), store_off.tolist(), store_v6.tolist(), pof.tolist())])
    days = np.floor_divide(sts, 86400000)
    valid = (sts >= _MIN_MS) & (sts <= _MAX_MS)
    udays, dinv = np.unique(np.where(valid, days, 0), return_inverse=True)
    dates = np.array([_day(d) for d in udays.tolist()], dtype=object)[dinv.reshape(-1)]
    if not valid.all():
        dates[~valid] = "invalid"
    tparts = [topic_partition(t) for t in topics]
    crc_col = R[:, 4]
    body_crc = _gather(u8, pos + 8, 4, ">i4")
    arrays = {
        "source": const(task.source),
        "store_path": const(task.store_path),
        "file": const(task.name),
        "file_position": pa.array(pos, i64),
        "physical_offset": pa.array(pos + task.start, i64),
        "physical_offset_field": pa.array(pof, i64),
        "total_size": pa.array(total.astype(np.int32), i32),
        "magic_version": pa.array(R[:, 15].astype(np.int32), i32),
        "topic": strs(topics),
        "queue_id": pa.array(R[:, 6].astype(np.int32), i32),
        "queue_offset": pa.array(R[:, 7], i64),
        "flag": pa.array(_gather(u8, pos + 16, 4, ">i4").astype(np.int32), i32),
        "sys_flag": pa.array(sys_flag.astype(np.int32), i32),
        "transaction_type": strs(_TX_NAMES[(sys_flag & 0xC) >> 2]),
        "born_timestamp": ts(bts),
        "born_timestamp_ms": pa.array(bts, i64),
        "born_host": strs(_host_column(buf, u8, pos, born_v6, 48, hcache)),
        "store_timestamp": ts(sts),
        "store_timestamp_ms": pa.array(sts, i64),
        "store_host": strs(store_host),
        "reconsume_times": pa.array(_gather(u8, bpos - 16, 4, ">i4").astype(np.int32), i32),
        "prepared_transaction_offset": pa.array(_gather(u8, bpos - 12, 8, ">i8"), i64),
        "tags": strs(tags),
        "tags_code": pa.array(np.array(tcodes, dtype=np.int64), i64, mask=tcode_mask),
        "keys": str_list(koffs, kflat),
        "uniq_key": strs(uniqs),
        "offset_msg_id": msgid,
        "properties": pa.MapArray.from_arrays(pa.array(poffs, type=i32), strs(pkeys), strs(pvals)),
        "body_size": pa.array(np.maximum(R[:, 3], 0).astype(np.int32), i32),
        "body_crc": pa.array(body_crc, i64),
        # unchecked by the scan = an empty body: crc32 of nothing is 0 (store.commitlog.decode_slot)
        "crc_ok": pa.array(np.where(crc_col < 0, body_crc == 0, crc_col == 1), pa.bool_()),
        "record_crc32": pa.array(np.array(rcrc, dtype=np.int64), i64),
        "problems": str_list(proffs, probs),
        "store_date": strs(dates),
        "topic_partition": strs(tparts),
    }
    if with_body:
        arrays["body"] = pa.array(bodies, pa.binary())
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _fast_file_batches(task: FileTask, schema, with_body: bool, flt: RowFilter | None, result: FileResult | None,
                       batch_rows: int):
    import numpy as np

    mf = MappedFile(task.path, task.start)
    try:
        buf = mf.buffer
        limit = mf.size
        mv = memoryview(buf)
        u8 = np.frombuffer(buf, dtype=np.uint8) if limit else np.zeros(0, dtype=np.uint8)
        caches: dict = {}
        pos = 0
        try:
            while True:
                raw, n, pos = _fastscan.scan_messages(buf, pos, limit, True, True, _FAST_RUN, RECORD_SIZE_CAP)
                if n:
                    R = np.frombuffer(raw, dtype=np.int64).reshape(n, 16)
                    b = _fast_run_batch(buf, u8, mv, R, task, schema, with_body, flt, caches)
                    if b is not None:
                        if result is not None:
                            result.rows += b.num_rows
                        for off in range(0, b.num_rows, batch_rows):
                            yield b.slice(off, batch_rows)
                if n == _FAST_RUN:
                    continue
                kind, p, size, hdr, bpos, _, reason = next(scan_buffer(buf, pos, limit, False, True))
                if kind == MESSAGE:
                    # refused by the compiled scanner only for its body CRC: the reference row
                    pos = p + size
                    if flt is not None and not flt.header_ok(hdr):
                        continue
                    msg = decode_slot(buf, task.start, p, hdr, bpos, None, task.name)
                    if flt is not None and not flt.topic_ok(msg.topic):
                        continue
                    cols = _new_columns(with_body)
                    append_message(cols, msg, task, mv[p:p + size])
                    if result is not None:
                        result.rows += 1
                    yield columns_to_batch(cols, schema)
                elif kind == HALF:
                    if result is not None:
                        result.damage.append(FileDamage(task.source, task.path, task.start + p, kind, reason))
                    pos = p + size
                else:
                    if kind in (ILLEGAL, CRC_MISMATCH) and result is not None:
                        result.damage.append(FileDamage(task.source, task.path, task.start + p, kind, reason))
                    break
        finally:
            del u8
            mv.release()
    finally:
        mf.close()


# --- local engine ----------------------------------------------------------------------------------


@dataclass
class ExportResult:
    engine: str
    out: str
    stores: list[str]
    files: int
    rows: int
    damage: list[FileDamage] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"engine": self.engine, "out": self.out, "stores": self.stores, "files": self.files,
                "rows": self.rows, "damage": [d.to_dict() for d in self.damage]}


def write_file_task(number: int, task: FileTask, out: str, *, with_body: bool = False,
                    flt: RowFilter | None = None) -> FileResult:
    """Write the rows of one commitlog file into the dataset at ``out`` (local path or a Hadoop-style URI
    pyarrow understands: hdfs://, s3://). The unit of work of both engines: the local engine runs the
    files one after another, the Spark engine runs one task per file; names ``part-<number>-<i>.parquet``
    never collide, so concurrent tasks write into the same partition directories safely."""
    import pyarrow.dataset as ds

    schema = arrow_schema(with_body)
    result = FileResult(task)
    part = ds.partitioning(schema=arrow_schema_of(schema, PARTITION_COLUMNS), flavor="hive")
    ds.write_dataset(file_batches(task, with_body=with_body, flt=flt, result=result), out, schema=schema,
                     format="parquet", partitioning=part, existing_data_behavior="overwrite_or_ignore",
                     basename_template=f"part-{number:05d}-{{i}}.parquet", max_rows_per_group=1 << 17,
                     max_partitions=1 << 16)
    return result


def export_local(stores: Sequence[str], out: str, *, labels: Sequence[str] | None = None, with_body: bool = False,
                 flt: RowFilter | None = None, advance=None) -> ExportResult:
    """Write the Parquet dataset with pyarrow, one file after another (hive partitions topic_partition/store_date)."""
    check_output_dir(out, stores)
    tasks = file_tasks(stores, labels)
    os.makedirs(out, exist_ok=True)
    results = []
    done = 0
    for n, t in enumerate(tasks):
        results.append(write_file_task(n, t, out, with_body=with_body, flt=flt))
        done += t.size
        if advance:
            advance(done)
    return ExportResult("local", os.path.abspath(out), [t.store_path for t in tasks if t.index == 0], len(tasks),
                        sum(r.rows for r in results), [d for r in results for d in r.damage])


def arrow_schema_of(schema, names: Sequence[str]):
    import pyarrow as pa

    return pa.schema([schema.field(n) for n in names])


def read_dataset(out: str):
    """Read an exported dataset back as one Arrow table (partition columns restored as strings)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    part = ds.partitioning(pa.schema([pa.field(n, pa.string()) for n in PARTITION_COLUMNS]), flavor="hive")
    return ds.dataset(out, format="parquet", partitioning=part).to_table()
