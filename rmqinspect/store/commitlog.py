"""CommitLog files: offset -> file mapping, the record scan (broker semantics), and message decoding.

The scan mirrors ``CommitLog.checkMessageAndReturnSize`` (FORMATS.md §1.10/§1.11): it reports what it
finds and never decides policy. Callers (walk, verify, recover, rebuild) choose to stop, skip or resync.
The hot loop uses the ``struct`` layouts derived from the construct schema in ``formats.commitlog``.
"""

from __future__ import annotations

import collections
import functools
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from ..errors import CorruptDataError, OffsetOutOfStoreError, StoreNotFoundError
from ..formats.commitlog import (
    CRC32_RESERVED_LEN,
    HEADER_INDEX,
    HEADER_STRUCT_NAMES,
    HEADER_STRUCTS,
    HEADER_V4,
    INT8,
    INT16,
    PREFIX,
    decode_crc32_property,
    parse_properties,
    properties_well_formed,
)
from ..formats.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_CRC32,
    RECORD_SIZE_CAP,
    u32hex,
)
from ..formats.crc import crc32 as _crc32
from ..formats.crc import crc32_function
from .broker_conf import BrokerConf, Setting
from .layout import StoreLayout
from .mapped import MappedFile
from .message import Message
from .scanner import compiled

if TYPE_CHECKING:
    import numpy as np

# header tuple positions of the fields the scanner reads in its hot loop (bound once, named once)
_SYS_FLAG, _BODY_CRC, _BODY_LENGTH = HEADER_INDEX["sys_flag"], HEADER_INDEX["body_crc"], HEADER_INDEX["body_length"]


class Kind(StrEnum):
    """What the scan found at a physical offset. The values are the words the reports print."""

    MESSAGE = "message"  # a record that passed the broker's check
    BLANK = "blank"  # end-of-file blank record (BLANK_MAGIC_CODE): continue in the next file
    END = "end"  # zero-filled space: where written data stops
    ILLEGAL = "illegal"  # broker: (-1, false) - bad magic, absurd size, unreadable
    CRC = "crc"  # broker: (-1, false) because the body CRC differs (only when checking CRCs)
    HALF = "half"  # broker: (TOTALSIZE, false) - lengths inside the record disagree with TOTALSIZE
    FILE_END = "file_end"  # the file ended exactly at a record boundary without a blank record
    GAP = "gap"  # no file covers this offset range (deleted by retention, or missing)


MESSAGE = Kind.MESSAGE
BLANK = Kind.BLANK
END = Kind.END
ILLEGAL = Kind.ILLEGAL
CRC_MISMATCH = Kind.CRC
HALF = Kind.HALF
FILE_END = Kind.FILE_END
GAP = Kind.GAP

# Kinds that are damage (the broker's check failed); END is where data stops, not damage.
DAMAGE_KINDS = frozenset((ILLEGAL, CRC_MISMATCH, HALF))
# Kinds after which nothing more of a file is read (after HALF the scan goes on at offset + size).
FILE_DONE_KINDS = frozenset((END, ILLEGAL, CRC_MISMATCH, BLANK, FILE_END))

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
RUN_BATCH = 8192


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


