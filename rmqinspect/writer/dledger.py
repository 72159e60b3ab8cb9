"""DLedger-mode fixtures: one member's entry files, index, checkpoint and currterm, and whole DLedger stores.

``DLedgerWriter`` appends the way ``DLedgerMmapFileStore.appendAsLeader`` does after RocketMQ 4.9.8's
``DLedgerCommitLog`` serialized the message: the record's PHYSICALOFFSET is the entry's pos + 48, the entry
header (formats.dledger) goes in front, an entry that does not fit the rest of a data file (entry size + 8 >
bytes left) leaves a blank record (-1, bytes left) and starts the next file, and the 32-byte index unit of entry
``i`` is written at byte ``i * 32`` of the index files. Terms are whatever the caller says (``term=``), so tests
can make multi-term logs and diverged peers; ``truncate_after`` cuts a follower's log as a new leader would.
tests/test_dledger_writer.py proves the bytes equal to the oracle's.

This writes only into a directory the caller names; it is never pointed at an inspected store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..formats.dledger import (
    BLANK_MAGIC_CODE,
    BODY_OFFSET,
    CHECKPOINT_FILE,
    COMMITTED_INDEX_KEY,
    CURR_TERM_KEY,
    CURRTERM_FILE,
    DATA_DIR,
    END_INDEX_KEY,
    ENTRY_HEADER,
    INDEX_DIR,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    MAGIC_1,
    MEMBER_DIR_PREFIX,
    MIN_BLANK_LENGTH,
    VOTE_LEADER_KEY,
)
from .commitlog import AppendResult, MessageSpec, RecordLayout, next_queue_offset
from .store import StoreWriter


@dataclass
class EntryWritten:
    index: int
    term: int
    pos: int
    size: int


class DLedgerWriter:
    """Appends DLedger entries to ``<member_dir>/data`` and their units to ``<member_dir>/index``."""

    def __init__(self, member_dir: str, data_file_size: int, index_file_size: int = INDEX_UNIT_SIZE * 8192,
                 term: int = 0, queue_offsets: dict[tuple[str, int], int] | None = None):
        if index_file_size % INDEX_UNIT_SIZE:
            raise ValueError("index_file_size must be a multiple of 32 (units never straddle index files)")
        self.member_dir = member_dir
        self.data_dir = os.path.join(member_dir, DATA_DIR)
        self.index_dir = os.path.join(member_dir, INDEX_DIR)
        os.makedirs(self.data_dir, exist_ok=True)
        os.makedirs(self.index_dir, exist_ok=True)
        self.data_file_size = data_file_size
        self.index_file_size = index_file_size
        self.term = term
        self.queue_offsets: dict[tuple[str, int], int] = dict(queue_offsets or {})
        self.entries: list[EntryWritten] = []
        self._file_start = 0
        self._pos = 0
        self._new_data_file(0)

    # --- files ----------------------------------------------------------------------------------------------
    def _new_data_file(self, start: int) -> None:
        with open(os.path.join(self.data_dir, "%020d" % start), "wb") as f:
            f.truncate(self.data_file_size)  # zeros, as a pre-allocated mapped file
        self._file_start, self._pos = start, 0

    def _write(self, directory: str, file_size: int, at: int, data: bytes) -> None:
        start = at - at % file_size
        path = os.path.join(directory, "%020d" % start)
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.truncate(file_size)
        with open(path, "r+b") as f:
            f.seek(at - start)
            f.write(data)

    @property
    def write_offset(self) -> int:
        """Position of the next entry (DLedger's data write position; RocketMQ's max offset once committed)."""
        return self._file_start + self._pos

    @property
    def next_index(self) -> int:
        return self.entries[-1].index + 1 if self.entries else 0

    # --- appending ------------------------------------------------------------------------------------------
    def append_body(self, body: bytes, term: int | None = None, *, index: int | None = None,
                    magic: int = MAGIC_1) -> EntryWritten:
        """One entry around ``body`` (any bytes); ``index``/``magic`` may be forced to make damaged logs."""
        term = self.term if term is None else term
        size = BODY_OFFSET + len(body)
        if size + MIN_BLANK_LENGTH > self.data_file_size:
            raise ValueError(f"entry of {size} bytes can never fit a {self.data_file_size}-byte data file")
        if size + MIN_BLANK_LENGTH > self.data_file_size - self._pos:
            left = self.data_file_size - self._pos
            self._write(self.data_dir, self.data_file_size, self.write_offset,
                        BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True) + left.to_bytes(4, "big"))
            self._new_data_file(self._file_start + self.data_file_size)
        pos = self.write_offset
        idx = self.next_index if index is None else index
        header = ENTRY_HEADER.pack(magic, size, idx, term, pos, 0, 0, 0, len(body))
        self._write(self.data_dir, self.data_file_size, pos, header + body)
        self._write(self.index_dir, self.index_file_size, idx * INDEX_UNIT_SIZE,
                    INDEX_UNIT.pack(magic, pos, size, idx, term))
        self._pos += size
        e = EntryWritten(idx, term, pos, size)
        self.entries.append(e)
        return e

    def append(self, spec: MessageSpec, term: int | None = None) -> AppendResult:
        """A RocketMQ message as DLedgerCommitLog stores it: the record (PHYSICALOFFSET = entry pos + 48)."""
        layout = RecordLayout.of(spec)
        size = layout.size
        if BODY_OFFSET + size + MIN_BLANK_LENGTH > self.data_file_size - self._pos:
            pos = self._file_start + self.data_file_size  # append_body moves to the next file
        else:
            pos = self.write_offset
        qoff = next_queue_offset(self.queue_offsets, spec)
        phys = pos + BODY_OFFSET
        rec = layout.encode(qoff, phys)
        e = self.append_body(rec, term)
        assert e.pos + BODY_OFFSET == phys
        return AppendResult(phys, len(rec), qoff, rec)

    def truncate_after(self, index: int) -> None:
        """Cut the log after entry ``index`` (what a follower does when the leader's log differs there):
        the data and index bytes after it become zeros, later data files are deleted."""
        keep = [e for e in self.entries if e.index <= index]
        end = keep[-1].pos + keep[-1].size if keep else 0
        for name in sorted(os.listdir(self.data_dir)):
            start = int(name)
            path = os.path.join(self.data_dir, name)
            if start > end:
                os.remove(path)
            elif start <= end < start + self.data_file_size:
                with open(path, "r+b") as f:
                    f.seek(end - start)
                    f.write(b"\0" * (self.data_file_size - (end - start)))
        unit_end = (index + 1) * INDEX_UNIT_SIZE if keep else 0
        for name in sorted(os.listdir(self.index_dir)):
            start = int(name)
            if start + self.index_file_size > unit_end:
                cut = max(unit_end - start, 0)
                with open(os.path.join(self.index_dir, name), "r+b") as f:
                    f.seek(cut)
                    f.write(b"\0" * (self.index_file_size - cut))
        self.entries = keep
        # an entry always leaves 8 bytes in its file, so the end never falls on a file boundary (except 0)
        self._file_start, self._pos = end - end % self.data_file_size, end % self.data_file_size

    # --- member state ---------------------------------------------------------------------------------------
    def write_checkpoint(self, committed_index: int, end_index: int | None = None) -> None:
        """``checkpoint`` as IOUtils.properties2String writes it."""
        end_index = committed_index if end_index is None else end_index
        _write_text(os.path.join(self.member_dir, CHECKPOINT_FILE),
                    f"{COMMITTED_INDEX_KEY}={committed_index}\n{END_INDEX_KEY}={end_index}\n")

    def write_currterm(self, term: int, vote_leader: str) -> None:
        _write_text(os.path.join(self.member_dir, CURRTERM_FILE),
                    f"{VOTE_LEADER_KEY}={vote_leader}\n{CURR_TERM_KEY}={term}\n")

    def close(self) -> None:
        pass


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="latin-1", newline="") as f:
        f.write(text)


_PENDING = object()  # DLedgerStoreWriter's records writer, set right after StoreWriter.__init__


class DLedgerStoreWriter(StoreWriter):
    """``StoreWriter`` in DLedger mode: the records go into ``<root>/dledger-<self_id>/`` entries; consume queues,
    index files and the RocketMQ checkpoint are made at ``close()`` the same way (the dispatcher walks the
    entries), plus the member's ``checkpoint`` (committed = end = the last entry) and ``currterm``."""

    def __init__(self, root: str, *, self_id: str = "n0", data_file_size: int = 1 << 30,
                 index_file_size: int = INDEX_UNIT_SIZE * 8192, term: int = 0, vote_leader: str | None = None,
                 committed_index: int | None = None, **kw):
        # StoreWriter refuses a non-empty root, so the member's files are created after its check
        super().__init__(root, commitlog_file_size=data_file_size, records=_PENDING, **kw)
        self.dledger = DLedgerWriter(os.path.join(root, MEMBER_DIR_PREFIX + self_id), data_file_size,
                                     index_file_size, term)
        self.commitlog = self.dledger  # type: ignore[assignment]
        self.vote_leader = vote_leader or self_id
        self.committed_index = committed_index

    def append_in_term(self, spec: MessageSpec, term: int) -> AppendResult:
        self.dledger.term = term
        return self.append(spec)

    def close(self):
        d = self.dledger
        last = d.entries[-1].index if d.entries else -1
        d.write_checkpoint(last if self.committed_index is None else self.committed_index, last)
        d.write_currterm(d.term, self.vote_leader)
        return super().close()
