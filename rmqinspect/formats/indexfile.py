"""IndexFile: 40-byte IndexHeader, hash slots, 20-byte items (FORMATS.md §5, IndexHeader / IndexFile)."""

from __future__ import annotations

import struct

import numpy as np
from construct import Array, Int32sb, Int64sb, Struct

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ITEM_SIZE = 20

INDEX_HEADER_FIELDS = (
    ("begin_timestamp", "q"),
    ("end_timestamp", "q"),
    ("begin_phy_offset", "q"),
    ("end_phy_offset", "q"),
    ("hash_slot_count", "i"),
    ("index_count", "i"),  # next free item number; starts at 1
)
INDEX_ITEM_FIELDS = (
    ("key_hash", "i"),
    ("phy_offset", "q"),
    ("time_diff", "i"),  # seconds since header.begin_timestamp
    ("prev_index", "i"),  # previous item in the slot chain, 0 = end
)
_T = {"q": Int64sb, "i": Int32sb}

IndexHeader = Struct(*[n / _T[c] for n, c in INDEX_HEADER_FIELDS])
IndexItem = Struct(*[n / _T[c] for n, c in INDEX_ITEM_FIELDS])


def index_file_schema(slots: int, max_items: int) -> Struct:
    """A whole index file; geometry is not stored in the file and comes from the broker config."""
    return Struct(
        "header" / IndexHeader,
        "slots" / Array(slots, Int32sb),
        "items" / Array(max_items, IndexItem),
    )


INDEX_HEADER = struct.Struct(">" + "".join(c for _, c in INDEX_HEADER_FIELDS))
INDEX_ITEM = struct.Struct(">" + "".join(c for _, c in INDEX_ITEM_FIELDS))
INDEX_ITEM_DTYPE = np.dtype([(n, ">i8" if c == "q" else ">i4") for n, c in INDEX_ITEM_FIELDS])
assert INDEX_HEADER.size == INDEX_HEADER_SIZE and INDEX_ITEM.size == INDEX_ITEM_SIZE == INDEX_ITEM_DTYPE.itemsize


def index_file_size(slots: int, max_items: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + max_items * INDEX_ITEM_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def item_position(slots: int, n: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + n * INDEX_ITEM_SIZE
