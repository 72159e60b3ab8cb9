"""Replicas of one broker group side by side (``rmqinspect peers``): classic master/slave and controller mode.

Both HA modes copy the commit log byte for byte at the same physical offsets (``DefaultHAClient`` /
``AutoSwitchHAClient`` append each block at the master's offset), so copies are aligned by physical offset and the
overlap is compared byte by byte. Where the bytes first differ:

- controller mode: at or past the epochs' consistent point (``EpochFileCache.findConsistentPoint`` on both
  epoch files) the histories forked by election - expected; below it the epochs say the bytes are one history, so a
  difference there is corruption or a wrong pairing;
- classic mode: any difference below the lower end is corruption or a wrong pairing (the slave only ever appends
  the master's bytes).

Per direction the loss window is every message one copy holds past the common prefix (topic/queue/offset, keys,
UNIQ_KEY, offsetMsgId). Each replica's end is where the broker's recovery ends (the RecoveryPlan), its queues are
the plan's after start() cut at the confirm offset in controller mode (``recovery.controller``), and its
truncation on rejoin is ``AutoSwitchHAClient.doTruncate``'s (controller) or none (classic HA never truncates).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from ..errors import OffsetOutOfStoreError
from ..formats.epoch import EpochEntry, derive_end_offsets, find_consistent_point
from ..store import Store
from ..store.broker_conf import BrokerConf
from ..store.config_files import read_config_files
from ..store.epoch import EpochFile, HaIdentity, ha_identity, read_epoch_checkpoint
from ..store.walk.kinds import BLANK, MESSAGE
from ..store.walk.records import Record, RecordRun
from ..store.walk.resync import validate_at, walk_with_resync
from .recovery.controller import (
    LoadFailure,
    compensate_for_ha,
    effective_confirm_offset,
)
from .recovery.plan import RecoveryOptions, RecoveryPlan, plan_recovery

COMPARE_CHUNK = 1 << 20
LIST_LIMIT = 10_000  # messages listed per window (all are counted)


class Verdict(StrEnum):
    """How two copies' overlap compares (JSON ``verdict``)."""

    IDENTICAL = "identical"  # the overlap is byte-identical
    FORKED_BY_EPOCH = "forked_by_epoch"  # differs at/after the epochs' consistent point: an election forked them
    CORRUPT_OR_WRONG_PAIR = "corrupt_or_wrong_pair"  # differs below where both must agree
    NO_COMMON_RECORD = "no_common_record"  # not one record in common: not replicas of one group
    NO_OVERLAP = "no_overlap"


@dataclass
class MessageRow:
    physical_offset: int
    store_size: int
    topic: str
    queue_id: int
    queue_offset: int
    keys: str | None
    uniq_key: str | None
    offset_msg_id: str
    tags: str | None
    transaction: str
    in_consume_queue: bool  # as the broker holding it serves its queues (confirmed and dispatchable)
    epoch: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Window:
    holder: str
    from_offset: int
    to_offset: int
    messages: int = 0
    per_queue: dict[str, int] = field(default_factory=dict)
    in_consume_queue: int = 0
    rows: list[MessageRow] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return max(self.to_offset - self.from_offset, 0)

    def to_dict(self) -> dict:
        return {"holder": self.holder, "from_offset": self.from_offset, "to_offset": self.to_offset,
                "bytes": self.bytes, "messages": self.messages, "in_consume_queue": self.in_consume_queue,
                "per_queue": self.per_queue, "list": [r.to_dict() for r in self.rows]}


