"""``rebuild()``: one whole rebuild of a store's ConsumeQueue and IndexFile, as a library call.

``analyses.dispatcher.dispatch_commitlog`` decides what the broker's dispatcher writes; this module chooses the
geometry, the sinks (new files under ``out``, or the dry-run comparison with the store's own files in
``analyses.compare.rebuild_vs_store``), runs the dispatch (locally, or through any engine with the same signature, e.g.
``spark.rebuild.rebuild_spark``), converts the consume queues to the 5.x RocksDB layout when asked, writes the
``rebuild.json`` manifest and returns everything as a ``RebuildRun``. The ``rebuild`` command only parses its
options and renders the result.
"""

from __future__ import annotations

import collections
import functools
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..formats.constants import DEFAULT_CQ_FILE_SIZE, DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
from ..formats.consumequeue import CQ_DTYPE, round_cq_file_size
from ..sinks.consumequeue import ConsumeQueueSet
from ..sinks.indexfile import IndexFileSet, slot_links
from ..sinks.staging import Staged, utf8_json
from ..store import Store
from ..store.broker_conf import BrokerConf, BrokerConfigError, Setting, configured
from ..store.commitlog import CommitLog
from ..store.consumequeue import list_queues
from ..store.indexfile import INDEX_GEOMETRY_SETTLE, IndexGeometry, prove_geometry_of
from ..store.layout import ensure_new_directory, ensure_output_outside, is_offset_file_name
from ..store.mapped import MappedFile
from ..store.scanner import describe as describe_scanner
from ..store.version import BrokerVersion
from ..store.walk.parallel import map_files, resolve_jobs
from ..store.walk.resync import record_chunks
from .dispatch_rules import DEFAULT_DELAY_TABLE, DelayTable
from .dispatcher import RebuildOptions, RebuildReport, dispatch_commitlog, queue_groups

if TYPE_CHECKING:
    from .compare.rebuild_vs_store import Reconciliation

# Imported where used, not at module load (the command's start-up is serial time before any worker runs): the
# dry-run comparison (analyses.compare.rebuild_vs_store) and the RocksDB conversion (sinks.rocksdb_cq).

MANIFEST = "rebuild.json"
CQ_SIZE_SETTLE = "--cq-file-size (or mappedFileSizeConsumeQueue in --broker-config)"
INDEX_FILE_NAMING = ("beginTimestamp of each file (UTC yyyyMMddHHmmssSSS), +1 ms when needed to keep names "
                     "strictly increasing; the broker used wall-clock time")
ROCKSDB_STORE_NOTE = ("the store keeps its consume queues in RocksDB (5.x storeType=defaultRocksDB): there are no "
                      "CQ files to compare, so every entry shows as missing")
# the walk itself stopped on damage or a missing file, or records were skipped: the rebuild is incomplete
PROBLEM_STOPS = ("illegal", "gap")

# dispatch_commitlog's signature: (commitlog, cq, index, options, progress) -> RebuildReport
Dispatch = Callable[..., RebuildReport]


# --- one commitlog file per task (the local parallel engine and the Spark engine) -------------------------
#
# Every record carries its own queue offset and every commitlog file starts at a record boundary, so the
# dispatch of file k needs nothing from the files before it. A task runs ``dispatch_commitlog`` over a one-file
# CommitLog with recording sinks and returns the consume-queue entries and the index puts (key hashes computed
# in the task) as numpy arrays; ``join_file_dispatches`` feeds them, in commitlog order, to the real sinks, so
# the CQ entries land at ``queue offset * 20`` and the index files roll where the broker rolls them. The rules
# that cross files (stop at the first END/ILLEGAL, a missing file, the record after the last index put) are
# applied in the join, as the sequential walk applies them.

_NATURAL_END = "end of the last commitlog file"
# Index puts handed to the index files at a time by the join: a chunk's puts (~160 k for 64 MiB of 1.2 KiB records
# with three keys) in one batch sort and look up a slot table far larger than the CPU caches; in batches of this
# size the same puts go in about twice as fast (the result is the same for any split: puts go in in order).
INDEX_PUTS = 16384


