"""One commit-log file's records: the record scan (broker semantics), the walk of a plain file, and decoding.

The scan mirrors ``CommitLog.checkMessageAndReturnSize`` (FORMATS.md §1.10/§1.11): it reports what it
finds and never decides policy. Callers (walk, verify, recover, rebuild) choose to stop, skip or resync.
The hot loop uses the ``struct`` layouts derived from the construct schema in ``formats.commitlog``.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from ...formats.commitlog import (
    CRC32_RESERVED_LEN,
    HEADER_INDEX,
    HEADER_STRUCT_NAMES,
    HEADER_STRUCTS,
    HEADER_V4,
    INT8,
    INT16,
    PREFIX,
    decode_crc32_property,
    parse_properties_checked,
)
from ...formats.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_CRC32,
    RECORD_SIZE_CAP,
    u32hex,
)
from ...formats.crc import crc32 as _crc32
from ...formats.crc import crc32_function
from ..mapped import MappedFile
from ..scanner import compiled
from .kinds import BLANK, CRC_MISMATCH, DAMAGE_KINDS, END, FILE_DONE_KINDS, FILE_END, GAP, HALF, ILLEGAL, MESSAGE, Kind

if TYPE_CHECKING:
    import numpy as np

    from ..message import Message

# header tuple positions of the fields the scanner reads in its hot loop (bound once, named once)
_SYS_FLAG, _BODY_CRC, _BODY_LENGTH = HEADER_INDEX["sys_flag"], HEADER_INDEX["body_crc"], HEADER_INDEX["body_length"]


# Smallest record TOTALSIZE: all fixed fields, empty body/topic/properties (V1, IPv4).
MIN_RECORD_SIZE = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2

_V1 = MESSAGE_MAGIC_CODE_V1
_V2 = MESSAGE_MAGIC_CODE_V2
_BLANK = BLANK_MAGIC_CODE

class RecordHeader(NamedTuple):
    """A record's fixed header as ``HEADER_STRUCTS`` unpacks it (field names: ``HEADER_STRUCT_NAMES``)."""

    total_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int


if RecordHeader._fields != tuple(HEADER_STRUCT_NAMES):  # the names are spelled here for type checkers only
    raise ImportError(f"RecordHeader fields {RecordHeader._fields} differ from HEADER_STRUCT_NAMES")


def unpack_header(buf, pos: int) -> RecordHeader:
    hdr = HEADER_V4.unpack_from(buf, pos)
    sf = hdr[_SYS_FLAG] & 0x30
    return RecordHeader._make(HEADER_STRUCTS[sf].unpack_from(buf, pos) if sf else hdr)


# What the scan knows of every well-formed record, one int64 each (the compiled scanner's row layout,
# store/_fastscan.c). Positions are relative to the record's file; crc_ok is -1 when not checked.
RECORD_FIELDS = ("position", "total_size", "body_pos", "body_len", "crc_ok", "sys_flag", "queue_id", "queue_offset",
                 "physical_offset_field", "store_timestamp", "born_timestamp", "topic_pos", "topic_len",
                 "properties_pos", "properties_len", "magic_version")
_NFIELDS = len(RECORD_FIELDS)
_FIELD_INDEX = {n: i for i, n in enumerate(RECORD_FIELDS)}
# one compiled-scanner row: NFIELDS native int64 (a run's rows read without numpy, ``RecordRun.row_tuples``)
_ROW = struct.Struct(f"={_NFIELDS}q")
@functools.cache
def _record_dtype():
    """RECORD_DTYPE (module __getattr__). numpy is imported on the first run viewed as an array, not with this
    module: a key look-up on a small store reads its records as row tuples and never needs it (~80 ms of start-up)."""
    import numpy as np

    return np.dtype([(n, np.int64) for n in RECORD_FIELDS])


def __getattr__(name: str):
    if name == "RECORD_DTYPE":
        return _record_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Records per run of the walk (bulk consumers amortise their per-run numpy overhead over large runs).
RECORDS_PER_RUN = 8192


