"""Benchmark: proving an index file's geometry (store.indexfile.prove_index_geometry), issue 11.

    python benchmarks/bench_index_geometry.py [--dir /tmp]

Generates, with numpy and the putKey chain rules, a full default-geometry index file (5,000,000 slots,
20,000,000 items, 420 MB) and the same file 2 MiB longer (a size no geometry with 5,000,000 slots fits), and
times the proof of each against a baseline measured in the same run on the same bytes: one sequential read
of the whole file (np.count_nonzero over the mapped words), the least any linear check must cost; and the proof
with the whole-table rule forced (the behaviour before it was skipped for a settled geometry), warm and cold
(the file's pages dropped with posix_fadvise before each cold run). The
pre-issue search (every slot count, the slot table rescanned each time) did not finish the padded file in
90 s.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from rmqinspect.fixtures.indexfile import write_chained_index
from rmqinspect.store.indexfile import prove_geometry_of
from rmqinspect.store.mapped import MappedFile

SLOTS, ITEMS = 5_000_000, 20_000_000


def best(fn, n=3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def read_once(path: str) -> None:
    m = MappedFile(path)
    try:
        np.count_nonzero(np.frombuffer(m.buffer, dtype=np.uint8))
    finally:
        m.close()


def drop_cache(path: str) -> None:
    """Forget this file's pages (posix_fadvise DONTNEED on this file only): the next read is a cold one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cold(fn, path: str, n=3) -> float:
    times = []
    for _ in range(n):
        drop_cache(path)
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for name, pad in (("full", 0), ("padded_2MiB", 2 * 1024 * 1024)):
            p = os.path.join(d, name)
            write_chained_index(p, SLOTS, ITEMS, ITEMS, seed=1, pad=pad)
            g = prove_geometry_of(p)
            full = prove_geometry_of(p, whole_table=True)
            out[name] = {"source": g.source, "slots": g.slots, "max_items": g.max_items, "detail": g.detail,
                         "same_answer_with_whole_table": (full.slots, full.max_items) == (g.slots, g.max_items),
                         # before: the whole-table rule always ran (prove_geometry_of(whole_table=True))
                         "prove_whole_table_s": round(best(lambda p=p: prove_geometry_of(p, whole_table=True)), 3),
                         "prove_s": round(best(lambda p=p: prove_geometry_of(p)), 3),
                         "read_once_s": round(best(lambda p=p: read_once(p)), 3),
                         "cold_prove_whole_table_s": round(cold(lambda p=p: prove_geometry_of(p, whole_table=True),
                                                                p), 3),
                         "cold_prove_s": round(cold(lambda p=p: prove_geometry_of(p), p), 3),
                         "cold_read_once_s": round(cold(lambda p=p: read_once(p), p), 3)}
            os.unlink(p)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
