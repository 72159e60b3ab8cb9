"""Walk + decode + CRC over a >= 1 GiB commitlog written by rmqinspect's writer.

Everything is measured in the same run, against one C pass over the same bytes (zlib.crc32 of every
file) as the baseline:

  crc32-baseline     zlib.crc32 over each whole file (the one-pass C limit)
  verify-compiled    CommitLog.scan(check_crc=True): record headers + body CRC, compiled scanner
  verify-arrays      walk_file per file: the same, record runs as numpy arrays (what bulk analyses use)
  verify-python      the pure-Python scanner (no C extension), headers + CRC
  decode-full        Message objects with parsed properties (the decode-commitlog walk), on a slice
  construct-schema   CommitLogRecord.parse per record (the declarative schema), on a slice

Usage: python benchmarks/bench_walk.py [--size-gib 1.0] [--data DIR] [--keep]
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
from rmqinspect.fixtures.sample import benchmark_messages  # noqa: E402
from rmqinspect.formats.commitlog import CommitLogRecord  # noqa: E402
from rmqinspect.store import Store  # noqa: E402
from rmqinspect.store.walk.file import walk_file
from rmqinspect.store.walk.kinds import MESSAGE
from rmqinspect.store.walk.records import RecordRun, decode_slot, fast_available, scan_buffer

FILE_SIZE = 256 * 1024 * 1024


def make_store(path: str, size_gib: float) -> None:
    marker = os.path.join(path, ".complete-%s" % size_gib)
    if os.path.exists(marker):
        return
    shutil.rmtree(path, ignore_errors=True)
    target = int(size_gib * (1 << 30))
    t = time.perf_counter()
    with CommitLogWriter(os.path.join(path, "commitlog"), FILE_SIZE) as w:
        for spec in benchmark_messages(10**9):
            w.append(spec)
            if w.write_offset >= target:
                break
    open(marker, "w").close()
    print(f"wrote {target / (1 << 30):.2f} GiB in {time.perf_counter() - t:.1f}s", file=sys.stderr)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "walk"))
    ap.add_argument("--slice-mib", type=int, default=128, help="bytes used for the slow per-record paths")
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    make_store(args.data, args.size_gib)
    st = Store.open(args.data)
    cl = st.commitlog
    # where each file's records end (blank record or zero tail): every path is measured over these bytes
    data_end = {}
    for s in cl.scan(check_crc=False):
        if s.kind == MESSAGE:
            data_end[s.file.name] = s.position + s.size
    data_bytes = sum(data_end.values())
    regions = [(f, data_end[f.name]) for f in cl.files if f.name in data_end]
    # warm the page cache so every path reads from memory
    for f, end in regions:
        zlib.crc32(memoryview(f.buffer)[:end])

    results = []

    def add(name, seconds, nbytes, records=None):
        results.append({"path": name, "seconds": round(seconds, 3), "bytes": nbytes,
                        "GB_per_s": round(nbytes / seconds / 1e9, 3),
                        "records_per_s": round(records / seconds) if records else None})

    sec, _ = timed(lambda: [zlib.crc32(memoryview(f.buffer)[:end]) for f, end in regions])
    add("crc32-baseline", sec, data_bytes)

    def verify_compiled():
        n = 0
        for s in cl.scan(check_crc=True):
            n += s.kind == MESSAGE
        return n

    sec, n_records = timed(verify_compiled)
    add("verify-compiled" if fast_available() else "verify (python, no extension)", sec, data_bytes, n_records)

    def verify_arrays():
        n = 0
        for f in cl.files:
            for ev in walk_file(f, check_crc=True, run_records=65536):
                if type(ev) is RecordRun:
                    n += len(ev)
        return n

    sec, n = timed(verify_arrays)
    add("verify-arrays", sec, data_bytes, n)

    slice_bytes = min(args.slice_mib << 20, data_end[cl.files[0].name])
    f0 = cl.files[0]

    def verify_python():
        n = 0
        for t in scan_buffer(f0.buffer, 0, slice_bytes, True):
            n += t[0] == MESSAGE
        return n

    sec, n = timed(verify_python)
    add("verify-python", sec, slice_bytes, n)

    def decode_full():
        n = 0
        for s in cl.scan(cl.min_offset, cl.min_offset + slice_bytes, check_crc=True):
            if s.kind == MESSAGE:
                decode_slot(s.file.buffer, s.file.start, s.position, s.header, s.body_pos, s.crc_ok, s.file.path)
                n += 1
        return n

    sec, n = timed(decode_full)
    add("decode-full (Message objects)", sec, slice_bytes, n)

    construct_bytes = min(16 << 20, slice_bytes)

    def construct_parse():
        n = 0
        buf = f0.buffer
        for t in scan_buffer(buf, 0, construct_bytes, False):
            if t[0] == MESSAGE:
                CommitLogRecord.parse(buf[t[1]:t[1] + t[2]])
                n += 1
        return n

    sec, n = timed(construct_parse)
    add("construct-schema parse", sec, construct_bytes, n)

    base = results[0]["GB_per_s"]
    print(f"commitlog: {data_bytes / (1 << 30):.2f} GiB in {len(cl.files)} files, {n_records} records, "
          f"avg {data_bytes / n_records:.0f} B/record, compiled scanner: {fast_available()}")
    print(f"{'path':34} {'GB/s':>8} {'records/s':>12} {'vs crc32':>9}")
    for r in results:
        rps = f"{r['records_per_s']:,}" if r["records_per_s"] else "-"
        print(f"{r['path']:34} {r['GB_per_s']:8.3f} {rps:>12} {r['GB_per_s'] / base:9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"data_bytes": data_bytes, "records": n_records, "results": results}, f, indent=2)
    st.close()
    if not args.keep:
        shutil.rmtree(args.data, ignore_errors=True)


if __name__ == "__main__":
    main()
