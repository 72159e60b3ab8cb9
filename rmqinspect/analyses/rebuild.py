"""The broker's dispatcher, offline: walk the CommitLog and derive every ConsumeQueue entry and index put
(FORMATS.md §3-§5; ``ReputMessageService`` + ``CommitLogDispatcherBuildConsumeQueue`` +
``CommitLogDispatcherBuildIndex``).

This module decides *what* is dispatched; where it goes is up to the sinks the caller passes
(``writer.consumequeue.ConsumeQueueSet`` / ``writer.indexfile.IndexFileSet`` or their dry-run comparing
subclasses). ``rebuild`` and the project's ``StoreWriter`` both go through ``dispatch_commitlog``, so there
is one implementation of the dispatch rules (which themselves live in ``analyses.dispatch``).

Hot path: no ``Message`` objects. The record scan's header tuple gives sizes, queue id/offset, sysflag and
store time; ``dispatch_properties`` pulls TAGS/KEYS/UNIQ_KEY/DELAY out of the raw properties bytes with
the same "later duplicates win, empty values ignored" rule as ``parse_properties`` (proven equal on every
oracle record in tests/test_rebuild_fastpath.py); index key hashes are computed in numpy batches.
Memory is bounded by the number of queues, the index slot table and one batch, never by the store size.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass, field

import numpy as np

from ..formats.commitlog import HEADER_STRUCTS, PREFIX
from ..formats.constants import (
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_SIZE_CAP,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TAGS,
    RMQ_SYS_SCHEDULE_TOPIC,
)
from ..formats.javahash import java_string_hash, tags_code
from ..store.commitlog import BLANK, END, FILE_END, HALF, ILLEGAL, MESSAGE, MIN_RECORD_SIZE, scan_buffer
from .dispatch import DEFAULT_DELAY_TABLE, DelayLevelError, DelayTable, dispatch_tags_code, goes_to_consume_queue

# TopicValidator: the allowed characters. Length: 127 in 4.x, longer names exist in 5.x (V2 records); the
# directory name is the limit that matters here (255 bytes on common file systems).
_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 255

_INDEX_BATCH = 1 << 16
# Walked CommitLog pages are dropped from the process' map every this many bytes (read-only file-backed
# pages: the data stays in the page cache), so RSS does not grow with the store size.
_RELEASE_EVERY = 64 << 20
_CACHE_LIMIT = 1 << 16
_SCHEDULE_B = RMQ_SYS_SCHEDULE_TOPIC.encode()
_INNER_MULTI_DISPATCH = b"INNER_MULTI_DISPATCH\x01"


def topic_is_safe(topic: str) -> bool:
    """A topic that may become a directory name under the output root (no '/', '\\', '..', NUL ...)."""
    return 0 < len(topic) <= TOPIC_MAX_LENGTH and bool(_TOPIC_RE.match(topic))


_WANTED = (b"TAGS\x01", b"KEYS\x01", b"UNIQ_KEY\x01", b"DELAY\x01")


def dispatch_properties(raw: bytes) -> tuple:
    """(TAGS, KEYS, UNIQ_KEY, DELAY) as raw bytes or None, as ``parse_properties`` would resolve them:
    pieces split on \x02, name = up to the first \x01, empty values ignored, later duplicates win."""
    tags = keys = uniq = delay = None
    if raw:
        for pc in raw.split(b"\x02"):
            if pc.startswith(_WANTED):
                name, _, val = pc.partition(b"\x01")
                if val:
                    if name == b"TAGS":
                        tags = val
                    elif name == b"KEYS":
                        keys = val
                    elif name == b"UNIQ_KEY":
                        uniq = val
                    else:
                        delay = val
    return tags, keys, uniq, delay


def _pow31(n: int) -> np.ndarray:
    p = np.full(max(n, 1), 31, dtype=np.uint32)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint32)  # wraps mod 2**32, as Java int arithmetic does


_POW = _pow31(1 << 12)


def index_key_hashes(keys: list[bytes]) -> np.ndarray:
    """IndexFile.indexKeyHashMethod for many ``topic#key`` byte strings at once (int64, non-negative).

    ASCII keys are hashed vectorised (UTF-16 code units == bytes); others fall back to the scalar Java hash
    of the UTF-8-decoded string, which is what the broker hashes.
    """
    global _POW
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    width = int(lens.max())
    flat = None
    if width <= 256:
        # keys right-aligned in a zero-padded matrix: Horner's rule column by column (leading zeros add
        # nothing), all keys at once, in uint32 so the arithmetic wraps like Java int
        padded = b"".join([k.rjust(width, b"\0") for k in keys])
        cols = np.frombuffer(padded, dtype=np.uint8).reshape(n, width).T.astype(np.uint32)  # contiguous columns
        acc = np.zeros(n, dtype=np.uint32)
        m31 = np.uint32(31)
        for j in range(width):
            acc *= m31
            acc += cols[j]
        h = acc.view(np.int32).astype(np.int64)
    else:
        flat = b"".join(keys)
        ends = np.cumsum(lens)
        starts = ends - lens
        if width > len(_POW):
            _POW = _pow31(width)
        codes = np.frombuffer(flat, dtype=np.uint8).astype(np.uint32)
        # exponent of each byte: distance to the end of its key minus one
        expo = np.repeat(ends, lens) - 1 - np.arange(len(flat), dtype=np.int64)
        contrib = codes * _POW[expo]
        h = np.add.reduceat(contrib, starts).astype(np.uint32).view(np.int32).astype(np.int64)
    if not (padded if flat is None else flat).isascii():
        for i, k in enumerate(keys):
            if not k.isascii():
                h[i] = java_string_hash(k.decode("utf-8", "replace"))
    h = np.abs(h)
    h[h == 1 << 31] = 0  # abs(Integer.MIN_VALUE) stays negative in Java; the broker maps it to 0
    return h


@dataclass
class RebuildOptions:
    build_cq: bool = True
    build_index: bool = True
    from_offset: int | None = None
    to_offset: int | None = None
    delay_table: DelayTable = DEFAULT_DELAY_TABLE


@dataclass
class RebuildReport:
    start_offset: int = 0
    end_offset: int = 0  # where the walk stopped (the broker's reput offset)
    bytes_walked: int = 0
    messages: int = 0
    cq_entries: int = 0
    not_in_cq: int = 0  # PREPARED / ROLLBACK records
    index_records: int = 0
    index_puts: int = 0
    rollback_not_indexed: int = 0
    half_records: list[dict] = field(default_factory=list)
    skipped_topics: dict[str, int] = field(default_factory=dict)  # unsafe topic -> records not written to CQ
    multi_dispatch_records: int = 0  # INNER_MULTI_DISPATCH seen (LMQ, only dispatched with enableLmq)
    stop_kind: str = ""
    stop_reason: str = ""
    stop_file: str = ""
    after_last_put_ts: int | None = None  # see IndexFileSet.close

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


def _fast_header(bits: int) -> struct.Struct:
    """HEADER_STRUCTS layout with the host fields and other unused fields skipped as pad bytes: unpacks to
    (total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, store_ts, reconsume,
    prepared, body_len) without creating bytes objects for the IPs."""
    born = 16 if bits & 0x10 else 4
    store = 16 if bits & 0x20 else 4
    st = struct.Struct(">iiiiiqqiq%dxq%dxiqi" % (born + 4, store + 4))
    assert st.size == HEADER_STRUCTS[bits].size
    return st


_FAST = {bits: _fast_header(bits) for bits in (0x00, 0x10, 0x20, 0x30)}


def dispatch_commitlog(commitlog, cq=None, index=None, options: RebuildOptions | None = None,
                       progress=None) -> RebuildReport:
    """Walk ``commitlog`` like ReputMessageService and feed ``cq`` (``queue(topic, qid).put(...)``) and
    ``index`` (``put_batch(hashes, phys, ts)``, ``close(record_after_last_put_ts)``).

    The walk accepts a record on an inline fast path only when every condition of ``scan_buffer``'s MESSAGE
    outcome holds (same checks, narrower struct); anything else is handed to ``scan_buffer`` itself for that
    position, so blank/end/illegal/half decisions are made by the one implementation of the broker's check.

    The sinks are not closed here except the index's pending batch, which is flushed; the caller closes both.
    ``progress(bytes_done)`` is called at each file boundary.
    """
    opt = options or RebuildOptions()
    rep = RebuildReport()
    if not opt.build_cq:
        cq = None
    if not opt.build_index:
        index = None
    files = commitlog.files
    start = commitlog.min_offset if opt.from_offset is None else opt.from_offset
    end = opt.to_offset
    rep.start_offset = start
    fsize = commitlog.file_size
    fi = None
    for i, f in enumerate(files):
        if f.start <= start < f.start + max(f.size, 1):
            fi = i
            break
    if fi is None:
        rep.end_offset = start
        rep.stop_kind = "gap"
        rep.stop_reason = f"no commitlog file covers offset {start}"
        return rep

    topic_cache: dict[bytes, tuple] = {}
    tags_cache: dict[bytes, int] = {}
    queue_cache: dict = {}
    ik: list[bytes] = []
    ip: list[int] = []
    it: list[int] = []
    after_last_put = None  # store time of the first record after the last index put
    index_end_phy = -1
    delay_table = opt.delay_table
    V1 = MESSAGE_MAGIC_CODE_V1
    V2 = MESSAGE_MAGIC_CODE_V2
    prefix = PREFIX.unpack_from
    fast = {k: v.unpack_from for k, v in _FAST.items()}
    fast_size = {k: v.size for k, v in _FAST.items()}
    props_of = dispatch_properties
    messages = 0
    cq_entries = 0

    def flush_index():
        if ik:
            index.put_batch(index_key_hashes(ik), np.array(ip, dtype=np.int64), np.array(it, dtype=np.int64))
            rep.index_puts += len(ik)
            ik.clear()
            ip.clear()
            it.clear()

    pos = start - files[fi].start
    offset = start
    while True:
        f = files[fi]
        base = f.start
        limit = f.size
        if end is not None and end - base < limit:
            limit = max(end - base, 0)
        buf = f.buffer
        stop = None
        next_file = False
        released = pos - pos % mmap.PAGESIZE
        next_release = released + _RELEASE_EVERY
        can_release = isinstance(buf, mmap.mmap) and hasattr(buf, "madvise")
        while True:
            # ---- fast path: the record passes every check scan_buffer makes for MESSAGE
            ok = False
            rem = limit - pos
            if rem >= 8:
                total, magic = prefix(buf, pos)
                if (magic == V1 or magic == V2) and MIN_RECORD_SIZE <= total <= rem and total <= RECORD_SIZE_CAP:
                    bits = buf[pos + 39] & 0x30
                    hsize = fast_size[bits]
                    if rem >= hsize + 3:
                        h = fast[bits](buf, pos)
                        blen = h[12]
                        bpos = pos + hsize
                        tpos = bpos
                        if blen > 0:
                            tpos = bpos + blen
                            if blen > total or tpos > limit:
                                tpos = -1
                        if tpos >= 0:
                            if magic == V1:
                                if tpos + 1 <= limit:
                                    tlen = buf[tpos]
                                    if tlen > 127:
                                        tlen = -1
                                    tstart = tpos + 1
                                else:
                                    tlen = -1
                            elif tpos + 2 <= limit:
                                tlen = (buf[tpos] << 8) | buf[tpos + 1]
                                if tlen > 32767:
                                    tlen = -1
                                tstart = tpos + 2
                            else:
                                tlen = -1
                            if tlen >= 0:
                                ppos = tstart + tlen
                                if ppos + 2 <= limit:
                                    plen = (buf[ppos] << 8) | buf[ppos + 1]
                                    if plen > 32767:
                                        plen = 0
                                    if (ppos + 2 + plen <= limit
                                            and ppos + 2 + plen - pos == total):
                                        ok = True
                                        qid = h[3]
                                        qoff = h[5]
                                        sys_flag = h[7]
                                        store_ts = h[9]
                                        size = total
            if not ok:
                # ---- the exact decision, from the record scan itself
                kind, p, size, hdr, bpos, _crc, reason = next(scan_buffer(buf, pos, limit, False, True))
                if kind == MESSAGE:  # not reached when the fast path mirrors scan_buffer; kept for safety
                    qid, qoff, sys_flag, store_ts, blen = hdr[3], hdr[5], hdr[7], hdr[11], hdr[16]
                    tpos = bpos + (blen if blen > 0 else 0)
                    if hdr[1] == V1:
                        tlen = buf[tpos]
                        tstart = tpos + 1
                    else:
                        tlen = (buf[tpos] << 8) | buf[tpos + 1]
                        tstart = tpos + 2
                    ppos = tstart + tlen
                    plen = (buf[ppos] << 8) | buf[ppos + 1]
                    if plen > 32767:
                        plen = 0
                elif kind == HALF:
                    # ReputMessageService: size > 0 but not successful -> skip the record and go on
                    rep.half_records.append({"offset": base + p, "size": size, "file": f.path, "reason": reason})
                    pos = p + size
                    offset = base + pos
                    continue
                elif kind == BLANK:
                    next_file = True
                    offset = base + fsize
                    break
                elif kind == FILE_END:
                    next_file = True
                    offset = base + p
                    break
                else:  # END, ILLEGAL
                    stop = (kind, base + p, reason)
                    break
            # ---- one message: what the dispatchers do with it
            phys = base + pos
            messages += 1
            if pos >= next_release and can_release:
                upto = pos - pos % mmap.PAGESIZE
                try:
                    buf.madvise(mmap.MADV_DONTNEED, released, upto - released)
                except (OSError, ValueError):
                    can_release = False
                released = upto
                next_release = upto + _RELEASE_EVERY
            topic_b = buf[tstart:ppos]
            if plen:
                raw = buf[ppos + 2:ppos + 2 + plen]
                tags, keys, uniq, delay = props_of(raw)
                if _INNER_MULTI_DISPATCH in raw:
                    rep.multi_dispatch_records += 1
            else:
                tags = keys = uniq = delay = None
            pos += size
            offset = base + pos
            tx = sys_flag & 0xC
            sched_code = None
            if delay is not None and topic_b == _SCHEDULE_B:
                # checkMessageAndReturnSize computes this for every record; a bad DELAY makes it illegal
                props = {PROPERTY_DELAY_TIME_LEVEL: delay.decode("utf-8", "replace")}
                if tags is not None:
                    props[PROPERTY_TAGS] = tags.decode("utf-8", "replace")
                try:
                    sched_code, _ = dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, store_ts, delay_table)
                except DelayLevelError as e:
                    messages -= 1
                    stop = ("illegal", phys, f"{e}: the broker's dispatch stops here")
                    break
            # --- consume queue (CommitLogDispatcherBuildConsumeQueue: NOT_TYPE and COMMIT only)
            if tx == 0 or tx == 8:
                if cq is not None:
                    qkey = (topic_b, qid)
                    q = queue_cache.get(qkey)
                    if q is None:
                        tinfo = topic_cache.get(topic_b)
                        if tinfo is None:
                            if len(topic_cache) > _CACHE_LIMIT:
                                topic_cache.clear()
                            tstr = topic_b.decode("utf-8", "replace")
                            tinfo = topic_cache[topic_b] = (tstr, topic_is_safe(tstr))
                        if tinfo[1]:
                            if len(queue_cache) > _CACHE_LIMIT:
                                queue_cache.clear()
                            q = queue_cache[qkey] = cq.queue(tinfo[0], qid)
                        else:
                            rep.skipped_topics[tinfo[0]] = rep.skipped_topics.get(tinfo[0], 0) + 1
                    if q is not None:
                        if sched_code is not None:
                            code = sched_code
                        elif tags is None:
                            code = 0
                        else:
                            code = tags_cache.get(tags)
                            if code is None:
                                if len(tags_cache) > _CACHE_LIMIT:
                                    tags_cache.clear()
                                code = tags_cache[tags] = tags_code(tags.decode("utf-8", "replace"))
                        q.put(qoff, phys, size, code)
                        cq_entries += 1
            else:
                rep.not_in_cq += 1
            # --- index (IndexService.buildIndex)
            if index is not None:
                if tx == 0xC or phys < index_end_phy or (uniq is None and not keys):
                    if tx == 0xC:
                        rep.rollback_not_indexed += 1
                    if after_last_put is None:
                        after_last_put = store_ts
                else:
                    rep.index_records += 1
                    pre = topic_b + b"#"
                    if uniq is not None:
                        ik.append(pre + uniq)
                        ip.append(phys)
                        it.append(store_ts)
                    if keys:
                        for k in keys.split(b" "):
                            if k:
                                ik.append(pre + k)
                                ip.append(phys)
                                it.append(store_ts)
                    index_end_phy = phys
                    after_last_put = None
                    if len(ik) >= _INDEX_BATCH:
                        flush_index()
        if can_release:
            try:
                buf.madvise(mmap.MADV_DONTNEED, released, max(f.size - released, 1))
            except (OSError, ValueError):
                pass
        if stop is not None:
            rep.stop_kind, offset, rep.stop_reason = stop
            rep.stop_file = f.path
            break
        if end is not None and offset >= end:
            rep.stop_kind = "to"
            rep.stop_reason = f"reached --to {end}"
            break
        if end is not None and limit < f.size and not next_file:
            rep.stop_kind = "to"
            rep.stop_reason = f"reached --to {end}"
            break
        fi += 1
        if fi >= len(files):
            rep.stop_kind = "end"
            rep.stop_reason = "end of the last commitlog file"
            break
        nxt = files[fi]
        if nxt.start != base + fsize:
            offset = base + fsize
            rep.stop_kind = "gap"
            rep.stop_reason = f"missing commitlog file(s) between {base + fsize} and {nxt.start}"
            rep.stop_file = nxt.path
            break
        if end is not None and nxt.start >= end:
            rep.stop_kind = "to"
            rep.stop_reason = f"reached --to {end}"
            break
        pos = 0
        if progress is not None:
            progress(nxt.start - start)
    rep.messages = messages
    rep.cq_entries = cq_entries
    if index is not None:
        flush_index()
        rep.after_last_put_ts = after_last_put
    rep.end_offset = offset
    rep.bytes_walked = max(offset - start, 0)
    return rep


def close_sinks(cq, index, report: RebuildReport) -> None:
    """Close the sinks the way the broker leaves its files at shutdown."""
    if cq is not None:
        cq.close()
    if index is not None:
        index.close(report.after_last_put_ts)


_ = (END, ILLEGAL, goes_to_consume_queue)  # the scan kinds and rule this module mirrors inline
