"""Benchmark: `verify` and `recover --dry-run` over >= 4 GiB of commit log written with the project's writer.

Baseline measured in the same run: one zlib.crc32 pass over the same bytes (the single-pass C limit every
check has to touch at least once). Data goes to a fresh directory under /tmp and is deleted afterwards
(unless --keep).

    python benchmarks/bench_verify_recover.py [--gib 4.2] [--body 1024] [--keep] [--dir DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery  # noqa: E402
from rmqinspect.analyses.verify import verify  # noqa: E402
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec  # noqa: E402
from rmqinspect.formats.commitlog import encode_properties  # noqa: E402
from rmqinspect.store import Store  # noqa: E402

GIB = 1 << 30
FILE_SIZE = 1 << 30
BASE_TS = 1_795_000_000_000


def generate(root: str, total_bytes: int, body_size: int) -> tuple[int, int]:
    os.makedirs(os.path.join(root, "commitlog"))
    body = bytes((i * 7 + 3) & 0xFF for i in range(body_size))
    n = 0
    with CommitLogWriter(os.path.join(root, "commitlog"), FILE_SIZE) as w:
        while w.write_offset < total_bytes:
            props = encode_properties({"UNIQ_KEY": "%032X" % n, "KEYS": f"k-{n}", "TAGS": ("TagA", "TagB")[n & 1]})
            w.append(MessageSpec(topic=("OrderTopic", "PayTopic", "LogTopic")[n % 3], queue_id=n & 3, body=body,
                                 properties=props, store_timestamp=BASE_TS + n, born_timestamp=BASE_TS))
            n += 1
        end = w.write_offset
    # abnormal start with a checkpoint older than every file but the first: recovery scans everything
    with open(os.path.join(root, "checkpoint"), "wb") as f:
        ts = BASE_TS + 3000
        f.write((ts.to_bytes(8, "big") * 2 + b"\0" * 8).ljust(4096, b"\0"))
    return n, end


def crc_pass(root: str) -> tuple[float, int]:
    total = 0
    t0 = time.perf_counter()
    d = os.path.join(root, "commitlog")
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            c = 0
            while True:
                chunk = f.read(64 << 20)
                if not chunk:
                    break
                c = zlib.crc32(chunk, c)
                total += len(chunk)
    return time.perf_counter() - t0, total


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.2)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--profile", action="store_true", help="cProfile the verify run (top 15 functions)")
    a = ap.parse_args()
    root = a.dir or tempfile.mkdtemp(prefix="rmqinspect-bench-", dir="/tmp")
    fresh = not os.path.isdir(os.path.join(root, "commitlog"))
    try:
        if fresh:
            t, (n, end) = timed(lambda: generate(root, int(a.gib * GIB), a.body))
            print(f"generated {n} records, {end / GIB:.2f} GiB of commit log in {t:.1f} s (writer)", flush=True)
        if os.path.exists(os.path.join(root, "abort")):
            os.remove(os.path.join(root, "abort"))  # left by an earlier run on a kept directory (--dir)
        data = sum(os.path.getsize(os.path.join(root, "commitlog", x)) for x in os.listdir(os.path.join(root,
                                                                                                        "commitlog")))
        results = {}
        # warm the page cache once so every measurement reads from memory alike
        t_crc0, _ = crc_pass(root)
        t_crc, nbytes = crc_pass(root)
        results["zlib.crc32 one pass (baseline)"] = (t_crc, nbytes)
        st = Store.open(root)
        end = None

        def run_verify(checks):
            rep = verify(Store.open(root), checks)
            assert rep.ok, [p.to_dict() for p in rep.problems[:3]]
            return rep

        t, rep = timed(lambda: run_verify(("structure", "crc")))
        results["verify --checks structure,crc"] = (t, nbytes)
        t, rep = timed(lambda: run_verify(("structure", "crc", "checkpoint")))
        results["verify (structure,crc,checkpoint; collects per-record columns)"] = (t, nbytes)
        v498 = BrokerVersion.parse("4.9.8")
        t, plan = timed(lambda: plan_recovery(Store.open(root), RecoveryOptions(v498, with_salvage=False,
                                                                                keep_redispatch=False,
                                                                                model_start=False)))
        assert plan.mode == "normal"
        results["recover --dry-run, normal, load() only (third-last file on)"] = (t, plan.scanned_bytes)
        t, plan = timed(lambda: plan_recovery(Store.open(root), RecoveryOptions(v498, with_salvage=True,
                                                                                keep_redispatch=False)))
        results["recover --dry-run, normal + start() (no CQ: every record dispatched)"] = (t, plan.truncate_offset)
        open(os.path.join(root, "abort"), "wb").close()
        t, plan = timed(lambda: plan_recovery(Store.open(root), RecoveryOptions(v498, with_salvage=True,
                                                                                keep_redispatch=False)))
        assert plan.mode == "abnormal" and plan.start_file == "%020d" % 0
        end = plan.truncate_offset
        results["recover --dry-run, abnormal from file 0 (re-dispatch every record)"] = (t, plan.scanned_bytes)
        st.close()
        print("GB/s = bytes the run covers (whole files for verify, scanned records for recover) / seconds; "
              "'vs crc32' = time relative to the crc32 pass over the same number of bytes; data GB/s counts only "
              "bytes up to the end of written data (the last file's zero tail excluded)")
        print(f"\ncommit log: {data / GIB:.2f} GiB in {len(os.listdir(os.path.join(root, 'commitlog')))} files, "
              f"data end {end}, {plan.messages_scanned} records\n")
        print(f"{'run':<72} {'seconds':>8} {'GB/s':>7} {'vs crc32':>9} {'data GB/s':>10}")
        out = {}
        for name, (t, b) in results.items():
            gbs = b / t / 1e9
            ratio = t / t_crc * (nbytes / b) if b else float("nan")
            dgbs = min(b, end) / t / 1e9
            print(f"{name:<72} {t:8.2f} {gbs:7.3f} {ratio:8.1f}x {dgbs:10.3f}")
            out[name] = {"seconds": round(t, 3), "bytes": b, "GBps": round(gbs, 4), "slowdown_vs_crc32": round(ratio, 2),
                         "data_GBps": round(dgbs, 4)}
        print(json.dumps(out))
        if a.profile:
            pr = cProfile.Profile()
            pr.enable()
            verify(Store.open(root), ("structure", "crc"))
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(15)
            print(s.getvalue())
    finally:
        if not a.keep and fresh:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
