"""Benchmark: `rebuild` (ConsumeQueue + IndexFile from the CommitLog) against baselines on the same files.

    python benchmarks/bench_rebuild.py [--gib 1] [--dir /tmp/rmqinspect-bench-rebuild] [--keep]

Generates >= GIB GiB of CommitLog with the project's writer (1 KiB bodies, TAGS, KEYS with two keys,
UNIQ_KEY, the usual WAIT/CLUSTER properties; 16 queues of one topic; default 1 GiB files), then measures in
the same run, each phase in a fresh child process (so its peak RSS is its own):

* crc   - one zlib.crc32 pass over the CommitLog bytes (the I/O + memory-bandwidth floor in Python);
* verify - CommitLog.scan(check_crc=True) over every record (the verify-style walk);
* dispatch-only - the rebuild walk (compiled record scan + compiled dispatch_fields: TAGS/KEYS/UNIQ_KEY/DELAY,
  tagsCode, index key hashes) and the numpy dispatch bookkeeping, without any output;
* rebuild - analyses.dispatcher.dispatch_commitlog into ConsumeQueue + IndexFile writers (default geometry:
  6,000,000-byte CQ files, 5,000,000 slots / 20,000,000 items per index file), files closed.

Prints a table and one JSON line. Data and output are deleted unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

BODY = 1024


def generate(root: str, gib: float) -> dict:
    from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
    from rmqinspect.formats.commitlog import encode_properties

    target = int(gib * (1 << 30))
    base_body = bytearray(os.urandom(BODY))
    t0 = time.perf_counter()
    n = 0
    ts = 1_790_000_000_000
    with CommitLogWriter(os.path.join(root, "commitlog")) as w:
        while w.write_offset < target:
            base_body[0:8] = n.to_bytes(8, "big")
            props = encode_properties([
                ("KEYS", f"order-{n} user-{n % 100_000}"), ("UNIQ_KEY", "7F00000100002A9F%016X" % n),
                ("CLUSTER", "DefaultCluster"), ("TAGS", f"Tag{n % 32}"), ("WAIT", "true")])
            w.append(MessageSpec("BenchTopic", n % 16, body=bytes(base_body), properties=props,
                                 born_timestamp=ts + n // 10, store_timestamp=ts + n // 10 + 1))
            n += 1
        size = w.write_offset
    meta = {"records": n, "bytes": size, "seconds": time.perf_counter() - t0}
    with open(os.path.join(root, "..", "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


def phase(name: str, root: str, out: str) -> dict:
    from rmqinspect.store import Store

    st = Store.open(root)
    cl = st.commitlog
    t0 = time.perf_counter()
    records = 0
    nbytes = 0
    if name == "crc":
        # the written bytes only (files are pre-allocated full-size; the zero tail is not data)
        with open(os.path.join(root, "..", "meta.json")) as fh:
            data_end = json.load(fh)["bytes"]
        for f in cl.files:
            n = max(min(f.size, data_end - f.start), 0)
            mv = memoryview(f.buffer)
            crc = 0
            for i in range(0, n, 1 << 24):
                crc = zlib.crc32(mv[i:min(i + (1 << 24), n)], crc)
            mv.release()
            nbytes += n
            f.close()
    elif name == "verify":
        from rmqinspect.store.walk.kinds import MESSAGE

        end = 0
        for slot in cl.scan(check_crc=True):
            if slot.kind == MESSAGE:
                records += 1
                end = slot.end
        nbytes = end - cl.min_offset
    elif name == "dispatch-only":
        # the dispatcher's walk + property extraction + key hashing with no sinks (CQ/index writers excluded)
        from rmqinspect.analyses.dispatcher import dispatch_commitlog

        class _NullIndex:  # hashes computed, puts discarded
            def put_batch(self, *a):
                pass

        rep = dispatch_commitlog(cl, None, _NullIndex())
        records = rep.messages
        nbytes = rep.bytes_walked
    elif name == "rebuild":
        from rmqinspect.analyses.dispatcher import close_sinks, dispatch_commitlog
        from rmqinspect.formats.constants import DEFAULT_CQ_FILE_SIZE, DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
        from rmqinspect.sinks.consumequeue import ConsumeQueueSet
        from rmqinspect.sinks.indexfile import IndexFileSet

        cq = ConsumeQueueSet(os.path.join(out, "consumequeue"), DEFAULT_CQ_FILE_SIZE)
        ix = IndexFileSet(os.path.join(out, "index"), DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX)
        rep = dispatch_commitlog(cl, cq, ix)
        close_sinks(cq, ix, rep)
        records = rep.messages
        nbytes = rep.bytes_walked
    secs = time.perf_counter() - t0
    st.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"phase": name, "seconds": secs, "bytes": nbytes, "records": records, "peak_rss": rss}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--dir", default="/tmp/rmqinspect-bench-rebuild")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    args = ap.parse_args()
    root = os.path.join(args.dir, "store")
    out = os.path.join(args.dir, "out")
    if args.phase:
        print(json.dumps(phase(args.phase, root, out)))
        return
    if os.path.exists(args.dir):
        shutil.rmtree(args.dir)
    os.makedirs(args.dir)
    try:
        gen = generate(root, args.gib)
        print(f"generated {gen['records']:,} records, {gen['bytes'] / 1e9:.3f} GB in {gen['seconds']:.1f} s "
              f"with the project's writer", flush=True)
        results = []
        for name in ("crc", "verify", "dispatch-only", "rebuild"):
            shutil.rmtree(out, ignore_errors=True)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--phase", name, "--dir", args.dir],
                               capture_output=True, text=True, check=True)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            results.append(res)
            print(f"  {name:13s} {res['seconds']:7.2f} s  {res['bytes'] / res['seconds'] / 1e9:6.3f} GB/s  "
                  f"{(res['records'] / res['seconds']) if res['records'] else 0:12,.0f} rec/s  "
                  f"peak RSS {res['peak_rss'] / 2**20:8.1f} MiB", flush=True)
        by = {r["phase"]: r for r in results}
        outsize = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        summary = {
            "gib": args.gib, "records": gen["records"], "commitlog_bytes": gen["bytes"],
            "rebuild_gbps": by["rebuild"]["bytes"] / by["rebuild"]["seconds"] / 1e9,
            "rebuild_records_per_s": by["rebuild"]["records"] / by["rebuild"]["seconds"],
            "verify_gbps": by["verify"]["bytes"] / by["verify"]["seconds"] / 1e9,
            "crc_gbps": by["crc"]["bytes"] / by["crc"]["seconds"] / 1e9,
            "dispatch_only_gbps": by["dispatch-only"]["bytes"] / by["dispatch-only"]["seconds"] / 1e9,
            "rebuild_vs_verify": by["verify"]["seconds"] / by["rebuild"]["seconds"],
            "rebuild_vs_crc": by["crc"]["seconds"] / by["rebuild"]["seconds"],
            "peak_rss_rebuild_mib": by["rebuild"]["peak_rss"] / 2**20,
            "peak_rss_verify_mib": by["verify"]["peak_rss"] / 2**20,
            "output_bytes_apparent": outsize,
        }
        print(f"rebuild = {summary['rebuild_vs_verify']:.2f}x the verify walk's speed, "
              f"{summary['rebuild_vs_crc']:.3f}x one crc32 pass")
        print(json.dumps(summary))
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
