"""The walk's one vocabulary: what a slot of the commit log is (``Kind``), what a DLedger entry slot is
(``EntryKind``), what a damaged range is (``DamageKind``), and the range-with-reason every checker reports
(``Damage``). The values are the words the reports print (JSON kinds are these enums' values); a word two
vocabularies share is spelled once, by ``Kind``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """What the scan found at a physical offset. The values are the words the reports print."""

    MESSAGE = "message"  # a record that passed the broker's check
    BLANK = "blank"  # end-of-file blank record (BLANK_MAGIC_CODE): continue in the next file
    END = "end"  # zero-filled space: where written data stops
    ILLEGAL = "illegal"  # broker: (-1, false) - bad magic, absurd size, unreadable
    CRC = "crc"  # broker: (-1, false) because the body CRC differs (only when checking CRCs)
    HALF = "half"  # broker: (TOTALSIZE, false) - lengths inside the record disagree with TOTALSIZE
    FILE_END = "file_end"  # the file ended exactly at a record boundary without a blank record
    GAP = "gap"  # no file covers this offset range (deleted by retention, or missing)


MESSAGE = Kind.MESSAGE
BLANK = Kind.BLANK
END = Kind.END
ILLEGAL = Kind.ILLEGAL
CRC_MISMATCH = Kind.CRC
HALF = Kind.HALF
FILE_END = Kind.FILE_END
GAP = Kind.GAP

# Kinds that are damage (the broker's check failed); END is where data stops, not damage.
DAMAGE_KINDS = frozenset((ILLEGAL, CRC_MISMATCH, HALF))
# Kinds after which nothing more of a file is read (after HALF the scan goes on at offset + size).
FILE_DONE_KINDS = frozenset((END, ILLEGAL, CRC_MISMATCH, BLANK, FILE_END))


class EntryKind(StrEnum):
    """What DLedger's own walk met at an entry boundary (``walk.entries.entry_events``)."""

    ENTRY = "entry"  # an entry header DLedger's recovery accepts
    BLANK = Kind.BLANK.value  # DLedger's blank record (magic -1): continue in the next file
    END = Kind.END.value  # size 0: where written data stops
    FILE_END = Kind.FILE_END.value  # the file ends at an entry boundary without a blank record
    BAD = "bad"  # a header DLedger's recovery rejects (the event's reason says which rule)


class DamageKind(StrEnum):
    """What a damaged range of the commit log (``Damage.kind``) looks like, as the resynchronising walk
    (``walk.resync``) classifies it, and the DLedger entry rules (``analyses.dledger.entry_problems``)."""

    TORN_TAIL = "torn_tail"  # the last damaged record(s): nothing valid follows anywhere
    ZERO_PAGE = "zero_page"  # zero-filled bytes with valid data (or a required blank record) after them
    CRC = "crc_mismatch"  # structurally sound record whose body CRC differs
    HALF = Kind.HALF.value  # lengths inside the record disagree with TOTALSIZE
    STALE = "stale_data"  # a structurally valid record whose stored PHYSICALOFFSET is not where it lies
    GARBAGE = Kind.ILLEGAL.value  # bad magic / absurd length / unreadable bytes
    MISSING_FILE = "missing_file"  # a commit-log file is absent from the sequence
    NOT_CONTIGUOUS = "file_names"  # overlapping / misaligned file names
    # DLedger entry rules (the member's data and index files, its currterm)
    DLEDGER_ENTRY = "dledger_entry"
    DLEDGER_INDEX = "dledger_index"
    DLEDGER_TERM = "dledger_term"
    DLEDGER_INDEX_UNIT = "dledger_index_unit"
    DLEDGER_BLANK = "dledger_blank"
    DLEDGER_RECORD = "dledger_record"


# the scan's verdict on a record -> the damaged range it starts
DAMAGE_OF_KIND = {Kind.CRC: DamageKind.CRC, Kind.HALF: DamageKind.HALF, Kind.END: DamageKind.ZERO_PAGE,
                  Kind.ILLEGAL: DamageKind.GARBAGE}


@dataclass
class Damage:
    """A range of a log's bytes that is not what the broker would read, and why: the one range-with-reason of
    the walk and the DLedger entry rules. ``file`` is the path (or name) of the file holding ``start``, None
    where no file does (a missing file)."""

    kind: DamageKind
    start: int  # physical offset, inclusive
    end: int  # physical offset, exclusive
    file: str | None
    position: int | None
    reason: str
    cause: str = ""  # for torn_tail / zero_page: the kind of the first damaged bytes

    @property
    def size(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "start": self.start, "end": self.end, "size": self.size, "file": self.file,
             "position": self.position, "reason": self.reason}
        if self.cause:
            d["cause"] = self.cause
        return d