class RecordRun:
    """A run of consecutive well-formed records of one file (what the broker's check accepts).

    ``records`` is a numpy array of ``RECORD_DTYPE`` (``run.records["queue_offset"]``), positions relative
    to ``file``. ``rows`` is the same memory as a 2-D int64 array in ``RECORD_FIELDS`` order (the compiled
    scanner's output; kept while modules still index columns by number). A run from a scanner holds the
    scanner's rows (``raw``: the compiled scanner's bytes, or the pure-Python scanner's row lists) and makes
    the array on first use; ``row_tuples`` reads them without numpy."""

    __slots__ = ("file", "_records", "_raw")

    def __init__(self, file: MappedFile, records: np.ndarray | None = None, raw: bytes | list | None = None):
        self.file = file
        self._records = records
        self._raw = raw

    @property
    def records(self) -> np.ndarray:
        r = self._records
        if r is None:
            import numpy as np

            raw = self._raw
            if type(raw) is list:
                r = np.array([tuple(x) for x in raw], dtype=_record_dtype())
            else:
                r = np.frombuffer(raw, dtype=_record_dtype())  # type: ignore[arg-type]
            self._records = r
        return r

    def row_tuples(self) -> list[tuple]:
        """The records as tuples in ``RECORD_FIELDS`` order, without numpy (small consumers)."""
        raw = self._raw
        if raw is None:
            return self.records.tolist()
        if type(raw) is list:
            return [tuple(x) for x in raw]
        return list(_ROW.iter_unpack(raw))

    def column(self, name: str) -> list[int]:
        """One field of every record (``RECORD_FIELDS``), as a list, without numpy."""
        raw = self._raw
        if raw is None:
            return self.records[name].tolist()
        i = _FIELD_INDEX[name]
        if type(raw) is list:
            return [r[i] for r in raw]
        return memoryview(raw).cast("q")[i::_NFIELDS].tolist()  # type: ignore[arg-type]

    @property
    def rows(self) -> np.ndarray:
        """The same memory as a 2-D int64 array (RECORD_FIELDS order): what the compiled dispatcher takes."""
        import numpy as np

        return self.records.view(np.int64).reshape(len(self.records), _NFIELDS)

    @property
    def base(self) -> int:
        """Physical offset of the file's first byte."""
        return self.file.start

    @property
    def end(self) -> int:
        """Position in the file after the last record."""
        raw = self._raw
        if raw is None:
            last = self.records[-1]
            return int(last["position"] + last["total_size"])
        row = raw[-1] if type(raw) is list else _ROW.unpack_from(raw, len(raw) - _ROW.size)
        return row[0] + row[1]

    def __len__(self) -> int:
        raw = self._raw
        if raw is None:
            return len(self.records)
        return len(raw) if type(raw) is list else len(raw) // _ROW.size

    def __getitem__(self, sel) -> RecordRun:
        """A run of the selected records (a slice, a mask or indices); the run itself when that is all of it
        (no copy: selecting every record is the common case of bulk consumers)."""
        import numpy as np

        records = self.records
        n = len(records)
        if isinstance(sel, np.ndarray) and (sel.dtype == bool and sel.all() or sel.dtype != bool and sel.size == n
                                            and (n == 0 or (sel[0] == 0 and sel[-1] == n - 1
                                                            and bool((np.diff(sel) == 1).all())))):
            return self
        return RecordRun(self.file, np.ascontiguousarray(records[sel]))

    def __repr__(self) -> str:
        return f"RecordRun({self.file.name if self.file else None}, {len(self)} records)"


def crc32_trailer_records(buf, records: np.ndarray) -> np.ndarray:
    """Indexes (int64) of the records (RECORD_DTYPE, positions in ``buf``) whose end holds the broker's
    ``__CRC32#`` trailer (``formats.properties.crc32_trailer_rows``): the compiled scanner's one pass over the rows
    where it is built (numpy: strided passes and a gather)."""
    import numpy as np

    from ...formats.properties import CRC32_TRAILER_PREFIX, TRAILER_AT, crc32_trailer_rows

    ext = compiled()
    if ext is not None and hasattr(ext, "trailer_rows"):
        rows = np.ascontiguousarray(records).view(np.int64)
        return np.frombuffer(ext.trailer_rows(rows, buf, CRC32_TRAILER_PREFIX, TRAILER_AT), dtype=np.int64)
    return crc32_trailer_rows(np.frombuffer(buf, dtype=np.uint8), records["position"] + records["total_size"])


