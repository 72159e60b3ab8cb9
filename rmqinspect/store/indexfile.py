"""IndexFile reader (FORMATS.md §5): header, slot table, items, and the broker's per-file lookup.

The slot count is not stored in the file. It comes from the caller (broker config), else it is inferred
from the file size: the default geometry, the default 1:4 slot/item ratio, or a search over the sizes the
file length allows, each candidate validated against the data (every used slot's head item must hash
to that slot).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..formats.constants import DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
from ..formats.indexfile import (
    HASH_SLOT_DTYPE,
    HASH_SLOT_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_ITEM,
    INDEX_ITEM_DTYPE,
    INDEX_ITEM_SIZE,
    INDEX_ITEM_TABLE,
    index_file_size,
    slot_position,
)
from ..formats.javahash import build_index_key, index_key_hash
from .errors import CorruptDataError
from .mapped import MappedFile


@dataclass
class IndexHeaderData:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


@dataclass
class ChainStep:
    """One item visited while walking a slot chain (for --explain)."""

    item: int
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int
    time_read: int
    matched: bool
    reason: str


@dataclass
class FileLookup:
    file: str
    slot: int
    slot_value: int
    offsets: list[int] = field(default_factory=list)
    steps: list[ChainStep] = field(default_factory=list)
    stopped: str = ""


class IndexFile:
    def __init__(self, path: str, slots: int | None = None, max_items: int | None = None):
        self.mapped = MappedFile(path)
        self.path = path
        self.name = os.path.basename(path)
        if self.mapped.size < INDEX_HEADER_SIZE:
            raise CorruptDataError(f"index file is {self.mapped.size} bytes, shorter than its {INDEX_HEADER_SIZE}-byte "
                                   "header", path, 0)
        self.header = IndexHeaderData(*INDEX_HEADER.unpack_from(self.mapped.buffer, 0))
        self.geometry_note = ""
        if slots is None:
            slots, max_items, self.geometry_note = infer_geometry(self)
        elif max_items is None:
            max_items = (self.mapped.size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) // INDEX_ITEM_SIZE
        self.slots = slots
        self.max_items = max_items
        self.expected_size = index_file_size(slots, max_items)
        self.truncated = self.mapped.size < self.expected_size

    @property
    def items_base(self) -> int:
        return INDEX_HEADER_SIZE + self.slots * HASH_SLOT_SIZE  # slot_position(slots), inlined: per chain item

    def slot_value(self, slot: int) -> int | None:
        pos = slot_position(slot)
        if pos + HASH_SLOT_SIZE > self.mapped.size:
            return None
        return int.from_bytes(self.mapped.buffer[pos:pos + HASH_SLOT_SIZE], "big", signed=True)

    def item(self, n: int) -> tuple[int, int, int, int] | None:
        """(key_hash, phy_offset, time_diff, prev_index) of item n, None when beyond the file."""
        pos = self.items_base + n * INDEX_ITEM_SIZE
        if n < 0 or pos + INDEX_ITEM_SIZE > self.mapped.size:
            return None
        return INDEX_ITEM.unpack_from(self.mapped.buffer, pos)

    def slot_table(self) -> np.ndarray:
        n = min(self.slots, (self.mapped.size - INDEX_HEADER_SIZE) // HASH_SLOT_SIZE)
        return np.frombuffer(self.mapped.buffer, dtype=HASH_SLOT_DTYPE, count=n, offset=INDEX_HEADER_SIZE)

    def items(self) -> np.ndarray:
        """Used items 1..indexCount-1 (item 0 is never written), bounded by the file length."""
        used = max(self.header.index_count - 1, 0)
        avail = max((self.mapped.size - self.items_base) // INDEX_ITEM_SIZE - 1, 0)
        n = min(used, avail)
        return np.frombuffer(self.mapped.buffer, dtype=INDEX_ITEM_DTYPE, count=n,
                             offset=self.items_base + INDEX_ITEM_SIZE)

    def is_time_matched(self, begin: int, end: int) -> bool:
        """IndexFile.isTimeMatched."""
        fb, fe = self.header.begin_timestamp, self.header.end_timestamp
        return (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe)

    def select_phy_offset(self, key_string: str, max_num: int, begin: int, end: int,
                          collected: int = 0, explain: bool = False) -> FileLookup:
        """IndexFile.selectPhyOffset for one file (FORMATS.md §5.5), cycle-safe.

        ``collected`` is how many results earlier files already produced (the broker shares one list).
        """
        key_hash = index_key_hash(key_string)
        slot = key_hash % self.slots
        sv = self.slot_value(slot)
        res = FileLookup(self.name, slot, sv if sv is not None else 0)
        ic = self.header.index_count
        if sv is None:
            res.stopped = "slot lies beyond the end of the (truncated) file"
            return res
        if sv <= 0 or sv > ic or ic <= 1:
            res.stopped = "empty slot" if sv == 0 else (f"slot value {sv} out of range (indexCount {ic})"
                                                        if sv != 0 else "empty slot")
            return res
        n = sv
        seen: set[int] = set()
        while True:
            if collected + len(res.offsets) >= max_num:
                res.stopped = f"max results ({max_num}) reached"
                break
            if n in seen:
                res.stopped = f"prevIndex cycle at item {n}: chain walked before (corrupt index)"
                break
            seen.add(n)
            it = self.item(n)
            if it is None:
                res.stopped = f"item {n} lies beyond the end of the (truncated) file"
                break
            h, phy, tdiff, prev = it
            if tdiff < 0:
                res.stopped = f"item {n} has negative timeDiff {tdiff} (corruption guard)"
                if explain:
                    res.steps.append(ChainStep(n, h, phy, tdiff, prev, 0, False, "negative timeDiff"))
                break
            time_read = self.header.begin_timestamp + tdiff * 1000
            time_ok = begin <= time_read <= end
            matched = h == key_hash and time_ok
            if matched:
                res.offsets.append(phy)
            if explain:
                why = ("hash and time match" if matched else
                       ("hash differs" if h != key_hash else f"time {time_read} outside [{begin}, {end}]"))
                res.steps.append(ChainStep(n, h, phy, tdiff, prev, time_read, matched, why))
            if prev <= 0 or prev > ic or prev == n or time_read < begin:
                res.stopped = ("end of chain" if prev == 0 else
                               "older than begin" if time_read < begin else
                               f"prevIndex {prev} out of range" if prev < 0 or prev > ic else
                               "prevIndex points to itself")
                break
            n = prev
        return res

    def close(self) -> None:
        self.mapped.close()


_KEY_HASH_POSITION = INDEX_ITEM_TABLE.position("key_hash")
_KEY_HASH_SIZE = INDEX_ITEM_TABLE.dtype["key_hash"].itemsize
# bytes per slot when the default ratio maxIndexNum = 4 x maxHashSlotNum was kept (FORMATS.md §5.1)
_BYTES_PER_SLOT_DEFAULT_RATIO = HASH_SLOT_SIZE + 4 * INDEX_ITEM_SIZE


def _validate_slots(idx: IndexFile, slots: int, max_checks: int = 2000) -> bool:
    size = idx.mapped.size
    ic = idx.header.index_count
    max_items = (size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) // INDEX_ITEM_SIZE
    if max_items <= 0 or ic > max_items:
        return False
    table = np.frombuffer(idx.mapped.buffer, dtype=HASH_SLOT_DTYPE, count=slots, offset=INDEX_HEADER_SIZE)
    nz = np.flatnonzero(table)[:max_checks]
    if nz.size == 0:
        return ic <= 1
    vals = table[nz].astype(np.int64)
    if (vals < 0).any() or (vals >= ic).any():
        return False
    base = slot_position(slots)
    pos = base + vals * INDEX_ITEM_SIZE + _KEY_HASH_POSITION
    if (pos + _KEY_HASH_SIZE > size).any():
        return False
    buf = np.frombuffer(idx.mapped.buffer, dtype=np.uint8)
    hb = buf[pos[:, None] + np.arange(_KEY_HASH_SIZE)].astype(np.int64)
    hashes = (hb[:, 0] << 24) | (hb[:, 1] << 16) | (hb[:, 2] << 8) | hb[:, 3]
    hashes = np.where(hashes >= 1 << 31, hashes - (1 << 32), hashes)
    return bool(((hashes >= 0) & (hashes % slots == nz)).all())


def infer_geometry(idx: IndexFile) -> tuple[int, int, str]:
    size = idx.mapped.size
    if size == index_file_size(DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX):
        return DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX, "default geometry (5,000,000 slots, 20,000,000 items)"
    rest = size - INDEX_HEADER_SIZE
    per_slot = _BYTES_PER_SLOT_DEFAULT_RATIO
    if rest > 0 and rest % per_slot == 0 and _validate_slots(idx, rest // per_slot):
        s = rest // per_slot
        return s, 4 * s, f"{s} slots / {4 * s} items (default 1:4 ratio)"
    if idx.header.index_count > 1 and rest > 0:
        limit = rest // HASH_SLOT_SIZE
        # s must leave a whole number of items
        for s in range(1, limit + 1):
            if (rest - HASH_SLOT_SIZE * s) % INDEX_ITEM_SIZE == 0 and _validate_slots(idx, s):
                return s, (rest - HASH_SLOT_SIZE * s) // INDEX_ITEM_SIZE, f"{s} slots inferred from the slot table"
    raise CorruptDataError(
        f"cannot infer the index geometry from a {size}-byte file; pass --index-slots (maxHashSlotNum)",
        idx.path, 0)


def lookup_key_string(topic: str, key: str) -> str:
    return build_index_key(topic, key)
