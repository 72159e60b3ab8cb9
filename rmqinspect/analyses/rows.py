"""Messages as table rows: the one row decoder behind ``export`` (local and Spark engines) and the ``rocketmq``
Spark data source.

The columns are declared once, in ``COLUMNS`` (name, type, meaning); the Arrow schema, the Spark DDL and the
column table of docs/spark.md are derived from it (``arrow_schema``, ``spark_ddl``, ``columns_markdown``).

``file_batches(task)`` turns one commitlog file into Arrow RecordBatches. Every commitlog file starts at a record
boundary (the broker pads the end of a file with a blank record and starts the next record at position 0 of the
next file), so one file is a self-contained unit of work. Rows are the records the broker accepts (scan kind
MESSAGE, exactly what ``CommitLog.messages`` decodes, a body-CRC mismatch included with ``crc_ok`` false); torn
or illegal records are reported as ``FileDamage`` and the scan goes on past a HALF record like the dispatcher,
and stops at an ILLEGAL one.

The decoder works on the record runs of ``store.walk.file.walk_file`` (``RECORD_DTYPE`` records, from the
compiled or the pure-Python scanner alike): numeric columns are sliced or gathered with numpy from those records
and the mapped file, and only what is text by nature (properties, keys, problems, topic) goes through per-record
Python.
tests/rows_reference.py holds a per-record decoder (``CommitLog.messages``' ``decode_slot`` per row) that the
tests prove equal to this one, row for row.

It lives in analyses/ because two of its columns are broker rules of this layer (``tags_code``: the dispatcher's
rule in ``analyses.dispatch_rules``) or dataset choices (the partition columns), and it reads the store like every
other analysis. pyarrow is imported lazily: the rest of rmqinspect never needs it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ..formats.commitlog import (
    BODY_CRC_POSITION,
    BORN_HOST_POSITION,
    FLAG_POSITION,
    PREPARED_TRANSACTION_OFFSET_BEFORE_BODY,
    RECONSUME_TIMES_BEFORE_BODY,
    store_host_position,
)
from ..formats.constants import (
    PROPERTY_CRC32,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_SCHEDULE_TOPIC,
    SysFlag,
)
from ..formats.crc import crc32_function
from ..formats.javahash import tags_code
from ..formats.msgid import host_string, offset_msg_id
from ..formats.properties import (
    MALFORMED_PROPERTIES,
    check_property_crc,
    crc32_value,
    parse_properties_checked,
    property_crc_problem,
)
from ..store.mapped import MappedFile
from ..store.message import split_keys
from ..store.scanner import compiled
from ..store.walk.file import walk_file
from ..store.walk.kinds import Kind
from ..store.walk.records import RECORD_FIELDS, RecordRun
from .dispatch_rules import DelayLevelError, dispatch_tags_code

# --- the columns ----------------------------------------------------------------------------------


class ColumnType(NamedTuple):
    spark: str  # Spark SQL type
    doc: str  # how docs/spark.md names it (Arrow / Spark)


# Arrow types are built from these names in ``arrow_type`` (pyarrow is imported lazily).
TYPES: dict[str, ColumnType] = {
    "string": ColumnType("STRING", "string"),
    "int64": ColumnType("BIGINT", "int64 / BIGINT"),
    "int32": ColumnType("INT", "int32 / INT"),
    "bool": ColumnType("BOOLEAN", "bool / BOOLEAN"),
    "binary": ColumnType("BINARY", "binary / BINARY"),
    "timestamp": ColumnType("TIMESTAMP", "timestamp[us, UTC] / TIMESTAMP"),
    "list<string>": ColumnType("ARRAY<STRING>", "list<string> / ARRAY<STRING>"),
    "map<string,string>": ColumnType("MAP<STRING,STRING>", "map<string,string> / MAP<STRING,STRING>"),
}


class Column(NamedTuple):
    name: str
    type: str  # a key of TYPES
    doc: str


BODY = "body"  # the one optional column (--with-body)
# The documented schema, in column order. The two partition columns come last; they are directory names in the
# dataset, not columns of its files.
COLUMNS: tuple[Column, ...] = (
    Column("source", "string", "store label (broker/replica); default the store directory name"),
    Column("store_path", "string", "absolute path of the store root"),
    Column("file", "string", "commitlog file name (20-digit start offset)"),
    Column("file_position", "int64", "position of the record in its file"),
    Column("physical_offset", "int64", "file start + position"),
    Column("physical_offset_field", "int64", "PHYSICALOFFSET stored in the record"),
    Column("total_size", "int32", "TOTALSIZE"),
    Column("magic_version", "int32", "1 (0xDAA320A7) or 2 (0xDAA320AB, 2-byte topic length)"),
    Column("topic", "string", "topic as stored (SCHEDULE_TOPIC_XXXX / RMQ_SYS_TRANS_HALF_TOPIC for delayed/half "
                              "msgs)"),
    Column("queue_id", "int32", "QUEUEID"),
    Column("queue_offset", "int64", "QUEUEOFFSET (consume-queue index)"),
    Column("flag", "int32", "FLAG"),
    Column("sys_flag", "int32", "SYSFLAG"),
    Column("transaction_type", "string", "NOT_TYPE | PREPARED | COMMIT | ROLLBACK (sysFlag & 0xC)"),
    Column("born_timestamp", "timestamp", "BORNTIMESTAMP (UTC, null when outside years 1..9999)"),
    Column("born_timestamp_ms", "int64", "BORNTIMESTAMP raw epoch ms"),
    Column("born_host", "string", "ip:port ([ipv6]:port)"),
    Column("store_timestamp", "timestamp", "STORETIMESTAMP (UTC, null when outside years 1..9999)"),
    Column("store_timestamp_ms", "int64", "STORETIMESTAMP raw epoch ms"),
    Column("store_host", "string", "ip:port ([ipv6]:port)"),
    Column("reconsume_times", "int32", "RECONSUMETIMES"),
    Column("prepared_transaction_offset", "int64", "PREPAREDTRANSACTIONOFFSET"),
    Column("tags", "string", "TAGS property"),
    Column("tags_code", "int64", "tagsCode the dispatcher writes into the consume queue (delivery time for "
                                 "SCHEDULE_TOPIC_XXXX); null when DELAY is not a number"),
    Column("keys", "list<string>", "KEYS split on single spaces, empty tokens dropped"),
    Column("uniq_key", "string", "UNIQ_KEY (client msgId)"),
    Column("offset_msg_id", "string", "offsetMsgId: store host + PHYSICALOFFSET field, upper-case hex"),
    Column("properties", "map<string,string>", "all properties"),
    Column("body_size", "int32", "BODYLEN (stored, possibly compressed)"),
    Column("body_crc", "int64", "BODYCRC"),
    Column("crc_ok", "bool", "body CRC check (an empty body: stored CRC 0)"),
    Column("record_crc32", "int64", "zlib crc32 of the whole record (replica comparison)"),
    Column("problems", "list<string>", "decode problems (bad __CRC32#, malformed properties, CRC mismatch)"),
    Column("txn_state", "string", "verdict of the record's transaction (committed, rolled_back, in_doubt, open, "
                                  "given_up: `rmqinspect txn`); null when the record is no half, PREPARED, COMMIT, "
                                  "ROLLBACK, op or given-up copy"),
    Column(BODY, "binary", "stored body bytes (only with --with-body)"),
    Column("store_date", "string", "partition: UTC date of STORETIMESTAMP (YYYY-MM-DD, 'invalid' when out of "
                                   "range)"),
    Column("topic_partition", "string", "partition: topic made safe as a directory name (see docs/spark.md)"),
)
PARTITION_COLUMNS = ("topic_partition", "store_date")
TRANSACTION_TYPE_NAMES = ("NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK")  # by (sysFlag & 0xC) >> 2


def columns(with_body: bool = False, partition_columns: bool = True) -> list[Column]:
    return [c for c in COLUMNS
            if (with_body or c.name != BODY) and (partition_columns or c.name not in PARTITION_COLUMNS)]


def column_names(with_body: bool = False) -> list[str]:
    return [c.name for c in columns(with_body)]


def arrow_type(name: str):
    import pyarrow as pa

    return {
        "string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "bool": pa.bool_(),
        "binary": pa.binary(), "timestamp": pa.timestamp("us", tz="UTC"), "list<string>": pa.list_(pa.string()),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
    }[name]


def arrow_schema(with_body: bool = False, partition_columns: bool = True):
    import pyarrow as pa

    return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in columns(with_body, partition_columns)])


def arrow_schema_of(schema, names):
    import pyarrow as pa

    return pa.schema([schema.field(n) for n in names])


def spark_ddl(with_body: bool = False) -> str:
    """The schema as a Spark DDL string (for the Python Data Source)."""
    return ", ".join(f"`{c.name}` {TYPES[c.type].spark}" for c in columns(with_body))


def columns_markdown() -> str:
    """The column table of docs/spark.md (a test keeps the two equal)."""
    lines = ["| column | Arrow / Spark type | meaning |", "|---|---|---|"]
    lines += [f"| `{c.name}` | {TYPES[c.type].doc} | {c.doc.replace('|', chr(92) + '|')} |" for c in COLUMNS]
    return "\n".join(lines) + "\n"


# --- partition values -----------------------------------------------------------------------------

MIN_TIMESTAMP_MS = -62135596800000  # 0001-01-01T00:00:00Z
MAX_TIMESTAMP_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
_SAFE_TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_EPOCH = _dt.date(1970, 1, 1)


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


@functools.lru_cache(maxsize=4096)
def _day(days: int) -> str:
    return (_EPOCH + _dt.timedelta(days=days)).isoformat()


def store_date(ms: int) -> str:
    """The ``store_date`` partition value of a store timestamp."""
    return _day(ms // 86400000) if MIN_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS else "invalid"


# --- the unit of work and what it reports ---------------------------------------------------------


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
    # (offsets, states) of this file's transaction records, sorted (analyses.txn.txn_states_by_file); the
    # verdict is a store-wide answer, so it is computed once before the files are handed out
    txn: tuple = ()
    # whether the file is a DLedger data file (entries around the records): the parent's layout decides it, with
    # the broker.conf it was opened with; None: from the path (a dledger-<selfId>/data directory)
    dledger: bool | None = None
    # a chunk of the file (``analyses.export.chunk_tasks``): the file's walk taken from ``pos`` (a valid record's
    # position), ending where it lands on one of ``stops`` (the later chunks' starts) or where the file's walk ends
    pos: int = 0
    stops: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass
class RowFilter:
    """Filters cheap enough to apply inside the scan: topic set and a store-time range (inclusive)."""

    topics: frozenset[str] | None = None
    since: int | None = None
    until: int | None = None

    def time_ok(self, store_timestamp: int) -> bool:
        if self.since is not None and store_timestamp < self.since:
            return False
        if self.until is not None and store_timestamp > self.until:
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
    # where the walk ended: one of the task's stops when it landed on one, else the file's size
    landed: int = 0
    written: list[str] = field(default_factory=list)  # the Parquet files written for the task (export)


# --- the decoder ----------------------------------------------------------------------------------

BATCH_ROWS = 4096
RUN_RECORDS = 16384  # records per scanner run

_BORNHOST_V6 = int(SysFlag.BORNHOST_V6)
_STOREHOST_V6 = int(SysFlag.STOREHOSTADDRESS_V6)
BODY_CRC_MISMATCH = "body CRC mismatch"  # the problem text decode_slot gives the same record


def _gather(u8, idx, width: int, dtype: str):
    """Big-endian integers of ``width`` bytes at byte positions ``idx`` of ``u8``."""
    import numpy as np

    m = u8[idx[:, None] + np.arange(width)]
    return np.ascontiguousarray(m).view(dtype).reshape(len(idx)).astype(np.int64)


def _host_column(buf, u8, pos, wide, off, cache: dict):
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


_TOPIC_GATHER_MAX = 256  # longest topic compared as a fixed-width byte row; longer ones are decoded one by one


def topic_id_table(distinct: list[bytes], topics: dict[str, int]):
    """The id in ``topics`` of each of a run's distinct topic byte strings (in order of first appearance, as the
    compiled scanner lists them): new names get the next ids; byte strings that decode alike share one."""
    import numpy as np

    return np.array([topics.setdefault(t.decode("utf-8", "replace"), len(topics)) for t in distinct], dtype=np.int64)


def topic_ids(u8, rows, topics: dict[str, int]):
    """Topic id of every row of a run of scanned records (``topics`` maps each topic to its id; new topics get
    the next ids in order of first appearance, as a per-record loop assigns them): the distinct topic byte
    strings of the run are found with numpy and decoded once each."""
    import numpy as np

    ext = compiled()
    if ext is not None and rows.dtype.names == RECORD_FIELDS and len(rows):
        # a run's records (RECORD_DTYPE: the scanner's rows, named): the same 16 int64 a row
        rows = np.ascontiguousarray(rows).view(np.int64).reshape(len(rows), len(RECORD_FIELDS))
    if ext is not None and not rows.dtype.names and len(rows) and rows.shape[1] == len(RECORD_FIELDS):
        # the compiled scanner numbers the run's topics in one pass (a hash table over the bytes): ~20 ns a record
        # where the numpy path below sorts every record's padded topic (~400 ns); test_topic_ids proves them equal
        raw, distinct = ext.intern_topics(u8, np.ascontiguousarray(rows, dtype=np.int64))
        return topic_id_table(distinct, topics)[np.frombuffer(raw, dtype=np.int64)]
    if rows.dtype.names:
        tpos, tlen = rows["topic_pos"], rows["topic_len"]
    else:  # 2-D rows in RECORD_FIELDS order (RecordRun.rows)
        tpos, tlen = rows[:, RECORD_FIELDS.index("topic_pos")], rows[:, RECORD_FIELDS.index("topic_len")]
    width = int(tlen.max()) if len(rows) else 0
    if width > _TOPIC_GATHER_MAX:
        names = [bytes(u8[p:p + n]).decode("utf-8", "replace") for p, n in zip(tpos.tolist(), tlen.tolist())]
        return np.array([topics.setdefault(t, len(topics)) for t in names], dtype=np.int64)
    # fixed-width rows: the topic bytes padded with zeros, then its length (a topic may hold zero bytes)
    cols = np.arange(width, dtype=np.int64)
    idx = np.minimum(tpos[:, None] + cols, u8.size - 1)
    mat = np.where(cols < tlen[:, None], u8[idx], 0).astype(np.uint8)
    mat = np.concatenate([mat, tlen.astype("<u2").view(np.uint8).reshape(-1, 2)], axis=1)
    keys = np.ascontiguousarray(mat).view(np.dtype((np.void, mat.shape[1]))).ravel()
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    ids = np.empty(len(first), dtype=np.int64)
    for u in order.tolist():
        r = int(first[u])
        p, n = int(tpos[r]), int(tlen[r])
        ids[u] = topics.setdefault(bytes(u8[p:p + n]).decode("utf-8", "replace"), len(topics))
    return ids[inv.ravel()]


def _split_properties(buf, R):
    """The compiled scanner's split of a run's properties (``split_properties``): (flags, pairs, name strings, value
    strings), or None when the extension is not built or a record needs Python's decoding (non-ASCII text, a name
    given twice)."""
    import numpy as np
    import pyarrow as pa

    ext = compiled()
    if ext is None or not hasattr(ext, "split_properties") or not len(R):
        return None
    pp = np.ascontiguousarray(R["properties_pos"], dtype=np.int64)
    pl = np.ascontiguousarray(R["properties_len"], dtype=np.int64)
    fb, pb, nb, vb = ext.split_properties(buf, pp, pl)
    flags = np.frombuffer(fb, dtype=np.int32)
    if (flags & 1).any():
        return None
    pairs = np.frombuffer(pb, dtype=np.int64).reshape(-1, 3)

    def strings(lengths, data):
        offs = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offs[1:])
        return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offs), pa.py_buffer(data))

    return flags, pairs[:, 0], strings(pairs[:, 1], nb), strings(pairs[:, 2], vb)


def schedule_tags_codes(rows, topics, sts, tcodes, n: int):
    """SCHEDULE_TOPIC_XXXX records with a DELAY level (``rows``: (index, properties)): their tagsCode is the
    delivery time, written into ``tcodes``; the mask of those whose level the delay table does not know (tagsCode 0,
    shown as null), or None."""
    import numpy as np

    tcode_mask = None
    for i, props in rows:
        try:
            tcodes[i] = dispatch_tags_code(topics[i], props, int(sts[i]))[0]
        except DelayLevelError:
            tcodes[i] = 0
            if tcode_mask is None:
                tcode_mask = np.zeros(n, dtype=bool)
            tcode_mask[i] = True
    return tcode_mask


class RowDecoder:
    """Arrow RecordBatches from runs of scanned records of one mapped commitlog file."""

    def __init__(self, buf, task: FileTask, schema, with_body: bool = False, flt: RowFilter | None = None):
        import numpy as np

        self.buf = buf
        self.mv = memoryview(buf)
        self.u8 = np.frombuffer(buf, dtype=np.uint8) if len(self.mv) else np.zeros(0, dtype=np.uint8)
        self.task, self.schema, self.with_body = task, schema, with_body
        self.flt = None if flt is None or flt.empty else flt
        self.tx_names = np.array(TRANSACTION_TYPE_NAMES, dtype=object)
        self.topic_ids: dict[str, int] = {}  # topic -> id (topic_ids)
        self.topic_names = np.empty(0, dtype=object)  # by id
        self.topic_partitions = np.empty(0, dtype=object)  # by id
        self.tags_codes: dict = {}
        self.hosts: dict = {}
        self.txn = (np.array(task.txn[0], dtype=np.int64), np.array(task.txn[1], dtype=object)) if task.txn else None

    def close(self) -> None:
        del self.u8
        self.mv.release()

    def _check_body_crc(self, R):
        """Rows the scanner did not check (crc_ok -1 with a body) get their body CRC checked here."""
        import numpy as np

        unchecked = np.flatnonzero((R["crc_ok"] < 0) & (R["body_len"] > 0))
        if not len(unchecked):
            return R
        R = R.copy()
        buf = self.buf
        for i in unchecked.tolist():
            p, bp, bl = int(R["position"][i]), int(R["body_pos"][i]), int(R["body_len"][i])
            body_crc = int.from_bytes(buf[p + BODY_CRC_POSITION:p + BODY_CRC_POSITION + 4], "big", signed=True)
            R["crc_ok"][i] = int(crc32_value(self.mv[bp:bp + bl]) == body_crc)
        return R

    def _txn_states(self, phys, n: int):
        """txn_state of each row: its offset looked up in the file's transaction records."""
        import numpy as np

        out = np.full(n, None, dtype=object)
        if self.txn is not None and len(self.txn[0]):
            offs, states = self.txn
            i = np.minimum(np.searchsorted(offs, phys), len(offs) - 1)
            hit = offs[i] == phys
            out[hit] = states[i[hit]]
        return out

    def _text_columns(self, R, split, topics, sts, crc_col, pos, total):
        """The properties map, tags, tagsCode, keys, UNIQ_KEY, problems and record CRCs of a run from the compiled
        split of its properties (``_split_properties``): the same values as the per-record loop in ``batch``."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        mv, buf = self.mv, self.buf
        flags, rec, names, values = split
        n = len(R)
        counts = np.bincount(rec, minlength=n) if len(rec) else np.zeros(n, dtype=np.int64)
        poffs = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=poffs[1:])
        props_col = pa.MapArray.from_arrays(pa.array(poffs, type=pa.int32()), names, values)

        def value_of(name: str):
            """(index into values of each record's ``name`` or -1, the values as a string array with nulls)."""
            hit = np.flatnonzero(pc.equal(names, name).to_numpy(zero_copy_only=False)) if len(names) else \
                np.zeros(0, dtype=np.int64)
            at = np.full(n, -1, dtype=np.int64)
            at[rec[hit]] = hit
            missing = at < 0
            return at, values.take(pa.array(np.where(missing, 0, at), mask=missing if missing.any() else None)) \
                if len(values) else pa.nulls(n, pa.string())

        _, tags_arr = value_of(PROPERTY_TAGS)
        _, uniq_arr = value_of(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        _, keys_str = value_of(PROPERTY_KEYS)
        # tagsCode: one hash per distinct tag
        enc = tags_arr.dictionary_encode()
        tccache = self.tags_codes
        uniq_tags = enc.dictionary.to_pylist()
        for tg in uniq_tags:
            if tg not in tccache:
                tccache[tg] = tags_code(tg)
        codes = np.array([tccache[tg] for tg in uniq_tags] + [tccache.setdefault(None, tags_code(None))],
                         dtype=np.int64)
        ti = enc.indices.to_numpy(zero_copy_only=False)
        ti = np.where(pc.is_null(enc.indices).to_numpy(zero_copy_only=False), len(uniq_tags),
                      np.nan_to_num(ti, nan=len(uniq_tags))).astype(np.int64)
        tcodes = codes[ti]
        # KEYS: split on single spaces, empty tokens dropped (split_keys); no KEYS: an empty list
        parts = pc.split_pattern(keys_str.fill_null(""), " ")
        flat = parts.flatten()
        keep = pc.greater(pc.binary_length(flat), 0).to_numpy(zero_copy_only=False)
        cum = np.zeros(len(keep) + 1, dtype=np.int32)
        np.cumsum(keep, out=cum[1:])
        koffs = cum[parts.offsets.to_numpy()]
        keys_col = pa.ListArray.from_arrays(pa.array(koffs, type=pa.int32()), flat.filter(pa.array(keep)))
        # SCHEDULE_TOPIC_XXXX with a DELAY level: the delivery time, as the per-record loop computes it
        delay_at, _ = value_of(PROPERTY_DELAY_TIME_LEVEL)
        tcode_mask = schedule_tags_codes(
            ((i, parse_properties_checked(buf[int(R["properties_pos"][i]):int(R["properties_pos"][i])
                                              + int(R["properties_len"][i])])[0])
             for i in np.flatnonzero(delay_at >= 0).tolist() if topics[i] == RMQ_SYS_SCHEDULE_TOPIC),
            topics, sts, tcodes, n)
        # problems, in decode_slot's order: __CRC32#, malformed properties, body CRC
        crc_at, _ = value_of(PROPERTY_CRC32)
        todo = np.flatnonzero((crc_at >= 0) | ((flags & 2) != 0) | (crc_col == 0))
        probs: list = []
        per = np.zeros(n, dtype=np.int64)
        for i in todo.tolist():
            k = len(probs)
            j = int(crc_at[i])
            if j >= 0:
                value = values[j].as_py()
                ok, stored, actual = check_property_crc(mv, int(pos[i]), int(total[i]), value)
                if not ok:
                    probs.append(property_crc_problem(stored, actual))
            if flags[i] & 2:
                probs.append(MALFORMED_PROPERTIES)
            if crc_col[i] == 0:
                probs.append(BODY_CRC_MISMATCH)
            per[i] = len(probs) - k
        proffs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per, out=proffs[1:])
        rcrc = np.frombuffer(compiled().crc32_many(buf, np.ascontiguousarray(pos, dtype=np.int64),
                                                   np.ascontiguousarray(total, dtype=np.int64)), dtype=np.uint32)
        return (props_col, tags_arr, tcodes, tcode_mask, keys_col, uniq_arr, probs, proffs.astype(np.int32),
                rcrc.astype(np.int64))

    def _filtered(self, R):
        """(rows, topic ids) of the run that pass the row filter (time range, topics), or None when none does;
        the topic columns learn the run's new topics either way."""
        import numpy as np

        flt = self.flt
        if flt is not None and (flt.since is not None or flt.until is not None):
            sts = R["store_timestamp"]
            keep = np.ones(len(R), dtype=bool)
            if flt.since is not None:
                keep &= sts >= flt.since
            if flt.until is not None:
                keep &= sts <= flt.until
            R = R[keep]
        if not len(R):
            return None
        ids = topic_ids(self.u8, R, self.topic_ids)
        if len(self.topic_ids) > len(self.topic_names):
            self.topic_names = np.array(list(self.topic_ids), dtype=object)
            self.topic_partitions = np.array([topic_partition(t) for t in self.topic_names.tolist()], dtype=object)
        if flt is not None and flt.topics is not None:
            keep = np.array([t in flt.topics for t in self.topic_names.tolist()], dtype=bool)[ids]
            R, ids = R[keep], ids[keep]
        return (R, ids) if len(R) else None

    def _text_columns_python(self, R, topics, sts, crc_col):
        """``_text_columns`` record by record, where the properties cannot be split in bulk (in decode_slot's
        order: properties, their CRC, well-formedness, the body CRC)."""
        import numpy as np
        import pyarrow as pa

        buf, mv, n = self.buf, self.mv, len(R)
        pos_l, total_l = R["position"].tolist(), R["total_size"].tolist()
        crc32 = crc32_function()
        dicts: list = []
        probs: list = []
        proffs = [0]
        for p, tot, crc_ok, pp, pl in zip(pos_l, total_l, crc_col.tolist(), R["properties_pos"].tolist(),
                                          R["properties_len"].tolist()):
            props = {}
            if pl > 0:
                props, well_formed = parse_properties_checked(buf[pp:pp + pl])
                if PROPERTY_CRC32 in props:
                    ok, stored, actual = check_property_crc(mv, p, tot, props[PROPERTY_CRC32])
                    if not ok:
                        probs.append(property_crc_problem(stored, actual))
                if not well_formed:
                    probs.append(MALFORMED_PROPERTIES)
            if crc_ok == 0:
                probs.append(BODY_CRC_MISMATCH)
            dicts.append(props)
            proffs.append(len(probs))
        rcrc = [crc32(mv[p:p + tot]) for p, tot in zip(pos_l, total_l)]
        tags = [d.get(PROPERTY_TAGS) for d in dicts]
        tccache = self.tags_codes
        for tg in set(tags):
            if tg not in tccache:
                tccache[tg] = tags_code(tg)
        tcodes = [tccache[tg] for tg in tags]
        kl = [split_keys(d.get(PROPERTY_KEYS)) for d in dicts]
        koffs = np.cumsum([0] + [len(ks) for ks in kl], dtype=np.int64).astype(np.int32)
        poffs = np.cumsum([0] + [len(d) for d in dicts], dtype=np.int64).astype(np.int32)
        tcode_mask = schedule_tags_codes(
            ((i, d) for i, d in enumerate(dicts)
             if PROPERTY_DELAY_TIME_LEVEL in d and topics[i] == RMQ_SYS_SCHEDULE_TOPIC), topics, sts, tcodes, n)
        string, i32 = pa.string(), pa.int32()
        props_col = pa.MapArray.from_arrays(pa.array(poffs, type=i32),
                                            pa.array([k for d in dicts for k in d], type=string),
                                            pa.array([v for d in dicts for v in d.values()], type=string))
        keys_col = pa.ListArray.from_arrays(pa.array(koffs, type=i32),
                                            pa.array([x for ks in kl for x in ks], type=string))
        uniq_arr = pa.array([d.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for d in dicts], type=string)
        return (props_col, pa.array(tags, type=string), tcodes, tcode_mask, keys_col, uniq_arr, probs, proffs,
                rcrc)

    def _offset_msg_ids(self, R, store_v6, store_off):
        """The offsetMsgId column: store host and PHYSICALOFFSET field in hex, in bulk when no host is IPv6."""
        import numpy as np
        import pyarrow as pa

        buf, u8, n = self.buf, self.u8, len(R)
        pos, pof = R["position"], R["physical_offset_field"]
        if not store_v6.any():
            sh = np.ascontiguousarray(u8[(pos + store_off)[:, None] + np.arange(8)])
            idb = np.hstack([sh, pof.astype(">i8").view(np.uint8).reshape(n, 8)]).tobytes().hex().upper().encode()
            return pa.StringArray.from_buffers(n, pa.py_buffer(np.arange(0, 32 * n + 1, 32, dtype=np.int32)),
                                               pa.py_buffer(idb))
        return pa.array([offset_msg_id(bytes(buf[p + so:p + so + 16]) if v6 else bytes(buf[p + so:p + so + 4]),
                                       int.from_bytes(buf[p + so + (16 if v6 else 4):p + so + (20 if v6 else 8)],
                                                      "big", signed=True), f)
                         for p, so, v6, f in zip(pos.tolist(), store_off.tolist(), store_v6.tolist(), pof.tolist())],
                        type=pa.string())

    def batch(self, R):
        """One RecordBatch for a run of scanned records (rows of R), or None when the filter keeps nothing."""
        import numpy as np
        import pyarrow as pa

        kept = self._filtered(R)
        if kept is None:
            return None
        R, ids = kept
        buf, u8, task, schema = self.buf, self.u8, self.task, self.schema
        n = len(R)
        topics = self.topic_names[ids]
        R = self._check_body_crc(R)
        pos, total, bpos, blen = R["position"], R["total_size"], R["body_pos"], R["body_len"]
        sys_flag, sts, bts = R["sys_flag"], R["store_timestamp"], R["born_timestamp"]
        crc_col = R["crc_ok"]
        born_v6 = (sys_flag & _BORNHOST_V6) != 0
        store_v6 = (sys_flag & _STOREHOST_V6) != 0
        store_off = store_host_position(sys_flag)
        split = _split_properties(buf, R)
        (props_col, tags_arr, tcodes, tcode_mask, keys_col, uniq_arr, probs, proffs, rcrc) = (
            self._text_columns(R, split, topics, sts, crc_col, pos, total) if split is not None
            else self._text_columns_python(R, topics, sts, crc_col))
        bodies = ([buf[bp:bp + bl] if bl > 0 else b"" for bp, bl in zip(bpos.tolist(), blen.tolist())]
                  if self.with_body else None)

        i64, i32 = pa.int64(), pa.int32()

        def const(s):
            return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                                  pa.array([s])).cast(pa.string())

        def ts(ms):
            bad = (ms < MIN_TIMESTAMP_MS) | (ms > MAX_TIMESTAMP_MS)
            return pa.array(np.where(bad, 0, ms) * 1000, type=schema.field("born_timestamp").type,
                            mask=bad if bad.any() else None)

        def strs(values):
            return pa.array(values, type=pa.string())

        hcache = self.hosts
        days = np.floor_divide(sts, 86400000)
        valid = (sts >= MIN_TIMESTAMP_MS) & (sts <= MAX_TIMESTAMP_MS)
        udays, dinv = np.unique(np.where(valid, days, 0), return_inverse=True)
        dates = np.array([_day(d) for d in udays.tolist()], dtype=object)[dinv.reshape(-1)]
        if not valid.all():
            dates[~valid] = "invalid"
        body_crc = _gather(u8, pos + BODY_CRC_POSITION, 4, ">i4")
        arrays = {
            "source": const(task.source),
            "store_path": const(task.store_path),
            "file": const(task.name),
            "file_position": pa.array(pos, i64),
            "physical_offset": pa.array(pos + task.start, i64),
            "physical_offset_field": pa.array(R["physical_offset_field"], i64),
            "total_size": pa.array(total.astype(np.int32), i32),
            "magic_version": pa.array(R["magic_version"].astype(np.int32), i32),
            "topic": strs(topics),
            "queue_id": pa.array(R["queue_id"].astype(np.int32), i32),
            "queue_offset": pa.array(R["queue_offset"], i64),
            "flag": pa.array(_gather(u8, pos + FLAG_POSITION, 4, ">i4").astype(np.int32), i32),
            "sys_flag": pa.array(sys_flag.astype(np.int32), i32),
            "transaction_type": strs(self.tx_names[(sys_flag & 0xC) >> 2]),
            "born_timestamp": ts(bts),
            "born_timestamp_ms": pa.array(bts, i64),
            "born_host": strs(_host_column(buf, u8, pos, born_v6, BORN_HOST_POSITION, hcache)),
            "store_timestamp": ts(sts),
            "store_timestamp_ms": pa.array(sts, i64),
            "store_host": strs(_host_column(buf, u8, pos, store_v6, store_off, hcache)),
            "reconsume_times": pa.array(_gather(u8, bpos - RECONSUME_TIMES_BEFORE_BODY, 4, ">i4").astype(np.int32),
                                        i32),
            "prepared_transaction_offset": pa.array(_gather(u8, bpos - PREPARED_TRANSACTION_OFFSET_BEFORE_BODY, 8,
                                                            ">i8"), i64),
            "tags": tags_arr,
            "tags_code": pa.array(np.array(tcodes, dtype=np.int64), i64, mask=tcode_mask),
            "keys": keys_col,
            "uniq_key": uniq_arr,
            "offset_msg_id": self._offset_msg_ids(R, store_v6, store_off),
            "properties": props_col,
            "body_size": pa.array(np.maximum(blen, 0).astype(np.int32), i32),
            "body_crc": pa.array(body_crc, i64),
            # unchecked by the scan = an empty body: crc32 of nothing is 0 (store.walk.records.decode_slot)
            "crc_ok": pa.array(np.where(crc_col < 0, body_crc == 0, crc_col == 1), pa.bool_()),
            "record_crc32": pa.array(np.array(rcrc, dtype=np.int64), i64),
            "problems": pa.ListArray.from_arrays(pa.array(proffs, type=i32), strs(probs)),
            "store_date": strs(dates),
            "topic_partition": strs(self.topic_partitions[ids]),
        }
        arrays["txn_state"] = strs(self._txn_states(pos + task.start, n))
        if self.with_body:
            arrays[BODY] = pa.array(bodies, pa.binary())
        return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)

