"""The CombineConsumeQueueStore (5.3.4+, ``rocksdbCQDoubleWriteEnable=true``) as recovery sees it: a file
consume queue and a RocksDB consume queue side by side, both fed by every dispatch (VERSIONS.md §1.3).

What the broker does with the pair (code @8fc57f1 ``CombineConsumeQueueStore``), and what is modelled here:

* ``combineCQPreferCQType`` names the store the broker serves reads from, ``combineAssignOffsetCQType`` the one
  that assigns queue offsets; both default to the file queue (``default``);
* ``getDispatchFromPhyOffset`` is the minimum over the inner stores: normal recovery re-dispatches every record
  past the smaller one;
* the start-file walk must satisfy the assign-offset store; a file that satisfies it but not another store costs
  one of ``combineCQMaxExtraSearchCommitLogFiles`` (default 3) extra files; once they are spent the file is taken
  anyway ("can not recover all inner store") - or the broker throws when the assign-offset store is not the read
  store;
* ``truncateDirty`` runs on every inner store;
* at ``start()``, ``verifyAndInitOffsetForAllStore`` compares each queue of the assign-offset store with the other
  store and initialises an other-store queue that lags (``initializeWithOffset``: min = max = the assign store's
  max offset).

The recovery's file-queue models stay the plan's ``queues`` (the assign-offset side in the default settings);
this module keeps the RocksDB side's models. ``compare_sides`` is the offline ``checkRocksdbCqWriteProgress``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...store import Store
from ...store.broker_conf import BrokerConf, configured
from ...store.version import BrokerVersion
from .queueset import QueueSet
from .rocksdb import (
    RocksDBQueueModel,
    RocksDBQueues,
    read_rocksdb_queues,
    rocksdb_cq_dir,
    truncate_rocksdb_queues,
)

FILE_CQ = "default"  # StoreType.DEFAULT
ROCKSDB_CQ = "defaultRocksDB"  # StoreType.DEFAULT_ROCKSDB
CQ_TYPES = (FILE_CQ, ROCKSDB_CQ)


@dataclass(frozen=True)
class CombineSettings:
    """The MessageStoreConfig keys of the combine store (defaults of 8fc57f1), from broker.conf when given."""

    prefer: str = FILE_CQ  # combineCQPreferCQType: the store reads are served from
    assign: str = FILE_CQ  # combineAssignOffsetCQType: the store that assigns queue offsets
    max_extra_files: int = 3  # combineCQMaxExtraSearchCommitLogFiles
    sources: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, conf: BrokerConf | None) -> CombineSettings:
        vals, src = {}, []
        for key, attr in (("combineCQPreferCQType", "prefer"), ("combineAssignOffsetCQType", "assign"),
                          ("combineCQMaxExtraSearchCommitLogFiles", "max_extra_files")):
            s = configured(conf, key)
            if s is not None:
                vals[attr] = s.value
                src.append(f"{key}={s.value} ({s.source})")
        for attr in ("prefer", "assign"):
            # StoreType.getStoreType matches case-insensitively; anything else the broker refuses at start
            v = str(vals.get(attr, FILE_CQ))
            vals[attr] = next((t for t in CQ_TYPES if t.lower() == v.lower()), v)
        return cls(vals.get("prefer", FILE_CQ), vals.get("assign", FILE_CQ),
                   int(vals.get("max_extra_files", 3)), tuple(src))

    def to_dict(self) -> dict:
        return {"combineCQPreferCQType": self.prefer, "combineAssignOffsetCQType": self.assign,
                "combineCQMaxExtraSearchCommitLogFiles": self.max_extra_files, "from_config": list(self.sources)}


@dataclass
class CombineSide:
    """The RocksDB inner store of a CombineConsumeQueueStore while recovery runs."""

    settings: CombineSettings
    table: RocksDBQueues | None
    dispatch_from: int  # RocksDBConsumeQueueStore.getDispatchFromPhyOffset (0 when the table has no checkpoint)
    queues: QueueSet = field(default_factory=QueueSet)
    extra_left: int = 3  # what is left of combineCQMaxExtraSearchCommitLogFiles
    budget_spent_at: str | None = None  # the file taken once the extra files were spent
    initialized: list[dict] = field(default_factory=list)  # verifyAndInitOffsetForAllStore's initialisations
    notes: list[str] = field(default_factory=list)
    bounds: dict[str, tuple[int, int]] = field(default_factory=dict)  # (min, max) per queue after start()
    progress: list[dict] = field(default_factory=list)  # check_write_progress's mismatches after start()
    checked: int = 0  # queues compared

    def queue(self, topic: str, queue_id: int) -> RocksDBQueueModel:
        """findOrCreateConsumeQueue on the RocksDB side."""
        m = self.queues.find(topic, queue_id)
        return m if m is not None else self.queues.add(RocksDBQueueModel(topic, queue_id))

    @property
    def assign_is_file(self) -> bool:
        return self.settings.assign == FILE_CQ

    @property
    def served_is_file(self) -> bool:
        return self.settings.prefer == FILE_CQ


def combine_in_effect(store: Store, options) -> bool:
    """Whether the store runs a CombineConsumeQueueStore: ``RecoveryOptions.combine`` when given, else broker.conf
    (``rocksdbCQDoubleWriteEnable``; ``storeType=defaultRocksDB`` selects the pure RocksDB store instead), else
    the layout: file queues and a RocksDB database together in consumequeue/."""
    if options.combine is not None:
        return bool(options.combine)
    st = configured(store.conf, "storeType")
    if st is not None and str(st.value).lower() == ROCKSDB_CQ.lower():
        return False
    s = configured(store.conf, "rocksdbCQDoubleWriteEnable")
    if s is not None:
        return bool(s.value)
    from ...store.consumequeue import list_queues

    return bool(list_queues(store.layout.consumequeue_dir))


def accelerated_in_effect(store: Store, version: BrokerVersion, rocksdb: bool, options, notes: list[str]) -> bool:
    """enableAcceleratedRecovery (5.3.4+): ``RecoveryOptions.accelerated`` or broker.conf; effective only with
    storeType=defaultRocksDB (the pure RocksDB consume queue)."""
    on = options.accelerated
    if on is None:
        s = configured(store.conf, "enableAcceleratedRecovery")
        on = bool(s.value) if s is not None else False
    if not on:
        return False
    if not version.has_combine_store:
        notes.append(f"enableAcceleratedRecovery does not exist in RocketMQ {version.text}: ignored")
        return False
    if not rocksdb:
        notes.append("enableAcceleratedRecovery has no effect without storeType=defaultRocksDB (isEnableRocksDBStore)")
        return False
    return True


def accelerated_blind_spot(store: Store, version: BrokerVersion | None) -> int | None:
    """The physical offset before which an accelerated recovery (enableAcceleratedRecovery with
    storeType=defaultRocksDB, 5.3.4+) checks no record: the RocksDB consume queue's dispatch offset (its
    CHECKPOINT_TOPIC). None when acceleration is not in effect or the offset cannot be read. ``version`` None:
    the release detected from the files."""
    from .rocksdb import has_rocksdb_consume_queue

    on = configured(store.conf, "enableAcceleratedRecovery")
    st = configured(store.conf, "storeType")
    if not (on is not None and on.value and st is not None and str(st.value).lower() == ROCKSDB_CQ.lower()):
        return None
    if version is None:
        from .version import detect_version

        version = detect_version(store).version
    if not version.has_combine_store or not has_rocksdb_consume_queue(store):
        return None
    rq, _ = read_rocksdb_queues(store)
    return rq.checkpoint if rq is not None else None


def accelerated_note(point: int, starts: list[int]) -> str:
    """The sentence verify and fate add when accelerated recovery is in effect."""
    before = sum(1 for s in starts if s < point)
    return (f"accelerated recovery (enableAcceleratedRecovery, storeType=defaultRocksDB): a restart checks no record "
            f"before {point} (no CRC); {before} of the {len(starts)} problem(s) shown lie there and survive it")


def load_combine_side(store: Store) -> CombineSide:
    """load(): the RocksDB side's offset table (every queue's max row and CHECKPOINT_TOPIC)."""
    settings = CombineSettings.from_config(store.conf)
    rq, how = read_rocksdb_queues(store)
    side = CombineSide(settings, rq, 0, extra_left=settings.max_extra_files)
    side.notes.append(f"combine store, RocksDB side: {how}")
    if rq is not None:
        for (topic, qid), (mp, mo) in sorted(rq.max.items()):
            side.queues.add(RocksDBQueueModel(topic, qid, mp, mo))
        # RocksDBConsumeQueueOffsetTable.getMaxPhyOffset: 0 without a CHECKPOINT_TOPIC row
        side.dispatch_from = rq.checkpoint if rq.checkpoint is not None else 0
        side.notes.extend(f"combine store, RocksDB offset table: {p}" for p in rq.problems[:5])
    for s in (settings.prefer, settings.assign):
        if s not in CQ_TYPES:
            side.notes.append(f"combine store: {s!r} is not a consume-queue type (default, defaultRocksDB): the "
                              "broker refuses to start")
    return side


def other_store_matches(side: CombineSide, phys: int, file_test: tuple[bool, str], file_name: str) -> tuple[bool, str]:
    """CombineConsumeQueueStore#isMappedFileMatchedRecover for a file whose first record passed the full check:
    the assign-offset store must match; the other store's mismatch costs one extra file until they are spent."""
    rocks_ok = phys <= side.dispatch_from
    rocks_why = f"RocksDB side: first PHYSICALOFFSET {phys} {'<=' if rocks_ok else '>'} its dispatchFromPhyOffset " \
                f"{side.dispatch_from}"
    assign_ok, assign_why = (file_test[0], file_test[1]) if side.assign_is_file else (rocks_ok, rocks_why)
    other_ok, other_why = (rocks_ok, rocks_why) if side.assign_is_file else file_test
    if not assign_ok:
        return False, f"assign-offset store: {assign_why}"
    if other_ok:
        return True, f"{assign_why}; {other_why}"
    left = side.extra_left
    side.extra_left -= 1
    if left <= 0:
        side.budget_spent_at = file_name
        other = "RocksDBConsumeQueueStore" if side.assign_is_file else "ConsumeQueueStore"
        if side.settings.assign != side.settings.prefer:
            side.notes.append(f"combine store: {other} cannot be recovered fully and the read store is not the "
                              "assign-offset store: the broker throws IllegalArgumentException (recovery fails)")
        side.notes.append(f"combine store: the {side.settings.max_extra_files} extra commit-log file(s) are spent at "
                          f"{file_name}; the broker logs 'can not recover all inner store, store={other}' and "
                          "recovers only the assign-offset store")
        return True, f"{assign_why}; {other_why}, extra files spent: taken anyway"
    return False, f"{assign_why}; {other_why}: one of the extra files spent ({left - 1} left)"