def walk_file(file: MappedFile, start: int = 0, limit: int | None = None, *, check_crc: bool = True,
              accept_v2: bool = True, batch: int = RUN_BATCH, python_runs: bool = True,
              crc_continue: bool = False, release_pages: bool = False) -> Iterator[RecordRun | Record]:
    """The broker's check over one file, ``file.buffer[start:limit]`` (default: to the file's end).

    Runs of well-formed records come from the selected scanner (``scanner.compiled()``) as ``RecordRun``s of
    at most ``batch`` records; every other position is decided by the pure-Python ``scan_buffer`` (one
    implementation of each unusual case) and comes as a ``Record``. Ends after the first record of a kind in
    ``FILE_DONE_KINDS``; after HALF it goes on at offset + size, as the broker's dispatcher does.

    ``python_runs=False``: without the compiled scanner, accepted records come one by one as MESSAGE
    ``Record``s (no row built: per-record consumers). ``crc_continue``: a record whose only fault is its body
    CRC comes as a CRC ``Record`` (``crc_ok`` False, the structure verdict wins over the CRC one) and the
    walk goes on after it, instead of ending the file. ``release_pages``: drop walked pages from the map
    (``PageReleaser``).
    """
    if file.dledger:
        # entries around the records (DLedger mode): the same events, from the entry walk
        from .dledger import walk_entries

        yield from walk_entries(file, start, limit, check_crc=check_crc, accept_v2=accept_v2, batch=batch,
                                python_runs=python_runs, crc_continue=crc_continue, release_pages=release_pages)
        return
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
            raw, n, pos = ext.scan_messages(buf, pos, limit, check_crc, accept_v2, batch, RECORD_SIZE_CAP)
            if n:
                run = RecordRun(file, raw=raw)
                if pos >= nxt:
                    rel.advance(_ROW.unpack_from(raw, 0)[0])
                    nxt = rel.next
                yield run
                if pos >= nxt:
                    rel.advance(_ROW.unpack_from(raw, len(raw) - _ROW.size)[0])
                    nxt = rel.next
                if n == batch:
                    continue
            one = next(_python_steps(buf, pos, limit, check_crc, accept_v2, crc_continue))
        else:
            one = next(steps)
            if one[0] == MESSAGE and python_runs:
                pending.append(_python_row(buf, one))
                if len(pending) < batch:
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
    props = parse_properties(props_raw)
    msg = Message(
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
    if props_raw and not properties_well_formed(props_raw):
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


@dataclass
class CommitLog:
    """The commitlog files of one store, ordered by start offset, with the inferred mapped file size."""

    files: list[MappedFile]
    file_size: int
    gaps: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, layout: StoreLayout, file_size: int | None = None) -> CommitLog:
        entries = layout.commitlog_file_paths()
        if not entries:
            raise StoreNotFoundError("no commitlog files", layout.commitlog_dirs[0] if layout.commitlog_dirs else
                                     layout.root)
        # DLedger mode: the member's data files, walked through their entries (MappedFile.dledger)
        dledger = layout.dledger is not None
        files = [MappedFile(p, start, dledger=dledger) for start, p in entries]
        notes = list(layout.notes)
        if file_size is None:
            file_size = infer_file_size(files, notes)
        gaps = []
        for a, b in zip(files, files[1:]):
            if a.start + file_size < b.start:
                gaps.append(Gap(a.start + file_size, b.start))
            elif a.start + file_size > b.start:
                notes.append(f"{a.name} and {b.name} overlap (file size {file_size})")
        for f in files:
            if f.start % file_size and not layout.single_file:
                notes.append(f"{f.name}: start offset is not a multiple of the file size {file_size}")
            if f.size != file_size and f is not files[-1]:
                notes.append(f"{f.name}: length {f.size} differs from the mapped file size {file_size}; "
                             "RocketMQ 4.9.8+/5.x refuses to load it")
        return cls(files, file_size, gaps, notes)

    # --- geometry ----------------------------------------------------------------------------------
    @property
    def dledger(self) -> bool:
        """Whether the files are DLedger data files (entries around the records)."""
        return bool(self.files) and self.files[0].dledger

    @property
    def min_offset(self) -> int:
        return self.files[0].start

    @property
    def end_offset(self) -> int:
        """End of the last file's bytes (not of its data)."""
        return self.files[-1].start + self.files[-1].size

    def locate(self, offset: int) -> tuple[MappedFile, int]:
        """Physical offset -> (file, position). Raises OffsetOutOfStoreError for gaps and outside."""
        import bisect

        starts = [f.start for f in self.files]
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            raise OffsetOutOfStoreError(
                f"offset {offset} is below the first commitlog file ({self.files[0].name}); "
                "its file was deleted or never existed")
        f = self.files[i]
        if offset >= f.start + f.size:
            raise OffsetOutOfStoreError(f"offset {offset} is not covered by any commitlog file"
                                        f" (after {f.name}, size {f.size})")
        return f, offset - f.start

    # --- scanning ----------------------------------------------------------------------------------
    def walk(self, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
             accept_v2: bool = True, stop_at_end: bool = True, follow_blank: bool = True, batch: int = RUN_BATCH,
             python_runs: bool = True, crc_continue: bool = False) -> Iterator[RecordRun | Record | Gap]:
        """The broker's walk across the commitlog files: the one walk every analysis is built on.

        Starts at ``start`` (a record boundary; default the first file) and stops before ``end``
        (exclusive). Each file is walked by ``walk_file`` (same ``check_crc``/``accept_v2``/``batch``/
        ``python_runs``/``crc_continue``). Yields, in offset order:

        - ``RecordRun``: well-formed records in bulk (``run.records``, ``RECORD_DTYPE``);
        - ``Record``: anything else the scan met (``record.kind``: damage, blank record, zero fill, end of a
          file without a blank record; MESSAGE only with ``python_runs=False`` and no compiled scanner);
        - ``Gap``: a range no file covers.

        Moves to the next file after a BLANK record (unless not ``follow_blank``: then the walk ends) and
        at FILE_END; at END/ILLEGAL/CRC the file is done and, with ``stop_at_end``, the whole walk (without
        it the walk goes on with the next file: summaries of damaged stores; the broker never does that).
        What to do about damage is the caller's policy. Walked pages are released every ``RELEASE_EVERY``
        bytes (``PageReleaser``).
        """
        files = self.files
        if start is None:
            start = self.min_offset
        idx = None
        for i, f in enumerate(files):
            if f.start <= start < f.start + max(f.size, 1) or start < f.start:
                idx = i
                break
        if idx is None:
            return
        f = files[idx]
        if start < f.start:
            yield Gap(start, f.start, "no commitlog file covers this range")
            start = f.start
        pos = start - f.start
        while True:
            stop_here = False
            base = f.start
            limit = f.size
            if end is not None and end - base < limit:
                limit = max(end - base, 0)
            if pos < limit:
                for ev in walk_file(f, pos, limit, check_crc=check_crc, accept_v2=accept_v2, batch=batch,
                                    python_runs=python_runs, crc_continue=crc_continue, release_pages=True):
                    if isinstance(ev, Record):
                        kind = ev.kind
                        if kind in FILE_DONE_KINDS:
                            if kind == FILE_END and limit < f.size:
                                return  # reached the caller's end offset
                            yield ev
                            if kind == BLANK:
                                if not follow_blank:
                                    return
                            elif kind != FILE_END:
                                stop_here = True
                            break
                    yield ev
            elif end is not None and base + pos >= end:
                return
            if stop_here and stop_at_end:
                return
            idx += 1
            if idx >= len(files):
                return
            nxt = files[idx]
            if end is not None and nxt.start >= end:
                return
            expected = f.start + self.file_size
            if nxt.start > expected:
                yield Gap(expected, nxt.start, "missing commitlog file(s)")
            f = nxt
            pos = 0

    def scan(self, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
             accept_v2: bool = True, stop_at_end: bool = True, follow_blank: bool = True) -> Iterator[Record | Gap]:
        """``walk`` one record at a time: a ``Record`` per record (MESSAGE ones too, headers unpacked on first
        use) and the ``Gap``s, for per-record consumers (same rules and arguments as ``walk``)."""
        for ev in self.walk(start, end, check_crc=check_crc, accept_v2=accept_v2, stop_at_end=stop_at_end,
                            follow_blank=follow_blank, python_runs=False):
            if isinstance(ev, RecordRun):
                f = ev.file
                base = f.start
                for p, total, bpos, _, c, *_ in ev.row_tuples():
                    yield Record(MESSAGE, base + p, total, f, p, None, bpos, None if c < 0 else c == 1, "")
            else:
                yield ev

    def messages(self, start: int | None = None, end: int | None = None, *, keep_going: bool = False,
                 accept_v2: bool = True, on_damage=None) -> Iterator[Message]:
        """Decoded messages (body CRC always computed, reported in ``crc_ok``). Damage raises
        CorruptDataError unless ``keep_going`` (then the damaged file's rest is skipped, a HALF record is
        decoded with its reason in ``problems``). ``on_damage`` (with ``keep_going``) is called with a
        CorruptDataError for every damaged record it skips (ILLEGAL/CRC) and with the ``Gap`` of every range no
        file covers."""
        for rec in self.scan(start, end, check_crc=False, stop_at_end=not keep_going, accept_v2=accept_v2):
            if isinstance(rec, Gap):
                if on_damage is not None:
                    on_damage(rec)
                continue
            kind = rec.kind
            # DLedger keeps an entry whose header is intact whatever its record holds, and the broker serves the
            # record as its decoder reads it: a torn one is shown so (crc_ok false), with what is wrong
            if kind == MESSAGE or (kind == HALF and (keep_going or rec.file.dledger)):
                f = rec.file
                msg = decode_slot(f.buffer, f.start, rec.position, rec.header, rec.body_pos, None, f.path)
                if f.dledger:
                    _attach_entry(msg, f, rec.position)
                if kind == HALF:
                    msg.problems.append(rec.reason)
                    if f.dledger:
                        msg.problems.append("DLedger keeps this entry (its header is intact) and the broker serves "
                                            "the record as decoded here")
                yield msg
            elif kind in DAMAGE_KINDS:
                err = CorruptDataError(rec.reason, rec.file.path, rec.offset, kind=kind)
                if not keep_going:
                    raise err
                if on_damage is not None:
                    on_damage(err)

    def read_message(self, offset: int, accept_v2: bool = True):
        """Decode the single record at ``offset``; raise a CorruptDataError naming file and offset.
        ``accept_v2=False`` reads like a 4.x broker, to which a V2 record is an illegal magic code."""
        f, pos = self.locate(offset)
        if f.dledger:
            _refuse_entry_header(f, pos)
        for kind, p, size, hdr, bpos, _crc_ok, reason in scan_buffer(f.buffer, pos, f.size, False, accept_v2):
            if kind in (MESSAGE, HALF):
                msg = decode_slot(f.buffer, f.start, p, hdr, bpos, None, f.path)
                if f.dledger:
                    _attach_entry(msg, f, p)
                if kind == HALF:
                    raise CorruptDataError(reason, f.path, offset, kind=HALF)
                return msg
            if kind == BLANK:
                raise CorruptDataError(f"blank end-of-file record (TOTALSIZE {size}), not a message", f.path,
                                       offset, kind=BLANK)
            if kind == END:
                raise CorruptDataError("zero-filled space, no record here", f.path, offset, kind=END)
            raise CorruptDataError(reason, f.path, offset, kind=kind)
        raise CorruptDataError("no record", f.path, offset)

    def close(self) -> None:
        for f in self.files:
            f.close()


