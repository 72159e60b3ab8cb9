"""``rebuild --engine spark``: the dispatcher walk of every commitlog file as its own Spark task.

Every record carries its own queue offset and every commitlog file starts at a record boundary, so the walk of
file *k* needs nothing from files before it. Each task runs the local engine's ``dispatch_commitlog`` over a
one-file CommitLog with recording sinks and returns the consume-queue entries and the index puts (key hashes
computed in the task) as numpy arrays. The driver takes the results in commitlog order (``toLocalIterator``:
one file's results in memory at a time) and feeds the real ``ConsumeQueueSet`` / ``IndexFileSet``: CQ entries
land at ``queue offset * 20`` and the index files roll exactly where the broker rolls, because the puts arrive
in the broker's order. The walk-level rules that cross files (stop at the first END/ILLEGAL, a missing file,
the record after the last index put) are applied when the per-file results are joined, as the sequential walk
applies them.
"""

from __future__ import annotations

import numpy as np

from ..analyses.rebuild import RebuildOptions, RebuildReport, dispatch_commitlog
from ..formats.consumequeue import CQ_DTYPE
from ..store.commitlog import CommitLog
from ..store.mapped import MappedFile

_NATURAL_END = "end of the last commitlog file"


class _RecordingQueue:
    __slots__ = ("qi", "sink")

    def __init__(self, qi, sink):
        self.qi, self.sink = qi, sink

    def put(self, cq_offset, phys, size, tags_code):
        s = self.sink
        s.qidx.append(self.qi)
        s.qoff.append(cq_offset)
        s.phys.append(phys)
        s.size.append(size)
        s.code.append(tags_code)


class RecordingCQ:
    def __init__(self):
        self.keys: list[tuple[str, int]] = []
        self._q: dict = {}
        self.qidx, self.qoff, self.phys, self.size, self.code = [], [], [], [], []

    def queue(self, topic, queue_id):
        q = self._q.get((topic, queue_id))
        if q is None:
            q = self._q[(topic, queue_id)] = _RecordingQueue(len(self.keys), self)
            self.keys.append((topic, queue_id))
        return q

    def blocks(self) -> list[tuple]:
        """Per queue, in first-seen order: (topic, queue_id, queue offsets, packed 20-byte entries). Within a
        queue the entries keep commitlog order; queues are independent files, so their interleaving is moot."""
        qidx = np.array(self.qidx, dtype=np.int32)
        qoff = np.array(self.qoff, dtype=np.int64)
        ent = np.empty(len(qidx), dtype=CQ_DTYPE)
        ent["physical_offset"] = self.phys
        ent["size"] = self.size
        ent["tags_code"] = self.code
        order = np.argsort(qidx, kind="stable")
        bounds = np.searchsorted(qidx[order], np.arange(len(self.keys) + 1))
        out = []
        for i, (topic, qid) in enumerate(self.keys):
            sel = order[bounds[i]:bounds[i + 1]]
            out.append((topic, qid, qoff[sel], ent[sel].tobytes()))
        return out


class RecordingIndex:
    def __init__(self):
        self.h, self.p, self.t = [], [], []

    def put_batch(self, h, p, t):
        self.h.append(h)
        self.p.append(p)
        self.t.append(t)

    def arrays(self) -> dict:
        def cat(xs):
            return np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)

        return {"h": cat(self.h), "p": cat(self.p), "t": cat(self.t)}


def dispatch_file(args) -> dict:
    """One Spark task: the dispatch of one commitlog file. ``args`` = (path, start, mapped file size,
    build_cq, build_index, delay_table)."""
    path, start, file_size, build_cq, build_index, delay_table = args
    cl = CommitLog([MappedFile(path, start)], file_size)
    cq = RecordingCQ() if build_cq else None
    ix = RecordingIndex() if build_index else None
    try:
        rep = dispatch_commitlog(cl, cq, ix, RebuildOptions(build_cq, build_index, delay_table=delay_table))
    finally:
        cl.close()
    return {"start": start, "report": rep, "cq": cq.blocks() if cq else None, "index": ix.arrays() if ix else None}


def rebuild_spark(spark, commitlog: CommitLog, cq, index, options: RebuildOptions | None = None,
                  progress=None) -> RebuildReport:
    """Same contract as ``dispatch_commitlog`` (whole CommitLog, no --from/--to): feeds ``cq`` and ``index``
    and returns the joined report; the caller closes the sinks (``index.close(rep.after_last_put_ts)``)."""
    opt = options or RebuildOptions()
    if opt.from_offset is not None or opt.to_offset is not None:
        raise ValueError("--from/--to are not supported with --engine spark")
    build_cq, build_index = opt.build_cq and cq is not None, opt.build_index and index is not None
    files = commitlog.files
    fsize = commitlog.file_size
    args = [(f.path, f.start, fsize, build_cq, build_index, opt.delay_table) for f in files]
    rdd = spark.sparkContext.parallelize(args, len(args)).map(dispatch_file)
    total = RebuildReport(start_offset=commitlog.min_offset)
    queues: dict = {}
    after_last_put = None
    offset = commitlog.min_offset
    for i, res in enumerate(rdd.toLocalIterator(prefetchPartitions=True)):
        f = files[i]
        rep: RebuildReport = res["report"]
        for topic, qid, qoff, packed in res["cq"] or ():
            w = queues.get((topic, qid))
            if w is None:
                w = queues[(topic, qid)] = cq.queue(topic, qid)
            w.put_packed(qoff, packed)
        x = res["index"]
        if x is not None and len(x["h"]):
            index.put_batch(x["h"], x["p"], x["t"])
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
    # the iterator may still hold later files' tasks: they are simply not consumed
    if build_index:
        total.after_last_put_ts = after_last_put
    total.end_offset = offset
    total.bytes_walked = max(offset - total.start_offset, 0)
    return total
