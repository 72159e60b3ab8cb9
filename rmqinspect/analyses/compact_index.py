"""``compact-index``: IndexStoreFile.compactToNewFile, offline. Each slot's hash chain (newest first) is
copied into one contiguous run of 28-byte items (the 32-byte item without its ``prev`` link); the slot
then holds (absolute position, byte length) and the header magic becomes END (seed 002, FORMATS.md §10.3).
Written into a NEW directory, never next to the source."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..formats.tiered_index import (COMPACT_INDEX_ITEM_SIZE, END_MAGIC, HEADER, HEADER_SIZE, INDEX_ITEM_SIZE,
                                    SLOT, compacted_file_size, item_position, slot_position)
from ..errors import CorruptDataError, UnsafeOutputError
from ..store.tiered_index import COMPACTED, TieredIndexFile
from ..sinks.staging import Staged


@dataclass
class CompactionResult:
    source: str
    output: str
    hash_slots: int
    items: int
    slots_used: int
    source_size: int
    output_size: int
    items_dropped: int  # unreachable from any slot chain (not copied, as in the broker)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def compact_index_file(src: TieredIndexFile, out_dir: str) -> CompactionResult:
    if src.layout == COMPACTED:
        raise CorruptDataError("file is already compacted", src.path)
    os.makedirs(out_dir, exist_ok=True)
    out_path = os.path.join(out_dir, src.name)
    if os.path.exists(out_path):
        raise UnsafeOutputError("output file exists", out_path)
    if os.path.realpath(out_path) == os.path.realpath(src.path):
        raise UnsafeOutputError("output would overwrite the source", out_path)
    n = src.index_item_count
    size = compacted_file_size(src.hash_slots, n)
    buf = src.mf.buffer
    slots = bytearray(src.hash_slots * 8)
    body = bytearray()
    base = HEADER_SIZE + src.hash_slots * 8
    used = 0
    for s in range(src.hash_slots):
        item = int.from_bytes(buf[slot_position(s):slot_position(s) + 4], "big", signed=True)
        if item == 0:
            continue
        begin = base + len(body)
        seen = set()
        # the broker walks while item > 0 and the write position stays inside the new file
        while item > 0 and base + len(body) < size:
            if item in seen or item > n:
                raise CorruptDataError(f"slot {s}: broken chain at item {item}", src.path,
                                       item_position(src.hash_slots, item))
            seen.add(item)
            pos = item_position(src.hash_slots, item)
            body += buf[pos:pos + COMPACT_INDEX_ITEM_SIZE]
            item = int.from_bytes(buf[pos + COMPACT_INDEX_ITEM_SIZE:pos + INDEX_ITEM_SIZE], "big", signed=True)
        SLOT.pack_into(slots, s * 8, begin, base + len(body) - begin)
        used += 1
    staged = Staged(out_path, "the compacted index file", directory=False)  # sinks.staging: whole or nothing
    with open(staged.path, "wb") as f:
        f.write(HEADER.pack(END_MAGIC, src.begin_timestamp, src.end_timestamp, src.hash_slot_count, n))
        f.write(slots)
        f.write(body)
        f.truncate(size)
    staged.commit()
    return CompactionResult(src.path, out_path, src.hash_slots, n, used, src.mf.size, size,
                            n - len(body) // COMPACT_INDEX_ITEM_SIZE)