def _attach_entry(msg: Message, f: MappedFile, position: int) -> None:
    """DLedger mode: the entry header 48 bytes before the record (index, term, pos ...) on the message; a
    record with no valid entry in front of it says so in ``problems``."""
    from .dledger import entry_for_message

    try:
        msg.dledger = entry_for_message(f.buffer, f.start, position, f).header_dict()
    except CorruptDataError as e:
        msg.problems.append(f"no DLedger entry frames this record: {e}")


def _refuse_entry_header(f: MappedFile, position: int) -> None:
    """DLedger mode: an offset at an entry header (not at the record 48 bytes later) is named as such."""
    from .dledger import entry_header_problem, read_entry

    if position + 48 <= f.size:
        e = read_entry(f.buffer, position, f)
        if not entry_header_problem(e, f.size - position):
            raise CorruptDataError(f"DLedger entry {e.index} (term {e.term}) starts here; its message is at "
                                   f"physical offset {e.physical_offset}", f.path, f.start + position)


COMMITLOG_SIZE_SETTLE = "mappedFileSizeCommitLog in --broker-config"


def prove_file_size(files: list[MappedFile]) -> Setting:
    """mappedFileSizeCommitLog as the files prove it (FORMATS.md §1.1): every file is created at that size
    and named by its first physical offset, so consecutive names step by it. One value shared by the name
    steps and the lengths is proven ("inferred"); lengths that disagree with the steps are "ambiguous"."""
    sizes = collections.Counter(f.size for f in files if f.size > 0)
    steps = collections.Counter(b.start - a.start for a, b in zip(files, files[1:]))
    if not sizes:
        return Setting(1, "ambiguous", f"every commitlog file is empty; {COMMITLOG_SIZE_SETTLE} settles it")
    size, _ = sizes.most_common(1)[0]
    if not steps:
        return Setting(size, "inferred", f"the one commitlog file is {size} bytes (no second name to confirm it)",
                       (size,))
    step, _ = steps.most_common(1)[0]
    if set(sizes) == {step} and len(steps) == 1:
        return Setting(step, "inferred", f"every commitlog file is {step} bytes and names step by it", (step,))
    if len(steps) == 1 and all(f.size <= step for f in files):
        # files shorter than the step (a copy cut short): the names are the broker's own record of the size
        return Setting(step, "inferred", f"names step by {step}; lengths {dict(sizes)}", (step,))
    cands = tuple(sorted(set(sizes) | set(steps)))
    return Setting(size, "ambiguous", f"commitlog lengths {dict(sizes)} and name steps {dict(steps)} disagree; "
                   f"using {size}; {COMMITLOG_SIZE_SETTLE} settles it", cands)


def infer_file_size(files: list[MappedFile], notes: list[str]) -> int:
    """``prove_file_size``'s value; an ambiguous answer is said in ``notes`` with the key that settles it."""
    if len(files) == 1:
        return files[0].size or 1
    got = prove_file_size(files)
    if got.source == "ambiguous":
        notes.append(f"file size ambiguous: {got.detail}")
    return got.value


def open_commitlog(path: str | os.PathLike, file_size: int | None = None, conf: BrokerConf | None = None
                   ) -> CommitLog:
    return CommitLog.open(StoreLayout.open(path, conf), file_size)
