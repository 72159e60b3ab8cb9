"""Large IndexFiles for fixtures and benchmarks: random keys chained as ``IndexFile.putKey`` chains them (each
item's prevIndex the slot's previous item, the slot table the last item of each slot), built in one go with numpy
- fast enough for the full 5 M-slot / 20 M-item default geometry, where the store writer's put-by-put path is
not. Header times and offsets are placeholders; the geometry proof reads indexCount and the tables."""

from __future__ import annotations

import numpy as np

from ..formats.indexfile import HASH_SLOT_DTYPE, INDEX_HEADER, INDEX_ITEM_DTYPE
from ..sinks.indexfile import slot_links


def write_chained_index(path: str, slots: int, items: int, used: int, seed: int, pad: int = 0) -> None:
    """A full-size index file of ``slots`` slots and ``items`` items (maxIndexNum), ``used`` of them written
    (indexCount; item 0 is never written), random key hashes from ``seed``; ``pad`` zero bytes after the file's
    end (a size no geometry fits)."""
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 2**31 - 1, used, dtype=np.int64)
    it = np.zeros(items, dtype=INDEX_ITEM_DTYPE)
    n = np.arange(1, used)
    it["key_hash"][1:used], it["phy_offset"][1:used], it["time_diff"][1:used] = h[1:], n * 100, n // 1000
    # items 1 .. used - 1 are one batch of puts into an empty table: the rebuild's chains (slot_links), item
    # numbers one above batch positions (a first put in its slot links to 0)
    used_slots, prev, _, lasts = slot_links(h[1:], slots)
    it["prev_index"][1:used] = prev + 1
    table = np.zeros(slots, dtype=HASH_SLOT_DTYPE)
    table[used_slots] = lasts + 1
    with open(path, "wb") as f:
        f.write(INDEX_HEADER.pack(1, 2, 0, 1, len(used_slots), used))
        f.write(table.tobytes())
        f.write(it.tobytes())
        if pad:
            f.truncate(f.tell() + pad)