class Record:
    """One thing the scan handed to Python at a physical offset: damage, a blank record, the data's end,
    the file's end, or (from the pure-Python scanner, see ``walk(python_runs=False)``) a well-formed record.

    For MESSAGE/HALF/CRC records ``header`` is the ``RecordHeader`` (unpacked on first use when the compiled
    scanner found the record) and ``body_pos`` the position of the body in ``file``; ``crc_ok`` is None when
    not checked. ``reason`` says what is wrong (empty for MESSAGE and BLANK)."""

    __slots__ = ("kind", "offset", "size", "file", "position", "_header", "body_pos", "crc_ok", "reason")

    def __init__(self, kind: Kind, offset: int, size: int, file: MappedFile, position: int,
                 header: tuple | None = None, body_pos: int = 0, crc_ok: bool | None = None, reason: str = ""):
        self.kind = kind
        self.offset = offset
        self.size = size
        self.file = file
        self.position = position
        self._header = header
        self.body_pos = body_pos
        self.crc_ok = crc_ok
        self.reason = reason

    @property
    def header(self) -> RecordHeader | None:
        h = self._header
        if h is None:
            if self.kind in (MESSAGE, HALF, CRC_MISMATCH):
                h = self._header = unpack_header(self.file.buffer, self.position)
        elif type(h) is not RecordHeader:
            h = self._header = RecordHeader._make(h)
        return h

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def damaged(self) -> bool:
        return self.kind in DAMAGE_KINDS

    def __repr__(self) -> str:
        return f"Record({self.kind}, offset={self.offset}, size={self.size}, reason={self.reason!r})"


def _python_row(buf, t) -> list:
    """RECORD_FIELDS of a record ``scan_buffer`` accepted (what the compiled scanner would have reported)."""
    kind, pos, total, hdr, bpos, crc_ok, _ = t
    h = RecordHeader._make(hdr)
    blen = h.body_length
    _, props, ppos = _topic_and_properties(buf, h, bpos)
    tsz = 2 if h.magic_code == _V2 else 1
    tpos = bpos + max(blen, 0) + tsz
    return [pos, total, bpos, blen, -1 if crc_ok is None else int(crc_ok), h.sys_flag, h.queue_id, h.queue_offset,
            h.physical_offset, h.store_timestamp, h.born_timestamp, tpos, ppos - tpos, ppos + 2, len(props),
            1 if h.magic_code == _V1 else 2]


python_row = _python_row  # for the DLedger entry walk (store.dledger), which scans one record per entry


def _python_run(file: MappedFile, rows: list) -> RecordRun:
    return RecordRun(file, raw=rows)


def walk_records(file: MappedFile, start: int = 0, limit: int | None = None, *, check_crc: bool = True,
              accept_v2: bool = True, run_records: int = RECORDS_PER_RUN, python_runs: bool = True,
              crc_continue: bool = False, release_pages: bool = False) -> Iterator[RecordRun | Record]:
    """The broker's check over one plain (not DLedger) file, ``file.buffer[start:limit]`` (default: to the
    file's end); ``walk.file.walk_file`` chooses this or the DLedger entry walk.

    Runs of well-formed records come from the selected scanner (``scanner.compiled()``) as ``RecordRun``s of
    at most ``run_records`` records; every other position is decided by the pure-Python ``scan_buffer`` (one
    implementation of each unusual case) and comes as a ``Record``. Ends after the first record of a kind in
    ``FILE_DONE_KINDS``; after HALF it goes on at offset + size, as the broker's dispatcher does.

    ``python_runs=False``: without the compiled scanner, accepted records come one by one as MESSAGE
    ``Record``s (no row built: per-record consumers). ``crc_continue``: a record whose only fault is its body
    CRC comes as a CRC ``Record`` (``crc_ok`` False, the structure verdict wins over the CRC one) and the
    walk goes on after it, instead of ending the file. ``release_pages``: drop walked pages from the map
    (``PageReleaser``).
    """
    buf = file.buffer
    if limit is None:
        limit = file.size
    base = file.start
    ext = compiled()
    rel = PageReleaser(buf, start, enabled=release_pages)
    nxt = rel.next
    pos = start
    steps = _python_steps(buf, start, limit, check_crc, accept_v2, crc_continue) if ext is None else iter(())
    pending: list = []  # pure Python: rows of accepted records not handed out yet
    while True:
        if ext is not None:
            raw, n, pos = ext.scan_messages(buf, pos, limit, check_crc, accept_v2, run_records, RECORD_SIZE_CAP)
            if n:
                run = RecordRun(file, raw=raw)
                if pos >= nxt:
                    rel.advance(_ROW.unpack_from(raw, 0)[0])
                    nxt = rel.next
                yield run
                if pos >= nxt:
                    rel.advance(_ROW.unpack_from(raw, len(raw) - _ROW.size)[0])
                    nxt = rel.next
                if n == run_records:
                    continue
            one = next(_python_steps(buf, pos, limit, check_crc, accept_v2, crc_continue))
        else:
            one = next(steps)
            if one[0] == MESSAGE and python_runs:
                pending.append(_python_row(buf, one))
                if len(pending) < run_records:
                    continue
            if pending:
                run = _python_run(file, pending)
                pending = []
                yield run
                if run.end >= nxt:
                    rel.advance(run.end)
                    nxt = rel.next
                if one[0] == MESSAGE and python_runs:
                    continue
        kind, p, size, hdr, bpos, crc_ok, reason = one
        if kind == MESSAGE and python_runs:
            # the compiled scanner declined a record scan_buffer accepts: a run of one
            yield _python_run(file, [_python_row(buf, one)])
        else:
            yield Record(kind, base + p, size, file, p, hdr, bpos, crc_ok, reason)
        if kind in FILE_DONE_KINDS and not (kind == CRC_MISMATCH and crc_continue):
            rel.finish(file.size)
            return
        if p >= nxt:
            rel.advance(p)
            nxt = rel.next
        pos = p + size