@dataclass
class Replica:
    label: str
    root: str
    identity: HaIdentity
    min_offset: int
    max_offset: int  # where the broker's recovery ends (RecoveryPlan truncate offset)
    messages: int
    recovery_mode: str
    recovery_start_file: str | None
    checkpoint_confirm: int | None
    confirm_offset: int  # what the broker treats as confirmed after recovery (classic: max)
    epochs: EpochFile
    unconfirmed: Window | None
    load_failure: LoadFailure | None
    stale_records: list[MessageRow]
    stale_range: tuple[int, int] | None
    queues: dict[str, tuple[int, int]]  # key -> (min, max) offsets as served after start
    consumer_offsets: list[dict] | None
    problems: list[str] = field(default_factory=list)
    epoch_ranges: list[EpochEntry] = field(default_factory=list)  # the epochs bounded by the end (initEntries)
    topics: list[str] | None = None  # config/topics.json (None: no config/ directory)
    subscription_groups: list[str] | None = None  # config/subscriptionGroup.json

    @property
    def last_epoch(self) -> int | None:
        return max((e.epoch for e in self.epochs.entries), default=None)

    def to_dict(self, with_lists: bool = True) -> dict:
        return {
            "label": self.label, "root": self.root, "ha": self.identity.to_dict(), "min_offset": self.min_offset,
            "max_offset": self.max_offset, "messages": self.messages, "recovery_mode": self.recovery_mode,
            "recovery_start_file": self.recovery_start_file, "checkpoint_confirm_phy_offset": self.checkpoint_confirm,
            "confirm_offset": self.confirm_offset, "last_epoch": self.last_epoch, "epochs": self.epochs.to_dict(),
            "epoch_ranges": [{"epoch": e.epoch, "start_offset": e.start_offset, "end_offset": e.end_offset}
                             for e in self.epoch_ranges],
            "unconfirmed": self.unconfirmed.to_dict() if self.unconfirmed else None,
            "will_start": self.load_failure is None,
            "load_failure": self.load_failure.to_dict() if self.load_failure else None,
            "stale_records": {"range": list(self.stale_range) if self.stale_range else None,
                              "count": len(self.stale_records),
                              "list": [r.to_dict() for r in self.stale_records] if with_lists else []},
            "consume_queues": {k: {"min_offset": a, "max_offset": b} for k, (a, b) in sorted(self.queues.items())},
            "problems": self.problems,
        }


@dataclass
class Pair:
    a: str
    b: str
    overlap: tuple[int, int] | None
    first_difference: int | None
    common_prefix_end: int
    common_prefix_messages: int
    consistent_point: int | None  # controller mode: findConsistentPoint(a's epochs, b's epochs)
    verdict: str
    sentence: str
    only_on_a: Window
    only_on_b: Window

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "overlap": list(self.overlap) if self.overlap else None,
                "first_difference": self.first_difference, "common_prefix_end": self.common_prefix_end,
                "common_prefix_messages": self.common_prefix_messages, "consistent_point": self.consistent_point,
                "verdict": self.verdict, "sentence": self.sentence, "only_on_a": self.only_on_a.to_dict(),
                "only_on_b": self.only_on_b.to_dict()}


class TruncationKind(StrEnum):
    """What a copy does when it rejoins the master (JSON ``kind`` of a truncation)."""

    NONE = "none"  # nothing to cut
    TRUNCATE = "truncate"  # doTruncate cuts [point, max)
    NOT_ALIGNED = "not_aligned"  # truncateFiles refuses: the point is not a record boundary
    NO_CONSISTENT_POINT = "no_consistent_point"  # no epoch agrees: doTruncate fails, never syncs
    NEW_REPLICA = "new_replica"  # no local epochs: no truncation, reports offset 0
    MASTER = "master"  # the replica the others rejoin
    CLASSIC_RESUME = "classic_resume"  # classic slave behind: resumes at its max
    CLASSIC_DIVERGED = "classic_diverged"  # classic slave holds bytes the master lacks: never cut


@dataclass
class Truncation:
    replica: str
    master: str
    kind: str
    point: int | None
    cut: Window | None
    receives: tuple[int, int] | None
    stale_after_resync: tuple[int, int] | None
    stale_records_after_resync: int
    sentence: str
    # the stale records a restart after the re-sync recovers as valid (#10666): the master's end falls on an old
    # record's start, so the recovery walks on through them
    resurrected_on_restart: int = 0

    def to_dict(self) -> dict:
        return {"replica": self.replica, "master": self.master, "kind": self.kind, "point": self.point,
                "cut": self.cut.to_dict() if self.cut else None,
                "receives": list(self.receives) if self.receives else None,
                "stale_after_resync": list(self.stale_after_resync) if self.stale_after_resync else None,
                "stale_records_after_resync": self.stale_records_after_resync,
                "resurrected_on_restart": self.resurrected_on_restart, "sentence": self.sentence}


