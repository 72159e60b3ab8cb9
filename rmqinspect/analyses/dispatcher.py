"""The broker's dispatcher, offline: walk the CommitLog and derive every ConsumeQueue entry and index put
(FORMATS.md §3-§5; ``ReputMessageService`` + ``CommitLogDispatcherBuildConsumeQueue`` +
``CommitLogDispatcherBuildIndex``).

This module decides *what* is dispatched; where it goes is up to the sinks the caller passes
(``sinks.consumequeue.ConsumeQueueSet`` / ``sinks.indexfile.IndexFileSet`` or their dry-run comparing
subclasses). ``rebuild`` and the project's ``StoreWriter`` both go through ``dispatch_commitlog``, so there
is one implementation of the dispatch rules (which themselves live in ``analyses.dispatch_rules``).

Hot path: no ``Message`` objects and no per-record Python. ``CommitLog.walk`` yields runs of well-formed
records as numpy arrays (compiled scanner) and every other position as a ``Record`` decided by ``scan_buffer``;
``dispatch_fields`` (compiled in store/_fastscan.c, pure-Python fallback ``record_fields_py``) pulls
TAGS/KEYS/UNIQ_KEY/DELAY out of the properties with ``parse_properties``' rule and computes tagsCode and the
index key hashes; the consume-queue entries and index puts are then handed to the sinks in bulk (proven
equal to the reference code in tests/test_rebuild_fastpath.py and tests/test_rebuild_compiled.py).
Memory is bounded by the number of queues, the index slot table and one batch, never by the store size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..formats.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TAGS,
    RMQ_SYS_SCHEDULE_TOPIC,
    TRANSACTION_MASK,
)
from ..formats.javahash import index_key_hashes, tags_code
from ..formats.properties import dispatch_properties
from ..store.scanner import compiled
from ..store.walk.kinds import BLANK, FILE_END, HALF, ILLEGAL
from ..store.walk.records import RECORD_DTYPE, Gap, RecordRun
from .dispatch_rules import DEFAULT_DELAY_TABLE, DelayLevelError, DelayTable, dispatch_tags_code

# TopicValidator: the allowed characters. Length: 127 in 4.x, longer names exist in 5.x (V2 records); the
# directory name is the limit that matters here (255 bytes on common file systems).
_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 255

_INDEX_BATCH = 1 << 16
_RECORDS_PER_RUN = 1 << 16  # records per walked run: the dispatcher's numpy work is amortised over large runs
_CACHE_LIMIT = 1 << 16

_SCHEDULE_B = RMQ_SYS_SCHEDULE_TOPIC.encode()
_INNER_MULTI_DISPATCH = b"INNER_MULTI_DISPATCH\x01"


def topic_is_safe(topic: str) -> bool:
    """A topic that may become a directory name under the output root (no '/', '\\', '..', NUL ...)."""
    return 0 < len(topic) <= TOPIC_MAX_LENGTH and bool(_TOPIC_RE.match(topic))


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


# Flags of the compiled dispatch_fields (store/_fastscan.c).
DF_FALLBACK = 1  # a string is not strict UTF-8: recompute this record with the reference code
DF_MULTI_DISPATCH = 2  # INNER_MULTI_DISPATCH property present
_NOUT = 6  # topic_id, tags_code, nkeys, delay_pos, delay_len, flags


def _record(row: np.ndarray):
    """One int64 row (RECORD_FIELDS order) as a record with named fields."""
    return np.ascontiguousarray(row, dtype=np.int64).view(RECORD_DTYPE)[0]


def record_fields_py(buf, row) -> tuple:
    """The reference for one scanned record (an int64 row in RECORD_FIELDS order): (topic bytes, tags_code,
    index key hashes (UNIQ_KEY then KEYS tokens), DELAY bytes or None, INNER_MULTI_DISPATCH present). Non-UTF-8 text is
    decoded with Python's replacement rule, as the rest of rmqinspect does."""
    rec = _record(row)
    tp, tl = int(rec["topic_pos"]), int(rec["topic_len"])
    pp, pl = int(rec["properties_pos"]), int(rec["properties_len"])
    tb = bytes(buf[tp:tp + tl])
    raw = bytes(buf[pp:pp + pl]) if pl > 0 else b""
    tags, keys, uniq, delay = dispatch_properties(raw)
    code = tags_code(tags.decode("utf-8", "replace")) if tags is not None else 0
    ks = []
    pre = tb + b"#"
    if uniq is not None:
        ks.append(pre + uniq)
    if keys:
        ks.extend([pre + k for k in keys.split(b" ") if k])
    return tb, code, index_key_hashes(ks).tolist() if ks else [], delay, _INNER_MULTI_DISPATCH in raw