def _python_steps(buf, pos: int, limit: int, check_crc: bool, accept_v2: bool, crc_continue: bool):
    """``scan_buffer``; with ``crc_continue`` a record whose only fault is its body CRC comes as
    ``(CRC_MISMATCH, ..., crc_ok=False, ...)`` and the scan goes on after it (the structure verdict of a
    record that also fails its CRC wins: it comes as HALF/ILLEGAL)."""
    while True:
        for one in scan_buffer(buf, pos, limit, check_crc, accept_v2):
            if one[0] != CRC_MISMATCH or not crc_continue:
                yield one
                continue
            v = next(scan_buffer(buf, one[1], limit, False, accept_v2))
            if v[0] == MESSAGE:
                yield (CRC_MISMATCH, v[1], v[2], v[3], v[4], False, one[6])
            else:
                yield v
                if v[0] != HALF:
                    return
            pos = v[1] + v[2]
            break
        else:
            return


def fast_available() -> bool:
    """Whether the walk runs the compiled scanner (``scanner.compiled()``)."""
    return compiled() is not None


def scan_buffer(buf, start: int, limit: int, check_crc: bool = True, accept_v2: bool = True) -> Iterator[tuple]:
    """Walk records in ``buf[start:limit]`` like the broker's recovery/dispatch loop.

    Yields tuples ``(kind, pos, size, header, body_pos, crc_ok, reason)``. After BLANK, END, ILLEGAL,
    CRC_MISMATCH or FILE_END nothing more is yielded (the rest of the buffer cannot be trusted to be on a
    record boundary); after HALF the scan continues at ``pos + size`` as the dispatcher does.
    """
    # A hot loop, long on purpose: every record of a store without the compiled scanner passes here, and the
    # names it binds below and the checks inlined in one body are what keep it near the compiled scanner's order.
    mv = memoryview(buf)
    pos = start
    v4 = HEADER_V4
    v4_size = v4.size
    structs = HEADER_STRUCTS
    prefix = PREFIX.unpack_from
    int8 = INT8.unpack_from
    int16 = INT16.unpack_from
    crc32 = crc32_function()
    try:
        while True:
            rem = limit - pos
            if rem <= 0:
                yield (FILE_END, pos, 0, None, 0, None, "end of file without a blank record")
                return
            if rem < 8:
                if not any(mv[pos:limit]):
                    yield (END, pos, rem, None, 0, None, "zero-filled space")
                else:
                    yield (ILLEGAL, pos, rem, None, 0, None, f"{rem} trailing bytes, too short for a record header")
                return
            total, magic = prefix(buf, pos)
            if magic == _V1 or (magic == _V2 and accept_v2):
                if total < MIN_RECORD_SIZE or total > rem or total > RECORD_SIZE_CAP:
                    if total > rem:
                        why = f"TOTALSIZE {total} runs past the end of the file ({rem} bytes left)"
                    else:
                        why = f"absurd TOTALSIZE {total}"
                    yield (ILLEGAL, pos, rem, None, 0, None, why)
                    return
                if rem < v4_size + 3:
                    yield (ILLEGAL, pos, rem, None, 0, None, "record header cut off")
                    return
                hdr = v4.unpack_from(buf, pos)
                sf = hdr[_SYS_FLAG] & 0x30
                if sf:
                    st = structs[sf]
                    if rem < st.size + 3:
                        yield (ILLEGAL, pos, rem, None, 0, None, "record header cut off")
                        return
                    hdr = st.unpack_from(buf, pos)
                    bpos = pos + st.size
                else:
                    bpos = pos + v4_size
                blen = hdr[_BODY_LENGTH]
                crc_ok = None
                if blen > 0:
                    if blen > total or bpos + blen > limit:
                        yield (ILLEGAL, pos, total, hdr, bpos, None, f"BODYLEN {blen} exceeds the record")
                        return
                    if check_crc:
                        crc_ok = (crc32(mv[bpos:bpos + blen]) & 0x7FFFFFFF) == hdr[_BODY_CRC]
                        if not crc_ok:
                            yield (CRC_MISMATCH, pos, total, hdr, bpos, False, "body CRC mismatch")
                            return
                    tpos = bpos + blen
                else:
                    tpos = bpos
                if magic == _V1:
                    if tpos + 1 > limit:
                        yield (ILLEGAL, pos, total, hdr, bpos, crc_ok, "topic length beyond the file")
                        return
                    tlen = int8(buf, tpos)[0]
                    ppos = tpos + 1 + tlen
                    tsz = 1
                else:
                    if tpos + 2 > limit:
                        yield (ILLEGAL, pos, total, hdr, bpos, crc_ok, "topic length beyond the file")
                        return
                    tlen = int16(buf, tpos)[0]
                    ppos = tpos + 2 + tlen
                    tsz = 2
                if tlen < 0 or ppos + 2 > limit:
                    yield (ILLEGAL, pos, total, hdr, bpos, crc_ok, f"bad topic length {tlen}")
                    return
                plen = int16(buf, ppos)[0]
                if plen > 0 and ppos + 2 + plen > limit:
                    yield (ILLEGAL, pos, total, hdr, bpos, crc_ok, f"PROPLEN {plen} beyond the file")
                    return
                calc = (bpos - pos) + (blen if blen > 0 else 0) + tsz + tlen + 2 + (plen if plen > 0 else 0)
                if calc != total:
                    yield (HALF, pos, total, hdr, bpos, crc_ok,
                           f"lengths inside the record add up to {calc}, TOTALSIZE says {total}")
                    pos += total
                    continue
                yield (MESSAGE, pos, total, hdr, bpos, crc_ok, "")
                pos += total
            elif magic == _BLANK:
                yield (BLANK, pos, total, None, 0, None, "")
                return
            elif total == 0 and magic == 0:
                yield (END, pos, rem, None, 0, None, "zero-filled space")
                return
            else:
                yield (ILLEGAL, pos, rem, None, 0, None,
                       f"illegal magic code {u32hex(magic)} (TOTALSIZE {total})")
                return
    finally:
        mv.release()


