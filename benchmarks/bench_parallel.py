"""Benchmark: the local parallel engine (``--jobs``) for ``verify`` and ``rebuild``, end to end, against one
zlib.crc32 pass over the same bytes in the same run.

    python benchmarks/bench_parallel.py                   # 256 MiB in 64 MiB files (4 files), jobs 1 and 2
    python benchmarks/bench_parallel.py --anchor          # issue 17's anchor: 1.24 GB, 1 M messages, 1 GiB files
    python benchmarks/bench_parallel.py --mib 1270 --file-mib 128 --jobs 1,2,4
    python benchmarks/bench_parallel.py --anchor --keep --dir /tmp/b   # keep the store (and its meta.json)
    python benchmarks/bench_parallel.py --store /tmp/b --per-file      # reuse it; also jobs > 1 one task per file

The store is written with the project's writer in the anchor's shape: ~1.2 KiB records (1 KiB bodies), 4 topics x
8 queues, two KEYS and a UNIQ_KEY each. Every measurement is the command as a user runs it (``rmqinspect verify
--checks structure,crc`` and ``rmqinspect rebuild --out``), each in a fresh child process, so the time includes
the command's start-up (``in cmd``: without the interpreter start and imports) and the peak RSS is the
command's own: ``rss`` the main process, ``worker_rss`` the largest worker process; ``cpu main`` / ``cpu
workers`` the CPU seconds (user + system) of the command's process (start-up included) and of all its workers
together: on a machine other work keeps busy, these show the parallel share and the cost of the split when the
wall-clock ratios cannot. The baseline is one zlib.crc32 pass over the commit log's data bytes, in the same run;
``vs_crc`` = crc32 time / command time (1.0 = as fast as one CRC pass); ``x broker`` = that fraction over the
broker's own (``BROKER_VS_CRC32``: issue 17's side-by-side figures), the issue's "x the broker" targets.
Parallel speed-ups need an idle
machine with at least as many cores as jobs: ``uptime`` is printed with the results. Data is deleted unless
--keep. The files are split into chunks of about 64 MiB at valid record starts (``RMQINSPECT_CHUNK_BYTES``), so
the 1.24 GB anchor in 1 GiB files is 19 tasks; ``--per-file`` adds each jobs > 1 run with one task per file (the
chunk size set past the file size), the engine before the split.
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..")
sys.path.insert(0, REPO)

ANCHOR_MESSAGES = 1_000_000
BODY = 1024
TOPICS = ("OrderTopic", "PayTopic", "LogTopic", "AuditTopic")

# run one command in this (fresh) process and report its own peak RSS and its largest worker's
_CHILD = r"""
import json, resource, sys, time
from click.testing import CliRunner
from rmqinspect.cli.main import cli
t0 = time.perf_counter()
r = CliRunner().invoke(cli, sys.argv[1:], catch_exceptions=False)
dt = time.perf_counter() - t0
kib = 1024
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": dt, "exit_code": r.exit_code, "rss_mib": me.ru_maxrss / kib,
                  "worker_rss_mib": kids.ru_maxrss / kib, "cpu_main": me.ru_utime + me.ru_stime,
                  "cpu_workers": kids.ru_utime + kids.ru_stime}))
