"""Benchmark: the recovery scan behind a key look-up's fates (analyses.lookup.recovery_view), issue 11.

    python benchmarks/bench_lookup_recovery.py [--mib 160] [--dir DIR]

Writes a crashed store with the project's writer (abort file, a checkpoint older than every file: the
abnormal recovery scans and re-dispatches the whole commit log), then times in the same run:
- ``before``: the plan the look-up ran until now (every scanned record dispatched into the queue models);
- ``after``: ``recovery_view(cache=False)`` (no dispatch: T and the re-dispatch range do not depend on it);
- ``cached``: a second ``recovery_view`` in the same process (an unchanged store is not scanned again);
- ``crc_pass``: one zlib.crc32 over the commit-log bytes, the least a scan that checks CRCs must cost.
The answers (truncation offset, re-dispatch range) are checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rmqinspect.analyses.lookup.fates import recovery_view
from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery  # noqa: E402
from rmqinspect.fixtures.commitlog import MessageSpec  # noqa: E402
from rmqinspect.fixtures.store import StoreWriter  # noqa: E402
from rmqinspect.formats.commitlog import encode_properties  # noqa: E402
from rmqinspect.store import Store  # noqa: E402

BASE_TS = 1_795_000_000_000


def generate(root: str, total: int) -> int:
    body = bytes((i * 7 + 3) & 0xFF for i in range(900))
    n = 0
    with StoreWriter(root, commitlog_file_size=32 << 20, index_slots=50_000, index_max=200_000, abort=True) as w:
        while w.commitlog.write_offset < total:
            props = encode_properties({"UNIQ_KEY": "%032X" % n, "KEYS": f"k-{n % 5000}", "TAGS": "t"})
            w.append(MessageSpec(topic=("OrderTopic", "PayTopic", "LogTopic")[n % 3], queue_id=n & 3, body=body,
                                 properties=props, store_timestamp=BASE_TS + n, born_timestamp=BASE_TS))
            n += 1
    with open(os.path.join(root, "checkpoint"), "r+b") as f:  # older than every file: scan from the first
        f.write(BASE_TS.to_bytes(8, "big") * 3)
    return n


def best(fn, n=3) -> tuple[float, object]:
    out, times = None, []
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def before(st):
    p = plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False, model_start=False))
    return p.truncate_offset, p.redispatch_first, p.redispatch_last


def crc_pass(root: str) -> None:
    d = os.path.join(root, "commitlog")
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            zlib.crc32(f.read())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=160)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        root = os.path.join(d, "store")
        n = generate(root, a.mib << 20)
        st = Store.open(root)
        t_before, r_before = best(lambda: before(st))
        t_after, v = best(lambda: recovery_view(st, cache=False))
        recovery_view(st)
        t_cached, v2 = best(lambda: recovery_view(st))
        t_crc, _ = best(lambda: crc_pass(root))
        r_after = (v.truncate_offset, v.redispatch_first, v.redispatch_last)
        print(json.dumps({"messages": n, "commitlog_mib": a.mib, "same_answer": r_before == r_after and v2 == v,
                          "truncate_offset": v.truncate_offset, "before_s": round(t_before, 3),
                          "after_s": round(t_after, 3), "cached_s": round(t_cached, 6), "crc_pass_s": round(t_crc, 3),
                          "after_vs_before": round(t_after / t_before, 2)}, indent=1))


if __name__ == "__main__":
    main()
