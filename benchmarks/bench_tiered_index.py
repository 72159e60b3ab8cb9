"""Reads per lookup in a tiered-store index file before and after compaction (seed 002's argument).

Writes an unsealed file with the project's writer (UNIQ_KEY + one business key per message, the
broker's put rules), compacts it, then looks up a sample of keys in both layouts and reports, per
lookup, read calls (each a random read on object storage), distinct 4 KiB pages touched and bytes,
plus wall time per lookup (local mmap; not the object-storage latency the compaction targets).

    python benchmarks/bench_tiered_index.py [--messages 200000] [--slots 50000] [--lookups 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqinspect.analyses.compact_index import compact_index_file  # noqa: E402
from rmqinspect.fixtures.tiered_index import TieredIndexWriter  # noqa: E402
from rmqinspect.store.tiered_index import ReadStats, TieredIndexFile  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--slots", type=int, default=50_000)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="bench-tiered-")
    rnd = random.Random(1)
    begin = 1_795_000_000_000
    keys = []
    t0 = time.perf_counter()
    with TieredIndexWriter(os.path.join(base, "unsealed"), begin, a.slots, 4 * a.messages) as w:
        for i in range(a.messages):
            uk = f"7F000001{i:024X}"
            bk = f"order-{rnd.randrange(a.messages // 4)}"
            w.put_key("OrderTopic", 1, i % 8, [uk, bk], i * 512, 512, begin + i)
            if i % (a.messages // a.lookups or 1) == 0:
                keys.append(uk if rnd.random() < 0.5 else bk)
    t_write = time.perf_counter() - t0
    f = TieredIndexFile(w.path)
    t0 = time.perf_counter()
    c = TieredIndexFile(compact_index_file(f, os.path.join(base, "compacted")).output)
    t_compact = time.perf_counter() - t0

    def run(idx):
        calls, pages, nbytes, found = [], [], [], 0
        t = time.perf_counter()
        for k in keys:
            st = ReadStats()
            found += len(idx.lookup("OrderTopic", k, stats=st))
            calls.append(st.read_calls)
            pages.append(st.pages)
            nbytes.append(st.bytes)
        return time.perf_counter() - t, calls, pages, nbytes, found

    tu, cu, pu, bu, fu = run(f)
    tc, cc, pc, bc, fc = run(c)
    assert fu == fc, "lookups must agree across layouts"
    print(f"file: {a.messages} messages, {f.index_item_count} items, {a.slots} slots "
          f"({f.index_item_count / a.slots:.1f} items/slot); write {t_write:.1f}s, compaction {t_compact:.2f}s")
    print(f"sizes: unsealed {f.mf.size:,} B (preallocated), compacted {c.mf.size:,} B")
    print(f"{len(keys)} lookups, {fu} items found in both layouts")
    print(f"{'':22}{'unsealed (baseline)':>22}{'compacted':>14}{'ratio':>9}")
    for name, u, v in (("read calls / lookup", cu, cc), ("4 KiB pages / lookup", pu, pc),
                       ("bytes read / lookup", bu, bc)):
        mu, mv = statistics.mean(u), statistics.mean(v)
        print(f"{name:22}{mu:>22.2f}{mv:>14.2f}{mu / mv:>8.1f}x")
    print(f"{'p99 read calls':22}{sorted(cu)[int(.99 * len(cu))]:>22}{sorted(cc)[int(.99 * len(cc))]:>14}")
    print(f"{'us / lookup (mmap)':22}{tu / len(keys) * 1e6:>22.1f}{tc / len(keys) * 1e6:>14.1f}"
          f"{tu / tc:>8.1f}x")
    f.close()
    c.close()
    if a.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
