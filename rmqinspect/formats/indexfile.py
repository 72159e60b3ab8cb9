"""IndexFile: 40-byte IndexHeader, hash slots, 20-byte items (FORMATS.md §5.2-5.3, IndexHeader / IndexFile)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .fields import FieldTable

if TYPE_CHECKING:
    from construct import Struct

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

INDEX_HEADER = INDEX_HEADER_TABLE.struct
INDEX_ITEM = INDEX_ITEM_TABLE.struct
assert INDEX_HEADER.size == INDEX_HEADER_SIZE and INDEX_ITEM.size == INDEX_ITEM_SIZE
assert HASH_SLOT_TABLE.size == HASH_SLOT_SIZE


def __getattr__(name: str):
    # The construct schemas (IndexHeader, IndexItem) and the numpy dtypes are built on first use: a one-key
    # look-up reads the header and a few items with INDEX_HEADER / INDEX_ITEM and should pay for neither
    # construct (~16 ms) nor numpy (~60 ms). FieldTable keeps each one: built once.
    if name == "IndexHeader":
        return INDEX_HEADER_TABLE.construct()
    if name == "IndexItem":
        return INDEX_ITEM_TABLE.construct()
    if name == "INDEX_ITEM_DTYPE":
        return INDEX_ITEM_TABLE.dtype  # FieldTable.dtype checks its itemsize against INDEX_ITEM_SIZE
    if name == "HASH_SLOT_DTYPE":
        return HASH_SLOT_TABLE.dtype[0]  # a plain >i4: the slot table is an int array
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def index_file_schema(slots: int, max_items: int) -> Struct:
    """A whole index file; geometry is not stored in the file and comes from the broker config."""
    from construct import Array, Struct

    return Struct(
        "header" / INDEX_HEADER_TABLE.construct(),
        "slots" / Array(slots, HASH_SLOT_TABLE.subcons()[0].subcon),
        "items" / Array(max_items, INDEX_ITEM_TABLE.construct()),
    )


def index_file_size(slots: int, max_items: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + max_items * INDEX_ITEM_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def item_position(slots: int, n: int) -> int:
    return INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + n * INDEX_ITEM_SIZE