"""


def generate(root: str, messages: int | None, target_bytes: int | None, file_size: int) -> dict:
    from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
    from rmqinspect.formats.commitlog import encode_properties

    body = bytearray(os.urandom(BODY))
    ts = 1_795_000_000_000
    n = 0
    with CommitLogWriter(os.path.join(root, "commitlog"), file_size) as w:
        while (messages is None or n < messages) and (target_bytes is None or w.write_offset < target_bytes):
            body[0:8] = n.to_bytes(8, "big")
            props = encode_properties([("KEYS", f"order-{n} user-{n % 100_000}"),
                                       ("UNIQ_KEY", "7F00000100002A9F%016X" % n), ("CLUSTER", "DefaultCluster"),
                                       ("TAGS", f"Tag{n % 8}"), ("WAIT", "true")])
            w.append(MessageSpec(TOPICS[n % 4], (n // 4) % 8, body=bytes(body), properties=props,
                                 born_timestamp=ts + n // 10, store_timestamp=ts + n // 10 + 1))
            n += 1
        end = w.write_offset
    return {"messages": n, "bytes": end, "files": len(os.listdir(os.path.join(root, "commitlog")))}


# Issue 17's anchor, measured side by side on this machine kind: RocketMQ 4.9.8's own store code CRC-scans
# (recovery) at 1.65 GB/s and dispatches (consume queues + index) at 0.90 GB/s, where one zlib.crc32 pass runs at
# 6.3 GB/s. The broker cannot run here, so it is compared through the same-run crc32 pass, as the issue states
# its targets: "x broker" = (command's fraction of a crc32 pass) / (the broker's fraction).
BROKER_VS_CRC32 = {"verify": 1.65 / 6.3, "rebuild": 0.90 / 6.3}


_CRC_CHILD = r"""
import mmap, os, sys, time, zlib
d, left = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
for name in sorted(os.listdir(d)):
    if left <= 0:
        break
    with open(os.path.join(d, name), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        mv = memoryview(m)
        n = min(len(m), left)
        c = 0
        for a in range(0, n, 64 << 20):
            c = zlib.crc32(mv[a:min(n, a + (64 << 20))], c)
        left -= n
        mv.release()
print(time.perf_counter() - t0)
"""


def crc_pass(root: str, data_end: int) -> float:
    """One zlib.crc32 pass over the commit log's data bytes, mapped read-only and taken 64 MiB at a time without a
    copy (page cache warm): what one core's CRC costs. A read() into fresh buffers measured half of that speed
    here (each 64 MiB buffer page-faulted anew), which flattered every "vs crc32" figure. It runs in a child
    process: the pages it maps would otherwise count in this process' peak RSS, which Linux hands on to every
    command started from here (the spawned children's ru_maxrss)."""
    p = subprocess.run([sys.executable, "-c", _CRC_CHILD, os.path.join(root, "commitlog"), str(data_end)],
                       capture_output=True, text=True, check=True)
    return float(p.stdout.strip())


def run(args: list[str], env: dict | None = None) -> dict:
    """The command in a fresh interpreter: ``seconds`` end to end (interpreter start and imports included),
    ``in_cmd`` the command itself."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["in_cmd"] = r.pop("seconds")
    r["seconds"] = wall
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anchor", action="store_true", help="issue 17's anchor: 1 M messages (1.24 GB), 1 GiB files")
    ap.add_argument("--mib", type=float, default=256, help="commit log size when not --anchor (default 256)")
    ap.add_argument("--file-mib", type=int, default=None, help="mapped file size (default 64; 1024 with --anchor)")
    ap.add_argument("--jobs", default="1,2", help="comma-separated --jobs values (default 1,2)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement (the best is kept)")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--store", default=None, help="a directory kept by an earlier --keep run: its store is reused")
    ap.add_argument("--per-file", action="store_true", help="also every jobs > 1 with one task per file")
    a = ap.parse_args()
    jobs = [int(j) for j in a.jobs.split(",")]
    base = a.store or a.dir or tempfile.mkdtemp(prefix="rmqinspect-bench-parallel-")
    root = os.path.join(base, "store")
    keep = a.keep or a.store is not None
    variants = [(j, "chunks", {}) for j in jobs]
    if a.per_file:
        variants += [(j, "per file", {"RMQINSPECT_CHUNK_BYTES": str(1 << 40)}) for j in jobs if j > 1]
    try:
        if a.store:
            with open(os.path.join(base, "meta.json"), encoding="utf-8") as fh:
                meta = json.load(fh)
            file_size = meta["file_size"]
        else:
            file_size = (a.file_mib or (1024 if a.anchor else 64)) << 20
            t0 = time.perf_counter()
            meta = generate(root, ANCHOR_MESSAGES if a.anchor else None,
                            None if a.anchor else int(a.mib * (1 << 20)), file_size)
            meta["write_seconds"] = round(time.perf_counter() - t0, 1)
            meta["file_size"] = file_size
            with open(os.path.join(base, "meta.json"), "w", encoding="utf-8") as fh:
                json.dump(meta, fh)
        from rmqinspect.store.scanner import crc32_path, describe

        print(f"store: {meta['bytes'] / 1e9:.3f} GB, {meta['messages']:,} messages in {meta['files']} file(s) of "
              f"{file_size >> 20} MiB; scanner {describe()} (body CRC: {crc32_path()}); cores {os.cpu_count()}")
        rows = []
        for rep in range(a.repeat):
            crc = crc_pass(root, meta["bytes"])
            rows.append({"what": "crc32", "jobs": 1, "seconds": crc, "rep": rep})
            for j, how, env in variants:
                for what, cmd in (("verify", ["verify", root, "--checks", "structure,crc", "--format", "json"]),
                                  ("rebuild", ["rebuild", root, "--format", "json"])):
                    out = os.path.join(base, f"rebuild-{j}-{rep}")
                    r = run(cmd + (["--out", out] if what == "rebuild" else []) + ["--jobs", str(j)], env)
                    shutil.rmtree(out, ignore_errors=True)
                    if r["exit_code"] not in (0, 1):
                        raise SystemExit(f"{what} --jobs {j}: exit code {r['exit_code']}")
                    rows.append({"what": what, "jobs": j, "how": how, "rep": rep, "crc_seconds": crc, **r})
        best: dict = {}
        for r in rows:
            k = (r["what"], r["jobs"], r.get("how", "chunks"))
            if k not in best or r["seconds"] < best[k]["seconds"]:
                best[k] = r
        crc = best[("crc32", 1, "chunks")]["seconds"]
        print(f"{'command':<10}{'jobs':>5}{'tasks':>11}{'seconds':>10}{'in cmd':>8}{'GB/s':>8}{'vs crc32':>10}"
              f"{'x broker':>10}{'speed-up':>10}{'in cmd':>8}{'rss MiB':>9}{'worker MiB':>12}{'cpu main':>10}"
              f"{'cpu workers':>13}")
        print(f"{'crc32':<10}{1:>5}{'':>11}{crc:>10.2f}{crc:>8.2f}{meta['bytes'] / crc / 1e9:>8.2f}{1.0:>10.2f}")
        result = {"store": meta, "file_size": file_size, "crc32_seconds": crc, "commands": []}
        for what in ("verify", "rebuild"):
            one = best[(what, jobs[0], "chunks")]
            for j, how, _ in variants:
                r = best[(what, j, how)]
                # against the fastest crc pass of the run (the most demanding baseline: a repetition's own crc
                # pass varied 0.43-0.71 s on this VM and flattered the rows measured beside a slow one)
                vs = crc / r["seconds"]
                label = "in-process" if j == 1 else how
                print(f"{what:<10}{j:>5}{label:>11}{r['seconds']:>10.2f}{r['in_cmd']:>8.2f}"
                      f"{meta['bytes'] / r['seconds'] / 1e9:>8.2f}{vs:>10.2f}{vs / BROKER_VS_CRC32[what]:>10.2f}"
                      f"{one['seconds'] / r['seconds']:>10.2f}{one['in_cmd'] / r['in_cmd']:>8.2f}"
                      f"{r['rss_mib']:>9.0f}{r['worker_rss_mib']:>12.0f}{r['cpu_main']:>10.2f}{r['cpu_workers']:>13.2f}")
                result["commands"].append({
                    "command": what, "jobs": j, "tasks": label, "seconds": round(r["seconds"], 3),
                    "in_command": round(r["in_cmd"], 3), "vs_crc32": round(vs, 3),
                    "vs_broker_via_crc32": round(vs / BROKER_VS_CRC32[what], 3),
                    "speedup_vs_first": round(one["seconds"] / r["seconds"], 3),
                    "speedup_in_command": round(one["in_cmd"] / r["in_cmd"], 3),
                    "cpu_main": round(r["cpu_main"], 3), "cpu_workers": round(r["cpu_workers"], 3),
                    "rss_mib": round(r["rss_mib"]), "worker_rss_mib": round(r["worker_rss_mib"])})
        result["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print("uptime:", result["uptime"])
        print(json.dumps(result))
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