@dataclass
class PeersReport:
    mode: str
    replicas: list[Replica]
    pairs: list[Pair]
    newest: str | None
    newest_why: str
    master: str | None
    master_why: str
    truncations: list[Truncation]
    consumer_offsets_beyond: list[dict]
    notes: list[str]
    metadata: dict = field(default_factory=dict)

    @property
    def problems(self) -> bool:
        return any(p.verdict in (Verdict.CORRUPT_OR_WRONG_PAIR, Verdict.NO_COMMON_RECORD) for p in self.pairs)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "replicas": [r.to_dict() for r in self.replicas],
                "pairs": [p.to_dict() for p in self.pairs], "newest_confirmed": {"replica": self.newest,
                                                                               "why": self.newest_why},
                "rejoin_master": {"replica": self.master, "why": self.master_why},
                "truncations": [t.to_dict() for t in self.truncations],
                "consumer_offsets_beyond_survivor": self.consumer_offsets_beyond, "metadata": self.metadata,
                "notes": self.notes}


# ---------------------------------------------------------------------------------------------------


def _epoch_of(entries: list[EpochEntry], offset: int) -> int | None:
    for e in entries:
        if e.start_offset <= offset < e.end_offset:
            return e.epoch
    return None


def _rows(store: Store, start: int, end: int, confirm: int, epochs: list[EpochEntry], window: Window,
          limit: int = LIST_LIMIT) -> None:
    """Decode the messages of [start, end) into ``window`` (all counted, the first ``limit`` listed)."""
    if end <= start:
        return
    for msg in store.commitlog.messages(start, end, keep_going=True):
        if msg.physical_offset + msg.total_size > end:
            break
        in_cq = msg.sys_flag & 0xC in (0, 8) and msg.physical_offset + msg.total_size <= confirm
        key = f"{msg.topic}/{msg.queue_id}"
        window.messages += 1
        window.per_queue[key] = window.per_queue.get(key, 0) + 1
        window.in_consume_queue += int(in_cq)
        if len(window.rows) < limit:
            window.rows.append(MessageRow(msg.physical_offset, msg.total_size, msg.topic, msg.queue_id,
                                          msg.queue_offset, msg.keys_string, msg.uniq_key, msg.offset_msg_id,
                                          msg.tags, msg.transaction_type.name, bool(in_cq),
                                          _epoch_of(epochs, msg.physical_offset)))


def _count_records(store: Store, start: int, end: int) -> tuple[int, int]:
    """(messages in [start, end), the last record boundary <= end reached by the walk)."""
    n, last = 0, start
    if end <= start:
        return 0, start
    for ev in store.commitlog.walk(start, end, check_crc=False):
        if isinstance(ev, RecordRun):
            r = ev.records
            ends = ev.base + r["position"] + r["total_size"]
            k = int(np.count_nonzero(ends <= end))
            n += k
            if k:
                last = int(ends[k - 1])
    return n, last


def _record_start_at_or_before(store: Store, start: int, offset: int) -> tuple[int, int]:
    """(start of the record holding ``offset``, messages fully before it), walking from ``start`` (a boundary):
    records are contiguous inside a file and a blank closes the file, so it is the last record end <= offset."""
    n, boundary = 0, start
    for ev in store.commitlog.walk(start, offset + 1, check_crc=False):
        if isinstance(ev, RecordRun):
            r = ev.records
            ends = ev.base + r["position"] + r["total_size"]
            full = np.flatnonzero(ends <= offset)
            n += int(full.size)
            if full.size:
                boundary = max(boundary, int(ends[full[-1]]))
        elif isinstance(ev, Record) and ev.kind == BLANK and ev.offset + ev.size <= offset:
            boundary = max(boundary, ev.offset + ev.size)
    return boundary, n


def first_difference(a: Store, b: Store, lo: int, hi: int) -> int | None:
    """The first physical offset in [lo, hi) where the two commit logs' bytes differ (None: identical), reading
    both through their maps in chunks (memory flat in the store size)."""
    pos = lo
    while pos < hi:
        try:
            fa, pa = a.commitlog.locate(pos)
            fb, pb = b.commitlog.locate(pos)
        except OffsetOutOfStoreError:
            return pos
        n = min(hi - pos, COMPARE_CHUNK, fa.size - pa, fb.size - pb)
        ba = fa.buffer[pa:pa + n]
        bb = fb.buffer[pb:pb + n]
        if ba != bb:
            x = np.frombuffer(ba, np.uint8)
            y = np.frombuffer(bb, np.uint8)
            m = min(len(x), len(y))
            d = np.flatnonzero(x[:m] != y[:m])
            return pos + (int(d[0]) if d.size else m)
        pos += n
    return None