def dispatch_fields(buf, rows: np.ndarray, want_keys: bool = True, use_compiled: bool = True) -> tuple:
    """For a batch of scanned records (``RecordRun.rows``: int64, RECORD_FIELDS order): ``(fields, key_hashes,
    topics)``.

    ``fields`` is int64 (n, 6): topic id (index into ``topics``, a list of topic bytes), tagsCode of TAGS
    (0 when absent; not the SCHEDULE_TOPIC_XXXX delivery time), number of index keys, DELAY value position
    and length (-1 when absent) and flags (DF_MULTI_DISPATCH). ``key_hashes`` (int64) holds each record's
    IndexFile.indexKeyHashMethod values of ``topic#key``, record after record (empty when not ``want_keys``).

    The compiled version computes everything for ASCII and strict UTF-8 text; a record with any other text
    is recomputed here with ``record_fields_py`` (Java's and Python's replacement rules differ).
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    n = len(rows)
    ext = compiled() if use_compiled else None
    if ext is not None:
        raw_f, raw_k, topics = ext.dispatch_fields(buf, rows, want_keys)
        fields = np.frombuffer(raw_f, dtype=np.int64).reshape(n, _NOUT)
        keyh = np.frombuffer(raw_k, dtype=np.int64)
        fb = np.flatnonzero(fields[:, 5] & DF_FALLBACK)
        if len(fb):
            fields = fields.copy()
            keyh = keyh.copy()
            koff = np.cumsum(fields[:, 2]) - fields[:, 2]
            for i in fb.tolist():
                _, code, hashes, _, _ = record_fields_py(buf, rows[i])
                fields[i, 1] = code
                fields[i, 5] &= ~DF_FALLBACK
                if want_keys:
                    k0 = int(koff[i])
                    assert len(hashes) == fields[i, 2]
                    keyh[k0:k0 + len(hashes)] = hashes
        return fields, keyh, topics
    fields = np.zeros((n, _NOUT), dtype=np.int64)
    keyh: list[int] = []
    topics: list[bytes] = []
    ids: dict[bytes, int] = {}
    for i in range(n):
        row = rows[i]
        tb, code, hashes, delay, multi = record_fields_py(buf, row)
        tid = ids.get(tb)
        if tid is None:
            tid = ids[tb] = len(topics)
            topics.append(tb)
        f = fields[i]
        f[0] = tid
        f[1] = code
        if want_keys:
            f[2] = len(hashes)
            keyh.extend(hashes)
        f[3] = -1
        if delay is not None:
            # position of the last DELAY piece's value: the one dispatch_properties returned
            rec = _record(row)
            pp, pl = int(rec["properties_pos"]), int(rec["properties_len"])
            raw = bytes(buf[pp:pp + pl])
            at = raw.rfind(b"\x02DELAY\x01" + delay)
            at = at + 7 if at >= 0 else len(b"DELAY\x01")  # the first piece has no leading separator
            f[3] = pp + at
            f[4] = len(delay)
        f[5] = DF_MULTI_DISPATCH if multi else 0
    return fields, np.array(keyh, dtype=np.int64), topics


def dispatch_topics(buf, rows: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """``dispatch_fields``' topic ids and topics alone (the same numbering), without its property parse: for a
    dispatch that needs no tagsCode (``RecoveryOptions.tags_codes``). The compiled ``intern_topics`` shares
    ``dispatch_fields``' topic table (store/_fastscan.c)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    ext = compiled()
    if ext is None or not len(rows):
        fields, _, topics = dispatch_fields(buf, rows, want_keys=False)
        return fields[:, 0].copy(), topics
    raw, topics = ext.intern_topics(buf, rows)
    return np.frombuffer(raw, dtype=np.int64), topics


