"""Recovery of a DLedger-mode store (``enableDLegerCommitLog=true``): DLedger's own recovery, then RocketMQ's.

RocketMQ 4.9.8 ``DLedgerCommitLog.recover`` (normal and abnormal are the same code, and it never re-dispatches):

1. ``DLedgerMmapFileStore.recover`` (``dledger_recover``): from the third-last data file (earlier when that
   file's first entry fails the pre-check against its index unit), entries are walked checking only their
   headers - magic, size > 44, pos = own position, bodySize + 48 = size, index consecutive, term never
   decreasing - and each index unit against its entry (a mismatch makes DLedger rewrite the index from there,
   it does not stop). The walk stops at size 0, a failed check, or after the last file; no CRC is checked.
   ledgerEnd = the last good entry; data and index are cut there. ``committedIndex`` comes from the member's
   ``checkpoint`` (never from ``checkpoint.bak``), clamped to the ledger end.
2. ``truncateDirtyLogicFiles(data end)`` when the consume queues reach it.
3. The max offset after load is ``committedPos`` (end of the committed entry), or the data's min offset when
   nothing is committed (no checkpoint: 0). Once the member is leader again it commits everything it holds:
   the max offset after start is the data end, and start()'s reput dispatches from the consume queues' max
   physical offset up to it.
4. ``IndexService.load`` as without DLedger (an abnormal exit drops index files newer than the checkpoint);
   nothing re-dispatches what they held.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...formats.dledger import RECOVER_FROM_FILES_FROM_END
from ...store import Store
from ...store.dledger import DLedgerLog
from ...store.walk.entries import Entry, entry_events, entry_header_problem
from ...store.walk.kinds import EntryKind


@dataclass
class DLedgerRecovery:
    """What DLedger's recovery (step 1) decides, and the RocketMQ max offsets that follow."""

    self_id: str
    start_file: str | None
    start_reason: str
    ledger_begin_index: int
    ledger_end_index: int
    ledger_end_term: int
    data_end: int  # processOffset: where the data is cut (dataMaxWrotePosition)
    stop_kind: str  # blank (after the last file) | end | bad | file_end | none
    stop_reason: str
    stop_file: str | None
    stop_position: int | None
    index_rewritten_from: int | None  # entry index from which the index did not match and is rebuilt
    checkpoint_present: bool
    checkpoint_committed_index: int | None
    committed_index: int
    committed_pos: int
    max_offset_after_load: int
    max_offset_after_start: int
    entries_accepted: int
    curr_term: int | None
    vote_leader: str | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _pre_check(log: DLedgerLog, f) -> str:
    """The pre-check of a data file's first entry: header rules and its index unit; "" when it passes."""
    evs = entry_events(f)
    ev = next(evs, None)
    if ev is None or ev.entry is None:
        return "no entry at the start of the file"
    e = ev.entry
    why = entry_header_problem(e, f.size)
    if why:
        return why
    return _unit_problem(log, e)


def _unit_problem(log: DLedgerLog, e: Entry) -> str:
    u = log.index.unit(e.index)
    if u is None:
        return f"no index unit for entry {e.index}"
    for name, a, b in (("magic", e.magic, u.magic), ("size", e.size, u.size), ("index", e.index, u.index),
                       ("term", e.term, u.term), ("pos", e.offset, u.pos)):
        if a != b:
            return f"index unit {name} {b} != entry {name} {a}"
    return ""


def _start_file(log: DLedgerLog, notes: list[str]) -> tuple[int, str]:
    """Where DLedger's recovery starts: the third-last data file, or earlier while a file's first entry fails the
    pre-check (index in the data files, why)."""
    files = log.data_files
    idx = max(len(files) - RECOVER_FROM_FILES_FROM_END, 0)
    start_reason = "third-last data file" if len(files) >= RECOVER_FROM_FILES_FROM_END else "first data file"
    failed = False
    for i in range(idx, -1, -1):
        why = _pre_check(log, files[i])
        if not why:
            idx = i
            break
        notes.append(f"pre-check of {files[i].name} failed: {why}")
        failed = True
        idx = i
    if failed:
        start_reason += f"; pre-check failed, recovery starts at {files[idx].name}"
    return idx, start_reason


@dataclass
class _LedgerWalk:
    """DLedger's walk of the entries from the start file: the last good entry and where and why it stopped."""

    process: int  # the data end: after the last entry accepted (or the blank record's file end)
    last_index: int = -1
    last_term: int = -1
    ends: dict[int, int] = field(default_factory=dict)  # entry index -> end of the entry
    rewritten_from: int | None = None  # the first entry whose index unit does not match
    stop: tuple = ("none", "", None, None)  # (kind, reason, file, position)
    accepted: int = 0
    file: int = 0  # index of the data file the walk ended in