def _config(store: Store):
    """The copy's config/*.json (analyses of metadata), or None when it has no config/ directory."""
    cdir = store.layout.config_dir
    if not os.path.isdir(cdir):
        return None
    return read_config_files(cdir)


def _config_offsets(cfg) -> list[dict] | None:
    """None when the copy has no usable consumerOffset.json (nor its .bak)."""
    if cfg is None or cfg.loads["consumerOffsets"].used is None:
        return None
    return cfg.consumer_offsets


def open_replica(store: Store, label: str, conf: BrokerConf | None = None, *, with_stale: bool = True,
                 plan: RecoveryPlan | None = None, count_messages: bool = True) -> Replica:
    """One replica as the broker would load it: its recovered end, confirm offset, epochs, queues as served,
    whether it loads at all, and the CRC-valid records past its end that it never serves. ``plan``: the store's
    RecoveryPlan when the caller has one (``recover --dry-run``); ``count_messages=False`` skips the walk that
    counts the messages up to the end (``messages`` is then -1)."""
    epochs = read_epoch_checkpoint(store.root)
    cp = store.checkpoint
    ident = ha_identity(store.root, dledger=store.layout.dledger is not None, epoch_file=epochs,
                        confirm_phy_offset=cp.confirm_phy_offset if cp else None, conf=conf)
    if plan is None:
        known = None
        if conf is not None and conf.get("enableControllerMode") is not None:
            known = (cp.confirm_phy_offset or 0) if conf.get("enableControllerMode") and cp else -1
        plan = plan_recovery(store, RecoveryOptions(with_salvage=False, keep_redispatch=False,
                                                    confirm_offset=known))
    end = plan.truncate_offset
    cl = store.commitlog
    lo = cl.min_offset
    controller = ident.mode == "controller"
    raw_confirm = cp.confirm_phy_offset if cp else None
    if controller and raw_confirm is None:
        raw_confirm = 0
    confirm = effective_confirm_offset(raw_confirm, lo, end) if controller else end
    assert confirm is not None
    entries = [EpochEntry(e.epoch, e.start_offset, e.end_offset) for e in epochs.entries]
    derive_end_offsets(entries, end)
    problems = list(epochs.problems)
    for e in entries:
        if e.start_offset > end:
            problems.append(f"{epochs.path}: epoch {e.epoch} starts at {e.start_offset}, past the end of the data "
                            f"({end}); the log never reached it")
        elif e.start_offset > lo and e.start_offset < end:
            try:
                f, pos = cl.locate(e.start_offset)
                if validate_at(f, pos, True, True) is None:
                    problems.append(f"{epochs.path}: epoch {e.epoch} starts at {e.start_offset}, which is not the "
                                    "start of a valid record (inside a record or damaged)")
            except OffsetOutOfStoreError:
                problems.append(f"{epochs.path}: epoch {e.epoch} starts at {e.start_offset}, where no commit-log "
                                "file is")
    messages = _count_records(store, lo, end)[0] if count_messages else -1
    cfg = _config(store)
    unconfirmed = None
    if controller and confirm < end:
        unconfirmed = Window(label, confirm, end)
        _rows(store, confirm, end, confirm, entries, unconfirmed)
    failure = None
    if controller or (conf is not None and conf.get("duplicationEnable")):
        _, failure = compensate_for_ha(store, confirm, end)
    stale: list[MessageRow] = []
    stale_range = None
    if with_stale:
        stale, stale_range = _stale_records(store, end, entries)
    queues = {}
    for key in plan.consume_queue_keys():
        ents = plan.consume_queue_entries(key)
        if ents is None:
            continue
        served = ents  # the plan cut them at the confirm offset (RecoveryOptions.confirm_offset)
        if served:
            queues[key] = (served[0][0], served[-1][0] + 1)
        elif ents:
            queues[key] = (ents[0][0], ents[0][0])
        else:
            mx = (plan.consume_queue_max_offsets_after_start or plan.consume_queue_max_offsets).get(key, 0)
            queues[key] = (mx, mx)
    return Replica(label, store.root, ident, lo, end, messages, plan.mode, plan.start_file, raw_confirm, confirm,
                   epochs, unconfirmed, failure, stale, stale_range, queues, _config_offsets(cfg), problems,
                   entries, None if cfg is None else sorted({t["topic"] for t in cfg.topics}),
                   None if cfg is None else sorted({g["group"] for g in cfg.subscription_groups}))