def queue_groups(tid: np.ndarray, qid: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The records of a run grouped by (topic, queue): (order, bounds, groups) - the members of group g are
    ``order[bounds[g]:bounds[g + 1]]`` in run order, and ``groups`` lists the groups in order of first appearance.
    A run's topics and queue ids are few and small: their combined key fits 16 bits and numpy's stable sort of
    16-bit keys is a radix sort (linear); otherwise the general sort of 64-bit keys."""
    n = len(tid)
    tmax = int(tid.max()) if n else 0
    qmin, qmax = (int(qid.min()), int(qid.max())) if n else (0, 0)
    if qmin >= 0 and (tmax + 1) * (qmax + 1) <= 1 << 16:
        key = (tid.astype(np.int64) * (qmax + 1) + qid).astype(np.uint16)
    else:
        key = (tid.astype(np.int64) << 32) | (qid.astype(np.int64) & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    starts = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1]))) if n else np.zeros(0, dtype=np.int64)
    bounds = np.concatenate((starts, [n]))
    # a stable sort keeps each group's first member first: order[starts] is where each group first appears
    groups = np.argsort(order[starts], kind="stable").tolist()
    return order, bounds, groups


class _Dispatcher:
    """The dispatchers' work for batches of scanned records, in numpy. Every effect happens in the order
    the record-by-record loop would produce it where a sink can observe order: consume-queue puts go per
    record, in file order, unless the sink declares ``bulk_puts`` (then per queue, in bulk); index puts
    are handed over in batches cut at the same records as before (every ``_INDEX_BATCH`` keys)."""

    def __init__(self, rep: RebuildReport, cq, index, delay_table: DelayTable):
        self.rep = rep
        self.cq = cq
        self.index = index
        self.delay_table = delay_table
        self.bulk_cq = cq is not None and bool(getattr(cq, "bulk_puts", False))
        # a sink that takes a whole run and groups it by queue itself (the parallel rebuild's recording sink)
        self.run_cq = self.bulk_cq and hasattr(cq, "put_run")
        self.topic_info: dict[bytes, tuple] = {}
        self.queue_cache: dict = {}
        self.pk: list[np.ndarray] = []
        self.pp: list[np.ndarray] = []
        self.pt: list[np.ndarray] = []
        self.pending = 0
        self.index_end_phy = -1
        self.after_last_put = None
        self.messages = 0
        self.cq_entries = 0

    def _topic(self, tb: bytes) -> tuple:
        info = self.topic_info.get(tb)
        if info is None:
            if len(self.topic_info) > _CACHE_LIMIT:
                self.topic_info.clear()
            tstr = tb.decode("utf-8", "replace")
            info = self.topic_info[tb] = (tstr, topic_is_safe(tstr), tb == _SCHEDULE_B)
        return info

    def dispatch(self, run: RecordRun):
        """Dispatch a run of records. Returns None, or (record index, reason) when a record makes the
        broker's dispatch stop (non-numeric DELAY on SCHEDULE_TOPIC_XXXX): records before it are dispatched."""
        buf = run.file.buffer
        base = run.base
        r = run.records
        fields, keyh, topics = dispatch_fields(buf, run.rows, self.index is not None)
        infos = [self._topic(tb) for tb in topics]
        n = len(r)
        codes = fields[:, 1]
        stop = None
        sched_ids = [i for i, inf in enumerate(infos) if inf[2]]
        if sched_ids:
            cand = np.flatnonzero((fields[:, 3] >= 0) & np.isin(fields[:, 0], sched_ids))
            if len(cand):
                codes = codes.copy()
                for i in cand.tolist():
                    # checkMessageAndReturnSize computes this for every record; a bad DELAY makes it illegal
                    pp, pl = int(r[i]["properties_pos"]), int(r[i]["properties_len"])
                    tags, _, _, delay = dispatch_properties(bytes(buf[pp:pp + pl]))
                    props = {PROPERTY_DELAY_TIME_LEVEL: delay.decode("utf-8", "replace")}
                    if tags is not None:
                        props[PROPERTY_TAGS] = tags.decode("utf-8", "replace")
                    try:
                        codes[i], _ = dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, int(r[i]["store_timestamp"]),
                                                         self.delay_table)
                    except DelayLevelError as e:
                        stop = (i, f"{e}: the broker's dispatch stops here")
                        break
        if stop is not None:
            n = stop[0]
            nk_all = fields[:, 2]
            keyh = keyh[:int(nk_all[:n].sum())]
            r = r[:n]
            fields = fields[:n]
            codes = codes[:n]
        if n == 0:
            return stop
        self.messages += n
        self.rep.multi_dispatch_records += int(np.count_nonzero(fields[:, 5] & DF_MULTI_DISPATCH))
        tx = r["sys_flag"] & TRANSACTION_MASK
        phys = r["position"] + base
        ts = r["store_timestamp"]
        nkeys = fields[:, 2]
        if self.index is not None:
            inc = (tx != 0xC) & (phys >= self.index_end_phy)
            eff = np.where(inc, nkeys, 0)
            if not inc.all():
                keyh = keyh[np.repeat(inc, nkeys)]
            cum = np.cumsum(eff)
            kstart = cum - eff
        a = 0
        while a < n:
            b = n  # exclusive
            flush = False
            if self.index is not None:
                base_k = int(kstart[a])
                j = int(np.searchsorted(cum, base_k + _INDEX_BATCH - self.pending, side="left"))
                if j < n:
                    b = max(j + 1, a + 1)
                    flush = True
            self._cq(r, fields, codes, tx, phys, infos, a, b)
            if self.index is not None:
                self._index(keyh, eff, phys, ts, tx, kstart, cum, a, b)
                if flush:
                    self.flush_index()
            a = b
        return stop

    def _cq(self, r, fields, codes, tx, phys, infos, a, b):
        rep = self.rep
        incq = (tx[a:b] == 0) | (tx[a:b] == 8)
        nin = int(np.count_nonzero(incq))
        rep.not_in_cq += (b - a) - nin
        if self.cq is None or nin == 0:
            return
        # every record of the run goes to a consume queue (the usual case): slices, not gathers
        idx = slice(a, b) if nin == b - a and self.run_cq else np.flatnonzero(incq) + a
        tid = fields[idx, 0]
        qid = r["queue_id"][idx]
        if self.run_cq:
            self._cq_run(r, tid, qid, idx, codes, phys, infos)
            return
        if len(self.queue_cache) > _CACHE_LIMIT:
            self.queue_cache.clear()
        if not self.bulk_cq:
            for t, q_id, qoff, p, size, code in zip(tid.tolist(), qid.tolist(), r["queue_offset"][idx].tolist(),
                                                    phys[idx].tolist(), r["total_size"][idx].tolist(),
                                                    codes[idx].tolist()):
                q = self._queue(t, q_id, infos)
                if q is False:
                    name = infos[t][0]
                    rep.skipped_topics[name] = rep.skipped_topics.get(name, 0) + 1
                else:
                    q.put(qoff, p, size, code)
                    self.cq_entries += 1
            return
        order, bounds, groups = queue_groups(tid, qid)
        for g in groups:
            members = idx[order[bounds[g]:bounds[g + 1]]]
            t = int(fields[members[0], 0])
            q = self._queue(t, int(r[members[0]]["queue_id"]), infos)
            if q is False:
                name = infos[t][0]
                rep.skipped_topics[name] = rep.skipped_topics.get(name, 0) + len(members)
            else:
                q.put_many(r["queue_offset"][members], phys[members], r["total_size"][members], codes[members])
                self.cq_entries += len(members)

    def _cq_run(self, r, tid, qid, idx, codes, phys, infos):
        """The run's entries to a sink that groups them by queue itself (``put_run``), unsafe topics skipped and
        counted here as ``_queue`` does."""
        rep = self.rep
        safe = [inf[1] for inf in infos]
        if not all(safe):
            if isinstance(idx, slice):
                idx = np.arange(idx.start, idx.stop)
            ok = np.array(safe, dtype=bool)[tid]
            # topic ids are numbered in order of first appearance: counted in the order _queue would count them
            for t, n in zip(*np.unique(tid[~ok], return_counts=True)):
                name = infos[int(t)][0]
                rep.skipped_topics[name] = rep.skipped_topics.get(name, 0) + int(n)
            idx, tid, qid = idx[ok], tid[ok], qid[ok]
            if not len(idx):
                return
        self.cq.put_run([inf[0] for inf in infos], tid, qid, r["queue_offset"][idx], phys[idx], r["total_size"][idx],
                        codes[idx])
        self.cq_entries += len(tid)

    def _queue(self, tid: int, qid: int, infos: list):
        # topic ids are per batch: the cache is keyed by the topic itself
        tstr, safe, _ = infos[tid]
        key = (tstr, safe, qid)
        q = self.queue_cache.get(key)
        if q is None:
            q = self.cq.queue(tstr, qid) if safe else False
            self.queue_cache[key] = q
        return q

    def _index(self, keyh, eff, phys, ts, tx, kstart, cum, a, b):
        rep = self.rep
        e = eff[a:b]
        rep.rollback_not_indexed += int(np.count_nonzero(tx[a:b] == 0xC))
        has = np.flatnonzero(e)
        if len(has):
            rep.index_records += len(has)
            last = int(has[-1]) + a
            self.index_end_phy = int(phys[last])
            self.after_last_put = int(ts[last + 1]) if last + 1 < b else None
            k0, k1 = int(kstart[a]), int(cum[b - 1])
            self.pk.append(keyh[k0:k1])
            self.pp.append(np.repeat(phys[a:b], e))
            self.pt.append(np.repeat(ts[a:b], e))
            self.pending += k1 - k0
        elif self.after_last_put is None:
            self.after_last_put = int(ts[a])

    def flush_index(self) -> None:
        if self.pending:
            k = np.concatenate(self.pk) if len(self.pk) > 1 else self.pk[0]
            p = np.concatenate(self.pp) if len(self.pp) > 1 else self.pp[0]
            t = np.concatenate(self.pt) if len(self.pt) > 1 else self.pt[0]
            self.index.put_batch(k, p, t)
            self.rep.index_puts += len(k)
            self.pk, self.pp, self.pt = [], [], []
            self.pending = 0


