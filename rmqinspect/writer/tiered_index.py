"""Write tiered-store index files from the spec (FORMATS.md §10.3, ``IndexStoreFile.putKey``): the
unsealed layout a broker writes while dispatching. Fixtures and benchmarks only."""

from __future__ import annotations

import os

from ..formats.javahash import build_index_key, tiered_index_key_hash
from ..formats.tiered_index import (
    BEGIN_MAGIC,
    END_MAGIC,
    HEADER,
    INVALID_INDEX,
    ITEM,
    UNSEALED_SLOT,
    item_position,
    slot_position,
    time_diff,
    unsealed_file_size,
)
from ..store.errors import UnsafeOutputError


class TieredIndexWriter:
    """One unsealed file ``<directory>/<begin_timestamp>``, preallocated (sparse) to its full size."""

    FILE_FULL = "FILE_FULL"
    SUCCESS = "SUCCESS"

    def __init__(self, directory: str, begin_timestamp: int, hash_slots: int, max_items: int):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, str(begin_timestamp))
        if os.path.exists(self.path):
            raise UnsafeOutputError("tiered index file already exists", self.path)
        self.begin_timestamp = begin_timestamp
        self.end_timestamp = begin_timestamp
        self.hash_slots = hash_slots
        self.max_items = max_items
        self.hash_slot_count = 0
        self.index_item_count = 0
        self.sealed = False
        self._f = open(self.path, "w+b")
        self._f.truncate(unsealed_file_size(hash_slots, max_items))
        self._slots = [0] * hash_slots  # in-memory mirror of the slot table (written through)
        self._flush_header(False)

    def _flush_header(self, end: bool) -> None:
        self._f.seek(0)
        self._f.write(HEADER.pack(END_MAGIC if end else BEGIN_MAGIC, self.begin_timestamp, self.end_timestamp,
                                  self.hash_slot_count, self.index_item_count))

    def put_key(self, topic: str, topic_id: int, queue_id: int, keys, offset: int, size: int,
                timestamp: int) -> str:
        """IndexStoreFile.putKey for one message: every key of ``keys`` (a set) becomes one item."""
        keys = list(dict.fromkeys(keys))
        if self.sealed or self.index_item_count + len(keys) >= self.max_items:
            self.sealed = True
            return self.FILE_FULL
        for key in keys:
            h = tiered_index_key_hash(build_index_key(topic, key))
            if h < 0:
                continue  # Integer.MIN_VALUE: the broker's slot computation fails, nothing is indexed
            slot = h % self.hash_slots
            old = self._slots[slot]
            self.index_item_count += 1
            item = self.index_item_count
            self._f.seek(item_position(self.hash_slots, item))
            self._f.write(ITEM.pack(h, topic_id, queue_id, offset, size,
                                    time_diff(timestamp, self.begin_timestamp), old))
            self._f.seek(slot_position(slot))
            self._f.write(UNSEALED_SLOT.pack(item, 0))  # the second int of an unsealed slot stays 0
            self._slots[slot] = item
            if old <= INVALID_INDEX:
                self.hash_slot_count += 1
            if self.end_timestamp < timestamp:
                self.end_timestamp = timestamp
        self._flush_header(self.max_items == self.index_item_count + 1)
        return self.SUCCESS

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> TieredIndexWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
