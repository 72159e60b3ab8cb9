"""CommitLog files: offset -> file mapping, the record scan (broker semantics), and message decoding.

The scan mirrors ``CommitLog.checkMessageAndReturnSize`` (FORMATS.md §1.10/§1.11): it reports what it
finds and never decides policy. Callers (walk, verify, recover, rebuild) choose to stop, skip or resync.
The hot loop uses the ``struct`` layouts derived from the construct schema in ``formats.commitlog``.
"""

from __future__ import annotations

import collections
import os
import zlib
from dataclasses import dataclass, field
from typing import Iterator

from ..formats.commitlog import (
    CRC32_RESERVED_LEN,
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
from .errors import CorruptDataError, OffsetOutOfStoreError, StoreNotFoundError
from .layout import StoreLayout
from .mapped import MappedFile
from .message import Message

# Slot kinds reported by the scan.
MESSAGE = "message"  # a record that passed the broker's check
BLANK = "blank"  # end-of-file blank record (BLANK_MAGIC_CODE): continue in the next file
END = "end"  # zero-filled space: where written data stops
ILLEGAL = "illegal"  # broker: (-1, false) - bad magic, absurd size, unreadable
CRC_MISMATCH = "crc"  # broker: (-1, false) because the body CRC differs (only when checking CRCs)
HALF = "half"  # broker: (TOTALSIZE, false) - lengths inside the record disagree with TOTALSIZE
FILE_END = "file_end"  # the file ended exactly at a record boundary without a blank record
GAP = "gap"  # no file covers this offset range (deleted by retention, or missing)

# Smallest record TOTALSIZE: all fixed fields, empty body/topic/properties (V1, IPv4).
MIN_RECORD_SIZE = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2

_V1 = MESSAGE_MAGIC_CODE_V1
_V2 = MESSAGE_MAGIC_CODE_V2
_BLANK = BLANK_MAGIC_CODE
_crc32 = zlib.crc32


class Slot:
    """One thing the scan found at a physical offset.

    For MESSAGE/HALF/CRC_MISMATCH slots ``header`` is the tuple unpacked by ``HEADER_STRUCTS`` (unpacked
    lazily when the compiled scanner found the record) and ``body_pos`` the position of the body in
    ``file``; ``crc_ok`` is None when not checked.
    """

    __slots__ = ("kind", "offset", "size", "file", "position", "_header", "body_pos", "crc_ok", "reason")

    def __init__(self, kind: str, offset: int, size: int, file: MappedFile | None, position: int,
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
    def header(self) -> tuple | None:
        if self._header is None and self.kind in (MESSAGE, HALF, CRC_MISMATCH) and self.file is not None:
            self._header = unpack_header(self.file.buffer, self.position)
        return self._header

    @property
    def end(self) -> int:
        return self.offset + self.size

    def __repr__(self) -> str:
        return f"Slot({self.kind}, offset={self.offset}, size={self.size}, reason={self.reason!r})"


def unpack_header(buf, pos: int) -> tuple:
    hdr = HEADER_V4.unpack_from(buf, pos)
    sf = hdr[7] & 0x30
    return HEADER_STRUCTS[sf].unpack_from(buf, pos) if sf else hdr


try:  # the compiled scanner (optional; see setup.py)
    from . import _fastscan
except ImportError:  # pragma: no cover - exercised when the extension could not be built
    _fastscan = None

FAST_BATCH = 8192
# Column order of the compiled scanner's records (see _fastscan.c).
FAST_FIELDS = ("pos", "total", "body_pos", "body_len", "crc_ok", "sys_flag", "queue_id", "queue_offset",
               "physical_offset_field", "store_timestamp", "born_timestamp", "topic_pos", "topic_len",
               "props_pos", "props_len", "magic_version")


def fast_available() -> bool:
    return _fastscan is not None


def scan_buffer_fast(buf, start: int, limit: int, check_crc: bool = True, accept_v2: bool = True,
                     use_compiled: bool = True) -> Iterator[tuple]:
    """``scan_buffer`` with the well-formed records found by the compiled scanner (``header`` None in
    those tuples; unpack lazily). Every other position goes through the pure-Python ``scan_buffer``."""
    if _fastscan is None or not use_compiled:
        yield from scan_buffer(buf, start, limit, check_crc, accept_v2)
        return
    import array

    pos = start
    while True:
        raw, n, pos = _fastscan.scan_messages(buf, pos, limit, check_crc, accept_v2, FAST_BATCH, RECORD_SIZE_CAP)
        if n:
            a = array.array("q")
            a.frombytes(raw)
            crc_col = a[4::16]
            for p, total, bpos, c in zip(a[0::16], a[1::16], a[2::16], crc_col):
                yield (MESSAGE, p, total, None, bpos, None if c < 0 else c == 1, "")
        if n == FAST_BATCH:
            continue
        one = next(scan_buffer(buf, pos, limit, check_crc, accept_v2))
        yield one
        if one[0] != HALF:
            return
        pos += one[2]


def scan_records_array(buf, start: int, limit: int, check_crc: bool = True, accept_v2: bool = True,
                       batch: int = 65536):
    """Bulk form for vectorised consumers: yields (numpy int64 array of shape (n, 16) in FAST_FIELDS order,
    None) for runs of well-formed records and (None, slot_tuple) for anything else, in file order. Runs
    hold at most ``batch`` records."""
    import numpy as np

    if _fastscan is None:
        # pure-Python: the same runs, batched from scan_buffer's MESSAGE tuples
        rows = []
        for one in scan_buffer(buf, start, limit, check_crc, accept_v2):
            if one[0] == MESSAGE:
                rows.append(_tuple_row(buf, one))
                if len(rows) >= batch:
                    yield np.array(rows, dtype=np.int64), None
                    rows = []
                continue
            if rows:
                yield np.array(rows, dtype=np.int64), None
                rows = []
            yield None, one
        if rows:
            yield np.array(rows, dtype=np.int64), None
        return
    pos = start
    while True:
        raw, n, pos = _fastscan.scan_messages(buf, pos, limit, check_crc, accept_v2, batch, RECORD_SIZE_CAP)
        if n:
            yield np.frombuffer(raw, dtype=np.int64).reshape(n, 16), None
        if n == batch:
            continue
        one = next(scan_buffer(buf, pos, limit, check_crc, accept_v2))
        yield None, one
        if one[0] not in (MESSAGE, HALF):
            return
        pos += one[2]


def _tuple_to_row(buf, t):
    import numpy as np

    return np.array([_tuple_row(buf, t)], dtype=np.int64)


def _tuple_row(buf, t) -> list:
    kind, pos, total, hdr, bpos, crc_ok, _ = t
    blen = hdr[16]
    _, props, ppos = _topic_and_properties(buf, hdr, bpos)
    tsz = 2 if hdr[1] == _V2 else 1
    tpos = bpos + max(blen, 0) + tsz
    tlen = ppos - tpos
    plen = len(props)
    return [pos, total, bpos, blen, -1 if crc_ok is None else int(crc_ok), hdr[7], hdr[3], hdr[5], hdr[6],
            hdr[11], hdr[8], tpos, tlen, ppos + 2, plen, 1 if hdr[1] == _V1 else 2]


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
    crc32 = _crc32
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
                sf = hdr[7] & 0x30
                if sf:
                    st = structs[sf]
                    if rem < st.size + 3:
                        yield (ILLEGAL, pos, rem, None, 0, None, "record header cut off")
                        return
                    hdr = st.unpack_from(buf, pos)
                    bpos = pos + st.size
                else:
                    bpos = pos + v4_size
                blen = hdr[16]
                crc_ok = None
                if blen > 0:
                    if blen > total or bpos + blen > limit:
                        yield (ILLEGAL, pos, total, hdr, bpos, None, f"BODYLEN {blen} exceeds the record")
                        return
                    if check_crc:
                        crc_ok = (crc32(mv[bpos:bpos + blen]) & 0x7FFFFFFF) == hdr[2]
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


def _topic_and_properties(buf, hdr, bpos: int) -> tuple[str, bytes, int]:
    blen = hdr[16]
    tpos = bpos + (blen if blen > 0 else 0)
    if hdr[1] == _V2:
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


def decode_slot(buf, base: int, pos: int, hdr: tuple, bpos: int, crc_ok, path: str = ""):
    """Full decode of a record the scan accepted. Returns a ``Message``."""
    blen = hdr[16]
    body = bytes(buf[bpos:bpos + blen]) if blen > 0 else b""
    if crc_ok is None and blen > 0:
        crc_ok = (_crc32(body) & 0x7FFFFFFF) == hdr[2]
    topic, props_raw, _ = _topic_and_properties(buf, hdr, bpos)
    props = parse_properties(props_raw)
    msg = Message(
        physical_offset=base + pos, total_size=hdr[0], magic_version=1 if hdr[1] == _V1 else 2, body_crc=hdr[2],
        crc_ok=crc_ok, queue_id=hdr[3], flag=hdr[4], queue_offset=hdr[5], physical_offset_field=hdr[6],
        sys_flag=hdr[7], born_timestamp=hdr[8], born_ip=hdr[9], born_port=hdr[10], store_timestamp=hdr[11],
        store_ip=hdr[12], store_port=hdr[13], reconsume_times=hdr[14], prepared_transaction_offset=hdr[15],
        body=body, topic=topic, properties_raw=props_raw, properties=props, file=path, position=pos,
    )
    if PROPERTY_CRC32 in props:
        stored = decode_crc32_property(props[PROPERTY_CRC32])
        rec_end = pos + hdr[0]
        actual = _crc32(memoryview(buf)[pos:rec_end - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
        msg.property_crc_ok = stored == actual
        if not msg.property_crc_ok:
            msg.problems.append(f"__CRC32# property {stored} != crc of record {actual}")
    if props_raw and not properties_well_formed(props_raw):
        msg.problems.append("properties string has a piece without a name/value separator (\\x01)")
    if crc_ok is False:
        msg.problems.append("body CRC mismatch")
    return msg


# Slot kinds after which nothing more of a file is read.
_FILE_DONE = frozenset((END, ILLEGAL, CRC_MISMATCH, BLANK, FILE_END))

# Walked CommitLog pages are dropped from the process' map every this many bytes.
RELEASE_EVERY = 64 << 20


class PageReleaser:
    """Drops already-walked pages of a read-only file map (``MADV_DONTNEED``) every ``RELEASE_EVERY``
    bytes, so a walk's RSS does not grow with the file size. The pages stay in the page cache and are
    faulted back in from the file if a caller reads a released range again (a Slot kept for later)."""

    __slots__ = ("buf", "released", "next", "ok")

    def __init__(self, buf, pos: int):
        import mmap

        self.buf = buf
        self.released = pos - pos % mmap.PAGESIZE
        self.ok = isinstance(buf, mmap.mmap) and hasattr(buf, "madvise")
        self.next = self.released + RELEASE_EVERY if self.ok else float("inf")

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
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass
class CommitLog:
    """The commitlog files of one store, ordered by start offset, with the inferred mapped file size."""

    files: list[MappedFile]
    file_size: int
    gaps: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, layout: StoreLayout, file_size: int | None = None) -> "CommitLog":
        entries = layout.commitlog_file_paths()
        if not entries:
            raise StoreNotFoundError("no commitlog files", layout.commitlog_dirs[0] if layout.commitlog_dirs else
                                     layout.root)
        files = [MappedFile(p, start) for start, p in entries]
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

    def file_for_name(self, name: str) -> MappedFile | None:
        for f in self.files:
            if f.name == name:
                return f
        return None

    # --- scanning ----------------------------------------------------------------------------------
    def walk(self, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
             accept_v2: bool = True, stop_at_end: bool = True, follow_blank: bool = True, batch: int = FAST_BATCH,
             python_rows: bool = False) -> Iterator[tuple]:
        """The broker's walk across the commitlog files, once for every scan built on it.

        Starts at ``start`` (a record boundary; default the first file) and stops before ``end``
        (exclusive). Moves to the next file at a BLANK record and at the exact end of a file (FILE_END);
        at END/ILLEGAL/CRC_MISMATCH the file is done and, with ``stop_at_end``, the whole walk (without it
        the walk goes on with the next file: summaries of damaged stores; the broker never does that).
        Yields events ``(file, rows, slot_tuple, gap)``, exactly one of the last three not None:

        - ``rows``: a run of at most ``batch`` well-formed records, ``scan_records_array`` rows
          (FAST_FIELDS order, positions relative to ``file``);
        - ``slot_tuple``: anything else, a ``scan_buffer`` tuple (a MESSAGE tuple only from the
          pure-Python scanner, when ``python_rows`` is false or a scanner disagreement leaves one);
        - ``gap``: ``(offset, size, reason)`` for a range no file covers (``file`` None).

        Walked pages are released every ``RELEASE_EVERY`` bytes (``PageReleaser``).
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
            yield None, None, None, (start, f.start - start, "no commitlog file covers this range")
            start = f.start
        pos = start - f.start
        while True:
            stop_here = False
            base = f.start
            limit = f.size
            if end is not None and end - base < limit:
                limit = max(end - base, 0)
            if pos < limit:
                buf = f.buffer
                rel = PageReleaser(buf, pos)
                if _fastscan is None and not python_rows:
                    runs = ((None, one) for one in scan_buffer(buf, pos, limit, check_crc, accept_v2))
                else:
                    runs = scan_records_array(buf, pos, limit, check_crc, accept_v2, batch)
                for rows, one in runs:
                    if rows is not None:
                        p = int(rows[0, 0])
                        if p >= rel.next:
                            rel.advance(p)
                        yield f, rows, None, None
                        p = int(rows[-1, 0])
                        if p >= rel.next:
                            rel.advance(p)
                        continue
                    kind = one[0]
                    if kind == FILE_END and limit < f.size:
                        return  # reached the caller's end offset
                    if one[1] >= rel.next:
                        rel.advance(one[1])
                    yield f, None, one, None
                    if kind in _FILE_DONE:
                        rel.finish(f.size)
                        if kind == BLANK:
                            if not follow_blank:
                                return
                        elif kind != FILE_END:
                            stop_here = True
                        break
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
                yield None, None, None, (expected, nxt.start - expected, "missing commitlog file(s)")
            f = nxt
            pos = 0

    def scan(self, start: int | None = None, end: int | None = None, *, check_crc: bool = True,
             accept_v2: bool = True, stop_at_end: bool = True, follow_blank: bool = True) -> Iterator[Slot]:
        """Slots from ``start`` (a record boundary; default the first file) up to ``end`` (exclusive): one
        per record of ``walk`` (same rules and arguments), and a GAP slot for every range no file covers.
        Headers of records found by the compiled scanner are unpacked lazily (``Slot.header``)."""
        for f, rows, one, gap in self.walk(start, end, check_crc=check_crc, accept_v2=accept_v2,
                                           stop_at_end=stop_at_end, follow_blank=follow_blank):
            if rows is not None:
                base = f.start
                for p, total, bpos, c in zip(rows[:, 0].tolist(), rows[:, 1].tolist(), rows[:, 2].tolist(),
                                             rows[:, 4].tolist()):
                    yield Slot(MESSAGE, base + p, total, f, p, None, bpos, None if c < 0 else c == 1, "")
            elif one is not None:
                kind, p, size, hdr, bpos, crc_ok, reason = one
                yield Slot(kind, f.start + p, size, f, p, hdr, bpos, crc_ok, reason)
            else:
                yield Slot(GAP, gap[0], gap[1], None, 0, reason=gap[2])

    def messages(self, start: int | None = None, end: int | None = None, *, keep_going: bool = False,
                 accept_v2: bool = True, on_damage=None) -> Iterator:
        """Decoded messages (body CRC always computed, reported in ``crc_ok``). Damage raises
        CorruptDataError unless ``keep_going``: then a HALF record is decoded (its reason in ``problems``), the
        rest of a damaged file is skipped and ``on_damage`` (when given) receives the CorruptDataError; it also
        receives a ``Gap`` for every range no file covers."""
        for slot in self.scan(start, end, check_crc=False, stop_at_end=not keep_going, accept_v2=accept_v2):
            if slot.kind == MESSAGE or (slot.kind == HALF and keep_going):
                msg = decode_slot(slot.file.buffer, slot.file.start, slot.position, slot.header, slot.body_pos,
                                  None, slot.file.path)
                if slot.kind == HALF:
                    msg.problems.append(slot.reason)
                yield msg
            elif slot.kind in (ILLEGAL, HALF):
                err = CorruptDataError(slot.reason, slot.file.path if slot.file else None, slot.offset,
                                       kind=slot.kind)
                if not keep_going:
                    raise err
                if on_damage is not None:
                    on_damage(err)
            elif slot.kind == GAP and on_damage is not None:
                on_damage(Gap(slot.offset, slot.end))

    def read_message(self, offset: int, accept_v2: bool = True):
        """Decode the single record at ``offset``; raise a CorruptDataError naming file and offset.
        ``accept_v2=False`` reads like a 4.x broker, to which a V2 record is an illegal magic code."""
        f, pos = self.locate(offset)
        for kind, p, size, hdr, bpos, crc_ok, reason in scan_buffer(f.buffer, pos, f.size, False, accept_v2):
            if kind in (MESSAGE, HALF):
                msg = decode_slot(f.buffer, f.start, p, hdr, bpos, None, f.path)
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


def infer_file_size(files: list[MappedFile], notes: list[str]) -> int:
    """Every commitlog file has the configured size (FORMATS.md §1.1); take the most common length,
    cross-checked with the spacing of the file names."""
    if len(files) == 1:
        return files[0].size or 1
    sizes = collections.Counter(f.size for f in files if f.size > 0)
    if not sizes:
        return 1
    size, _ = sizes.most_common(1)[0]
    spacing = collections.Counter(b.start - a.start for a, b in zip(files, files[1:]))
    step, _ = spacing.most_common(1)[0]
    if step != size and len(sizes) > 1:
        notes.append(f"file lengths disagree ({dict(sizes)}); using {size}")
    return size


def open_commitlog(path: str | os.PathLike, file_size: int | None = None) -> CommitLog:
    return CommitLog.open(StoreLayout.open(path), file_size)
