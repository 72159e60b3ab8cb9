"""``rebuild --engine spark``: the dispatcher walk of every commitlog file as its own Spark task.

The tasks and the join are the local parallel engine's (``analyses.rebuild.file_dispatch_args``,
``dispatch_file`` and ``join_file_dispatches``): each task dispatches one file with recording sinks and returns
the consume-queue entries and index puts with their slot chains; the driver takes the results in commitlog order
(``session.ordered_partitions``: as many files dispatched at once as the cluster has cores, a bounded number of
results held in the driver) and feeds the real ``ConsumeQueueSet`` / ``IndexFileSet``, applying the rules that
cross files as the sequential walk applies them. One task per file, not per 64 MiB chunk as the local engine:
every partition is a Spark job of its own, whose fixed cost a 64 MiB chunk does not repay (docs/spark.md). Every
task reports the record scanner it ran; the job warns when a task ran the pure-Python one (an executor without the
compiled extension).
"""

from __future__ import annotations

from ..analyses.dispatcher import RebuildOptions, RebuildReport
from ..analyses.rebuild import dispatch_file, file_dispatch_args, join_file_dispatches
from ..store.commitlog import CommitLog
from .session import ScannerTally, ordered_partitions


def rebuild_spark(spark, commitlog: CommitLog, cq, index, options: RebuildOptions | None = None,
                  progress=None) -> RebuildReport:
    """Same contract as ``dispatch_commitlog`` (whole CommitLog, no --from/--to): feeds ``cq`` and ``index``
    and returns the joined report; the caller closes the sinks (``index.close(rep.after_last_put_ts)``)."""
    opt = options or RebuildOptions()
    if opt.from_offset is not None or opt.to_offset is not None:
        raise ValueError("--from/--to are not supported with --engine spark")
    # whole files (lo 0, hi None) with the index's slot count: the executors compute the slot chains
    slots = getattr(index, "slots", None) if opt.build_index else None
    args = [(*a, 0, None, slots, f.dledger) for a, f in zip(file_dispatch_args(commitlog, cq, index, opt),
                                                            commitlog.files)]
    rdd = spark.sparkContext.parallelize(args, len(args)).map(dispatch_file)
    tally = ScannerTally("rebuild")
    results = ordered_partitions(rdd)
    try:
        rep = join_file_dispatches(tally.watch(results), commitlog, cq, index, opt, progress)
    finally:
        results.close()  # the join may stop early (damage, a missing file): later files' jobs are not started
    tally.warn()
    return rep