def file_batches(task: FileTask, *, with_body: bool = False, flt: RowFilter | None = None,
                 result: FileResult | None = None, batch_rows: int = BATCH_ROWS):
    """Arrow RecordBatches (at most ``batch_rows`` rows each) for one commitlog file, scanned from position 0 to
    its blank record / zero tail / end; for a chunk (``task.pos``, ``task.stops``), the file's walk from ``pos``
    up to the first of ``stops`` it lands on. ``result`` (optional) receives the row count, the damage seen and
    where the walk ended (``landed``)."""
    import numpy as np

    from ..store.walk.resync import first_at  # the chunk walks' landing rule, shared with the store's walk

    schema = arrow_schema(with_body)
    mf = MappedFile(task.path, task.start, dledger=task.dledger)
    stops = np.array(task.stops, dtype=np.int64) if task.stops else None
    landed = mf.size
    try:
        dec = RowDecoder(mf.buffer, task, schema, with_body, flt)
        try:
            for ev in walk_file(mf, task.pos, check_crc=True, run_records=RUN_RECORDS, crc_continue=True):
                if type(ev) is RecordRun:
                    run = ev
                    if stops is not None:
                        first = first_at(run.records["position"], stops)
                        if first >= 0:  # the walk reaches a later chunk's start: that chunk has the rest
                            landed = int(run.records["position"][first])
                            run = run[:first]
                elif stops is not None and ev.position in task.stops:
                    landed = ev.position
                    break
                elif ev.kind == Kind.CRC:
                    # a row all the same (crc_ok false): the record again, for its columns, without the check
                    run = next(walk_file(mf, ev.position, ev.position + ev.size, check_crc=False, run_records=1))
                else:
                    if ev.kind in (Kind.HALF, Kind.ILLEGAL) and result is not None:
                        result.damage.append(FileDamage(task.source, task.path, ev.offset, str(ev.kind), ev.reason))
                    continue
                b = dec.batch(run.records) if len(run) else None
                if b is not None:
                    if result is not None:
                        result.rows += b.num_rows
                    for off in range(0, b.num_rows, batch_rows):
                        yield b.slice(off, batch_rows)
                if landed < mf.size:
                    break
        finally:
            dec.close()
    finally:
        if result is not None:
            result.landed = landed
        mf.close()