def _stale_records(store: Store, end: int, entries: list[EpochEntry]) -> tuple[list[MessageRow], tuple | None]:
    """CRC-valid records a byte scan finds past the recovered end (resynchronising on magic codes): bytes a
    truncation reset only in memory or a torn tail left; the broker never serves them."""
    from ..store.walk.records import decode_slot

    rows: list[MessageRow] = []
    last_end = None
    for ev in walk_with_resync(store, end, check_crc=True, accept_v2=True):
        if not isinstance(ev, Record) or ev.kind != MESSAGE or ev.offset < end or not ev.crc_ok:
            continue
        f = ev.file
        msg = decode_slot(f.buffer, f.start, ev.position, ev.header, ev.body_pos, True, f.path)
        rows.append(MessageRow(msg.physical_offset, msg.total_size, msg.topic, msg.queue_id, msg.queue_offset,
                               msg.keys_string, msg.uniq_key, msg.offset_msg_id, msg.tags,
                               msg.transaction_type.name, False, None))
        last_end = ev.offset + ev.size
        if len(rows) >= LIST_LIMIT:
            break
    return rows, ((end, last_end) if last_end is not None else None)


# ---------------------------------------------------------------------------------------------------


def _bounded(entries: list[EpochEntry], end: int) -> list[EpochEntry]:
    out = [EpochEntry(e.epoch, e.start_offset) for e in entries]
    derive_end_offsets(out, end)
    return out


def compare_pair(sa: Store, a: Replica, sb: Store, b: Replica, mode: str) -> Pair:
    lo = max(a.min_offset, b.min_offset)
    hi = min(a.max_offset, b.max_offset)
    cpoint = None
    if mode == "controller" and a.epochs.entries and b.epochs.entries:
        cpoint = find_consistent_point(_bounded(a.epochs.entries, a.max_offset),
                                       _bounded(b.epochs.entries, b.max_offset))
    if lo >= hi:
        common_end = hi if lo == hi else lo
        ona, onb = Window(a.label, max(a.min_offset, lo), a.max_offset), Window(b.label, max(b.min_offset, lo),
                                                                                  b.max_offset)
        sentence = (f"the copies do not overlap ({a.label} [{a.min_offset}, {a.max_offset}), {b.label} "
                    f"[{b.min_offset}, {b.max_offset})): nothing to compare")
        return Pair(a.label, b.label, None, None, common_end, 0, cpoint, Verdict.NO_OVERLAP, sentence, ona, onb)
    diff = first_difference(sa, sb, lo, hi)
    if diff is None:
        common_end = hi
        n, _ = _count_records(sa, lo, hi)
        verdict = Verdict.IDENTICAL
        sentence = f"[{lo}, {hi}) is byte-identical on both ({n} messages)"
    else:
        common_end, n = _record_start_at_or_before(sa, lo, diff)
        where = f"the bytes first differ at {diff} (record at {common_end})"
        if n == 0 and common_end == lo:
            verdict = Verdict.NO_COMMON_RECORD
            sentence = (f"{where}: not one record in common from {lo}; these are not copies of one broker group "
                        "(a wrong pairing), or one copy is damaged from its start")
        elif mode == "controller" and cpoint is not None and cpoint >= 0 and common_end >= cpoint:
            verdict = Verdict.FORKED_BY_EPOCH
            sentence = (f"{where}: at the epochs' consistent point {cpoint}, where an election forked the two "
                        "histories (expected after a failover)")
        elif mode == "controller" and cpoint is not None and cpoint >= 0:
            verdict = Verdict.CORRUPT_OR_WRONG_PAIR
            sentence = (f"{where}, below the epochs' consistent point {cpoint} where both must hold the same "
                        "bytes: corruption of one copy or a wrong pairing")
        elif mode == "controller" and cpoint is not None:
            verdict = Verdict.CORRUPT_OR_WRONG_PAIR
            sentence = (f"{where}; the epoch files share no epoch with the same start offset: different groups "
                        "or a wrong pairing")
        else:
            verdict = Verdict.CORRUPT_OR_WRONG_PAIR
            sentence = (f"{where}, below the lower end {hi}: a slave only ever appends the master's bytes, so this "
                        "is corruption of one copy or a wrong pairing")
    ona = Window(a.label, common_end, a.max_offset)
    onb = Window(b.label, common_end, b.max_offset)
    _rows(sa, common_end, a.max_offset, a.confirm_offset, _bounded(a.epochs.entries, a.max_offset), ona)
    _rows(sb, common_end, b.max_offset, b.confirm_offset, _bounded(b.epochs.entries, b.max_offset), onb)
    return Pair(a.label, b.label, (lo, hi), diff, common_end, n, cpoint, verdict, sentence, ona, onb)