def _topic_and_properties(buf, hdr: RecordHeader, bpos: int) -> tuple[str, bytes, int]:
    blen = hdr.body_length
    tpos = bpos + (blen if blen > 0 else 0)
    if hdr.magic_code == _V2:
        tlen = INT16.unpack_from(buf, tpos)[0]
        tpos += 2
    else:
        tlen = INT8.unpack_from(buf, tpos)[0]
        tpos += 1
    topic = bytes(buf[tpos:tpos + tlen]).decode("utf-8", "replace")
    ppos = tpos + tlen
    plen = INT16.unpack_from(buf, ppos)[0]
    props = bytes(buf[ppos + 2:ppos + 2 + plen]) if plen > 0 else b""
    return topic, props, ppos


def topic_and_properties(buf, hdr: tuple, bpos: int) -> tuple[str, bytes]:
    """Topic (decoded) and raw properties of a record the scan accepted."""
    topic, props, _ = _topic_and_properties(buf, RecordHeader._make(hdr), bpos)
    return topic, props


@functools.cache
def _message_class() -> type[Message]:
    """``Message``, imported on the first decode: walks that never decode a record (``verify``, ``summary``) skip
    its imports (hashlib, base64, the message-id and compression modules); bound once, not per record."""
    from ..message import Message

    return Message