def dispatch_commitlog(commitlog, cq=None, index=None, options: RebuildOptions | None = None,
                       progress=None) -> RebuildReport:
    """Walk ``commitlog`` like ReputMessageService and feed ``cq`` (``queue(topic, qid).put(...)``, or
    ``put_many`` when the set has ``bulk_puts``) and ``index`` (``put_batch(hashes, phys, ts)``,
    ``close(record_after_last_put_ts)``).

    The walk is ``CommitLog.walk``: runs of well-formed records are dispatched in bulk; the policy for
    everything else is ReputMessageService's (HALF: skip TOTALSIZE and go on; BLANK: next file;
    END/ILLEGAL: stop; a missing file: stop).

    The sinks are not closed here except the index's pending batch, which is flushed; the caller closes both.
    ``progress(bytes_done)`` is called at each file boundary.
    """
    opt = options or RebuildOptions()
    rep = RebuildReport()
    if not opt.build_cq:
        cq = None
    if not opt.build_index:
        index = None
    start = commitlog.min_offset if opt.from_offset is None else opt.from_offset
    end = opt.to_offset
    rep.start_offset = start
    fsize = commitlog.file_size
    if not any(f.start <= start < f.start + max(f.size, 1) for f in commitlog.files):
        rep.end_offset = start
        rep.stop_kind = "gap"
        rep.stop_reason = f"no commitlog file covers offset {start}"
        return rep

    d = _Dispatcher(rep, cq, index, opt.delay_table)
    offset = start
    stop = None
    cur = None
    for ev in commitlog.walk(start, end, check_crc=False, accept_v2=True, run_records=_RECORDS_PER_RUN):
        f = ev.file
        if f is not cur and f is not None:
            if cur is not None:
                if f.start != cur.start + fsize:  # overlapping file names
                    stop = ("gap", cur.start + fsize, f"missing commitlog file(s) between {cur.start + fsize} and "
                            f"{f.start}", f.path)
                    break
                if progress is not None:
                    progress(f.start - start)
            cur = f
        if type(ev) is RecordRun:
            halt = d.dispatch(ev)
            if halt is not None:
                i, why = halt
                stop = (ILLEGAL, f.start + int(ev.records[i]["position"]), why, f.path)
                break
            offset = f.start + ev.end
        elif type(ev) is Gap:
            stop = ("gap", ev.start, f"missing commitlog file(s) between {ev.start} and {ev.end}",
                    commitlog.locate(ev.end)[0].path)
            break
        elif ev.kind == HALF:
            rep.half_records.append({"offset": ev.offset, "size": ev.size, "file": f.path, "reason": ev.reason})
            offset = ev.end
        elif ev.kind == BLANK:
            offset = f.start + fsize
        elif ev.kind == FILE_END:
            offset = ev.offset
        else:  # END, ILLEGAL
            stop = (ev.kind, ev.offset, ev.reason, f.path)
            break
    if stop is None and cur is not None and not (end is not None and offset >= end):
        nxt = next((g for g in commitlog.files if g.start > cur.start), None)
        if nxt is not None and nxt.start != cur.start + fsize:  # the walk ended at --to before a missing file
            stop = ("gap", cur.start + fsize, f"missing commitlog file(s) between {cur.start + fsize} and "
                    f"{nxt.start}", nxt.path)
    if stop is not None:
        rep.stop_kind, offset, rep.stop_reason, rep.stop_file = stop
    elif end is not None and offset >= end:
        rep.stop_kind = "to"
        rep.stop_reason = f"reached --to {end}"
    else:
        rep.stop_kind = "end"
        rep.stop_reason = "end of the last commitlog file"
    rep.messages = d.messages
    rep.cq_entries = d.cq_entries
    if index is not None:
        d.flush_index()
        rep.after_last_put_ts = d.after_last_put
    rep.end_offset = offset
    rep.bytes_walked = max(offset - start, 0)
    return rep


def close_sinks(cq, index, report: RebuildReport) -> None:
    """Close the sinks the way the broker leaves its files at shutdown."""
    if cq is not None:
        cq.close()
    if index is not None:
        index.close(report.after_last_put_ts)