def truncate_combine_side(store: Store, side: CombineSide, t: int) -> None:
    """RocksDBConsumeQueueStore.truncateDirty(T) inside the combine store's truncateDirty."""
    why = truncate_rocksdb_queues(store, [m for m in side.queues.models], t)
    if why:
        side.notes.append(why)


def verify_and_init_offsets(side: CombineSide, assign_models: list) -> None:
    """verifyAndInitOffsetForAllStore(true) at start(): each queue of the assign-offset store against the other
    store's queue (created when absent); a lagging other-store queue is initialised to min = max = the assign
    store's max offset."""
    for m in assign_models:
        topic, qid = m.cq.topic, m.cq.queue_id
        other = side.queue(topic, qid)
        mine, theirs = m.max_offset(), other.max_offset()
        if mine == theirs or (mine <= 0 and theirs <= 0):
            continue
        entry = {"queue": f"{topic}/{qid}", "maxOffsetInAssign": mine, "maxOffset0": theirs}
        if theirs > 0:
            side.notes.append(f"combine store: checkAssignOffsetStore fail for {topic}/{qid}: assign store max "
                              f"{mine}, other store {theirs}; initialised anyway")
        other.initialize_with_offset(mine)
        side.initialized.append(entry)


def settle_side(store: Store, side: CombineSide, file_entries) -> None:
    """After start(): the RocksDB side's (min, max) per queue (``side.bounds``) and the offline
    ``checkRocksdbCqWriteProgress`` (``side.progress``), the database opened once. ``file_entries(key)`` gives the
    file side's entries of a queue (None: not held as files)."""
    from ...store.rocksdb_cq import RocksDBConsumeQueueStore

    try:
        with RocksDBConsumeQueueStore(rocksdb_cq_dir(store)) as db:
            for m in side.queues.sorted():
                key = f"{m.cq.topic}/{m.cq.queue_id}"
                rows = m.entries(db.queue(m.cq.topic, m.cq.queue_id).entries())
                side.bounds[key] = m.bounds(rows)
                base = file_entries(key)
                if base is not None:
                    side.checked += 1
                    miss = check_write_progress(key, base, rows, side.bounds[key][0])
                    if miss is not None:
                        side.progress.append(miss)
    except Exception as e:  # noqa: BLE001 - a damaged database: the plan stands without the comparison
        side.notes.append(f"combine store: the RocksDB side's queues cannot be read ({e}); not compared")