class _RecordingQueue:
    __slots__ = ("key", "sink")

    def __init__(self, key: tuple[str, int], sink: RecordingCQ):
        self.key, self.sink = key, sink

    def put(self, cq_offset, phys, size, tags_code):
        self.put_many(np.array([cq_offset], np.int64), np.array([phys], np.int64), np.array([size], np.int64),
                      np.array([tags_code], np.int64))

    def put_many(self, cq_offsets, phys, sizes, tags_codes):
        n = len(cq_offsets)
        self.sink.put_run([self.key[0]], np.zeros(n, np.int64), np.full(n, self.key[1], np.int64), cq_offsets, phys,
                          sizes, tags_codes)


class RecordingCQ:
    """A consume-queue sink that keeps the entries of one file's (or chunk's) dispatch and hands them over queue by
    queue (``blocks``). The dispatcher gives it whole runs (``put_run``): they are grouped by queue once, here at
    the end, in the worker, instead of once per run and queue."""

    bulk_puts = True

    def __init__(self):
        self._topic_ids: dict[str, int] = {}
        self.topics: list[str] = []
        self.runs: list[tuple] = []

    def queue(self, topic, queue_id):
        return _RecordingQueue((topic, int(queue_id)), self)

    def put_run(self, topics: list[str], tid, qid, cq_offsets, phys, sizes, tags_codes) -> None:
        """Entries of one run in commitlog order: the topic of entry i is ``topics[tid[i]]``, its queue ``qid[i]``."""
        ids = self._topic_ids
        g = []
        for t in topics:
            k = ids.get(t)
            if k is None:
                k = ids[t] = len(self.topics)
                self.topics.append(t)
            g.append(k)
        # contiguous copies: a run's fields may be views of the walk's record array, which is not kept
        self.runs.append((np.array(g, dtype=np.int64)[tid], *(np.ascontiguousarray(x, np.int64) for x in (
            qid, cq_offsets, phys, sizes, tags_codes))))

    def blocks(self) -> tuple[list[tuple], list[bool]]:
        """Per queue, in first-seen order: (topic, queue_id, queue offsets, its 20-byte entries as a ``CQ_DTYPE`` array:
        a view, so a result handed to the parent carries them out of band, not pickled into the pipe), and whether
        each block is dense (consecutive queue offsets, increasing entry ends: ``ConsumeQueueWriter.put_packed``'s
        ``dense``, checked here in the worker instead of in the in-order join). Within a queue the entries keep
        commitlog order; queues are independent files, so their interleaving is moot."""
        if not self.runs:
            return [], []
        gtid, qid, qoff, phys, size, code = (np.concatenate([r[k] for r in self.runs]) if len(self.runs) > 1
                                             else self.runs[0][k] for k in range(6))
        order, bounds, groups = queue_groups(gtid, qid)  # stable: each queue's entries stay in commitlog order
        qoff, phys, size = qoff[order], phys[order], size[order]
        ent = np.empty(len(order), dtype=CQ_DTYPE)
        ent["physical_offset"] = phys
        ent["size"] = size
        ent["tags_code"] = code[order]
        ends = phys + size
        # step i -> i + 1 continues a queue densely (only steps inside one block are looked at)
        step_ok = (qoff[1:] - qoff[:-1] == 1) & (ends[1:] > ends[:-1])
        out, dense = [], []
        for g in groups:
            a, b = int(bounds[g]), int(bounds[g + 1])
            out.append((self.topics[int(gtid[order[a]])], int(qid[order[a]]), qoff[a:b], ent[a:b]))
            dense.append(bool(step_ok[a:b - 1].all()))
        return out, dense


