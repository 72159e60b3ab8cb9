"""`peers` on two copies of one controller-mode group against one zlib.crc32 pass over both commit logs, in the same
run (the project's yardstick). Copies: N messages of ~1 KiB in common, then a 2 % tail on each side (A's tail
unconfirmed), epochs 1 / 1+2 as after a failover.

    python benchmarks/bench_peers.py [N]      (default 60000: about 70 MB per copy)

What it costs: one recovery plan per copy (a walk of each log), the byte compare of the overlap, the walk that
counts messages, the decode of both loss windows, the stale-record scan past each end."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import zlib

from rmqinspect.analyses.peers import compare_replicas
from rmqinspect.fixtures.replica import diverging_replicas, set_confirm_offset, write_epoch_file
from rmqinspect.fixtures.sample import benchmark_messages
from rmqinspect.store import Store


def crc_pass(paths: list[str]) -> float:
    t = time.perf_counter()
    for root in paths:
        d = os.path.join(root, "commitlog")
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                c = 0
                while chunk := f.read(1 << 22):
                    c = zlib.crc32(chunk, c)
    return time.perf_counter() - t


def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        a, b = os.path.join(tmp, "A"), os.path.join(tmp, "B")
        specs = list(benchmark_messages(n + 2 * (n // 50)))
        common, ta, tb = specs[:n], specs[n:n + n // 50], specs[n + n // 50:]
        fork, (end_a, end_b) = diverging_replicas([a, b], common, [ta, tb],
                                                  commitlog_file_size=64 << 20, build_index=False)
        write_epoch_file(a, [(1, 0)])
        write_epoch_file(b, [(1, 0), (2, fork)])
        set_confirm_offset(a, fork)
        crc_pass([a, b])  # warm the page cache for both
        base = crc_pass([a, b])
        t = time.perf_counter()
        stores = [Store.open(a), Store.open(b)]
        rep = compare_replicas(stores, labels=["A", "B"])
        took = time.perf_counter() - t
        for s in stores:
            s.close()
        tr = [x for x in rep.truncations if x.replica == "A"][0]
        print(f"copies: {end_a / 1e6:.1f} MB + {end_b / 1e6:.1f} MB, common prefix {rep.pairs[0].common_prefix_end}, "
              f"A cut at {tr.point} ({tr.cut.messages if tr.cut else 0} messages)")
        print(f"zlib.crc32 over both logs: {base:.2f} s; peers: {took:.2f} s; ratio {took / base:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60000)
