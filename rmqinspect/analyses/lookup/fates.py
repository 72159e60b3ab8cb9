"""What a restart does to a look-up's answers: the recovery as the index look-up sees it (``RecoveryView``), the
fate of every hit and offset (survives, redispatched, reindexed, cut), and the query as the broker answers it
after the restart (``query_as_recovered``); the restart itself is decided by ``analyses.recovery.plan``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import RmqInspectError
from ...formats.javahash import build_index_key, index_key_hash
from .query import (
    DEFAULT_MAX_MSGS_NUM_BATCH,
    JAVA_LONG_MAX,
    Hit,
    IndexService,
    QueryMessageResult,
    message_has_key,
    query_message,
)

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class RecoveryView:
    """What a query needs of the restart model (``RecoveryPlan``): the truncation offset, the range the recovery
    dispatches again, every range the restart dispatches and the surviving index's endPhyOffset (what
    IndexService.buildIndex indexes again: ``recovery.index``)."""

    truncate_offset: int
    redispatch_first: int | None
    redispatch_last: int | None
    dispatched: tuple[tuple[int, int], ...] = ()
    index_end_phy_offset: int = 0
    index_begin_timestamp: int = 0

    def reindex_ranges(self) -> list[tuple[int, int]]:
        from ..recovery.index import reindex_ranges

        return reindex_ranges(list(self.dispatched), self.index_end_phy_offset)

    def reindexes(self, offset: int) -> bool:
        return any(a <= offset < b for a, b in self.reindex_ranges())


_VIEWS: dict[tuple, RecoveryView] = {}  # per process: a key look-up loop pays for the recovery scan once
_VIEWS_MAX = 16


def _store_identity(store) -> tuple:
    """What the recovery's answer depends on, cheaply: every commit-log file's name, size and mtime, the abort
    file and the checkpoint (a store that changes between two look-ups is scanned again)."""
    def stamp(path: str):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    root = store.root
    files = tuple((f.name, f.size, stamp(f.path)) for f in store.commitlog.files)
    return (os.path.realpath(root), files, store.abort_present, stamp(os.path.join(root, "checkpoint")))


def recovery_view(store, cache: bool = True, version=None) -> RecoveryView:
    """Where the broker's recovery of this directory truncates the commit log (analyses.recovery, with the
    broker.conf in effect for checkCRCOnRecover / messageIndexSafe): records at or past it are gone after a
    restart, whatever the index files on disk still say. ``version`` (a BrokerVersion): the release whose
    recovery rules apply (None: detected, ``recovery.version``).

    Only the truncation offset and the re-dispatch range are computed (the scan's records are not dispatched
    into queue models: neither depends on them), and the answer is kept per process for an unchanged store."""
    from ..recovery.scan import conf_recovery_switches
    from ..recovery.small import small_recovery_scan

    check_crc, index_safe = conf_recovery_switches(store.conf)
    key = (_store_identity(store), check_crc, index_safe, version) if cache else None
    if key is not None and key in _VIEWS:
        return _VIEWS[key]
    scan = small_recovery_scan(store, check_crc, index_safe, version)
    view = _small_view(store, scan, version) if scan is not None else None
    if view is None:
        from ..recovery.plan import RecoveryOptions, plan_recovery

        plan = plan_recovery(store, RecoveryOptions(check_crc=check_crc, index_safe=index_safe, with_salvage=False,
                                                    keep_redispatch=False, model_start=False, dispatch=False,
                                                    version=version))
        # DLedger mode: truncate_offset is the data end (a leader commits everything again, recovery.dledger)
        view = view_of_plan(plan)
    if key is not None:
        if len(_VIEWS) >= _VIEWS_MAX:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[key] = view
    return view


def view_of_plan(plan) -> RecoveryView:
    """The look-up's view of a ``RecoveryPlan`` (the one restart model)."""
    return RecoveryView(plan.truncate_offset, plan.redispatch_first, plan.redispatch_last,
                        tuple(plan.dispatched), plan.index_end_phy_offset, plan.index_begin_timestamp)


def _small_view(store, scan, version=None) -> RecoveryView | None:
    """The view from ``recovery.small``'s scan: what the restart dispatches is the scan's re-dispatch and start()'s
    reput from the queues' max physical offset (at least the commit log's min offset, at most T: queues past T are
    cut back to it); None when the queues are too large to read here (the plan answers)."""
    from ..recovery.index import dispatched_ranges, index_after_load
    from ..recovery.small import small_queue_max_phys

    t = scan.truncate_offset
    normal = not store.abort_present
    if normal:
        max_phy = small_queue_max_phys(store, version)
        if max_phy is None:
            return None
        reput_from = min(max(store.commitlog.min_offset, max_phy, scan.last_dispatched_end), t)
    else:
        reput_from = max(store.commitlog.min_offset, scan.last_dispatched_end)
    try:
        cp = store.checkpoint
    except RmqInspectError:
        cp = None
    ia = index_after_load(store.layout.index_dir, normal, cp.index_msg_timestamp if cp else None)
    return RecoveryView(t, scan.redispatch_first, scan.redispatch_last,
                        tuple(dispatched_ranges(scan.redispatch_first, scan.redispatch_last, reput_from, t)),
                        ia.end_phy_offset, ia.begin_timestamp)


def mark_fates(result: QueryMessageResult, view: RecoveryView | None) -> None:
    """Each hit's fate after restart (``Hit.fate``)."""
    if view is None:
        return
    for h in result.hits:
        h.beyond_truncation = h.physical_offset >= view.truncate_offset
        h.redispatched = view.reindexes(h.physical_offset)


FATES_AFTER_RESTART = ("survives", "redispatched", "reindexed")