class RecordingIndex:
    """An index sink that keeps the puts of one file's dispatch, in order."""

    def __init__(self):
        self.h, self.p, self.t = [], [], []

    def put_batch(self, h, p, t):
        self.h.append(h)
        self.p.append(p)
        self.t.append(t)

    def arrays(self, slots: int | None = None) -> dict:
        """The puts as arrays; with ``slots``, also the hash-slot chains of each batch of ``INDEX_PUTS`` puts
        (``sinks.indexfile.slot_links``: the sort done here, in the worker, instead of in the in-order join)."""
        def cat(xs):
            return np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)

        h = cat(self.h)
        out = {"h": h, "p": cat(self.p), "t": cat(self.t)}
        if slots:
            # per batch: slot, prev and the batch's heads/lasts (positions inside the batch, kept per batch)
            out["links"] = [slot_links(h[a:a + INDEX_PUTS], slots) for a in range(0, len(h), INDEX_PUTS)]
            out["h"] = h.astype(np.int32)  # hashes are Java ints: half the bytes sent to the join
        return out


def dispatch_file(args) -> dict:
    """One task: the dispatch of one commitlog file. ``args`` = (path, start, mapped file size, build_cq,
    build_index, delay_table[, lo, hi[, index slots[, dledger]]]): with ``lo``/``hi`` only the chunk of the file from
    position ``lo`` up to position ``hi`` (None: the file's end; ``chunk_dispatch_args``); with the index's slot
    count the index puts come with their slot chains; ``dledger`` is the parent's ``MappedFile.dledger`` (None:
    from the path). The file is mapped here (in the worker) and closed before returning;
    the result says which record scanner ran (``scanner``)."""
    path, start, file_size, build_cq, build_index, delay_table = args[:6]
    lo, hi = args[6:8] if len(args) > 6 else (0, None)
    slots = args[8] if len(args) > 8 else None
    cl = CommitLog([MappedFile(path, start, dledger=args[9] if len(args) > 9 else None)], file_size)
    cq = RecordingCQ() if build_cq else None
    ix = RecordingIndex() if build_index else None
    try:
        rep = dispatch_commitlog(cl, cq, ix, RebuildOptions(build_cq, build_index, delay_table=delay_table,
                                                            from_offset=start + lo if lo else None,
                                                            to_offset=None if hi is None else start + hi))
    finally:
        cl.close()
    blocks, dense = cq.blocks() if cq else (None, None)
    return {"start": start, "report": rep, "cq": blocks, "cq_dense": dense, "index": ix.arrays(slots) if ix else None,
            "scanner": describe_scanner(), "args": tuple(args)}


def chunk_dispatch_args(commitlog: CommitLog, cq, index, options: RebuildOptions) -> list[tuple]:
    """``file_dispatch_args`` with every file split into chunks of about ``parallel.chunk_bytes()`` at valid
    record starts (``salvage.record_chunks``): the parallel engine balances by bytes, not files. The dispatch
    walk carries nothing from one record to the next but its position (every record holds its own queue offset),
    so a chunk's dispatch is the file's from the chunk's start; ``join_file_dispatches`` checks that each chunk's
    walk reached the next chunk's start exactly."""
    out = []
    slots = getattr(index, "slots", None) if options.build_index else None
    for a, f in zip(file_dispatch_args(commitlog, cq, index, options), commitlog.files):
        starts = record_chunks(f, 0, accept_v2=True)
        for k, lo in enumerate(starts):
            out.append((*a, lo, starts[k + 1] if k + 1 < len(starts) else None, slots, f.dledger))
    return out


def file_dispatch_args(commitlog: CommitLog, cq, index, options: RebuildOptions) -> list[tuple]:
    """``dispatch_file``'s argument for every file of ``commitlog`` (whole CommitLog: no --from/--to)."""
    if options.from_offset is not None or options.to_offset is not None:
        raise ValueError("--from/--to need the sequential walk (one job, local engine)")
    build_cq, build_index = options.build_cq and cq is not None, options.build_index and index is not None
    return [(f.path, f.start, commitlog.file_size, build_cq, build_index, options.delay_table)
            for f in commitlog.files]