def _newest(replicas: list[Replica], mode: str, pairs: list[Pair]) -> tuple[str | None, str]:
    if not replicas:
        return None, ""
    if mode == "controller":
        best = max(replicas, key=lambda r: (r.last_epoch if r.last_epoch is not None else -1, r.confirm_offset))
        return best.label, (f"highest last epoch ({best.last_epoch}), then highest confirm offset "
                            f"({best.confirm_offset}); only confirmed data (acknowledged by the sync state set) "
                            "counts")
    best = max(replicas, key=lambda r: r.max_offset)
    diverged = [p for p in pairs if p.verdict not in (Verdict.IDENTICAL, Verdict.NO_OVERLAP)]
    if diverged:
        return None, ("ambiguous: the copies differ below their ends, so no copy's log contains the others' "
                      "(see the pairs)")
    return best.label, (f"highest recovered end ({best.max_offset}) and the others are byte prefixes of it "
                        "(classic HA: every byte a master wrote counts; there is no confirm offset)")


def _truncation(sr: Store, r: Replica, sm: Store, m: Replica, mode: str, pair: Pair | None) -> Truncation:
    receives = (max(r.max_offset, 0), m.max_offset)
    if mode != "controller":
        common = pair.common_prefix_end if pair else min(r.max_offset, m.max_offset)
        if r.max_offset <= common:
            return Truncation(r.label, m.label, TruncationKind.CLASSIC_RESUME, None, None,
                              (r.max_offset, m.max_offset) if m.max_offset > r.max_offset else None, None, 0,
                              f"classic HA never truncates: {r.label} reports {r.max_offset} and {m.label} sends "
                              f"from there ({max(m.max_offset - r.max_offset, 0)} bytes to receive)")
        cut = Window(r.label, common, r.max_offset)
        _rows(sr, common, r.max_offset, r.confirm_offset, [], cut)
        return Truncation(r.label, m.label, TruncationKind.CLASSIC_DIVERGED, None, cut, None, None, 0,
                          f"classic HA never truncates: {r.label} keeps [{common}, {r.max_offset}) ({cut.messages} "
                          f"messages {m.label} does not have); {m.label} sends nothing until its own log passes "
                          f"{r.max_offset}, then appends from there, so {r.label}'s log becomes a mix of both "
                          "histories (DefaultHAClient checks only that the block offset equals its max)")
    if not r.epochs.entries:
        return Truncation(r.label, m.label, TruncationKind.NEW_REPLICA, None, None, (0, m.max_offset), None, 0,
                          f"{r.label} has no epochs: doTruncate treats it as a new replica, truncates nothing and "
                          f"reports offset 0; its existing log [{r.min_offset}, {r.max_offset}) is not cut")
    local = _bounded(r.epochs.entries, r.max_offset)
    master = _bounded(m.epochs.entries, m.max_offset)
    point = find_consistent_point(local, master)
    if point < 0:
        return Truncation(r.label, m.label, TruncationKind.NO_CONSISTENT_POINT, None, None, None, None, 0,
                          f"no epoch of {r.label} has the same start offset on {m.label}: doTruncate fails "
                          "(\"Failed to find a consistent point\"), the HA client closes and retries forever")
    if point >= r.max_offset:
        rec = (r.max_offset, m.max_offset) if m.max_offset > r.max_offset else None
        return Truncation(r.label, m.label, TruncationKind.NONE, point, None, rec, None, 0,
                          f"consistent point {point} is at or past {r.label}'s end {r.max_offset}: nothing to "
                          f"truncate; it receives [{r.max_offset}, {m.max_offset})" if rec else
                          f"consistent point {point} is at or past {r.label}'s end {r.max_offset}: nothing to cut")
    try:
        f, pos = sr.commitlog.locate(point)
        aligned = validate_at(f, pos, True, True) is not None
    except OffsetOutOfStoreError:
        aligned = True  # getCommitLogData returns null: isOffsetAligned says true
    if not aligned:
        return Truncation(r.label, m.label, TruncationKind.NOT_ALIGNED, point, None, None, None, 0,
                          f"the consistent point {point} is not the start of a valid record on {r.label}: "
                          "truncateFiles refuses (isOffsetAligned checks the record with its CRC: \"need manual "
                          "fix\") and the replica never syncs")
    cut = Window(r.label, point, r.max_offset)
    _rows(sr, point, r.max_offset, r.confirm_offset, local, cut)
    receives = (point, m.max_offset)
    stale = None
    n_stale = 0
    if r.max_offset > m.max_offset:
        stale = (m.max_offset, r.max_offset)
        n_stale = sum(1 for row in cut.rows if row.physical_offset >= m.max_offset)
    sentence = (f"{r.label} truncates at {point} (findConsistentPoint: epoch "
                f"{_epoch_of(local, point - 1) if point > 0 else _epoch_of(local, 0)} agrees, min of the two end "
                f"offsets), cutting [{point}, {r.max_offset}) = {cut.messages} messages, then receives "
                f"[{point}, {m.max_offset}) from {m.label}")
    resurrected = 0
    if stale:
        sentence += (f"; truncateFiles only resets positions, so [{stale[0]}, {stale[1]}) keeps {r.label}'s old "
                     f"bytes on disk ({n_stale} whole CRC-valid records of the abandoned history, apache/rocketmq"
                     "#10666)")
        if n_stale and any(row.physical_offset == m.max_offset for row in cut.rows):
            resurrected = n_stale
            sentence += (f". {m.max_offset} is where one of them starts: a restart of {r.label} before new data "
                         f"overwrites them recovers all {n_stale} as valid (the walk goes on from the re-synced end "
                         f"into the old records, up to {r.max_offset}), old-epoch messages served under the new "
                         "epoch")
        elif n_stale:
            sentence += (f". A restart stops at {m.max_offset} (an old record straddles it): the broker never "
                         "serves them, a byte scan finds them")
    return Truncation(r.label, m.label, TruncationKind.TRUNCATE, point, cut, receives, stale, n_stale, sentence,
                      resurrected)


