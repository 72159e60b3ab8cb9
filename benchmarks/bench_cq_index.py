"""Benchmark: listing a ConsumeQueue of >= 3 million entries, and key look-ups in a full-size IndexFile.

    python benchmarks/bench_cq_index.py [--entries 3000000] [--keys 1000000] [--dir /tmp]

Data is generated with numpy from the formats' own layouts (CQ_DTYPE, INDEX_ITEM_DTYPE, IndexFile.putKey chain
rules) into a temporary directory that is deleted at the end. Every figure comes with a baseline measured in the
same run on the same bytes:

* CQ listing vs a raw numpy read of the same files (np.fromfile + CQ_DTYPE view + .tolist());
* `cq --format ndjson` end to end (a subprocess writing to /dev/null) vs the same JSON lines produced by a bare
  loop over the numpy arrays;
* IndexFile look-up (IndexService.queryOffset, the broker's hash-chain walk) vs a numpy full scan of the item
  area for the key hash (what a tool without the slot table has to do).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rmqinspect.analyses.lookup.query import IndexService, query_offset
from rmqinspect.formats.constants import DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS  # noqa: E402
from rmqinspect.formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE  # noqa: E402
from rmqinspect.formats.indexfile import INDEX_HEADER, INDEX_ITEM_DTYPE, index_file_size  # noqa: E402
from rmqinspect.formats.javahash import build_index_key, index_key_hash  # noqa: E402
from rmqinspect.store.consumequeue import ConsumeQueue  # noqa: E402

CQ_FILE_ENTRIES = 300_000  # default mappedFileSizeConsumeQueue = 6,000,000 bytes
TOPIC = "BenchTopic"
T0 = 1_700_000_000_000


def timed(fn, repeat=1):
    best = None
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, out


def make_cq(root: str, n: int) -> str:
    qdir = os.path.join(root, "consumequeue", TOPIC, "0")
    os.makedirs(qdir)
    os.makedirs(os.path.join(root, "commitlog"))
    rng = np.random.default_rng(1)
    sizes = rng.integers(200, 2000, n, dtype=np.int64)
    arr = np.zeros(n, dtype=CQ_DTYPE)
    arr["size"] = sizes
    arr["physical_offset"] = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    arr["tags_code"] = rng.integers(-(1 << 31), 1 << 31, n)
    for i in range(0, n, CQ_FILE_ENTRIES):
        chunk = np.zeros(CQ_FILE_ENTRIES, dtype=CQ_DTYPE)  # the last file keeps its zero tail, as the broker's does
        part = arr[i:i + CQ_FILE_ENTRIES]
        chunk[:len(part)] = part
        chunk.tofile(os.path.join(qdir, "%020d" % (i * CQ_STORE_UNIT_SIZE)))
    return qdir


def bench_cq(root: str, n: int) -> dict:
    qdir = make_cq(root, n)
    files = sorted(os.listdir(qdir))
    res = {"entries": n, "files": len(files), "bytes": sum(os.path.getsize(os.path.join(qdir, f)) for f in files)}

    def baseline():
        total = 0
        for f in files:
            a = np.fromfile(os.path.join(qdir, f), dtype=CQ_DTYPE)
            ok = a[a["size"] > 0]
            total += len(ok["physical_offset"].tolist()) + len(ok["size"].tolist()) + len(ok["tags_code"].tolist())
        return total // 3

    def ours():
        cq = ConsumeQueue(TOPIC, 0, qdir)
        k = 0
        for _ in cq.entries():
            k += 1
        cq.close()
        return k

    def bounds():
        cq = ConsumeQueue(TOPIC, 0, qdir)
        b = cq.bounds()
        cq.close()
        return b

    def seek_tail():
        cq = ConsumeQueue(TOPIC, 0, qdir)
        out = list(cq.entries(n - 1000, 1000))
        cq.close()
        return out

    t_base, nb = timed(baseline, 2)
    t_ours, no = timed(ours, 2)
    assert nb == no == n, (nb, no, n)
    t_bounds, b = timed(bounds, 3)
    assert b == (0, n, n)
    t_seek, tail = timed(seek_tail, 3)
    assert tail[0][0] == n - 1000
    res.update(baseline_numpy_tolist_s=t_base, entries_iter_s=t_ours, entries_per_s=n / t_ours,
               baseline_entries_per_s=n / t_base, ratio_vs_baseline=t_ours / t_base,
               bounds_s=t_bounds, seek_last_1000_s=t_seek)

    # end to end: the cq command, NDJSON to /dev/null
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, "-m", "rmqinspect", "cq", root, "--topic", TOPIC, "--queue", "0", "--format", "ndjson"]
    t = time.perf_counter()
    with open(os.devnull, "w") as dn:
        subprocess.run(cmd, stdout=dn, check=True, env=env)
    t_cli = time.perf_counter() - t
    startup_cmd = [sys.executable, "-m", "rmqinspect", "cq", root, "--topic", TOPIC, "--queue", "0", "--count", "1"]
    t = time.perf_counter()
    subprocess.run(startup_cmd, stdout=subprocess.DEVNULL, check=True, env=env)
    t_startup = time.perf_counter() - t

    def baseline_json():
        dumps = json.dumps
        k = 0
        with open(os.devnull, "w") as out:
            for f in files:
                a = np.fromfile(os.path.join(qdir, f), dtype=CQ_DTYPE)
                a = a[a["size"] > 0]
                for po, sz, tc in zip(a["physical_offset"].tolist(), a["size"].tolist(), a["tags_code"].tolist()):
                    out.write(dumps({"topic": TOPIC, "queue_id": 0, "queue_offset": k, "physical_offset": po,
                                     "size": sz, "tags_code": tc}, separators=(",", ":")) + "\n")
                    k += 1
        return k

    t_bjson, _ = timed(baseline_json)
    res.update(cli_ndjson_s=t_cli, cli_entries_per_s=n / t_cli, cli_startup_s=t_startup,
               baseline_ndjson_loop_s=t_bjson, cli_ratio_vs_baseline=t_cli / t_bjson)
    return res


def make_index(path: str, nkeys: int, hot: int) -> tuple[list[str], int]:
    """A default-geometry file (5M slots / 20M items) holding nkeys+hot items, written as putKey would."""
    slots, max_items = DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX
    size = index_file_size(slots, max_items)
    keys = [f"key-{i:08d}" for i in range(nkeys)] + ["hot-key"] * hot
    rng = random.Random(7)
    rng.shuffle(keys)
    hashes = np.fromiter((index_key_hash(build_index_key(TOPIC, k)) for k in keys), dtype=np.int64, count=len(keys))
    m = len(keys)
    items = np.zeros(m, dtype=INDEX_ITEM_DTYPE)
    items["key_hash"] = hashes
    items["phy_offset"] = np.arange(m, dtype=np.int64) * 500
    items["time_diff"] = np.arange(m) // 1000  # 1000 messages a second
    slot = hashes % slots
    numbers = np.arange(1, m + 1, dtype=np.int64)
    # prevIndex = the previous item (by number) in the same slot, else 0; the slot holds the newest
    order = np.lexsort((numbers, slot))
    s_sorted, n_sorted = slot[order], numbers[order]
    prev = np.zeros(m, dtype=np.int64)
    same = np.r_[False, s_sorted[1:] == s_sorted[:-1]]
    prev_sorted = np.where(same, np.r_[0, n_sorted[:-1]], 0)
    prev[n_sorted - 1] = prev_sorted
    items["prev_index"] = prev
    last = np.r_[s_sorted[1:] != s_sorted[:-1], True]
    table = np.zeros(slots, dtype=">i4")
    table[s_sorted[last]] = n_sorted[last]
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: the unused item area stays a hole
        f.write(INDEX_HEADER.pack(T0, T0 + (m // 1000) * 1000, 0, (m - 1) * 500, int(last.sum()), m + 1))
        f.seek(40)
        f.write(table.tobytes())
        f.seek(40 + slots * 4 + 20)
        f.write(items.tobytes())
    return keys, size


def bench_index(root: str, nkeys: int) -> dict:
    idir = os.path.join(root, "index")
    os.makedirs(idir)
    path = os.path.join(idir, "20231114221320000")
    hot = 200
    t_gen, (keys, size) = timed(lambda: make_index(path, nkeys, hot))
    t_open, svc = timed(lambda: IndexService(idir))
    assert svc.files[0].slots == DEFAULT_INDEX_SLOTS and os.path.getsize(path) == 420_000_040
    f = svc.files[0]
    rng = random.Random(3)
    sample = rng.sample([k for k in keys if k != "hot-key"], 2000)

    lat = []
    for k in sample:
        t = time.perf_counter()
        r = query_offset(svc, TOPIC, k, 64, 0, (1 << 63) - 1)
        lat.append(time.perf_counter() - t)
        assert len(r.offsets) == 1, (k, r.offsets)
    t = time.perf_counter()
    hot_r = query_offset(svc, TOPIC, "hot-key", 64, 0, (1 << 63) - 1)
    t_hot = time.perf_counter() - t
    assert len(hot_r.offsets) == 64
    t = time.perf_counter()
    miss = query_offset(svc, TOPIC, "absent-key", 64, 0, (1 << 63) - 1)
    t_miss = time.perf_counter() - t
    assert miss.offsets == []

    # baseline: a numpy scan of the whole used item area for the same key hash, on the same mapped bytes
    items = f.items()
    base = []
    for k in sample[:20]:
        h = index_key_hash(build_index_key(TOPIC, k))
        t = time.perf_counter()
        hit = np.flatnonzero(items["key_hash"] == h)
        base.append(time.perf_counter() - t)
        assert len(hit) >= 1
    used = 40 + DEFAULT_INDEX_SLOTS * 4 + (nkeys + hot + 1) * 20

    def read_used():
        with open(path, "rb") as fh:
            a = np.fromfile(fh, dtype=np.uint8, count=used)
        return int(a[-1])

    t_read, _ = timed(read_used, 3)
    med = statistics.median(lat)
    svc.close()
    return {"file_bytes": size, "items": nkeys + hot, "generate_s": t_gen, "open_and_infer_geometry_s": t_open,
            "lookup_median_us": med * 1e6, "lookup_p99_us": sorted(lat)[int(len(lat) * 0.99)] * 1e6,
            "lookup_hot_key_64_hits_us": t_hot * 1e6, "lookup_absent_key_us": t_miss * 1e6,
            "baseline_numpy_item_scan_median_us": statistics.median(base) * 1e6,
            "speedup_vs_item_scan": statistics.median(base) / med,
            "baseline_np_fromfile_used_bytes_ms": t_read * 1e3, "used_bytes": used,
            "speedup_vs_reading_used_bytes": t_read / med}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=3_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rmqinspect-bench-cq-", dir=args.dir)
    try:
        cq = bench_cq(root, args.entries)
        print("ConsumeQueue listing")
        for k, v in cq.items():
            print(f"  {k:32s} {v:,.3f}" if isinstance(v, float) else f"  {k:32s} {v:,}")
        ix = bench_index(root, args.keys)
        print("IndexFile look-up (default geometry, 420,000,040-byte file)")
        for k, v in ix.items():
            print(f"  {k:32s} {v:,.3f}" if isinstance(v, float) else f"  {k:32s} {v:,}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