def decode_slot(buf, base: int, pos: int, hdr: tuple | None, bpos: int, crc_ok, path: str = "") -> Message:
    """Full decode of a record the scan accepted (``hdr``: its header, None to unpack it here)."""
    h = hdr if type(hdr) is RecordHeader else unpack_header(buf, pos) if hdr is None else RecordHeader._make(hdr)
    blen = h.body_length
    body = bytes(buf[bpos:bpos + blen]) if blen > 0 else b""
    if crc_ok is None:
        # an empty body too: the broker skips its check (bodyLen > 0 guards it) and crc32 of nothing is 0, so
        # a stored 0 is right and anything else is not; None would read as "not verified"
        crc_ok = (_crc32(body) & 0x7FFFFFFF) == h.body_crc
    topic, props_raw, _ = _topic_and_properties(buf, h, bpos)
    props, well_formed = parse_properties_checked(props_raw)
    msg = _message_class()(
        physical_offset=base + pos, total_size=h.total_size, magic_version=1 if h.magic_code == _V1 else 2,
        body_crc=h.body_crc, crc_ok=crc_ok, queue_id=h.queue_id, flag=h.flag, queue_offset=h.queue_offset,
        physical_offset_field=h.physical_offset, sys_flag=h.sys_flag, born_timestamp=h.born_timestamp,
        born_ip=h.born_ip, born_port=h.born_port, store_timestamp=h.store_timestamp, store_ip=h.store_ip,
        store_port=h.store_port, reconsume_times=h.reconsume_times,
        prepared_transaction_offset=h.prepared_transaction_offset, body=body, topic=topic,
        properties_raw=props_raw, properties=props, file=path, position=pos,
    )
    if PROPERTY_CRC32 in props:
        stored = decode_crc32_property(props[PROPERTY_CRC32])
        rec_end = pos + h.total_size
        actual = _crc32(memoryview(buf)[pos:rec_end - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
        msg.property_crc_ok = stored == actual
        if not msg.property_crc_ok:
            msg.problems.append(f"__CRC32# property {stored} != crc of record {actual}")
    if props_raw and not well_formed:
        msg.problems.append("properties string has a piece without a name/value separator (\\x01)")
    if crc_ok is False:
        msg.problems.append("body CRC mismatch")
    return msg


# Walked CommitLog pages are dropped from the process' map every this many bytes.
RELEASE_EVERY = 64 << 20


class PageReleaser:
    """Drops already-walked pages of a read-only file map (``MADV_DONTNEED``) every ``RELEASE_EVERY``
    bytes, so a walk's RSS does not grow with the file size. The pages stay in the page cache and are
    faulted back in from the file if a caller reads a released range again (a Record kept for later)."""

    __slots__ = ("buf", "released", "next", "ok")

    def __init__(self, buf, pos: int, enabled: bool = True):
        import mmap

        self.buf = buf
        self.released = pos - pos % mmap.PAGESIZE
        self.ok = enabled and isinstance(buf, mmap.mmap) and hasattr(buf, "madvise")
        self.next: float = self.released + RELEASE_EVERY if self.ok else float("inf")

    def advance(self, pos: int) -> None:
        import mmap

        if pos < self.next or not self.ok:
            return
        upto = pos - pos % mmap.PAGESIZE
        try:
            self.buf.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
        except (OSError, ValueError):
            self.ok = False
            self.next = float("inf")
            return
        self.released = upto
        self.next = upto + RELEASE_EVERY

    def finish(self, size: int) -> None:
        import mmap

        if self.ok and size > self.released:
            try:
                self.buf.madvise(mmap.MADV_DONTNEED, self.released, size - self.released)
            except (OSError, ValueError):
                pass
        self.ok = False


@dataclass
class Gap:
    """A range of physical offsets no commitlog file covers (deleted by retention, or missing)."""

    start: int
    end: int
    reason: str = field(default="", compare=False)

    kind = GAP
    file = None  # no file covers it

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def offset(self) -> int:
        return self.start