def _offsets_beyond(replicas: list[Replica], survivor: Replica) -> list[dict]:
    out = []
    for r in replicas:
        for row in r.consumer_offsets or ():
            key = f"{row['topic']}/{row['queue_id']}"
            q = survivor.queues.get(key)
            mx = q[1] if q else 0
            if row["offset"] > mx:
                out.append({"copy": r.label, "group": row["group"], "topic": row["topic"], "queue_id": row["queue_id"],
                            "offset": row["offset"], "survivor": survivor.label, "survivor_max_offset": mx,
                            "beyond": row["offset"] - mx,
                            "sentence": (f"{row['group']} committed {row['offset']} on {key} in {r.label}'s "
                                         f"consumerOffset.json, past {survivor.label}'s queue end {mx}: the broker "
                                         "does not cut consumer offsets with the log (apache/rocketmq#4771); the "
                                         f"group skips the next {row['offset'] - mx} messages written there")})
    return out


def compare_replicas(stores: list[Store], labels: list[str] | None = None, confs: list[BrokerConf | None] | None = None,
                     master: str | None = None) -> PeersReport:
    labels = labels or [s.root for s in stores]
    confs = confs or [None] * len(stores)
    replicas = [open_replica(s, lb, c) for s, lb, c in zip(stores, labels, confs, strict=True)]
    notes: list[str] = []
    modes = {r.identity.mode for r in replicas}
    if len(modes) > 1:
        notes.append("the copies show different HA modes (" + ", ".join(f"{r.label}: {r.identity.mode}"
                                                                        for r in replicas)
                     + "); compared as controller mode where any copy has epochs")
    mode = "controller" if "controller" in modes else ("dledger" if modes == {"dledger"} else "classic")
    sizes = {r.label: s.commitlog.file_size for r, s in zip(replicas, stores)}
    if len(set(sizes.values())) > 1:
        notes.append("the copies use different commit-log file sizes (" + ", ".join(f"{k}: {v}" for k, v in
                                                                                   sizes.items())
                     + "): replicas of one group share mappedFileSizeCommitLog; a wrong pairing?")
    pairs = []
    by_pair = {}
    for i in range(len(replicas)):
        for j in range(i + 1, len(replicas)):
            p = compare_pair(stores[i], replicas[i], stores[j], replicas[j], mode)
            pairs.append(p)
            by_pair[(i, j)] = p
    newest, newest_why = _newest(replicas, mode, pairs)
    if master is not None:
        if master not in labels:
            raise ValueError(f"--master {master!r} is not one of the stores given")
        m_label, m_why = master, "given with --master"
    else:
        m_label, m_why = newest, (
            "the replica with the newest confirmed data (the controller elects from the sync state set, which the "
            "stores do not record; --master names another)" if mode == "controller" else
            "the replica with the newest data (a classic slave follows the brokerId 0 broker of its group, which "
            "broker.conf names: --conf; --master names another)")
    truncations = []
    survivor = None
    if m_label is not None:
        mi = labels.index(m_label)
        survivor = replicas[mi]
        for i, r in enumerate(replicas):
            if i == mi:
                truncations.append(Truncation(r.label, r.label, TruncationKind.MASTER, None, None, None, None, 0,
                                              _master_sentence(r, mode)))
                continue
            pair = by_pair.get((min(i, mi), max(i, mi)))
            truncations.append(_truncation(stores[i], r, stores[mi], survivor, mode, pair))
    beyond = _offsets_beyond(replicas, survivor) if survivor is not None else []
    if all(r.consumer_offsets is None for r in replicas):
        notes.append("no copy has config/consumerOffset.json: consumer offsets not compared")
    return PeersReport(mode, replicas, pairs, newest, newest_why, m_label, m_why, truncations, beyond, notes,
                       _metadata(replicas))


