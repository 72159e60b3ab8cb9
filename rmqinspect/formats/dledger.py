"""DLedger on-disk layouts (``enableDLegerCommitLog=true``): entries, index units, blank records, checkpoint.

Source: DLedger 0.3.1.2 (the version RocketMQ 4.9.8 pins) - ``DLedgerEntry``, ``DLedgerEntryCoder.encode`` /
``encodeIndex``, ``MmapFileList.preAppend`` (blank records), ``DLedgerMmapFileStore`` (recovery, checkpoint) -
and RocketMQ 4.9.8 ``DLedgerCommitLog`` (the message record is an entry's body; its PHYSICALOFFSET is the
entry's pos + 48). Verified against ../shared/oracle/rocketmq-all-4.9.8/dledger-* (README, "DLedger on-disk
layout"). Constants and tables only, no I/O.
"""

from __future__ import annotations

from .fields import FieldTable

# --- DLedgerEntry header, big-endian, at the entry's position in a data file -----------------------------
ENTRY_HEADER_TABLE = FieldTable((
    ("magic", "i"),  # MAGIC_1 (= CURRENT_MAGIC in 0.3.1.2)
    ("size", "i"),  # the whole entry: header + body
    ("index", "q"),  # Raft log index: 0, 1, 2, ... consecutive
    ("term", "q"),  # leader term that appended it; never decreases along the log
    ("pos", "q"),  # absolute position of the entry itself (data file start offset + position in file)
    ("channel", "i"),  # reserved, 0
    ("chain_crc", "i"),  # copied, never computed by 0.3.1.2: 0
    ("body_crc", "i"),  # copied, never computed by 0.3.1.2: 0
    ("body_size", "i"),  # length of the body (one RocketMQ message record)
))
ENTRY_HEADER = ENTRY_HEADER_TABLE.struct
ENTRY_FIELDS = ENTRY_HEADER_TABLE.names
# DLedgerEntry.HEADER_SIZE counts up to bodyCrc (44); the body starts after bodySize (BODY_OFFSET = 48).
HEADER_SIZE = ENTRY_HEADER_TABLE.position("body_size")
BODY_OFFSET = ENTRY_HEADER_TABLE.size

# --- index unit (DLedgerEntryCoder.encodeIndex): unit of entry i at byte i * 32 of the index files --------
INDEX_UNIT_TABLE = FieldTable((
    ("magic", "i"),
    ("pos", "q"),
    ("size", "i"),
    ("index", "q"),
    ("term", "q"),
))
INDEX_UNIT = INDEX_UNIT_TABLE.struct
INDEX_UNIT_SIZE = INDEX_UNIT_TABLE.size

# --- magic values -----------------------------------------------------------------------------------------
MAGIC_1 = 1
CURRENT_MAGIC = MAGIC_1
# MmapFileList.BLANK_MAGIC_CODE: an entry never spans data files; the rest of a file that cannot hold the next
# entry (entry size + 8 > bytes left) starts with (-1, bytes left) and is zero after.
BLANK_MAGIC_CODE = -1
BLANK_HEADER_SIZE = 8
MIN_BLANK_LENGTH = 8

# --- geometry defaults ------------------------------------------------------------------------------------
# DLedgerConfig.mappedFileSizeForEntryIndex = INDEX_UNIT_SIZE * 5 * 1024 * 1024; RocketMQ never sets it, so a
# real broker's index files are 160 MiB (a reader takes the size from the files, not from here).
DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024
# The data file size is RocketMQ's mappedFileSizeCommitLog (DLedgerCommitLog passes it to DLedger).

# --- store directory (DLedgerConfig.getDefaultPath() = <storePathRootDir>/dledger-<selfId>) --------------
MEMBER_DIR_PREFIX = "dledger-"
DATA_DIR = "data"
INDEX_DIR = "index"
CHECKPOINT_FILE = "checkpoint"  # Properties text: committedIndex=<n>, endIndex=<n>
CURRTERM_FILE = "currterm"  # Properties text: voteLeader=<id>, currTerm=<n> (MemberState)
COMMITTED_INDEX_KEY = "committedIndex"
END_INDEX_KEY = "endIndex"
CURR_TERM_KEY = "currTerm"
VOTE_LEADER_KEY = "voteLeader"

# DLedgerMmapFileStore.recover() starts this many files from the end (earlier when that file's first entry
# fails its pre-check).
RECOVER_FROM_FILES_FROM_END = 3


def __getattr__(name: str):
    # The construct schemas (DLedgerEntryHeader, DLedgerIndexUnit) are built on first use: store/layout.py reads
    # this module's path constants for every command, and construct costs ~17 ms to import.
    tables = {"DLedgerEntryHeader": ENTRY_HEADER_TABLE, "DLedgerIndexUnit": INDEX_UNIT_TABLE}
    if name in tables:
        return tables[name].construct()  # FieldTable keeps the schema: built once
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

