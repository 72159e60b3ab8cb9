"""The DLedger entry walk against the plain commitlog walk over the same messages, in the same run.

The same ``benchmark_messages`` are written once as a commitlog (CommitLogWriter) and once as DLedger entries
(writer.dledger.DLedgerWriter, same file size); then every file of each is walked with ``walk_file`` (records as
numpy runs, body CRC checked), as bulk analyses do. Reported: seconds, MB/s, records/s of each and the ratio
dledger / commitlog (the price of one header check per entry).

Usage: python benchmarks/bench_dledger_walk.py [--size-mib 256] [--data DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rmqinspect.fixtures.commitlog import CommitLogWriter  # noqa: E402
from rmqinspect.fixtures.dledger import DLedgerWriter  # noqa: E402
from rmqinspect.fixtures.sample import benchmark_messages  # noqa: E402
from rmqinspect.store import Store  # noqa: E402
from rmqinspect.store.walk.file import walk_file
from rmqinspect.store.walk.records import RecordRun

FILE_SIZE = 64 * 1024 * 1024


def make(path: str, size_mib: int) -> None:
    marker = os.path.join(path, ".complete-%d" % size_mib)
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    target = size_mib << 20
    with CommitLogWriter(os.path.join(path, "plain", "commitlog"), FILE_SIZE) as w:
        d = DLedgerWriter(os.path.join(path, "dledger", "dledger-n0"), FILE_SIZE, 32 * (1 << 20))
        for spec in benchmark_messages(10**9):
            w.append(spec)
            d.append(spec, 0)
            if w.write_offset >= target:
                break
    open(marker, "w").close()


def walk_all(st: Store) -> tuple[float, int, int]:
    files = st.commitlog.files
    for f in files:
        zlib.crc32(f.buffer)  # page cache warm
    t = time.perf_counter()
    n = nbytes = 0
    for f in files:
        for ev in walk_file(f, check_crc=True, run_records=65536):
            if type(ev) is RecordRun:
                n += len(ev)
                nbytes = max(nbytes, f.start + ev.end)
    return time.perf_counter() - t, n, nbytes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "dledger"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    make(args.data, args.size_mib)
    out = {}
    for name in ("plain", "dledger"):
        with Store.open(os.path.join(args.data, name)) as st:
            sec, n, nbytes = walk_all(st)
        out[name] = {"seconds": round(sec, 3), "records": n, "MB_per_s": round(nbytes / sec / 1e6, 1),
                     "records_per_s": round(n / sec)}
    out["ratio_dledger_over_plain"] = round(out["dledger"]["seconds"] / out["plain"]["seconds"], 2)
    print(json.dumps(out, indent=1))
    if not args.keep:
        shutil.rmtree(args.data, ignore_errors=True)


if __name__ == "__main__":
    main()