def _walk_ledger(log: DLedgerLog, idx: int, notes: list[str]) -> _LedgerWalk:
    """Entries one after another across the data files from file ``idx`` (headers, index consecutive, term never
    decreasing, each index unit against its entry) until size 0, a failed check, or after the last file."""
    files = log.data_files
    w = _LedgerWalk(files[idx].start, file=idx)
    while True:
        f = files[w.file]
        moved = False
        for ev in entry_events(f):
            if ev.kind == EntryKind.BLANK:
                w.process = f.start + f.size
                if w.file + 1 < len(files):
                    w.file += 1
                    w.process = files[w.file].start
                    moved = True
                else:
                    w.stop = (EntryKind.BLANK, "blank record in the last data file: recovery over", f.name,
                              ev.position)
                break
            if ev.kind != EntryKind.ENTRY:
                w.stop = (ev.kind, ev.reason or ev.kind, f.name, ev.position)
                break
            e = ev.entry
            assert e is not None
            if w.last_index != -1 and e.index != w.last_index + 1:
                w.stop = (EntryKind.BAD, f"entry index {e.index} after {w.last_index} (not consecutive)", f.name,
                          ev.position)
                break
            if e.term < w.last_term:
                w.stop = (EntryKind.BAD, f"entry term {e.term} < previous term {w.last_term}", f.name, ev.position)
                break
            if w.rewritten_from is None:
                why = _unit_problem(log, e)
                if why:
                    w.rewritten_from = e.index
                    notes.append(f"index unit of entry {e.index} does not match ({why}): DLedger truncates the "
                                 "index there and rewrites it from the data")
            w.last_index, w.last_term = e.index, e.term
            w.ends[e.index] = e.end
            w.process = e.end
            w.accepted += 1
        else:
            w.stop = (EntryKind.FILE_END, "end of the file without a blank record", f.name, f.size)
        if not moved:
            break
    if w.stop[0] == EntryKind.FILE_END and w.file + 1 < len(files):
        notes.append(f"{files[w.file].name} ends without a blank record; DLedger's buffer reads past it and stops")
    return w


def _committed(log: DLedgerLog, w: _LedgerWalk, begin: int, notes: list[str]) -> tuple[int, int]:
    """(committedIndex, committedPos): the checkpoint's committed index clamped to the ledger end, and where that
    entry ends; (-1, -1) when there is none to use."""
    cp = log.checkpoint
    if cp.present and cp.committed_index is not None and cp.committed_index != -1 and w.last_index != -1:
        ci = cp.committed_index
        if ci < begin:
            notes.append(f"checkpoint committedIndex {ci} < ledgerBeginIndex {begin}: not used")
            return -1, -1
        ci = min(ci, w.last_index)
        end = w.ends.get(ci)
        if end is None:
            u = log.index.unit(ci)
            end = u.pos + u.size if u is not None else None
        if end is None:
            notes.append(f"committedIndex {ci}: no entry position found")
            return -1, -1
        return ci, end
    if not cp.present:
        notes.append("no DLedger checkpoint: committedIndex stays -1, so the max offset after load is the data's "
                     "min offset until the member is leader again")
    return -1, -1


def dledger_recover(store: Store) -> DLedgerRecovery:
    """DLedgerMmapFileStore.recover + the committed index from the checkpoint (see the module text)."""
    log = store.dledger
    assert log is not None, "not a DLedger-mode store"
    files = log.data_files
    notes: list[str] = []
    cp = log.checkpoint
    ct = log.currterm
    if not files:
        return DLedgerRecovery(log.self_id, None, "no data files", -1, -1, -1, 0, "none", "no data files", None,
                               None, None, cp.present, cp.committed_index, -1, -1, 0, 0, 0, ct.curr_term,
                               ct.vote_leader, notes)
    idx, start_reason = _start_file(log, notes)
    w = _walk_ledger(log, idx, notes)
    # ledgerBeginIndex: the first entry of the first data file (reviseLedgerBeginIndex)
    begin = -1
    first = next(entry_events(files[0]), None)
    if first is not None and first.entry is not None:
        begin = first.entry.index
    committed_index, committed_pos = _committed(log, w, begin, notes)
    min_offset = files[0].start
    after_load = committed_pos if committed_pos > 0 else (min_offset if min_offset > 0 else 0)
    after_start = w.process if w.last_index != -1 else after_load
    return DLedgerRecovery(
        self_id=log.self_id, start_file=files[idx].name, start_reason=start_reason, ledger_begin_index=begin,
        ledger_end_index=w.last_index, ledger_end_term=w.last_term, data_end=w.process, stop_kind=w.stop[0],
        stop_reason=w.stop[1], stop_file=w.stop[2], stop_position=w.stop[3], index_rewritten_from=w.rewritten_from,
        checkpoint_present=cp.present, checkpoint_committed_index=cp.committed_index,
        committed_index=committed_index, committed_pos=committed_pos, max_offset_after_load=after_load,
        max_offset_after_start=after_start, entries_accepted=w.accepted, curr_term=ct.curr_term,
        vote_leader=ct.vote_leader, notes=notes)


__all__ = ["DLedgerRecovery", "dledger_recover"]
