"""Export throughput: the local (pyarrow) engine vs the Spark engine with local[1] and local[2], same run,
same data, this tree against a baseline tree. Data: N commitlog files written by the project's CommitLogWriter
into a temp directory.

    python benchmarks/bench_export.py [--files 4] [--file-mb 256] [--dir /tmp/rmqinspect-bench-export]
                                      [--baseline /work/baseline] [--engines rows,local,spark local[1],...]

Each engine runs in a fresh process ``--repeat`` times per tree, the trees interleaved: the baseline
(``--baseline``: a checkout of an earlier rmqinspect, its C extension built in place; default: this tree again)
and this tree. "rows" is the row building alone (Arrow batches of every file, no Parquet writing). Reports rows/s
and GB/s (commitlog bytes scanned per second) for each run, the after/before ratio of the median wall and CPU
times per engine, and the local[2]/local[1] speed-up (target >= 1.8 on an idle 2-core machine). The machine load
average is printed with every figure: other processes on the cores distort the ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# the tree measured: this one, or the one the parent process selected (--baseline)
sys.path.insert(0, os.environ.get("RMQINSPECT_BENCH_TREE", HERE))

from rmqinspect.analyses.export import export_local  # noqa: E402
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec  # noqa: E402
from rmqinspect.formats.commitlog import encode_properties  # noqa: E402


def make_store(root: str, files: int, file_size: int, seed: int = 7) -> int:
    """Fill ``files`` commitlog files (the last one ends with a blank record, like the others). Returns rows."""
    rnd = random.Random(seed)
    bodies = [bytes(rnd.getrandbits(8) for _ in range(512)) * k for k in range(1, 17)]  # 0.5 .. 8 KiB
    topics = [f"Topic{i}" for i in range(8)]
    n = 0
    t0 = 1_763_700_000_000
    with CommitLogWriter(os.path.join(root, "commitlog"), file_size=file_size) as w:
        while True:
            i = n
            props = encode_properties({"TAGS": f"tag{i % 5}", "KEYS": f"order-{i} user-{i % 977}",
                                       "UNIQ_KEY": f"C0A8000100002A9F0000{i:012X}", "CLUSTER": "DefaultCluster"})
            spec = MessageSpec(topic=topics[i % 8], queue_id=i % 4, body=bodies[rnd.randrange(16)],
                               properties=props, born_timestamp=t0 + i * 10, store_timestamp=t0 + i * 10 + i % 50)
            if w.write_offset + 9000 > files * file_size:
                break
            w.append(spec)
            n += 1
    return n


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def bench_spark(master: str, store: str, out: str):
    from rmqinspect.spark.jobs import export_spark, messages_df
    from rmqinspect.spark.session import get_session

    spark = get_session(master, "bench-export", {"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    messages_df(spark, [store]).limit(1).count()  # start the JVM side and the Python workers
    t = time.perf_counter()
    res = export_spark(spark, [store], out)
    dt = time.perf_counter() - t
    spark.stop()
    return dt, res.rows


def run_engine(engine: str, tree: str, store: str, out: str):
    """One measurement in a fresh process running the rmqinspect of ``tree`` (the JVM and Spark's Python workers
    inherit the environment)."""
    env = dict(os.environ, RMQINSPECT_BENCH_TREE=tree)
    env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", engine, store, out], env=env,
                       check=True, capture_output=True, text=True)
    dt, n, cpu = r.stdout.strip().splitlines()[-1].split()
    return float(dt), int(n), float(cpu)


def one(engine: str, store: str, out: str) -> None:
    if engine == "rows":  # building the Arrow batches only (no Parquet writing), every commitlog file
        try:
            from rmqinspect.analyses.rows import file_batches
        except ImportError:  # a tree from before the row decoder had its own module
            from rmqinspect.analyses.export import file_batches
        from rmqinspect.analyses.export import file_tasks

        t, c = time.perf_counter(), time.process_time()
        n = sum(b.num_rows for task in file_tasks([store]) for b in file_batches(task))
        print(f"{time.perf_counter() - t} {n} {time.process_time() - c}")
        return
    if engine == "local":
        t, c = time.perf_counter(), time.process_time()
        res = export_local([store], out)
        dt, n, cpu = time.perf_counter() - t, res.rows, time.process_time() - c
    else:  # the work is done in Spark's Python workers: this process' CPU time says nothing
        dt, n = bench_spark(engine, store, out)
        cpu = float("nan")
    print(f"{dt} {n} {cpu}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--file-mb", type=int, default=256)
    ap.add_argument("--dir", default="/tmp/rmqinspect-bench-export")
    ap.add_argument("--keep", action="store_true", help="keep the generated store for the next run")
    ap.add_argument("--rows-only", action="store_true", help="only the row building (Arrow batches, no Parquet)")
    ap.add_argument("--engines", default="rows,local,spark local[1],spark local[2]",
                    help="comma-separated subset of: rows, local, spark local[1], spark local[2]")
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine and tree, interleaved; medians compared")
    ap.add_argument("--baseline", default=HERE, help="rmqinspect tree measured as 'before' (default: this tree)")
    ap.add_argument("--one", nargs=3, metavar=("ENGINE", "STORE", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        one(*a.one)
        return
    store = os.path.join(a.dir, "store")
    size = a.file_mb << 20
    marker = os.path.join(a.dir, f"rows-{a.files}x{a.file_mb}")
    if os.path.exists(marker):
        rows = int(open(marker).read())
    else:
        shutil.rmtree(a.dir, ignore_errors=True)
        t = time.perf_counter()
        rows = make_store(store, a.files, size)
        open(marker, "w").write(str(rows))
        print(f"wrote {rows} messages in {a.files} x {a.file_mb} MiB commitlog files in "
              f"{time.perf_counter() - t:.1f} s")
    scanned = sum(os.path.getsize(os.path.join(store, "commitlog", f)) for f in os.listdir(os.path.join(store,
                                                                                                      "commitlog")))
    print(f"{os.cpu_count()} CPUs; {load()}")
    results = {}
    times: dict = {}
    names = ["rows"] if a.rows_only else [e.strip() for e in a.engines.split(",")]
    trees = (("before", os.path.abspath(a.baseline)), ("after", os.path.abspath(HERE)))
    for name in names:
        for i in range(a.repeat):
            for label, tree in trees[::-1] if i % 2 else trees:  # alternate the order: load drifts during a run
                out = os.path.join(a.dir, "out-" + name.replace(" ", "_").replace("[", "").replace("]", ""))
                shutil.rmtree(out, ignore_errors=True)
                dt, n, cpu = run_engine(name.split()[-1], tree, store, out)
                assert n == rows, (name, n, rows)
                times.setdefault((name, label), []).append((dt, cpu))
                print(f"{name:15s} {label:6s} {dt:7.2f} s (cpu {cpu:6.2f} s)  {n / dt:10.0f} rows/s  "
                      f"{scanned / dt / 1e9:6.3f} GB/s   ({load()})", flush=True)
                shutil.rmtree(out, ignore_errors=True)
        for k in (0, 1):
            b, f = (statistics.median(t[k] for t in times[name, label]) for label in ("before", "after"))
            print(f"{name:15s} median {('wall', 'cpu')[k]}: before {b:.2f} s, after {f:.2f} s, after vs before: "
                  f"{b / f:.2f}x", flush=True)
        for label in ("before", "after"):
            results[name, label] = statistics.median(t[0] for t in times[name, label])
    if "spark local[1]" in names and "spark local[2]" in names:
        for label, _ in trees:
            s2 = results["spark local[2]", label]
            vs_local = (f"; spark local[2] vs local engine: {results['local', label] / s2:.2f}x" if "local" in names
                        else "")
            print(f"{label}: spark local[2] vs local[1]: {results['spark local[1]', label] / s2:.2f}x{vs_local}")
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
