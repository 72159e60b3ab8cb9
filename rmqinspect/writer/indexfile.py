"""Large IndexFiles for fixtures and benchmarks: random keys chained as ``IndexFile.putKey`` chains them (each
item's prevIndex the slot's previous item, the slot table the last item of each slot), built in one go with numpy
- fast enough for the full 5 M-slot / 20 M-item default geometry, where the store writer's put-by-put path is
not. Header times and offsets are placeholders; the geometry proof reads indexCount and the tables."""

from __future__ import annotations

import numpy as np

from ..formats.indexfile import HASH_SLOT_DTYPE, INDEX_HEADER, INDEX_ITEM_DTYPE


def write_chained_index(path: str, slots: int, items: int, used: int, seed: int, pad: int = 0) -> None:
    """A full-size index file of ``slots`` slots and ``items`` items (maxIndexNum), ``used`` of them written
    (indexCount; item 0 is never written), random key hashes from ``seed``; ``pad`` zero bytes after the file's
    end (a size no geometry fits)."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**31 - 1, used, dtype=np.int64)
    slot = h % slots
    it = np.zeros(items, dtype=INDEX_ITEM_DTYPE)
    n = np.arange(1, used)
    it["key_hash"][1:used], it["phy_offset"][1:used], it["time_diff"][1:used] = h[1:], n * 100, n // 1000
    order = np.lexsort((n, slot[1:]))
    idx, sl = n[order], slot[1:][order]
    same = np.r_[False, sl[1:] == sl[:-1]]
    prev = np.zeros(items, dtype=np.int64)
    prev[idx[same]] = idx[np.r_[same[1:], False]]
    it["prev_index"] = prev
    table = np.zeros(slots, dtype=HASH_SLOT_DTYPE)
    last = np.r_[sl[1:] != sl[:-1], True]
    table[sl[last]] = idx[last]
    with open(path, "wb") as f:
        f.write(INDEX_HEADER.pack(1, 2, 0, 1, int(last.sum()), used))
        f.write(table.tobytes())
        f.write(it.tobytes())
        if pad:
            f.truncate(f.tell() + pad)