def settle_after_start(store: Store, plan) -> None:
    """``settle_side`` for a RecoveryPlan's combine store, with a note when the sides differ."""
    side = plan.combine
    n = len(side.notes)
    settle_side(store, side, plan.consume_queue_entries)
    plan.notes.extend(side.notes[n:])
    if side.progress:
        first = side.progress[0]
        plan.notes.append(f"combine store after restart: the RocksDB queue differs from the file queue in "
                          f"{len(side.progress)} of {side.checked} queue(s), first {first['queue']} at offset "
                          f"{first['offset']} (offline checkRocksdbCqWriteProgress: CHECK_NOT_OK)")


def check_write_progress(key: str, base: list, compare: list, compare_min: int) -> dict | None:
    """CombineConsumeQueueStore#doCheckCqWriteProgress for one queue, offline: every unit of the file queue
    (the base) from the RocksDB queue's min offset to the file queue's last must be in the RocksDB queue, equal
    in offset, position, size and tagsCode. The broker's periodic check (logged only) starts at the units of the
    last 10 minutes; offline every unit from that min offset is compared. Returns the first mismatch, or None."""
    if not base:
        return None
    other = {e[0]: e for e in compare}
    for e in base:
        if e[0] < compare_min:
            continue
        got = other.get(e[0])
        if got is None or tuple(got[:4]) != tuple(e[:4]):
            return {"queue": key, "check_from": compare_min, "check_to": base[-1][0], "offset": e[0],
                    "file": list(e[:4]), "rocksdb": list(got[:4]) if got is not None else None}
    return None


