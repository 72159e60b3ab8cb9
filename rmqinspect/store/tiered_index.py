"""Tiered-store index files (FORMATS.md §10.3): read both layouts, look keys up the way
``IndexStoreFile.queryAsyncFromUnsealedFile`` / ``queryAsyncFromSegmentFile`` do, and count the reads
each lookup needs (the I/O the compaction of seed 002 saves on object storage).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..formats.javahash import build_index_key, tiered_index_key_hash
from ..formats.tiered_index import (
    BEGIN_MAGIC,
    COMPACT_INDEX_ITEM_SIZE,
    COMPACT_ITEM_DTYPE,
    COMPACT_ITEM_TABLE,
    COMPACT_READ_MAX_ITEMS,
    COMPACT_SLOT_DTYPE,
    DEFAULT_HASH_SLOTS,
    DEFAULT_MAX_ITEMS,
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
    UNSEALED_SLOT,
    UNSEALED_SLOT_DTYPE,
    item_position,
    slot_position,
    unsealed_file_size,
)
from .errors import CorruptDataError, StoreNotFoundError
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
        self.layout, self.hash_slots, self.max_items = self._geometry(hash_slots, max_items)

    def _geometry(self, hash_slots, max_items):
        size, n = self.mf.size, self.index_item_count
        # compacted: size = 28 + 8 S + 28 n exactly, magic END
        if self.magic == END_MAGIC:
            rest = size - HEADER_SIZE - n * COMPACT_INDEX_ITEM_SIZE
            if rest > 0 and rest % HASH_SLOT_SIZE == 0 and (hash_slots is None or rest // HASH_SLOT_SIZE == hash_slots):
                s = rest // HASH_SLOT_SIZE
                if self._compacted_plausible(s):
                    return COMPACTED, s, n
        cands = []
        if hash_slots:
            m = max_items or (size - HEADER_SIZE - hash_slots * HASH_SLOT_SIZE) // INDEX_ITEM_SIZE
            cands.append((hash_slots, m))
        cands.append((DEFAULT_HASH_SLOTS, DEFAULT_MAX_ITEMS))
        per_slot = HASH_SLOT_SIZE + 4 * INDEX_ITEM_SIZE
        if (size - HEADER_SIZE) % per_slot == 0:  # the default ratio: maxItems = 4 x slots
            cands.append(((size - HEADER_SIZE) // per_slot, 4 * ((size - HEADER_SIZE) // per_slot)))
        for s, m in cands:
            if s > 0 and unsealed_file_size(s, m) == size and n < m:
                return UNSEALED, s, m
        # no hint fits: search slot counts whose chains are self-consistent (bounded work)
        if hash_slots is None:
            smax = min((size - HEADER_SIZE) // HASH_SLOT_SIZE, 1 << 21)
            # the slot table of s slots is a prefix of the largest one: count its non-empty slots once (prefix
            # sums), not once per candidate (that was quadratic: a 2 MiB file took 37 s)
            used = np.cumsum(np.frombuffer(self.mf.buffer, dtype=UNSEALED_SLOT_DTYPE, count=max(smax, 0),
                                           offset=HEADER_SIZE)["item_index"] != 0)
            for s in range(1, smax + 1):
                rest = size - HEADER_SIZE - s * HASH_SLOT_SIZE
                if rest % INDEX_ITEM_SIZE or rest // INDEX_ITEM_SIZE <= n:
                    continue
                if self._unsealed_plausible(s, int(used[s - 1])):
                    return UNSEALED, s, rest // INDEX_ITEM_SIZE
        raise CorruptDataError(f"size {size} matches neither layout for indexItemCount {n}; pass the broker's "
                               "tieredStoreIndexFileMaxHashSlotNum/MaxIndexNum (--hash-slots/--max-items)",
                               self.path)

    def _unsealed_plausible(self, s: int, used_slots: int | None = None) -> bool:
        """Items 1..16 must hash to slots whose newest item is at least their own number, link backwards,
        and the non-empty slot count (``used_slots`` when the caller counted it) must equal the header's
        hashSlotCount."""
        buf, n = self.mf.buffer, self.index_item_count
        if used_slots is not None and used_slots != self.hash_slot_count:
            return False
        for k in range(1, min(n, 16) + 1):
            h, *_rest, prev = ITEM.unpack_from(buf, item_position(s, k))
            if h < 0 or not 0 <= prev < k:
                return False
            head = UNSEALED_SLOT.unpack_from(buf, slot_position(h % s))[0]
            if not k <= head <= n:
                return False
        if used_slots is not None:
            return True
        table = np.frombuffer(buf, dtype=UNSEALED_SLOT_DTYPE, count=s, offset=HEADER_SIZE)["item_index"]
        return int(np.count_nonzero(table)) == self.hash_slot_count

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
                "hash_slots": self.hash_slots, "max_items": self.max_items, "size": self.mf.size}

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