def reindexed_hits(commitlog, view: RecoveryView, topic: str, key: str, begin: int = 0,
                   end: int = JAVA_LONG_MAX) -> list[Hit]:
    """The index items the restart's IndexService.buildIndex puts whose keyHash is the query's (the broker
    compares hashes only: collisions included), one per item, in put order. An item's time is read back in
    whole seconds after its file's beginTimestamp (``recovery.index.item_time``); the model assumes the last
    index file does not fill up while the restart indexes (a new file would start its own clock).

    The records are walked in bulk (``CommitLog.walk`` runs, every record's key hashes from the rebuild
    dispatcher's ``dispatch_fields``); only the matching ones are decoded."""
    import numpy as np

    from ...store.walk.records import RecordRun
    from ..dispatcher import dispatch_fields
    from ..recovery.index import item_time

    key_hash = index_key_hash(build_index_key(topic, key))
    out: list[Hit] = []
    base = view.index_begin_timestamp
    for a, b in view.reindex_ranges():
        for ev in commitlog.walk(a, view.truncate_offset, check_crc=False, accept_v2=True, stop_at_end=True):
            if type(ev) is not RecordRun:
                continue
            recs = ev.records
            start = ev.file.start
            pos = recs["position"] + start
            if int(pos[0]) >= b:
                break
            # buildIndex: every dispatched record but ROLLBACK ones (TRANSACTION_ROLLBACK_TYPE = 3 << 2)
            sel = np.flatnonzero((pos < b) & ((recs["sys_flag"] & 0xC) != 0xC))
            if not sel.size:
                continue
            sub = ev if sel.size == len(recs) else ev[sel]
            fields, keyh, _ = dispatch_fields(sub.file.buffer, sub.rows, want_keys=True)
            counts = fields[:, 2]
            if base <= 0:
                have = np.flatnonzero(counts > 0)
                if have.size:  # the first put of an empty file sets its beginTimestamp
                    base = int(sub.records["store_timestamp"][have[0]])
            items = np.flatnonzero(keyh == key_hash)
            if not items.size:
                continue
            rec_of = np.repeat(np.arange(len(counts)), counts)[items]
            for j in rec_of.tolist():
                off = int(sub.records["position"][j]) + start
                time_read, _ = item_time(base, int(sub.records["store_timestamp"][j]))
                if not (begin <= time_read <= end):
                    continue
                msg = commitlog.read_message(off)
                h = Hit(off, "(restart)", message_has_key(msg, topic, key), msg.topic, msg.keys, msg.uniq_key,
                        msg.store_timestamp, message=msg, beyond_truncation=False)
                h.reindexed = True
                out.append(h)
    return out


def restore_as_recovered(result: QueryMessageResult, commitlog=None, view: RecoveryView | None = None) -> None:
    """Keep only what the broker returns after recovering the directory (``mark_fates`` first): hits of the kept
    index files before the truncation, and, with ``commitlog`` and ``view``, the items the restart indexes again
    (``reindexed_hits``; a hit of a deleted index file the restart re-indexes comes back as its item). The
    newest ``max_num`` items are kept, in ascending offset order as queryMessage sorts them."""
    gone = {h.physical_offset for h in result.hits if h.fate not in FATES_AFTER_RESTART}
    again: list[Hit] = []
    if commitlog is not None and view is not None:
        again = reindexed_hits(commitlog, view, result.topic, result.key, result.begin, result.end)
        back = {h.physical_offset for h in result.hits if h.fate == "redispatched"}
        for h in again:
            if h.physical_offset in back:
                h.reindexed = False
                h.from_dropped_file = True
                h.redispatched = True
        gone |= back
    dropped = [h for h in result.hits if h.physical_offset in gone]
    kept = [h for h in result.hits if h.physical_offset not in gone]
    if again:
        newest_first = sorted(again, key=lambda h: -h.physical_offset) + sorted(kept, key=lambda h: -h.physical_offset)
        kept = sorted(newest_first[:result.max_num], key=lambda h: h.physical_offset)
    result.hits = kept
    result.phy_offsets = [h.physical_offset for h in kept]
    lost = len({h.physical_offset for h in dropped} - {h.physical_offset for h in again})
    if lost:
        result.notes.append(f"as recovered: {lost} hit(s) dropped (beyond the truncation offset or from a "
                            "deleted index file and not re-dispatched)")
    added = sum(1 for h in kept if h.reindexed)
    if added:
        result.notes.append(f"as recovered: {added} hit(s) the restart indexes (records past the surviving index's "
                            f"endPhyOffset {view.index_end_phy_offset} that the restart dispatches)"  # type: ignore[union-attr]
                            )


def query_as_recovered(svc: IndexService, store, view: RecoveryView, topic: str, key: str, max_num: int,
                       begin: int = 0, end: int = JAVA_LONG_MAX,
                       max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH) -> QueryMessageResult:
    """DefaultMessageStore.queryMessage of the broker once it has recovered this directory."""
    q = query_message(svc, store.commitlog, topic, key, max_num, begin, end, max_msgs_num_batch)
    mark_fates(q, view)
    restore_as_recovered(q, store.commitlog, view)
    return q


def offset_fate(offset: int, view: RecoveryView | None) -> str | None:
    """The fate after restart of the record at ``offset`` read directly (an offsetMsgId, a located record): only
    the truncation matters, the index plays no part."""
    if view is None:
        return None
    return "beyond_truncation" if offset >= view.truncate_offset else "survives"


def beyond_truncation_text(offset: int, view: RecoveryView) -> str:
    return (f"offset {offset} is at or past {view.truncate_offset}, where the broker's recovery of this directory "
            "truncates the commit log: the broker no longer has this record once it restarts")