def rocksdb_side_entries(store: Store, side: CombineSide, key: str) -> list[tuple[int, int, int, int]] | None:
    """The RocksDB side's queue ``key`` after load() and start(): the database's rows with what recovery put."""
    from .rocksdb import rocksdb_queue_entries

    topic, _, qid = key.rpartition("/")
    m = side.queues.find(topic, int(qid))
    return None if m is None else rocksdb_queue_entries(store, m)


def side_bounds(store: Store, side: CombineSide) -> dict[str, tuple[int, int]]:
    """(minOffset, maxOffset) of every RocksDB-side queue after start()."""
    from .rocksdb import rocksdb_queue_entries

    out = {}
    for m in side.queues.sorted():
        out[f"{m.cq.topic}/{m.cq.queue_id}"] = m.bounds(rocksdb_queue_entries(store, m))
    return out


def combine_to_dict(plan) -> dict:
    """The combine store's part of a RecoveryPlan's JSON: settings, the RocksDB side's dispatch-from offset, the
    extra files spent, the initialisations at start()."""
    side = plan.combine
    return {"settings": side.settings.to_dict(), "served": side.settings.prefer,
            "assigns_offsets": side.settings.assign, "rocksdb_dispatch_from_phy_offset": side.dispatch_from,
            "extra_files_left": max(0, side.extra_left), "extra_files_spent_at": side.budget_spent_at,
            "initialized_at_start": side.initialized,
            # the offline checkRocksdbCqWriteProgress after start(): CHECK_OK when no queue mismatches
            "write_progress": {"status": "CHECK_OK" if not side.progress else "CHECK_NOT_OK",
                               "queues_checked": side.checked, "mismatches": side.progress},
            "bounds_differ": [d for d in compare_sides(file_side_bounds(plan), side.bounds) if d["differs"]]}


def file_side_bounds(plan) -> dict[str, tuple[int, int]]:
    """(minOffset, maxOffset) of the file queues after start() (entries of ``plan.consume_queue_entries``)."""
    out = {}
    for key in plan.consume_queue_keys():
        entries = plan.consume_queue_entries(key)
        if entries is None:
            continue
        mx = plan.queue_models[key].max_offset()
        out[key] = (entries[0][0] if entries else mx, mx)
    return out


def compare_sides(file_bounds: dict[str, tuple[int, int]], rocks_bounds: dict[str, tuple[int, int]]) -> list[dict]:
    """The offline checkRocksdbCqWriteProgress: per queue, (min, max) offsets of the file side and the RocksDB
    side, and whether they differ. Queues on one side only count as differing."""
    out = []
    for key in sorted(set(file_bounds) | set(rocks_bounds)):
        f, r = file_bounds.get(key), rocks_bounds.get(key)
        out.append({"queue": key, "file": list(f) if f else None, "rocksdb": list(r) if r else None,
                    "differs": f != r})
    return out


__all__ = ["CQ_TYPES", "CombineSettings", "CombineSide", "FILE_CQ", "ROCKSDB_CQ", "accelerated_blind_spot",
           "accelerated_in_effect", "accelerated_note", "check_write_progress", "combine_in_effect", "combine_to_dict",
           "compare_sides", "file_side_bounds", "load_combine_side", "other_store_matches", "rocksdb_side_entries",
           "settle_after_start", "settle_side", "side_bounds", "truncate_combine_side", "verify_and_init_offsets"]
