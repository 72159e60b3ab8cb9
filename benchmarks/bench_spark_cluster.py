"""Benchmark: the Spark engine on a real standalone cluster (rmqinspect.spark.standalone: a master and N
workers of one core each on loopback, from pyspark's own distribution), one worker against two, for ``export``
and ``rebuild --engine spark``, with the local engine (``--jobs 1``) on the same store in the same run.

    python benchmarks/bench_spark_cluster.py                 # 256 MiB in 32 MiB files (8 tasks)
    python benchmarks/bench_spark_cluster.py --mib 1270 --file-mib 128

Each cluster is started, measured (one warm-up job first: executors start and receive the package) and stopped
before the next. Times are the library calls the commands make (``export_spark`` / ``rebuild`` with the Spark
dispatch), so they include Spark's scheduling but not the cluster's start. Every task reports the record scanner
it ran (``scanners``). Speed-ups need an idle machine with as many cores as workers: ``uptime`` is printed.
Data is deleted unless --keep.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_parallel import generate  # noqa: E402


def measure(spark, root: str, base: str, tag: str) -> dict:
    from rmqinspect.analyses.rebuild import rebuild
    from rmqinspect.spark.jobs import export_spark
    from rmqinspect.spark.rebuild import rebuild_spark
    from rmqinspect.store import Store

    out: dict = {}
    t0 = time.perf_counter()
    res = export_spark(spark, [root], os.path.join(base, f"export-{tag}"))
    out["export"] = time.perf_counter() - t0
    out["export_rows"] = res.rows
    out["scanners"] = res.scanners
    t0 = time.perf_counter()
    with Store.open(root) as st:
        run = rebuild(st, os.path.join(base, f"rebuild-{tag}"), dispatch=functools.partial(rebuild_spark, spark))
    out["rebuild"] = time.perf_counter() - t0
    out["rebuild_messages"] = run.report.messages
    for d in (f"export-{tag}", f"rebuild-{tag}"):
        shutil.rmtree(os.path.join(base, d), ignore_errors=True)
    return out


def local(root: str, base: str) -> dict:
    from rmqinspect.analyses.export import export_local
    from rmqinspect.analyses.rebuild import rebuild
    from rmqinspect.store import Store

    t0 = time.perf_counter()
    export_local([root], os.path.join(base, "export-local"), jobs=1)
    e = time.perf_counter() - t0
    t0 = time.perf_counter()
    with Store.open(root) as st:
        rebuild(st, os.path.join(base, "rebuild-local"), jobs=1)
    r = time.perf_counter() - t0
    for d in ("export-local", "rebuild-local"):
        shutil.rmtree(os.path.join(base, d), ignore_errors=True)
    return {"export": e, "rebuild": r}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=float, default=256)
    ap.add_argument("--file-mib", type=int, default=32)
    ap.add_argument("--workers", default="1,2", help="cluster sizes to compare (default 1,2)")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    from rmqinspect.spark.session import get_session
    from rmqinspect.spark.standalone import StandaloneCluster

    base = a.dir or tempfile.mkdtemp(prefix="rmqinspect-bench-spark-cluster-")
    root = os.path.join(base, "store")
    try:
        meta = generate(root, None, int(a.mib * (1 << 20)), a.file_mib << 20)
        print(f"store: {meta['bytes'] / 1e9:.3f} GB, {meta['messages']:,} messages in {meta['files']} file(s)")
        result = {"store": meta, "local_jobs_1": local(root, base), "clusters": []}
        for n in (int(x) for x in a.workers.split(",")):
            t0 = time.perf_counter()
            with StandaloneCluster(workers=n, cores=1, memory="2g", work_dir=os.path.join(base, f"cluster-{n}")) as c:
                started = time.perf_counter() - t0
                spark = get_session(c.master_url, f"bench-{n}-workers", {"spark.executor.cores": "1",
                                                                         "spark.executor.memory": "1g"})
                spark.sparkContext.setLogLevel("ERROR")
                measure(spark, root, base, f"warm-{n}")  # executors start and receive the package
                m = measure(spark, root, base, f"{n}")
                spark.stop()
            m.update({"workers": n, "cluster_start_seconds": started})
            result["clusters"].append(m)
        one = result["clusters"][0]
        print(f"{'engine':<22}{'export s':>10}{'rebuild s':>11}{'export x':>10}{'rebuild x':>11}")
        lo = result["local_jobs_1"]
        print(f"{'local --jobs 1':<22}{lo['export']:>10.2f}{lo['rebuild']:>11.2f}")
        for m in result["clusters"]:
            print(f"{'spark ' + str(m['workers']) + ' worker(s)':<22}{m['export']:>10.2f}{m['rebuild']:>11.2f}"
                  f"{one['export'] / m['export']:>10.2f}{one['rebuild'] / m['rebuild']:>11.2f}  "
                  f"scanners {m['scanners']}, cluster start {m['cluster_start_seconds']:.0f} s")
        result["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print("uptime:", result["uptime"])
        print(json.dumps(result))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
