"""The index after a restart: IndexService.load(lastExitOK), then IndexService.buildIndex for every record the
restart dispatches (4.9.8 and 5.3.3 alike).

- ``load``: after an abnormal exit, index files whose endTimestamp is newer than the checkpoint's
  indexMsgTimestamp are destroyed; the others are kept, in name order.
- ``buildIndex``: ``retryGetAndCreateIndexFile`` gives the last kept file (or a new one starting at the full
  file's endPhyOffset, 0 when there is no file); a record whose commitLogOffset is below that file's endPhyOffset
  is skipped, every other one (ROLLBACK records aside) gets its UNIQ_KEY and KEYS tokens put. endPhyOffset is the
  offset of the last record indexed, so the record exactly at it is indexed a second time, and the records the
  restart dispatches past it (the recovery's re-dispatch, then start()'s ReputMessageService) are the ones a key
  look-up finds again.

No numpy here: a key look-up (``analyses.lookup.recovery_view``) asks this module for the same answer as
``plan.plan_recovery``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...formats.indexfile import INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_HEADER_TABLE

_END_TS = INDEX_HEADER_TABLE.index("end_timestamp")
_END_PHY = INDEX_HEADER_TABLE.index("end_phy_offset")
_BEGIN_TS = INDEX_HEADER_TABLE.index("begin_timestamp")
_COUNT = INDEX_HEADER_TABLE.index("index_count")


@dataclass
class IndexAfterLoad:
    """IndexService.load's answer: the files dropped and kept, and the endPhyOffset buildIndex compares with."""

    dropped: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    end_phy_offset: int = 0  # of the last kept file; 0 when none is kept (a new file starts at 0)
    # beginTimestamp of the file buildIndex puts into (the last kept one); 0 when it has no item yet (its first
    # put sets it): an item's time is read back as beginTimestamp + whole seconds after it
    begin_timestamp: int = 0
    notes: list[str] = field(default_factory=list)


def index_after_load(index_dir: str, normal: bool, index_msg_timestamp: int | None) -> IndexAfterLoad:
    """``IndexService.load(lastExitOK=normal)`` over ``index_dir`` (``index_msg_timestamp``: the checkpoint's;
    None when there is no checkpoint, and then nothing is dropped)."""
    out = IndexAfterLoad()
    if not os.path.isdir(index_dir):
        return out
    heads: dict[str, bytes] = {}
    for name in sorted(os.listdir(index_dir)):
        p = os.path.join(index_dir, name)
        if not os.path.isfile(p):
            continue
        with open(p, "rb") as fh:
            head = fh.read(INDEX_HEADER_SIZE)
        if len(head) < INDEX_HEADER_SIZE:
            out.kept.append(name)
            out.notes.append(f"index/{name} is shorter than its header")
            continue
        heads[name] = head
        if normal or index_msg_timestamp is None:
            out.kept.append(name)
            continue
        end_ts = INDEX_HEADER.unpack_from(head, 0)[_END_TS]
        (out.dropped if end_ts > index_msg_timestamp else out.kept).append(name)
    if out.kept and out.kept[-1] in heads:
        h = INDEX_HEADER.unpack_from(heads[out.kept[-1]], 0)
        out.end_phy_offset = int(h[_END_PHY])
        out.begin_timestamp = int(h[_BEGIN_TS]) if h[_COUNT] > 1 else 0
    return out


def item_time(begin_timestamp: int, store_timestamp: int) -> tuple[int, int]:
    """IndexFile.putKey then selectPhyOffset: (the time the item is read back with, the file's beginTimestamp
    after the put). The first put of a file sets its beginTimestamp (timeDiff 0); later ones store whole seconds
    after it (clamped at 0)."""
    if begin_timestamp <= 0:
        return store_timestamp, store_timestamp
    diff = max(int((store_timestamp - begin_timestamp) / 1000), 0)  # Java long division truncates
    return begin_timestamp + min(diff, (1 << 31) - 1) * 1000, begin_timestamp


def reindex_ranges(dispatched: list[tuple[int, int]], end_phy_offset: int) -> list[tuple[int, int]]:
    """[from, to) of record start offsets buildIndex indexes: the dispatched ranges, from ``end_phy_offset`` on."""
    out = []
    for a, b in dispatched:
        a = max(a, end_phy_offset)
        if a < b:
            out.append((a, b))
    return out


def dispatched_ranges(redispatch_first: int | None, redispatch_last: int | None, reput_from: int | None,
                      reput_to: int | None) -> list[tuple[int, int]]:
    """[from, to) of the record start offsets a restart dispatches: the recovery's re-dispatch (every record it
    walked from ``redispatch_first`` to ``redispatch_last``) and start()'s ReputMessageService [reput_from,
    reput_to)."""
    out = []
    if redispatch_first is not None and redispatch_last is not None:
        out.append((redispatch_first, redispatch_last + 1))
    if reput_from is not None and reput_to is not None and reput_from < reput_to:
        out.append((reput_from, reput_to))
    out.sort()
    merged: list[tuple[int, int]] = []
    for a, b in out:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


__all__ = ["IndexAfterLoad", "dispatched_ranges", "index_after_load", "item_time", "reindex_ranges"]
