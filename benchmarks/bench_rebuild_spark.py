"""rebuild --engine spark vs the local rebuild: same store, same run, outputs compared byte for byte.

    python benchmarks/bench_rebuild_spark.py [--files 4] [--file-mb 256] [--dir /tmp/rmqinspect-bench-rebuild]

The tasks do the walk, the property extraction and the index key hashing; the driver places the CQ entries
and assembles the index files in commitlog order (sequential), so the speed-up is bounded by that part.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_export import load, make_store  # noqa: E402

from rmqinspect.analyses.dispatcher import RebuildOptions, dispatch_commitlog  # noqa: E402
from rmqinspect.sinks.consumequeue import ConsumeQueueSet  # noqa: E402
from rmqinspect.sinks.indexfile import IndexFileSet  # noqa: E402
from rmqinspect.store import Store  # noqa: E402

CQ_FILE = 300000 * 20
SLOTS, MAX_ITEMS = 500_000, 2_000_000


def run(engine: str, store: str, out: str, spark=None):
    st = Store.open(store)
    cq = ConsumeQueueSet(os.path.join(out, "consumequeue"), CQ_FILE)
    ix = IndexFileSet(os.path.join(out, "index"), SLOTS, MAX_ITEMS)
    t = time.perf_counter()
    if engine == "local":
        rep = dispatch_commitlog(st.commitlog, cq, ix, RebuildOptions())
    else:
        from rmqinspect.spark.rebuild import rebuild_spark

        rep = rebuild_spark(spark, st.commitlog, cq, ix, RebuildOptions())
    cq.close()
    ix.close(rep.after_last_put_ts)
    dt = time.perf_counter() - t
    st.close()
    return dt, rep


def same_tree(a: str, b: str) -> bool:
    for dirpath, _, names in os.walk(a):
        for n in names:
            p = os.path.join(dirpath, n)
            q = os.path.join(b, os.path.relpath(p, a))
            if not os.path.exists(q) or not filecmp.cmp(p, q, shallow=False):
                return False
    return sum(len(n) for _, _, n in os.walk(a)) == sum(len(n) for _, _, n in os.walk(b))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--file-mb", type=int, default=256)
    ap.add_argument("--dir", default="/tmp/rmqinspect-bench-rebuild")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    store = os.path.join(a.dir, "store")
    shutil.rmtree(a.dir, ignore_errors=True)
    rows = make_store(store, a.files, a.file_mb << 20)
    size = a.files * (a.file_mb << 20)
    print(f"{rows} messages in {a.files} x {a.file_mb} MiB; {os.cpu_count()} CPUs; {load()}")
    outs = {}
    times = {}
    for name in ("local", "spark local[1]", "spark local[2]"):
        out = outs[name] = os.path.join(a.dir, "out-" + name.replace(" ", "_").replace("[", "").replace("]", ""))
        if name == "local":
            dt, rep = run("local", store, out)
        else:
            from rmqinspect.spark.session import get_session

            spark = get_session(name.split()[1], "bench-rebuild")
            spark.sparkContext.setLogLevel("ERROR")
            spark.sparkContext.parallelize([1, 2], 2).count()  # start the Python workers
            dt, rep = run("spark", store, out, spark)
            spark.stop()
        times[name] = dt
        print(f"{name:15s} {dt:7.2f} s  {rep.messages / dt:10.0f} msgs/s  {size / dt / 1e9:6.3f} GB/s  "
              f"({rep.cq_entries} CQ entries, {rep.index_puts} index puts; {load()})")
    for name in ("spark local[1]", "spark local[2]"):
        print(f"{name} output identical to local: {same_tree(outs['local'], outs[name])}")
    print(f"spark local[2] vs local[1]: {times['spark local[1]'] / times['spark local[2]']:.2f}x; "
          f"vs local engine: {times['local'] / times['spark local[2]']:.2f}x")
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