def _metadata(replicas: list[Replica]) -> dict:
    """config/*.json across the copies: a slave's is a periodic copy of its master's (SlaveSynchronize), so topics,
    groups and offsets that differ are replication lag (or a copy of another group)."""
    have = [r for r in replicas if r.topics is not None]
    out: dict = {"copies_with_config": [r.label for r in have]}
    if len(have) < 2:
        return out
    for key, attr in (("topics_only_in", "topics"), ("subscription_groups_only_in", "subscription_groups")):
        sets = {r.label: set(getattr(r, attr) or ()) for r in have}
        common = set.intersection(*sets.values())
        out[key] = {lb: sorted(s - common) for lb, s in sets.items() if s - common}
    offs: dict[tuple, dict[str, int]] = {}
    for r in have:
        for row in r.consumer_offsets or ():
            offs.setdefault((row["group"], row["topic"], row["queue_id"]), {})[r.label] = row["offset"]
    out["consumer_offset_differences"] = [
        {"group": g, "topic": t, "queue_id": q, "offsets": v} for (g, t, q), v in sorted(offs.items())
        if len(set(v.values())) > 1 or len(v) < len(have)]
    return out


def _master_sentence(r: Replica, mode: str) -> str:
    if mode != "controller":
        return f"{r.label} is the master the others follow; it keeps its log to {r.max_offset}"
    s = f"{r.label} is the master the others rejoin; it keeps its log to {r.max_offset}"
    if r.confirm_offset < r.max_offset:
        s += (f". Its unconfirmed tail [{r.confirm_offset}, {r.max_offset}) is kept by changeToMaster "
              "(truncateInvalidMsg re-checks from the reput offset without CRC and cuts only at an invalid record); "
              "the new epoch starts after it")
    return s


__all__ = ["Pair", "PeersReport", "Replica", "Truncation", "TruncationKind", "Verdict", "Window",
           "compare_pair", "compare_replicas", "first_difference", "open_replica"]
