"""`txn` on a >= 1 GiB store with 100,000 transactions, against one zlib.crc32 pass over the same files.

The store is made by rmqinspect's writer (``writer.transaction``, the broker-level convention, 5.x batched ops)
among ordinary ~1 KiB messages: of every 100 transactions 80 are committed, 10 rolled back, 4 in doubt (commit,
no op), 4 open after three checks and 2 given up; consume queues are built as the broker's dispatcher writes
them (index files are not: `txn` never reads them).

Measured in the same run:

  crc32-baseline   zlib.crc32 over each whole commitlog file (the one-pass C limit)
  txn-scan         analyses.txn.scan_transactions: the one pass and the verdicts (no rows)
  txn-rows         the scan plus every transaction as a row (its half read back, the commit's CQ entry)
  txn-command      `rmqinspect txn STORE --format ndjson` end to end in a subprocess, with the recovery model
  peak-rss         of the txn-command process (VmHWM; mapped store pages it touched count too)

``--open-halves N`` writes instead a store of N open halves and nothing else (the "a million open halves"
case) and reports the scan's time and the command's peak RSS.

Usage: python benchmarks/bench_txn.py [--size-gib 1.0] [--transactions 100000] [--data DIR] [--json FILE]
       python benchmarks/bench_txn.py --open-halves 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rmqinspect.analyses.txn import scan_transactions  # noqa: E402
from rmqinspect.fixtures.sample import benchmark_messages  # noqa: E402
from rmqinspect.fixtures.store import StoreWriter  # noqa: E402
from rmqinspect.fixtures.transaction import TransactionalBroker  # noqa: E402
from rmqinspect.store import Store  # noqa: E402

FILE_SIZE = 256 * 1024 * 1024
T0 = 1_795_296_980_000


def make_store(path: str, size_gib: float, transactions: int) -> None:
    marker = os.path.join(path, f".complete-{size_gib}-{transactions}")
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    target = int(size_gib * (1 << 30))
    t = time.perf_counter()
    w = StoreWriter(os.path.join(path, "store"), commitlog_file_size=FILE_SIZE, build_index=False)
    b = TransactionalBroker(w)
    plain = benchmark_messages(10**9)
    # spread the transactions over the target size: one every `every` ordinary messages
    every = max(1, int(target / 1100 / transactions) - 3)
    done = 0
    pending_ops = []
    body = b"txn-payload-" * 80
    while w.write_offset < target or done < transactions:
        for _ in range(every):
            w.append(next(plain))
        if done < transactions:
            ts = T0 + done
            h = b.half(("OrderTopic", "PayTopic", "LogTopic")[done % 3], done % 8, body, "TX%030d" % done, ts,
                       keys=f"ord-{done}")
            kind = done % 100
            if kind < 80:
                b.commit(h, ts + 1)
                pending_ops.append(h)
            elif kind < 90:
                pending_ops.append(h)
            elif kind < 94:
                b.commit(h, ts + 1)
            elif kind < 98:
                c = h
                for i in range(3):
                    c = b.check(c, ts + 2 + i)
            else:
                b.give_up(b.check(b.check(h, ts + 2), ts + 3), ts + 4)
            if len(pending_ops) >= 8:
                b.op(pending_ops, ts + 5)
                pending_ops = []
            done += 1
    if pending_ops:
        b.op(pending_ops, T0 + done + 5)
    w.close()
    open(marker, "w").close()
    print(f"wrote {w.write_offset / (1 << 30):.2f} GiB, {done} transactions in {time.perf_counter() - t:.0f}s",
          file=sys.stderr)


def make_open_halves(path: str, n: int) -> None:
    marker = os.path.join(path, f".complete-open-{n}")
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    t = time.perf_counter()
    w = StoreWriter(os.path.join(path, "store"), commitlog_file_size=FILE_SIZE, build_index=False,
                    build_cq=False)
    b = TransactionalBroker(w)
    for i in range(n):
        b.half("OrderTopic", i % 8, b"o", "OPEN%028d" % i, T0 + i)
    w.close()
    open(marker, "w").close()
    print(f"wrote {n} open halves ({w.write_offset / (1 << 20):.0f} MiB) in {time.perf_counter() - t:.0f}s",
          file=sys.stderr)


def crc_pass(root: str) -> float:
    t = time.perf_counter()
    for f in Store.open(root).commitlog.files:
        zlib.crc32(f.buffer)
    return time.perf_counter() - t


def run_command(root: str) -> tuple[float, int, int]:
    """`rmqinspect txn ROOT --format ndjson` to /dev/null: (seconds, rows, peak RSS in MiB). The peak is the
    process's VmHWM (ru_maxrss would carry the forking parent's high-water mark across exec)."""
    code = ("import sys, runpy; sys.argv = ['rmqinspect', 'txn', sys.argv[1], '--format', 'ndjson'];\n"
            "try:\n    runpy.run_module('rmqinspect', run_name='__main__')\nexcept SystemExit as e:\n"
            "    rc = e.code\nelse:\n    rc = 0\n"
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "sys.stderr.write('MAXRSS %s RC %s\\n' % (hwm, rc))")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, root], capture_output=True, text=True)
    dt = time.perf_counter() - t
    rss = int(next(line.split()[1] for line in p.stderr.splitlines() if line.startswith("MAXRSS")))
    return dt, p.stdout.count("\n"), rss // 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--transactions", type=int, default=100_000)
    ap.add_argument("--open-halves", type=int, default=0)
    ap.add_argument("--data", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    data = args.data or os.path.join(here, "txn-open" if args.open_halves else "txn")
    if args.open_halves:
        make_open_halves(data, args.open_halves)
    else:
        make_store(data, args.size_gib, args.transactions)
    root = os.path.join(data, "store")
    size = sum(f.size for f in Store.open(root).commitlog.files)
    out: dict = {"store_bytes": size}
    base = min(crc_pass(root) for _ in range(2))
    out["crc32_s"] = round(base, 3)
    st = Store.open(root)
    t = time.perf_counter()
    scan = scan_transactions(st)
    out["txn_scan_s"] = round(time.perf_counter() - t, 3)
    out["transactions"] = len(scan)
    out["states"] = scan.summary()[0]
    # what the scan holds per transactional record (the process RSS also counts the mapped pages walked)
    out["scan_arrays_mib"] = round(sum(a.nbytes for d in (scan.h, scan.e, scan.o, scan.g) for a in d.values())
                                   / (1 << 20), 1)
    if not args.open_halves:
        t = time.perf_counter()
        rows = sum(1 for _ in scan.transactions(scan.select()))
        out["txn_rows_s"] = round(time.perf_counter() - t + out["txn_scan_s"], 3)
        assert rows == len(scan)
    del scan
    st.close()
    dt, n, rss = run_command(root)
    out.update(txn_command_s=round(dt, 3), txn_command_rows=n, txn_command_peak_rss_mib=rss)
    for k in ("txn_scan_s", "txn_rows_s", "txn_command_s"):
        if k in out:
            out[k[:-2] + "_over_crc32"] = round(out[k] / base, 2)
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if not args.keep:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
