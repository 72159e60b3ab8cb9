"""DLedger-mode stores (``enableDLegerCommitLog=true``): the entries around the records, the index, the member state.

A DLedger data file holds entries (``formats.dledger``): a 48-byte header, then one RocketMQ message record.
Positions in the files are RocketMQ physical offsets (the record of the entry at ``pos`` is at ``pos + 48``, and
its PHYSICALOFFSET field says so), so every offset-based read (``CommitLog.locate``/``read_message``, consume
queues, index files, msgIds) works unchanged. Only the walk differs, and it is ``store.walk.entries``'.

This module is the member's other files and its entry-level view (``DLedgerLog``): what only DLedger has, index
and term, the index files, the checkpoint and currterm, for DLedger's own recovery (``analyses.recovery.dledger``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..formats.dledger import (
    COMMITTED_INDEX_KEY,
    CURR_TERM_KEY,
    END_INDEX_KEY,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    VOTE_LEADER_KEY,
)
from .broker_conf import BrokerConf, configured
from .layout import DLedgerMember
from .mapped import MappedFile
from .walk.entries import Entry, EntryEvent, entry_events
from .walk.kinds import EntryKind

# --- the member's other files ---------------------------------------------------------------------------


def read_properties(path: str) -> dict[str, str] | None:
    """A Java Properties text file as DLedger writes it (``IOUtils.properties2String``: ``key=value`` lines);
    None when the file does not exist."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        raw = f.read(1 << 16)
    out: dict[str, str] = {}
    for line in raw.decode("latin-1").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


def _int_or_none(v: str | None) -> int | None:
    try:
        return int(v) if v is not None and v.strip() else None
    except ValueError:
        return None


@dataclass
class DLedgerCheckpoint:
    """``dledger-<id>/checkpoint`` (recovery reads only committedIndex from it; ``.bak`` is never read)."""

    path: str
    present: bool
    committed_index: int | None = None
    end_index: int | None = None
    raw: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"path": self.path, "present": self.present, "committed_index": self.committed_index,
                "end_index": self.end_index}


@dataclass
class DLedgerTerm:
    """``dledger-<id>/currterm`` (MemberState): the current term and whom this member voted for."""

    path: str
    present: bool
    curr_term: int | None = None
    vote_leader: str | None = None

    def to_dict(self) -> dict:
        return {"path": self.path, "present": self.present, "curr_term": self.curr_term,
                "vote_leader": self.vote_leader}


def read_dledger_checkpoint(path: str) -> DLedgerCheckpoint:
    props = read_properties(path)
    if props is None:
        return DLedgerCheckpoint(path, False)
    return DLedgerCheckpoint(path, True, _int_or_none(props.get(COMMITTED_INDEX_KEY)),
                             _int_or_none(props.get(END_INDEX_KEY)), props)


def read_currterm(path: str) -> DLedgerTerm:
    props = read_properties(path)
    if props is None:
        return DLedgerTerm(path, False)
    return DLedgerTerm(path, True, _int_or_none(props.get(CURR_TERM_KEY)), props.get(VOTE_LEADER_KEY) or None)


@dataclass(frozen=True, slots=True)
class IndexUnit:
    """One 32-byte index unit (DLedgerEntryCoder.encodeIndex)."""

    magic: int
    pos: int
    size: int
    index: int
    term: int


class DLedgerIndex:
    """The member's index files: 32-byte units, the unit of entry ``i`` at byte ``i * 32`` of the concatenated
    files (units never straddle files: written with useBlank=false). The file size comes from the files."""

    def __init__(self, paths: list[tuple[int, str]]):
        self.files = [MappedFile(p, start, dledger=False) for start, p in paths]
        self.file_size = self.files[0].size if self.files else 0

    def unit(self, index: int) -> IndexUnit | None:
        """The unit for entry ``index``, or None when no file covers it."""
        at = index * INDEX_UNIT_SIZE
        for f in self.files:
            if f.start <= at and at + INDEX_UNIT_SIZE <= f.start + f.size:
                return IndexUnit(*INDEX_UNIT.unpack_from(f.buffer, at - f.start))
        return None

    def units(self) -> np.ndarray:
        """All units of all files (structured array, big-endian fields), zero units included."""
        from ..formats.dledger import INDEX_UNIT_TABLE

        parts = [np.frombuffer(f.buffer, dtype=INDEX_UNIT_TABLE.dtype, count=f.size // INDEX_UNIT_SIZE)
                 for f in self.files if f.size >= INDEX_UNIT_SIZE]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=INDEX_UNIT_TABLE.dtype)

    def close(self) -> None:
        for f in self.files:
            f.close()


