"""Tiered-store index file (FORMATS.md §10.3; tieredstore ``IndexStoreFile``, ``IndexItem``, 5.2.0+).

Two layouts share the 28-byte header: UNSEALED (hash chains: 8-byte slots holding the newest item
number, 32-byte items with a ``prev`` link) and COMPACTED (``compactToNewFile``: 8-byte slots holding
(absolute position, byte length) of a contiguous run of 28-byte items, newest first).
"""

from __future__ import annotations

from .fields import FieldTable

BEGIN_MAGIC = 0xBCC50289 - (1 << 32)  # IndexStoreFile.INDEX_BEGIN_MAGIC_CODE (as a Java int)
END_MAGIC = 0xBCC50285 - (1 << 32)  # INDEX_END_MAGIC_CODE: full, or compacted
HEADER_SIZE = 28
HASH_SLOT_SIZE = 8  # Long.BYTES; unsealed uses the first int only
INDEX_ITEM_SIZE = 32
COMPACT_INDEX_ITEM_SIZE = 28
INVALID_INDEX = 0
MAX_QUERY_COUNT = 512  # unsealed chain walk limit
COMPACT_READ_MAX_ITEMS = 1024  # compacted run read cap: 28 x 1024 bytes
DEFAULT_HASH_SLOTS = 5_000_000  # tieredStoreIndexFileMaxHashSlotNum
DEFAULT_MAX_ITEMS = 20_000_000  # tieredStoreIndexFileMaxIndexNum

# --- FORMATS.md §10.3: IndexStoreFile header, hash slots (unsealed / compacted) and IndexItem --------------
HEADER_FIELDS = (("magic", "i"), ("begin_timestamp", "q"), ("end_timestamp", "q"), ("hash_slot_count", "i"),
                 ("index_item_count", "i"))
ITEM_FIELDS = (("hash_code", "i"), ("topic_id", "i"), ("queue_id", "i"), ("offset", "q"), ("size", "i"),
               ("time_diff", "i"), ("item_index", "i"))  # item_index = previous item in the slot (unsealed)
COMPACT_ITEM_FIELDS = ITEM_FIELDS[:-1]
UNSEALED_SLOT_FIELDS = (("item_index", "i"), ("unused", "i"))
COMPACT_SLOT_FIELDS = (("position", "i"), ("length", "i"))

HEADER_TABLE = FieldTable(HEADER_FIELDS)
ITEM_TABLE = FieldTable(ITEM_FIELDS)
COMPACT_ITEM_TABLE = FieldTable(COMPACT_ITEM_FIELDS)
UNSEALED_SLOT_TABLE = FieldTable(UNSEALED_SLOT_FIELDS)
COMPACT_SLOT_TABLE = FieldTable(COMPACT_SLOT_FIELDS)

TieredIndexHeader = HEADER_TABLE.construct()
TieredIndexItem = ITEM_TABLE.construct()
TieredIndexCompactItem = COMPACT_ITEM_TABLE.construct()
TieredIndexUnsealedSlot = UNSEALED_SLOT_TABLE.construct()
TieredIndexCompactSlot = COMPACT_SLOT_TABLE.construct()

HEADER = HEADER_TABLE.struct
ITEM = ITEM_TABLE.struct
COMPACT_ITEM = COMPACT_ITEM_TABLE.struct
SLOT = COMPACT_SLOT_TABLE.struct
COMPACT_ITEM_DTYPE = COMPACT_ITEM_TABLE.dtype
UNSEALED_SLOT = UNSEALED_SLOT_TABLE.struct
UNSEALED_SLOT_DTYPE = UNSEALED_SLOT_TABLE.dtype
COMPACT_SLOT_DTYPE = COMPACT_SLOT_TABLE.dtype
INDEX_ITEM_COUNT_POSITION = HEADER_TABLE.position("index_item_count")
assert HEADER.size == HEADER_SIZE and ITEM.size == INDEX_ITEM_SIZE and COMPACT_ITEM.size == COMPACT_INDEX_ITEM_SIZE
assert COMPACT_ITEM_DTYPE.itemsize == COMPACT_INDEX_ITEM_SIZE and SLOT.size == HASH_SLOT_SIZE == UNSEALED_SLOT.size


def unsealed_file_size(slots: int, max_items: int) -> int:
    return HEADER_SIZE + slots * HASH_SLOT_SIZE + max_items * INDEX_ITEM_SIZE


def compacted_file_size(slots: int, item_count: int) -> int:
    return HEADER_SIZE + slots * HASH_SLOT_SIZE + item_count * COMPACT_INDEX_ITEM_SIZE


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * HASH_SLOT_SIZE


def item_position(slots: int, item: int) -> int:
    """Unsealed item ``item`` (1-based)."""
    return HEADER_SIZE + slots * HASH_SLOT_SIZE + item * INDEX_ITEM_SIZE


def time_diff(store_timestamp: int, begin_timestamp: int) -> int:
    """(int) ((timestamp - begin) / 1000L): Java division truncates toward zero."""
    d = store_timestamp - begin_timestamp
    q = abs(d) // 1000
    return _i32(q if d >= 0 else -q)


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v
