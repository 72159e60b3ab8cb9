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
    idx = max(len(files) - RECOVER_FROM_FILES_FROM_END, 0)
    start_reason = "third-last data file" if len(files) >= RECOVER_FROM_FILES_FROM_END else "first data file"
    for i in range(idx, -1, -1):
        why = _pre_check(log, files[i])
        if not why:
            idx = i
            break
        notes.append(f"pre-check of {files[i].name} failed: {why}")
        idx = i
    if notes:
        start_reason += f"; pre-check failed, recovery starts at {files[idx].name}"
    last_index = last_term = -1
    process = files[idx].start
    ends: dict[int, int] = {}
    rewritten_from = None
    stop = ("none", "", None, None)
    first_index = None
    accepted = 0
    i = idx
    while True:
        f = files[i]
        moved = False
        for ev in entry_events(f):
            if ev.kind == "blank":
                process = f.start + f.size
                if i + 1 < len(files):
                    i += 1
                    process = files[i].start
                    moved = True
                else:
                    stop = ("blank", "blank record in the last data file: recovery over", f.name, ev.position)
                break
            if ev.kind != "entry":
                stop = (ev.kind, ev.reason or ev.kind, f.name, ev.position)
                break
            e = ev.entry
            assert e is not None
            if last_index != -1 and e.index != last_index + 1:
                stop = ("bad", f"entry index {e.index} after {last_index} (not consecutive)", f.name, ev.position)
                break
            if e.term < last_term:
                stop = ("bad", f"entry term {e.term} < previous term {last_term}", f.name, ev.position)
                break
            if rewritten_from is None:
                why = _unit_problem(log, e)
                if why:
                    rewritten_from = e.index
                    notes.append(f"index unit of entry {e.index} does not match ({why}): DLedger truncates the "
                                 "index there and rewrites it from the data")
            if first_index is None:
                first_index = e.index
            last_index, last_term = e.index, e.term
            ends[e.index] = e.end
            process = e.end
            accepted += 1
        else:
            stop = ("file_end", "end of the file without a blank record", f.name, f.size)
        if not moved:
            break
    if stop[0] == "file_end" and i + 1 < len(files):
        notes.append(f"{files[i].name} ends without a blank record; DLedger's buffer reads past it and stops")
    # ledgerBeginIndex: the first entry of the first data file (reviseLedgerBeginIndex)
    begin = -1
    first = next(entry_events(files[0]), None)
    if first is not None and first.entry is not None:
        begin = first.entry.index
    committed_index, committed_pos = -1, -1
    if cp.present and cp.committed_index is not None and cp.committed_index != -1 and last_index != -1:
        ci = cp.committed_index
        if ci < begin:
            notes.append(f"checkpoint committedIndex {ci} < ledgerBeginIndex {begin}: not used")
        else:
            ci = min(ci, last_index)
            end = ends.get(ci)
            if end is None:
                u = log.index.unit(ci)
                end = u.pos + u.size if u is not None else None
            if end is None:
                notes.append(f"committedIndex {ci}: no entry position found")
            else:
                committed_index, committed_pos = ci, end
    elif not cp.present:
        notes.append("no DLedger checkpoint: committedIndex stays -1, so the max offset after load is the data's "
                     "min offset until the member is leader again")
    min_offset = files[0].start
    after_load = committed_pos if committed_pos > 0 else (min_offset if min_offset > 0 else 0)
    after_start = process if last_index != -1 else after_load
    return DLedgerRecovery(
        self_id=log.self_id, start_file=files[idx].name, start_reason=start_reason, ledger_begin_index=begin,
        ledger_end_index=last_index, ledger_end_term=last_term, data_end=process, stop_kind=stop[0],
        stop_reason=stop[1], stop_file=stop[2], stop_position=stop[3], index_rewritten_from=rewritten_from,
        checkpoint_present=cp.present, checkpoint_committed_index=cp.committed_index,
        committed_index=committed_index, committed_pos=committed_pos, max_offset_after_load=after_load,
        max_offset_after_start=after_start, entries_accepted=accepted, curr_term=ct.curr_term,
        vote_leader=ct.vote_leader, notes=notes)


__all__ = ["DLedgerRecovery", "dledger_recover"]