def join_file_dispatches(results, commitlog: CommitLog, cq, index, options: RebuildOptions,
                         progress=None) -> RebuildReport:
    """Feed ``cq`` and ``index`` from ``dispatch_file`` results taken in commitlog order (an iterator: one file's
    results in memory at a time) and return the report the sequential walk would give. Stops consuming at the
    first file whose walk did not end naturally, or before a missing file.

    A chunk's result (``chunk_dispatch_args``) counts only when its walk stopped exactly at the next chunk's
    start; otherwise (damage near the chunk's end: the walk went past it, or a record straddling it was judged
    against the chunk's end) the rest of the file is dispatched again here from the chunk's start, as one task,
    and the file's later chunks are dropped."""
    build_index = options.build_index and index is not None
    files = commitlog.files
    index_of = {f.start: i for i, f in enumerate(files)}
    fsize = commitlog.file_size
    total = RebuildReport(start_offset=commitlog.min_offset)
    queues: dict = {}
    after_last_put = None
    offset = commitlog.min_offset
    redone = None  # the file whose rest was dispatched again: its later chunks are dropped
    for res in results:
        i = index_of[res["start"]]
        f = files[i]
        if f.start == redone:
            continue
        args = res.get("args", ())
        hi = args[7] if len(args) > 7 else None
        rep: RebuildReport = res["report"]
        if hi is not None and not (rep.stop_kind == "to" and rep.end_offset == f.start + hi):
            res = dispatch_file((*args[:7], None, *args[8:]))
            rep, hi, redone = res["report"], None, f.start
        # a block the worker found dense goes in with its first entry checked (the dry-run comparison takes every
        # block entry by entry)
        dense = res.get("cq_dense") or ()
        for k, (topic, qid, qoff, packed) in enumerate(res["cq"] or ()):
            w = queues.get((topic, qid))
            if w is None:
                w = queues[(topic, qid)] = cq.queue(topic, qid)
            w.put_packed(qoff, packed, dense=k < len(dense) and dense[k])
        x = res["index"]
        if x is not None and len(x["h"]):
            h, p, t = x["h"], x["p"], x["t"]
            links = x.get("links")
            if links is None or len(args) <= 8 or getattr(index, "slots", None) != args[8]:
                links = None  # made without the slot count (a caller that passed none): the join sorts
            for a in range(0, len(h), INDEX_PUTS):
                b = a + INDEX_PUTS
                if links is None:
                    index.put_batch(h[a:b], p[a:b], t[a:b])
                else:
                    index.put_linked(h[a:b], p[a:b], t[a:b], *links[a // INDEX_PUTS])
        # join the per-file reports as the sequential walk would have counted them
        total.messages += rep.messages
        total.cq_entries += rep.cq_entries
        total.not_in_cq += rep.not_in_cq
        total.index_records += rep.index_records
        total.index_puts += rep.index_puts
        total.rollback_not_indexed += rep.rollback_not_indexed
        total.multi_dispatch_records += rep.multi_dispatch_records
        total.half_records.extend(rep.half_records)
        for t, n in rep.skipped_topics.items():
            total.skipped_topics[t] = total.skipped_topics.get(t, 0) + n
        if rep.index_records:
            after_last_put = rep.after_last_put_ts
        elif after_last_put is None:
            after_last_put = rep.after_last_put_ts
        offset = rep.end_offset
        if hi is not None:  # a chunk that reached the next one's start: the file goes on
            if progress is not None:
                progress(f.start + hi - commitlog.min_offset)
            continue
        if progress is not None:
            progress(f.start + f.size - commitlog.min_offset)
        natural = rep.stop_reason == _NATURAL_END and rep.stop_kind == "end"
        if not natural:
            total.stop_kind, total.stop_reason, total.stop_file = rep.stop_kind, rep.stop_reason, rep.stop_file
            break
        if i + 1 >= len(files):
            total.stop_kind, total.stop_reason = "end", _NATURAL_END
            break
        nxt = files[i + 1]
        if nxt.start != f.start + fsize:
            offset = f.start + fsize
            total.stop_kind = "gap"
            total.stop_reason = f"missing commitlog file(s) between {f.start + fsize} and {nxt.start}"
            total.stop_file = nxt.path
            break
    if build_index:
        total.after_last_put_ts = after_last_put
    total.end_offset = offset
    total.bytes_walked = max(offset - total.start_offset, 0)
    return total


def dispatch_parallel(commitlog: CommitLog, cq=None, index=None, options: RebuildOptions | None = None,
                      progress=None, jobs: int | None = None) -> RebuildReport:
    """``dispatch_commitlog``'s contract (whole CommitLog) with one chunk of a file per task
    (``chunk_dispatch_args``) on ``jobs`` local worker processes (``store.walk.parallel``); the same sink calls in
    the same order, so the same bytes. One chunk in all: the sequential walk, in this process."""
    opt = options or RebuildOptions()
    args = chunk_dispatch_args(commitlog, cq, index, opt)
    if len(args) < 2:
        return dispatch_commitlog(commitlog, cq, index, opt, progress=progress)
    return join_file_dispatches(map_files(dispatch_file, args, jobs), commitlog, cq, index, opt, progress)


@dataclass
class RebuildGeometry:
    """mappedFileSizeConsumeQueue, maxHashSlotNum and maxIndexNum used, and where each came from."""

    cq_file_size: int
    index_slots: int
    index_max: int
    source: dict[str, str] = field(default_factory=dict)
    # per value: {value, source: flag|config|inferred|ambiguous|default, candidates, detail}
    settings: dict[str, dict] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("settings")
        return d

    def uncertain(self) -> list[str]:
        """One line per value that is neither given nor proven (ambiguous or the broker's default)."""
        return [f"{k}: {v['source']}: {v.get('detail', '')}" for k, v in self.settings.items()
                if v.get("source") in ("ambiguous", "default")]


def _cq_file_size_setting(store: Store) -> Setting:
    """mappedFileSizeConsumeQueue as the store's consume-queue files prove it: every file is created at the
    configured size and named by its first logical byte offset, so a queue's names step by that size. One
    size shared by every file (and every name step) is proven; files that disagree are ambiguous."""
    sizes: collections.Counter = collections.Counter()
    steps: collections.Counter = collections.Counter()
    for q in list_queues(store.layout.consumequeue_dir):
        names = sorted(n for n in os.listdir(q.path) if is_offset_file_name(n))
        for n in names:
            sizes[os.path.getsize(os.path.join(q.path, n))] += 1
        for a, b in zip(names, names[1:]):
            steps[int(b) - int(a)] += 1
    if not sizes:
        return Setting(DEFAULT_CQ_FILE_SIZE, "default", "no consume-queue file to infer it from; "
                       f"{CQ_SIZE_SETTLE} settles it")
    cands = sorted(set(sizes) | set(steps))
    if len(cands) == 1:
        return Setting(cands[0], "inferred", f"every consume-queue file is {cands[0]} bytes"
                       + (" and names step by it" if steps else ""), tuple(cands))
    # a file cut short by a copy, or a broker restarted with a new size: the name steps are the stronger evidence
    if len(steps) == 1:
        step = next(iter(steps))
        return Setting(step, "inferred", f"file names step by {step} (lengths {dict(sizes)})", tuple(cands))
    return Setting(sizes.most_common(1)[0][0], "ambiguous",
                   f"consume-queue files disagree (lengths {dict(sizes)}, name steps {dict(steps)}); "
                   f"{CQ_SIZE_SETTLE} settles it", tuple(cands))


def _index_geometry_setting(store: Store) -> IndexGeometry:
    """The geometry proven by the store's first non-empty index file that proves one (store.indexfile)."""
    idir = store.layout.index_dir
    names = sorted(n for n in os.listdir(idir) if os.path.isfile(os.path.join(idir, n))) \
        if os.path.isdir(idir) else []
    amb: IndexGeometry | None = None
    for n in names:
        g = prove_geometry_of(os.path.join(idir, n))
        if g.source == "inferred" and "empty index file" not in g.detail:
            return g
        if g.source == "ambiguous" and amb is None:
            amb = g
    if amb is not None:
        return amb
    return IndexGeometry(None, None, "default", (), "no index file proves a geometry; "
                         f"{INDEX_GEOMETRY_SETTLE} settles it")


def configured_delay_table(conf: BrokerConf | None) -> DelayTable:
    """messageDelayLevel of ``conf`` (the delivery time of a delay-level message's tagsCode), else the broker's
    default table."""
    c = configured(conf, "messageDelayLevel")
    if c is None:
        return DEFAULT_DELAY_TABLE
    try:
        return DelayTable.parse(c.value)
    except Exception as e:  # the parser's own message, as a usage error naming the line
        raise BrokerConfigError(f"messageDelayLevel={c.value!r}: {e}", c.detail) from None


def store_geometry(store: Store, cq_file_size: int | None = None, index_slots: int | None = None,
                   index_max: int | None = None) -> RebuildGeometry:
    """Each value from its flag, else the store's broker.conf (--broker-config), else what the store's own
    files prove, else RocketMQ's default (said in ``settings`` and in the warnings of the command)."""
    src = {}
    settings: dict[str, dict] = {}
    cq = Setting.resolve(cq_file_size, store.conf, "mappedFileSizeConsumeQueue",
                         _cq_file_size_setting(store) if cq_file_size is None
                         and configured(store.conf, "mappedFileSizeConsumeQueue") is None else None,
                         DEFAULT_CQ_FILE_SIZE)
    cq_file_size = cq.value
    src["cq_file_size"] = {"flag": "option", "config": "broker.conf", "inferred": "store's consume queue files",
                           "ambiguous": "store's consume queue files (ambiguous)"}.get(cq.source, "RocketMQ default")
    settings["cq_file_size"] = cq.to_dict()
    if index_slots is not None and index_max is not None:
        src["index"] = "option"
        settings["index"] = IndexGeometry(index_slots, index_max, "flag").to_dict()
    else:
        cs, cm = configured(store.conf, "maxHashSlotNum"), configured(store.conf, "maxIndexNum")
        if index_slots is None and index_max is None and (cs is not None or cm is not None):
            index_slots = cs.value if cs is not None else DEFAULT_INDEX_SLOTS
            index_max = cm.value if cm is not None else DEFAULT_INDEX_MAX
            src["index"] = "broker.conf"
            settings["index"] = IndexGeometry(index_slots, index_max, "config", (),
                                              "; ".join(c.detail for c in (cs, cm) if c is not None)).to_dict()
        else:
            g = _index_geometry_setting(store)
            settings["index"] = g.to_dict()
            if g.source == "inferred" and (index_slots is None or index_slots == g.slots):
                index_slots = g.slots
                index_max = index_max or g.max_items
                src["index"] = "store's index files"
            else:
                if index_slots is None:
                    index_slots = DEFAULT_INDEX_SLOTS if index_max is None else max(index_max // 4, 1)
                if index_max is None:
                    index_max = DEFAULT_INDEX_MAX if index_slots == DEFAULT_INDEX_SLOTS else index_slots * 4
                src["index"] = "RocketMQ default" if g.source != "ambiguous" else "RocketMQ default (ambiguous)"
    return RebuildGeometry(round_cq_file_size(cq_file_size), index_slots, index_max, src, settings)


@dataclass
class RebuildRun:
    """The outcome of ``rebuild()``: the dispatcher's report plus what was written (or, dry run, compared)."""

    store: str
    out: str | None  # absolute; None for a dry run
    dry_run: bool
    geometry: RebuildGeometry
    broker_version: str
    report: RebuildReport
    queues: int  # consume queues produced
    index_files: list[str]  # names of the index files produced, in creation order
    cq_format: str
    rocksdb: dict | None = None  # file_cq_to_rocksdb's counts with cq_format "rocksdb"
    note: str | None = None
    reconciliation: Reconciliation | None = None  # dry run only

    @property
    def problems(self) -> bool:
        """Records got no entry, the walk stopped on damage, or (dry run) the store's files differ."""
        rep = self.report
        bad = bool(rep.skipped_topics or rep.half_records or rep.stop_kind in PROBLEM_STOPS)
        return bad or (self.reconciliation is not None and not self.reconciliation.ok)

    def to_dict(self) -> dict:
        d = {"store": self.store, "out": self.out, "dry_run": self.dry_run, "geometry": self.geometry.to_dict(),
             "geometry_settings": self.geometry.settings,
             "broker_version": self.broker_version, **self.report.to_dict(), "queues": self.queues,
             "index_files": list(self.index_files), "cq_format": self.cq_format}
        if self.rocksdb is not None:
            d["rocksdb"] = self.rocksdb
        d.pop("after_last_put_ts", None)
        if self.note is not None:
            d["note"] = self.note
        r = self.reconciliation
        if r is not None:
            d["reconciliation"] = {
                "ok": r.ok,
                "queues": [q.to_dict() for q in r.queues],
                "index_files": [i.to_dict() for i in r.index_files],
                "differences_total": r.differences_total,
                "differences": r.differences,
            }
        return d


@dataclass
class DispatchVersion:
    """The release whose IndexFile counting ``rebuild`` follows (before 4.7.1 hashSlotCount grew on every put),
    and how it was chosen: "option" (--broker-version), "index headers" (proven from the store's index files)
    or "assumed" (4.9: nothing proves it; ``why`` says what was looked at)."""

    version: BrokerVersion
    source: str
    why: str = ""


def dispatch_version(store: Store, given: BrokerVersion | None) -> DispatchVersion:
    """``given`` when set, else what the store's index headers prove, else 4.9 (assumed, said so)."""
    from ..store.version import index_counting_version

    if given is not None:
        return DispatchVersion(given, "option")
    found, why = index_counting_version(store.layout.index_dir)
    if found is None:
        return DispatchVersion(BrokerVersion.parse("4.9"), "assumed", why)
    return DispatchVersion(found, "index headers", why)


def record_around(store: Store, offset: int):
    """The record ``offset`` lies inside of (not at its start), as ``analyses.dump.EnclosingRecord``; None when
    ``offset`` is a record boundary or the walk does not reach it (a dispatch start or end must be a boundary)."""
    from .dump import enclosing_record

    rec = enclosing_record(store.commitlog, offset)
    return rec if rec is not None and rec.start != offset else None


def rebuild(store: Store, out: str | None = None, *, build_cq: bool = True, build_index: bool = True,
            from_offset: int | None = None, to_offset: int | None = None, cq_file_size: int | None = None,
            index_slots: int | None = None, index_max: int | None = None,
            broker_version: BrokerVersion | None = None,
            dry_run: bool = False, details: int = 1000, cq_format: str = "file", dispatch: Dispatch | None = None,
            progress: Callable[[int], None] | None = None, jobs: int | None = None) -> RebuildRun:
    """Regenerate ``store``'s ConsumeQueue and IndexFile from its CommitLog into the new directory ``out``
    (``consumequeue/``, ``index/`` and the ``rebuild.json`` manifest), exactly as the broker's dispatcher
    writes them; with ``dry_run``, write nothing and reconcile them with the store's own files instead.

    ``out`` must lie outside the store and be new or empty (``UnsafeOutputError``, exit code 6).
    ``broker_version`` before 4.7.1 counts hashSlotCount on every put (later versions count newly used slots);
    default 4.9.
    Geometry options left None are inferred (``store_geometry``). ``cq_format`` "rocksdb" writes
    ``out/consumequeue`` as the 5.x RocksDB consume queue. ``dispatch`` replaces ``dispatch_commitlog`` (same
    signature; e.g. the Spark engine); ``progress(bytes_done)`` is called as the walk advances. ``jobs`` > 1
    (default ``parallel.resolve_jobs``) dispatches chunks of the commitlog files on local worker processes
    (``dispatch_parallel``, same bytes) when there is no --from/--to. The store is not
    closed.
    """
    if not dry_run and not out:
        raise ValueError("rebuild needs an output directory, or dry_run")
    geo = store_geometry(store, cq_file_size, index_slots, index_max)
    opts = RebuildOptions(build_cq=build_cq, build_index=build_index, from_offset=from_offset, to_offset=to_offset,
                          delay_table=configured_delay_table(store.conf))
    version = broker_version or BrokerVersion.parse("4.9")
    every = version.index_counts_every_put
    cl = store.commitlog
    recon = None
    final_out = out
    if dry_run:
        from .compare.rebuild_vs_store import CompareConsumeQueueSet, CompareIndexFileSet, Reconciliation

        recon = Reconciliation()
        cq = CompareConsumeQueueSet(store.layout.consumequeue_dir, geo.cq_file_size, recon, details) \
            if build_cq else None
        index = CompareIndexFileSet(store.layout.index_dir, geo.index_slots, geo.index_max, recon, every,
                                    details) if build_index else None
    else:
        ensure_output_outside(store, out)
        ensure_new_directory(out)
        # written under a temporary name beside out and renamed at the end: an error, a full disk or a signal
        # leaves nothing at out (sinks.staging)
        staged = Staged(out, "the rebuild output", directory=True)
        final_out, out = out, staged.path
        cq = ConsumeQueueSet(os.path.join(out, "consumequeue"), geo.cq_file_size) if build_cq else None
        index = IndexFileSet(os.path.join(out, "index"), geo.index_slots, geo.index_max, every) \
            if build_index else None
    if dispatch is None:
        dispatch = dispatch_commitlog
        if resolve_jobs(jobs) > 1 and cl.files and from_offset is None and to_offset is None:
            dispatch = functools.partial(dispatch_parallel, jobs=jobs)
    rep = dispatch(cl, cq, index, opts, progress=progress)
    if cq is not None:
        if dry_run:
            cq.close(whole_commitlog=from_offset is None and to_offset is None)
        else:
            cq.close()
    if index is not None:
        index.close(rep.after_last_put_ts)
    rocks_result = None
    if cq_format == "rocksdb" and cq is not None and not dry_run:
        from ..sinks.rocksdb_cq import file_cq_to_rocksdb

        files_dir = os.path.join(out, ".consumequeue-files")
        os.rename(os.path.join(out, "consumequeue"), files_dir)
        try:
            rocks_result = file_cq_to_rocksdb(files_dir, os.path.join(out, "consumequeue"), cl)
        finally:
            shutil.rmtree(files_dir, ignore_errors=True)
    note = None
    if dry_run and build_cq and os.path.isfile(os.path.join(store.layout.consumequeue_dir, "CURRENT")):
        note = ROCKSDB_STORE_NOTE
    run = RebuildRun(store.root, None if dry_run else os.path.abspath(final_out), dry_run, geo, version.text, rep,
                     len(cq.queues) if cq is not None else 0, list(index.names) if index is not None else [],
                     cq_format, rocks_result, note, recon)
    if not dry_run:
        manifest = run.to_dict()
        manifest["index_file_naming"] = INDEX_FILE_NAMING
        with open(os.path.join(out, MANIFEST), "w", encoding="utf-8") as f:
            f.write(utf8_json(manifest, indent=2))
        staged.commit()
    return run


def rebuild_rocksdb_consume_queue(store: Store, out_dir: str, end_offset: int | None = None,
                                  delay_table=None) -> dict:
    """A RocksDB consume queue for ``store`` regenerated from its commit log (up to ``end_offset``, e.g. the
    recovery truncation point) into ``out_dir`` (a new store's ``consumequeue/``), which must lie outside
    ``store`` and be new or empty.

    The entries come from the one dispatcher (``dispatch_commitlog``, the same walk and rules as the file
    rebuild), written as file consume queues into a scratch directory beside ``out_dir`` and then loaded into
    RocksDB with each record's store timestamp."""
    ensure_output_outside(store, out_dir)
    ensure_new_directory(out_dir)
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".rmqinspect-cq-", dir=parent)
    try:
        cq = ConsumeQueueSet(scratch, 6_000_000)
        opts = RebuildOptions(build_cq=True, build_index=False, to_offset=end_offset,
                              delay_table=delay_table or DEFAULT_DELAY_TABLE)
        dispatch_commitlog(store.commitlog, cq, None, opts)
        cq.close()
        from ..sinks.rocksdb_cq import file_cq_to_rocksdb

        return file_cq_to_rocksdb(scratch, out_dir, store.commitlog)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