class DLedgerLog:
    """One DLedger member of a store: its data files (shared with ``Store.commitlog``), index, checkpoint and
    currterm. The group is not in any file (``dLegerGroup`` from --broker-config)."""

    def __init__(self, member: DLedgerMember, data_files: list[MappedFile]):
        self.member = member
        self.data_files = data_files
        self.index = DLedgerIndex(member.index_file_paths())

    @property
    def self_id(self) -> str:
        return self.member.self_id

    @property
    def checkpoint(self) -> DLedgerCheckpoint:
        return read_dledger_checkpoint(self.member.checkpoint_path)

    @property
    def currterm(self) -> DLedgerTerm:
        return read_currterm(self.member.currterm_path)

    def events(self, from_file: int = 0) -> Iterator[EntryEvent]:
        """Entry events over the data files from file number ``from_file``: each file to its blank record,
        moving on after a blank, ending at the first end, bad header or file end without a blank."""
        for f in self.data_files[from_file:]:
            last = None
            for ev in entry_events(f):
                last = ev
                yield ev
            if last is None or last.kind != EntryKind.BLANK:
                return

    def entries(self) -> Iterator[Entry]:
        for ev in self.events():
            if ev.entry is not None and ev.kind == EntryKind.ENTRY:
                yield ev.entry

    def close(self) -> None:
        self.index.close()


__all__ = ["DLedgerLog", "DLedgerIndex", "DLedgerCheckpoint", "DLedgerTerm", "IndexUnit", "read_dledger_checkpoint",
           "read_currterm", "dledger_info"]


def dledger_info(log: DLedgerLog, conf: BrokerConf | None = None) -> dict:
    """What the member's files say, for ``store-info``/``summary``: ids, term, checkpoint, the last entry (walked
    from the third-last data file, as DLedger's recovery does), and the file sets. ``group``/``peers`` come only
    from ``conf``, the broker.conf given (``dLegerGroup``/``dLegerPeers``): no DLedger file records them."""
    from ..formats.dledger import RECOVER_FROM_FILES_FROM_END

    cp, ct = log.checkpoint, log.currterm
    last: Entry | None = None
    stop = ""
    for ev in log.events(max(len(log.data_files) - RECOVER_FROM_FILES_FROM_END, 0)):
        if ev.kind == EntryKind.ENTRY:
            last = ev.entry
        elif ev.kind != EntryKind.BLANK:
            stop = f"{ev.kind} at {ev.offset}" + (f": {ev.reason}" if ev.reason else "")
    group, peers = configured(conf, "dLegerGroup"), configured(conf, "dLegerPeers")
    return {
        "mode": "dledger",
        "self_id": log.self_id,
        "member_dir": log.member.dir,
        "chosen_by": log.member.how,
        "group": group.value if group else None,
        "peers": peers.value if peers else None,
        "curr_term": ct.curr_term, "vote_leader": ct.vote_leader, "currterm_present": ct.present,
        "checkpoint_present": cp.present, "committed_index": cp.committed_index, "end_index": cp.end_index,
        "last_entry_index": last.index if last else None, "last_entry_term": last.term if last else None,
        "data_end": last.end if last else None, "walk_stop": stop,
        "data_files": [{"name": f.name, "size": f.size} for f in log.data_files],
        "index_files": [{"name": f.name, "size": f.size} for f in log.index.files],
        "index_file_size": log.index.file_size,
    }
