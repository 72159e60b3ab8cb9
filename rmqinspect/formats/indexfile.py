"""IndexFile: 40-byte IndexHeader, hash slots, 20-byte items (FORMATS.md §5.2-5.3, IndexHeader / IndexFile)."""

from __future__ import annotations

from construct import Array, Struct

from .fields import FieldTable

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ITEM_SIZE = 20

# --- FORMATS.md §5.2, IndexHeader (IndexHeader.load / updateByteBuffer) ---------------------------------
INDEX_HEADER_FIELDS = (
    ("begin_timestamp", "q"),
    ("end_timestamp", "q"),
    ("begin_phy_offset", "q"),
    ("end_phy_offset", "q"),
    ("hash_slot_count", "i"),
    ("index_count", "i"),  # next free item number; starts at 1
)
# --- FORMATS.md §5.3, hash slot (int32 item number) and item (IndexFile.putKey) ---------------------------
HASH_SLOT_FIELDS = (("item_index", "i"),)  # newest item of the slot, 0 = empty
INDEX_ITEM_FIELDS = (
    ("key_hash", "i"),
    ("phy_offset", "q"),
    ("time_diff", "i"),  # seconds since header.begin_timestamp
    ("prev_index", "i"),  # previous item in the slot chain, 0 = end
)
INDEX_HEADER_TABLE = FieldTable(INDEX_HEADER_FIELDS)
HASH_SLOT_TABLE = FieldTable(HASH_SLOT_FIELDS)
INDEX_ITEM_TABLE = FieldTable(INDEX_ITEM_FIELDS)

IndexHeader = INDEX_HEADER_TABLE.construct()
IndexItem = INDEX_ITEM_TABLE.construct()
INDEX_HEADER = INDEX_HEADER_TABLE.struct
INDEX_ITEM = INDEX_ITEM_TABLE.struct
INDEX_ITEM_DTYPE = INDEX_ITEM_TABLE.dtype
HASH_SLOT_DTYPE = HASH_SLOT_TABLE.dtype[0]  # a plain >i4: the slot table is an int array
assert INDEX_HEADER.size == INDEX_HEADER_SIZE and INDEX_ITEM.size == INDEX_ITEM_SIZE == INDEX_ITEM_DTYPE.itemsize
assert HASH_SLOT_TABLE.size == HASH_SLOT_SIZE


def index_file_schema(slots: int, max_items: int) -> Struct:
    """A whole index file; geometry is not stored in the file and comes from the broker config."""
    return Struct(
        "header" / IndexHeader,
        "slots" / Array(slots, HASH_SLOT_TABLE.subcons()[0].subcon),
        "items" / Array(max_items, IndexItem),
    )


def index_file_size(slots: int, max_items: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + max_items * INDEX_ITEM_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def item_position(slots: int, n: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + n * INDEX_ITEM_SIZE
