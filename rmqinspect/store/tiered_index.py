"""Tiered-store index files (FORMATS.md §10.3): read both layouts, look keys up the way
``IndexStoreFile.queryAsyncFromUnsealedFile`` / ``queryAsyncFromSegmentFile`` do, and count the reads
each lookup needs (the I/O the compaction of seed 002 saves on object storage).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import CorruptDataError, StoreNotFoundError
from ..formats.distinct import has_repeats
from ..formats.javahash import build_index_key, tiered_index_key_hash
from ..formats.tiered_index import (
    BEGIN_MAGIC,
    COMPACT_INDEX_ITEM_SIZE,
    COMPACT_ITEM_DTYPE,
    COMPACT_ITEM_TABLE,
    COMPACT_READ_MAX_ITEMS,
    COMPACT_SLOT_DTYPE,
    DEFAULT_HASH_SLOTS,
    END_MAGIC,
    HASH_SLOT_SIZE,
    HEADER,
    HEADER_SIZE,
    INDEX_ITEM_COUNT_POSITION,
    INDEX_ITEM_SIZE,
    INVALID_INDEX,
    ITEM,
    MAX_QUERY_COUNT,
    SLOT,
    UNSEALED_SLOT_DTYPE,
    item_position,
    slot_position,
    unsealed_file_size,
)
from .indexfile import IndexGeometry, consistent_candidates, empty_file_geometry, geometry_verdict
from .mapped import MappedFile

UNSEALED = "unsealed"
COMPACTED = "compacted"
PAGE = 4096


@dataclass
class TieredIndexItem:
    hash_code: int
    topic_id: int
    queue_id: int
    offset: int
    size: int
    time_diff: int
    prev: int | None = None  # unsealed only
    item: int | None = None  # unsealed item number
    position: int = 0

    def store_timestamp(self, begin_timestamp: int) -> int:
        return self.time_diff * 1000 + begin_timestamp

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class ReadStats:
    """Reads a lookup issued: each (position, length) is one random read on a remote segment."""

    reads: list = field(default_factory=list)

    def add(self, pos: int, length: int) -> None:
        self.reads.append((pos, length))

    @property
    def read_calls(self) -> int:
        return len(self.reads)

    @property
    def pages(self) -> int:
        s: set[int] = set()
        for pos, ln in self.reads:
            s.update(range(pos // PAGE, (pos + max(ln, 1) - 1) // PAGE + 1))
        return len(s)

    @property
    def bytes(self) -> int:
        return sum(ln for _, ln in self.reads)


# --- unsealed geometry -------------------------------------------------------------------------------------
# An unsealed file is 28 + 8*slots + 32*maxItems bytes: 4 more slots make one item fewer, so the size fits many
# (slots, maxItems) pairs (16/66 and 4/69 are both 2,268 bytes). As for IndexFiles (store.indexfile), a candidate
# is kept only when the file is self-consistent under it; every rule is something IndexStoreFile.putKey
# guarantees:
#   size    indexItemCount < maxItems
#   slots   each 8-byte slot holds an item number in [0, indexItemCount] and a zero second int
#   zeros   nothing non-zero past item indexItemCount; item 0 all zero (numbering starts at 1)
#   heads   a used slot's item hashes to that slot (hashCode >= 0, hashCode % slots)
#   chains  every item's prev is an earlier item of the same slot, each item the prev of at most one other,
#           used slots == the header's hashSlotCount and used slots + links == indexItemCount
# The slot and zero rules bound the slot count in one pass; the few candidates left are checked in full.
TIERED_GEOMETRY_SETTLE = ("--hash-slots/--max-items (the broker's tieredStoreIndexFileMaxHashSlotNum/"
                          "tieredStoreIndexFileMaxIndexNum)")
_ITEM_DTYPE = np.dtype([("hash_code", ">i4"), ("topic_id", ">i4"), ("queue_id", ">i4"), ("offset", ">i8"),
                       ("size", ">i4"), ("time_diff", ">i4"), ("prev", ">i4")])
assert _ITEM_DTYPE.itemsize == INDEX_ITEM_SIZE


# Proven (slots, maxItems) of one tiered index file, or why it could not be proven: the same answer as an
# IndexFile's (source "compacted" is set by the layout check).
TieredGeometry = IndexGeometry


def _unsealed_consistent(buf, size: int, s: int, n: int, hash_slot_count: int) -> bool:
    base = HEADER_SIZE + s * HASH_SLOT_SIZE
    items = np.frombuffer(buf, dtype=_ITEM_DTYPE, count=n + 1, offset=base)
    if items[0].tobytes() != bytes(INDEX_ITEM_SIZE):
        return False
    h = items["hash_code"].astype(np.int64)
    prev = items["prev"][1:].astype(np.int64)
    k = np.arange(1, n + 1)
    if (h[1:] < 0).any() or (prev < 0).any() or (prev >= k).any():
        return False
    linked = prev > 0
    if (h[prev[linked]] % s != h[1:][linked] % s).any():
        return False
    if has_repeats(prev[linked]):
        return False
    table = np.frombuffer(buf, dtype=UNSEALED_SLOT_DTYPE, count=s, offset=HEADER_SIZE)["item_index"].astype(np.int64)
    used = np.flatnonzero(table)
    if used.size != hash_slot_count or used.size + int(linked.sum()) != n:
        return False
    return bool((h[table[used]] % s == used).all())


_CHUNK = 1 << 22  # elements per pass: bounded memory on a 680 MB default-size file


def _first_bad_slot(pairs: np.ndarray, n: int) -> int:
    """Index of the first 8-byte word that cannot be an unsealed slot; len(pairs) if none."""
    for a in range(0, len(pairs), _CHUNK):
        c = pairs[a:a + _CHUNK]
        bad = np.flatnonzero((c[:, 0] < 0) | (c[:, 0] > n) | (c[:, 1] != 0))
        if bad.size:
            return a + int(bad[0])
    return len(pairs)


def _last_nonzero_byte(b: np.ndarray) -> int:
    for e in range(len(b), 0, -_CHUNK):
        c = b[max(e - _CHUNK, 0):e]
        whole = len(c) - len(c) % 8
        if not c[len(c) - whole:].view(np.uint64).any() and not c[:len(c) - whole].any():
            continue  # a zero chunk (the unused tail of a preallocated file) is skipped 8 bytes at a time
        nz = np.flatnonzero(c)
        return max(e - _CHUNK, 0) + int(nz[-1])
    return -1


def prove_unsealed_geometry(buf, size: int, n: int, hash_slot_count: int) -> TieredGeometry:
    """Every (slots, maxItems) the size allows, kept only if the unsealed file is self-consistent under it;
    the answer when exactly one survives, else ``source="ambiguous"`` naming what settles it."""
    rest = size - HEADER_SIZE
    if rest <= 0 or rest % HASH_SLOT_SIZE or n < 0:
        return TieredGeometry(None, None, "ambiguous", (),
                              f"size {size} fits no unsealed geometry (28 + 8*slots + 32*maxItems); pass "
                              f"{TIERED_GEOMETRY_SETTLE}")
    r = rest // HASH_SLOT_SIZE  # = slots + 4 * maxItems
    pairs = np.frombuffer(buf, dtype=">i4", count=r * 2, offset=HEADER_SIZE).reshape(r, 2)
    hi = min(_first_bad_slot(pairs, n), r - 4 * (n + 1))  # rules slots and size
    last = _last_nonzero_byte(np.frombuffer(buf, dtype=np.uint8, count=rest, offset=HEADER_SIZE))  # rule zeros
    lo = max(1, -(-(last + 1 - INDEX_ITEM_SIZE * (n + 1)) // HASH_SLOT_SIZE))
    first = lo + (r - lo) % 4
    cands = range(first, hi + 1, 4)
    items_of = lambda c: (r - c) // 4  # noqa: E731
    if n == 0 and (hash_slot_count != 0 or last >= 0):
        cands = range(0)  # no item, yet used slots or data: self-consistent under no geometry
    elif n == 0:
        return empty_file_geometry(cands, DEFAULT_HASH_SLOTS, items_of, TIERED_GEOMETRY_SETTLE, "empty file")
    survivors, too_many = consistent_candidates(
        cands, lambda c: _unsealed_consistent(buf, size, c, n, hash_slot_count), items_of, TIERED_GEOMETRY_SETTLE)
    if too_many is not None:
        return too_many
    return geometry_verdict(survivors, f"size {size} matches neither layout for indexItemCount {n} (no unsealed "
                            "geometry is self-consistent: damaged, or not an index file)", TIERED_GEOMETRY_SETTLE)


class TieredIndexFile:
    """One file in ``tiered_index_file/`` (or a compacted segment), either layout, read-only."""

    def __init__(self, path: str, hash_slots: int | None = None, max_items: int | None = None):
        self.path = path
        self.name = os.path.basename(path)
        self.mf = MappedFile(path)
        if self.mf.size < HEADER_SIZE:
            raise CorruptDataError(f"{self.mf.size} bytes, shorter than the 28-byte header", path, 0)
        buf = self.mf.buffer
        (self.magic, self.begin_timestamp, self.end_timestamp, self.hash_slot_count,
         self.index_item_count) = HEADER.unpack_from(buf, 0)
        if self.magic not in (BEGIN_MAGIC, END_MAGIC):
            raise CorruptDataError(f"bad magic 0x{self.magic & 0xFFFFFFFF:08X} (expected 0xBCC50289/0xBCC50285)",
                                   path, 0)
        if self.index_item_count < 0:
            raise CorruptDataError(f"negative indexItemCount {self.index_item_count}", path, INDEX_ITEM_COUNT_POSITION)
        self.geometry = TieredGeometry(None, None, "compacted")
        self.layout, self.hash_slots, self.max_items = self._geometry(hash_slots, max_items)

    def _geometry(self, hash_slots, max_items):
        size, n = self.mf.size, self.index_item_count
        # compacted: size = 28 + 8 S + 28 n exactly, magic END
        if self.magic == END_MAGIC:
            rest = size - HEADER_SIZE - n * COMPACT_INDEX_ITEM_SIZE
            if rest > 0 and rest % HASH_SLOT_SIZE == 0 and (hash_slots is None or rest // HASH_SLOT_SIZE == hash_slots):
                s = rest // HASH_SLOT_SIZE
                if self._compacted_plausible(s):
                    self.geometry = TieredGeometry(s, n, "inferred", ((s, n),),
                                                   "compacted: the slot runs add up to the items")
                    return COMPACTED, s, n
        if hash_slots:
            m = max_items or (size - HEADER_SIZE - hash_slots * HASH_SLOT_SIZE) // INDEX_ITEM_SIZE
            if unsealed_file_size(hash_slots, m) == size and n < m:
                self.geometry = TieredGeometry(hash_slots, m, "flag")
                return UNSEALED, hash_slots, m
            raise CorruptDataError(f"size {size} does not fit --hash-slots {hash_slots} / --max-items {m} "
                                   f"(28 + 8*slots + 32*maxItems, indexItemCount {n} < maxItems)", self.path)
        # the size fits many (slots, maxItems) pairs (4 slots = 1 item): prove which one, as for IndexFiles
        g = prove_unsealed_geometry(self.mf.buffer, size, n, self.hash_slot_count)
        self.geometry = g
        if g.slots is None or g.max_items is None:
            raise CorruptDataError(g.detail, self.path)
        return UNSEALED, g.slots, g.max_items

    def _compacted_plausible(self, s: int) -> bool:
        buf = self.mf.buffer
        lo = slot_position(s)
        sl = np.frombuffer(buf, dtype=COMPACT_SLOT_DTYPE, count=s, offset=HEADER_SIZE) if s else None
        if sl is None:
            return False
        used = sl["length"] > 0
        total = int(sl["length"][used].sum())
        return bool(np.all(sl["position"][used] >= lo)) and total == self.index_item_count * COMPACT_INDEX_ITEM_SIZE

    @property
    def sealed(self) -> bool:
        return self.magic == END_MAGIC

    def header_dict(self) -> dict:
        return {"file": self.name, "layout": self.layout, "magic": f"0x{self.magic & 0xFFFFFFFF:08X}",
                "begin_timestamp": self.begin_timestamp, "end_timestamp": self.end_timestamp,
                "hash_slot_count": self.hash_slot_count, "index_item_count": self.index_item_count,
                "hash_slots": self.hash_slots, "max_items": self.max_items, "size": self.mf.size,
                "geometry": self.geometry.to_dict()}

    # -- reading --------------------------------------------------------------------------------
    def slot_value(self, slot: int, stats: ReadStats | None = None) -> tuple[int, int]:
        pos = slot_position(slot)
        if stats is not None:
            stats.add(pos, HASH_SLOT_SIZE)
        return SLOT.unpack_from(self.mf.buffer, pos)

    def unsealed_item(self, item: int, stats: ReadStats | None = None) -> TieredIndexItem:
        pos = item_position(self.hash_slots, item)
        if pos + INDEX_ITEM_SIZE > self.mf.size:
            raise CorruptDataError(f"item {item} lies beyond the end of the file", self.path, pos)
        if stats is not None:
            stats.add(pos, INDEX_ITEM_SIZE)
        h, t, q, o, s, td, prev = ITEM.unpack_from(self.mf.buffer, pos)
        return TieredIndexItem(h, t, q, o, s, td, prev, item, pos)

    def compacted_run(self, slot: int, stats: ReadStats | None = None, cap: bool = True) -> list[TieredIndexItem]:
        pos, length = self.slot_value(slot, stats)
        if length <= 0:
            return []
        if cap:
            length = min(length, COMPACT_INDEX_ITEM_SIZE * COMPACT_READ_MAX_ITEMS)
        if pos < 0 or pos + length > self.mf.size:
            raise CorruptDataError(f"slot {slot} run ({pos}, {length}) lies outside the file", self.path,
                                   slot_position(slot))
        if stats is not None:
            stats.add(pos, length)
        arr = np.frombuffer(self.mf.buffer, dtype=COMPACT_ITEM_DTYPE, count=length // COMPACT_INDEX_ITEM_SIZE,
                            offset=pos)
        cols = [arr[n].tolist() for n in COMPACT_ITEM_TABLE.names]
        return [TieredIndexItem(*row, position=pos + i * COMPACT_INDEX_ITEM_SIZE)
                for i, row in enumerate(zip(*cols))]

    def chain(self, slot: int, stats: ReadStats | None = None, limit: int | None = MAX_QUERY_COUNT):
        """Unsealed chain of ``slot``, newest first, cycle-safe, stopping as the broker does."""
        item = self.slot_value(slot, stats)[0]
        left = limit if limit is not None else self.index_item_count + 1
        seen = set()
        while left > 0 and INVALID_INDEX < item <= self.index_item_count:
            if item in seen:
                raise CorruptDataError(f"slot {slot}: item chain cycles back to item {item}", self.path,
                                       item_position(self.hash_slots, item))
            seen.add(item)
            it = self.unsealed_item(item, stats)
            yield it
            item = it.prev
            left -= 1

    def lookup(self, topic: str, key: str, begin: int = 0, end: int = (1 << 63) - 1,
               stats: ReadStats | None = None) -> list[TieredIndexItem]:
        """Items for ``topic#key`` whose time (timeDiff*1000 + beginTimestamp) is within [begin, end],
        hash-chain order (newest first). Keys whose hash is Integer.MIN_VALUE are never indexed."""
        h = tiered_index_key_hash(build_index_key(topic, key))
        if h < 0:
            return []
        slot = h % self.hash_slots
        items = self.compacted_run(slot, stats) if self.layout == COMPACTED else self.chain(slot, stats)
        out = []
        for it in items:
            if it.hash_code == h and begin <= it.time_diff * 1000 + self.begin_timestamp <= end:
                out.append(it)
        return out

    def all_items(self):
        """Every item (unsealed: by item number; compacted: slot by slot)."""
        if self.layout == UNSEALED:
            for k in range(1, self.index_item_count + 1):
                yield self.unsealed_item(k)
        else:
            for s in range(self.hash_slots):
                yield from self.compacted_run(s, cap=False)

    def close(self) -> None:
        self.mf.close()


def tiered_index_paths(path: str) -> list[str]:
    """Index files under a store root (``tiered_index_file/``), a directory of them, or one file; sorted by
    their begin-timestamp names. ``compacting/`` (deleted by the broker at start) is skipped."""
    if os.path.isfile(path):
        return [path]
    d = os.path.join(path, "tiered_index_file") if os.path.isdir(os.path.join(path, "tiered_index_file")) else path
    if not os.path.isdir(d):
        raise StoreNotFoundError("no tiered_index_file/ directory", path)
    names = [n for n in os.listdir(d) if n.isascii() and n.isdigit() and os.path.isfile(os.path.join(d, n))]
    return [os.path.join(d, n) for n in sorted(names, key=int)]


def lookup_files(files: list[TieredIndexFile], topic: str, key: str, max_count: int = 64, begin: int = 0,
                 end: int = (1 << 63) - 1,
                 stats: ReadStats | None = None) -> list[tuple[TieredIndexFile, TieredIndexItem]]:
    """Newest file first, skipping files that begin after ``end``; stops at ``max_count`` items
    (IndexStoreService.queryAsync). The header endTimestamp is not trusted for skipping: after a broker
    restart it equals beginTimestamp (FORMATS.md §10.3)."""
    out = []
    for f in sorted(files, key=lambda f: f.begin_timestamp, reverse=True):
        if f.begin_timestamp > end:
            continue
        for it in f.lookup(topic, key, begin, end, stats):
            out.append((f, it))
            if len(out) >= max_count:
                return out
    return out
