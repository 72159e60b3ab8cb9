"""Benchmark: `rmqinspect report` (time and size of the HTML) against `verify` on the same store, same run.

    python benchmarks/bench_report.py [--gib 0.25] [--dir DIR] [--keep]     # --gib 1 for the 1 GiB figure

The store is written with the project's writer (benchmarks' CommitLogWriter workload: ~1.2 KiB records, six
topics of different weights x 8 queues, keys, tags, UNIQ_KEY, store times 8 ms apart), its consume queues and
index files by the project's rebuild sinks, then an abort file, an old checkpoint and one flipped body byte near
the end make it a crashed, CRC-damaged store (the report has damage, a truncation point and cut queue entries to
draw). Both commands run end to end as subprocesses, each twice (the faster run counts: the first warms the page
cache for both alike). Data goes to a fresh directory under /tmp and is deleted afterwards (unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rmqinspect.analyses.dispatcher import close_sinks, dispatch_commitlog  # noqa: E402
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec  # noqa: E402
from rmqinspect.formats.commitlog import encode_properties  # noqa: E402
from rmqinspect.formats.constants import DEFAULT_CQ_FILE_SIZE, DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS  # noqa: E402
from rmqinspect.sinks.consumequeue import ConsumeQueueSet  # noqa: E402
from rmqinspect.sinks.indexfile import IndexFileSet  # noqa: E402
from rmqinspect.store import Store  # noqa: E402

BODY = 1024
BASE_TS = 1_795_000_000_000
TOPICS = ("OrderTopic",) * 6 + ("PayTopic",) * 3 + ("LogTopic",) * 2 + ("AuditTopic", "MetricsTopic", "TraceTopic")


def generate(root: str, gib: float) -> dict:
    target = int(gib * (1 << 30))
    body = bytearray(os.urandom(BODY))
    n = 0
    t0 = time.perf_counter()
    with CommitLogWriter(os.path.join(root, "commitlog")) as w:
        while w.write_offset < target:
            body[0:8] = n.to_bytes(8, "big")
            topic = TOPICS[n % len(TOPICS)]
            props = encode_properties([("KEYS", f"order-{n} user-{n % 100_000}"),
                                       ("UNIQ_KEY", "7F00000100002A9F%016X" % n), ("CLUSTER", "DefaultCluster"),
                                       ("TAGS", f"Tag{n % 32}"), ("WAIT", "true")])
            ts = BASE_TS + n * 8
            w.append(MessageSpec(topic, n % 8, body=bytes(body), properties=props, born_timestamp=ts - 3,
                                 store_timestamp=ts))
            n += 1
        end = w.write_offset
    st = Store.open(root)
    cq = ConsumeQueueSet(os.path.join(root, "consumequeue"), DEFAULT_CQ_FILE_SIZE)
    ix = IndexFileSet(os.path.join(root, "index"), DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX)
    rep = dispatch_commitlog(st.commitlog, cq, ix)
    close_sinks(cq, ix, rep)
    st.close()
    # crashed: abort file, checkpoint a minute before the end; damaged: one body byte of a record near the end
    open(os.path.join(root, "abort"), "wb").close()
    with open(os.path.join(root, "checkpoint"), "wb") as f:
        cp = BASE_TS + (n - 7500) * 8
        f.write((cp.to_bytes(8, "big") * 3).ljust(4096, b"\0"))
    victim = end - 50 * (BODY + 200)
    st = Store.open(root)
    first = max(f.start for f in st.commitlog.files if f.start <= victim)
    rec = next(r for r in st.commitlog.scan(start=first, check_crc=False) if r.offset >= victim)
    st.close()
    fname = os.path.join(root, "commitlog", "%020d" % (rec.offset - rec.offset % (1 << 30)))
    with open(fname, "r+b") as f:
        f.seek(rec.body_pos + 10)  # body_pos: the body's position in the file
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    return {"records": n, "bytes": end, "damaged_record": rec.offset, "seconds": time.perf_counter() - t0}


def timed(args: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "rmqinspect", *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t0, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=0.25)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = a.dir or tempfile.mkdtemp(prefix="rmqinspect-bench-report-")
    root = os.path.join(work, "store")
    out = os.path.join(work, "report.html")
    try:
        meta = generate(root, a.gib)
        print(f"store: {meta['bytes']} bytes, {meta['records']} records, written in {meta['seconds']:.1f} s; "
              f"damaged record at {meta['damaged_record']}", flush=True)
        runs: dict[str, list[float]] = {"verify": [], "report": []}
        for _ in range(2):
            secs, rc = timed(["verify", root, "--format", "json"])
            assert rc == 1, rc  # the flipped byte is found
            runs["verify"].append(secs)
            if os.path.exists(out):
                os.unlink(out)
            secs, rc = timed(["report", root, "--out", out, "--as-of", str(BASE_TS)])
            assert rc == 0, rc
            runs["report"].append(secs)
        size = os.path.getsize(out)
        v, r = min(runs["verify"]), min(runs["report"])
        result = {"gib": a.gib, "bytes": meta["bytes"], "records": meta["records"], "verify_s": round(v, 2),
                  "report_s": round(r, 2), "report_vs_verify": round(r / v, 2), "report_bytes": size,
                  "verify_gbps": round(meta["bytes"] / v / 1e9, 3), "report_gbps": round(meta["bytes"] / r / 1e9, 3)}
        print(json.dumps(result))
        print(f"verify {v:.2f} s, report {r:.2f} s = {r / v:.2f}x verify; report {size / 1e6:.2f} MB")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
