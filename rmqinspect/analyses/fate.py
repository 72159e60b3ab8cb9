"""A message's fate in one answer: where its record is and in what state, its consume-queue entry or
why it has none, its index items, whether it survives a restart of this directory, and which consumer groups
already consumed it.

Nothing here re-implements a rule: the record comes from ``CommitLog.read_message``, the entry from the store's
ConsumeQueue, the restart from the recovery model (``plan_recovery``: ``truncate_offset`` and
``RecoveryPlan.consume_queue_entries``, the queue the broker holds after load() and start()), the index items from
``find_index_items`` and the dispatch rules from ``analyses.dispatch_rules``; consumption from the committed offsets
(``analyses.offsets.read_consumer_offsets``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import RmqInspectError
from ..formats.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_OUT_MS,
    RMQ_SYS_SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TransactionType,
)
from ..formats.javahash import build_index_key, index_key_hash
from ..store import Store
from ..store.consumequeue import ConsumeQueue
from .dispatch_rules import (
    DEFAULT_DELAY_TABLE,
    DelayLevelError,
    dispatch_tags_code,
    goes_to_consume_queue,
    goes_to_index,
    index_keys,
)
from .lookup.explain import find_index_items


@dataclass
class ConsumerState:
    group: str
    committed: int  # the next queue offset the group pulls
    consumed: bool  # committed > the message's queue offset


@dataclass
class MessageFate:
    physical_offset: int
    file: str
    position: int | None
    record: str  # "intact" | what is wrong with it
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    total_size: int | None = None
    store_timestamp: int | None = None
    keys: list[str] = field(default_factory=list)
    uniq_key: str | None = None
    consume_queue: str = ""  # "entry at queue offset N" or why there is none
    consume_queue_entry: list[int] | None = None  # [queue offset, physical offset, size, tagsCode] on disk
    index_items: list[dict] = field(default_factory=list)  # {"key", "file", "item", "reachable"}
    after_restart: str = ""  # the sentence, for people
    # the same as one word of AFTER_RESTART_FATES (JSON kinds are enums); None when the restart was not modelled
    after_restart_fate: str | None = None
    after_restart_entry: list[int] | None = None  # the entry the broker holds after load() and start()
    # the restart indexes it again (IndexService.buildIndex past the surviving endPhyOffset): key look-ups find it
    reindexed_after_restart: bool = False
    delivery_due: int | None = None  # a delayed / timer message: when it is due to be handed to its real topic
    real_topic: str | None = None  # a delayed / timer message: REAL_TOPIC, the topic it is delivered to
    consumers: list[ConsumerState] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # a half, PREPARED, op, commit, rollback or given-up record: its transaction (analyses.txn.attach_transactions)
    transaction: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)


# ``after_restart_fate``: what the broker does with the record when it restarts on this directory
# (the restart model: ``recovery.plan.RecoveryPlan``)
AFTER_RESTART_FATES = {
    "survives": "kept, and served from the consume-queue entry it has on disk (or never in a consume queue)",
    "redispatched": "kept; the restart dispatches it again (its consume-queue entry is written by the restart)",
    "cut": "the recovery removes it from the commit log (at or past truncate_offset)",
    "replaced": "kept, but the consume queue holds another record at its queue offset after the restart",
    "not_served": "kept in the commit log, but no consume-queue entry points to it after the restart",
    "unconfirmed": "kept in the commit log past the confirm offset (controller mode): in no consume queue; rejoining "
                   "a master of a newer epoch cuts it",
    "no_record": "no record starts at this offset (unreadable / damaged inside the kept range)",
}


def _entry_at(store: Store, topic: str, queue_id: int, queue_offset: int, phys: int) -> list[int] | None:
    try:
        q = ConsumeQueue.open(store.layout.consumequeue_dir, topic, queue_id)
    except RmqInspectError:
        return None
    for e in q.entries(queue_offset, 1):
        if e[1] == phys:
            return [int(x) for x in e]
    return None


def message_fate(store: Store, offset: int, *, plan=None, offsets: dict | None = None, svc=None) -> MessageFate:
    """The fate of the record at physical ``offset``. ``plan``: a ``RecoveryPlan`` (the restart model, shared
    across records); ``offsets``: {(topic, group): {queue id: committed}}; ``svc``: an ``IndexService``."""
    cl = store.commitlog
    f, pos = cl.locate(offset)
    try:
        msg = cl.read_message(offset)
    except RmqInspectError as e:
        fate = MessageFate(offset, f.name, pos, f"unreadable: {e.message}")
        if plan is not None:
            if plan.cuts(offset):
                fate.after_restart_fate = "cut"
                fate.after_restart = f"cut: the recovery cuts the commit log at {plan.truncate_offset}"
            else:
                fate.after_restart_fate = "no_record"
                fate.after_restart = "inside the range the recovery keeps, but no record starts here"
        return fate
    fate = MessageFate(offset, f.name, pos, "intact" if not msg.problems else "; ".join(msg.problems),
                       msg.topic, msg.queue_id, msg.queue_offset, msg.total_size, msg.store_timestamp, msg.keys,
                       msg.uniq_key)
    # the consume queue the dispatcher writes it to (CommitLogDispatcherBuildConsumeQueue)
    real_topic = msg.properties.get(PROPERTY_REAL_TOPIC)
    fate.real_topic = real_topic if msg.topic in (RMQ_SYS_SCHEDULE_TOPIC, TIMER_TOPIC) else None
    fate.delivery_due = _due_time(msg)
    if not goes_to_consume_queue(msg.sys_flag):
        fate.consume_queue = ("none: a transaction half message (PREPARED; only its COMMIT record is dispatched)"
                              if msg.transaction_type == TransactionType.PREPARED else
                              "none: a rolled-back transaction message (ROLLBACK records are never dispatched)")
    else:
        entry = _entry_at(store, msg.topic, msg.queue_id, msg.queue_offset, offset)
        fate.consume_queue_entry = entry
        if entry is not None:
            fate.consume_queue = f"{msg.topic}/{msg.queue_id} entry at queue offset {msg.queue_offset}"
            if msg.topic == RMQ_SYS_SCHEDULE_TOPIC:
                fate.consume_queue += (f" (delayed: SCHEDULE_TOPIC_XXXX hands it to {real_topic} when due, "
                                       f"tagsCode {entry[3]})")
        else:
            where = f"none on disk at {msg.topic}/{msg.queue_id} queue offset {msg.queue_offset}: "
            reached = plan.max_phy_offset_of_consume_queue if plan is not None else None
            if reached is not None and reached < 0:
                fate.consume_queue = where + ("not dispatched yet (the consume queues hold no entry: the restart "
                                              "dispatches every record)")
            elif reached is not None and offset >= reached:
                fate.consume_queue = where + f"not dispatched yet (the consume queues reach physical offset {reached})"
            else:
                fate.consume_queue = where + ("the dispatcher had passed it: the entry is missing (queue file gone "
                                              "or damaged; `cq --join` and `verify` show the queue)")
    # index items: every key the dispatcher indexes for it (CommitLogDispatcherBuildIndex)
    if svc is not None and goes_to_index(msg.sys_flag):
        topic_for_index = msg.topic
        for k in index_keys(msg.properties):
            for item in find_index_items(svc, index_key_hash(build_index_key(topic_for_index, k)), offset):
                fate.index_items.append({"key": k, "file": item["file"], "item": item["item"],
                                         "reachable": item["reachable"]})
    # the restart: the recovery model's cut, re-dispatch, index rebuild and the queue it holds after load() and
    # start()
    if plan is not None:
        _after_restart(fate, msg, plan, store)
    # consumption: the committed offset of every group subscribed to its queue
    if offsets and fate.consume_queue_entry is not None:
        for (t, group), qmap in sorted(offsets.items(), key=lambda kv: kv[0][1]):
            if t == msg.topic and msg.queue_id in qmap:
                c = qmap[msg.queue_id]
                fate.consumers.append(ConsumerState(group, c, c > msg.queue_offset))
    return fate


def _due_time(msg) -> int | None:
    """When a delayed (DELAY level, default levels) or timer (TIMER_OUT_MS) message is due."""
    if msg.topic == RMQ_SYS_SCHEDULE_TOPIC and PROPERTY_DELAY_TIME_LEVEL in msg.properties:
        try:
            code, is_time = dispatch_tags_code(msg.topic, msg.properties, msg.store_timestamp, DEFAULT_DELAY_TABLE)
        except DelayLevelError:
            return None
        return code if is_time else None
    raw = msg.properties.get(PROPERTY_TIMER_OUT_MS)
    if raw is not None and raw.lstrip("-").isdigit():
        return int(raw)
    return None


def _confirm_offset(store: Store) -> int:
    """confirmPhyOffset in controller mode (-1: classic or DLedger, nothing unconfirmed)."""
    if store.layout.dledger is not None:
        return -1
    from .recovery.controller import detect_confirm_offset

    return detect_confirm_offset(store)


def _after_restart(fate: MessageFate, msg, plan, store: Store) -> None:
    """``after_restart`` / ``after_restart_fate`` from the plan (the one restart model)."""
    offset = msg.physical_offset
    fate.reindexed_after_restart = goes_to_index(msg.sys_flag) and plan.reindexes(offset)
    if plan.cuts(offset, msg.total_size):
        fate.after_restart_fate = "cut"
        fate.after_restart = f"cut: the recovery cuts the commit log at {plan.truncate_offset}"
        return
    again = plan.redispatches(offset)
    entries = plan.consume_queue_entries(f"{msg.topic}/{msg.queue_id}")
    after = next((list(e) for e in entries or () if e[1] == offset), None)
    fate.after_restart_entry = after
    index = "; the restart indexes it (key look-ups find it after)" if fate.reindexed_after_restart else ""
    if after is not None:
        fate.after_restart_fate = "redispatched" if again and fate.consume_queue_entry != after else "survives"
        fate.after_restart = (f"survives, in {msg.topic}/{msg.queue_id} at queue offset {after[0]}"
                              + (" (its entry written by the restart's dispatch)"
                                 if fate.after_restart_fate == "redispatched" else "") + index)
        if msg.topic == RMQ_SYS_SCHEDULE_TOPIC and fate.delivery_due is not None and after[3] != fate.delivery_due:
            # 4.9.8: the recovery dispatches before ScheduleMessageService.load(), the delay levels are unknown
            # then, and the entry's tagsCode is the TAGS hash, which the scheduler reads as a due time long past
            fate.notes.append(f"the restart writes its SCHEDULE_TOPIC_XXXX entry with tagsCode {after[3]}, not its due "
                              f"time {fate.delivery_due}: the scheduler reads that as already due, so it is delivered "
                              f"to {fate.real_topic} at once after the restart, not at its due time")
    elif not goes_to_consume_queue(msg.sys_flag):
        fate.after_restart_fate = "survives"
        fate.after_restart = "survives in the commit log (never in a consume queue)" + index
    elif entries is None:
        fate.after_restart_fate = "redispatched" if again else "survives"
        fate.after_restart = ("survives in the commit log" + (", dispatched again by the restart" if again else "")
                              + " (its queue is not modelled as files)" + index)
    elif 0 <= (confirm := _confirm_offset(store)) < msg.physical_offset + msg.total_size:
        fate.after_restart_fate = "unconfirmed"
        fate.after_restart = (f"survives in the commit log, unconfirmed (controller mode: past confirmPhyOffset "
                              f"{confirm}): the reput dispatches only up to it, so it is in no consume "
                              "queue; rejoining a master of a newer epoch cuts it (rmqinspect peers)" + index)
    else:
        other = next((list(e) for e in entries if e[0] == msg.queue_offset), None)
        if other is not None:
            fate.after_restart_fate = "replaced"
            fate.after_restart = (f"survives in the commit log, but {msg.topic}/{msg.queue_id} queue offset "
                                  f"{msg.queue_offset} points to the record at {other[1]} after the restart" + index)
        else:
            fate.after_restart_fate = "not_served"
            fate.after_restart = "survives in the commit log, but no consume-queue entry points to it" + index


@dataclass
class RecordsAsked:
    """The records an identifier names, as ``fate`` asks about them: their physical offsets (in order, each once)
    and the recovery plan that decides 'after restart' (it also finds the records the restart indexes)."""

    offsets: list[int]
    plan: object  # analyses.recovery.RecoveryPlan


def records_asked(store: Store, svc, *, key: str | None = None, topic: str | None = None, msg_id: str | None = None,
                  uniq_key: str | None = None, offset: int | None = None,
                  broker_version: str | None = None) -> RecordsAsked:
    """The records one identifier names (exactly one of ``key`` with ``topic``, ``msg_id``, ``uniq_key``,
    ``offset``): what the broker's index returns for it (verified hits), the records a restart indexes under it,
    and for an offsetMsgId the record it points to. ``svc``: the store's ``IndexService``."""
    from .lookup.fates import reindexed_hits, view_of_plan
    from .lookup.msgid import find_msg_id
    from .lookup.query import DEFAULT_MAX_MSGS_NUM_BATCH, JAVA_LONG_MAX, query_message
    from .recovery import RecoveryOptions, plan_recovery

    def plan_of():
        return plan_recovery(store, RecoveryOptions(version=broker_version, with_salvage=False,
                                                    keep_redispatch=False))

    if offset is not None:
        return RecordsAsked([offset], plan_of())
    if key is not None:
        q = query_message(svc, store.commitlog, topic, key, DEFAULT_MAX_MSGS_NUM_BATCH, 0, JAVA_LONG_MAX,
                          DEFAULT_MAX_MSGS_NUM_BATCH)
        offsets = [h.physical_offset for h in q.verified]
        # and the records the restart indexes (the index does not hold them yet; the broker finds them after)
        plan = plan_of()
        offsets += [h.physical_offset for h in reindexed_hits(store.commitlog, view_of_plan(plan), topic, key)
                    if h.has_key]
        return RecordsAsked(sorted(set(offsets)), plan)
    ident = (msg_id or uniq_key or "").strip().upper()
    rep = find_msg_id(store, svc, ident, topic)
    offsets = [h["physical_offset"] for h in (rep.as_uniq_key or {}).get("hits", [])]
    # and the records the restart indexes under this UNIQ_KEY (the index does not hold them yet)
    plan = plan_of()
    for t in (rep.as_uniq_key or {}).get("topics_searched", []):
        offsets += [h.physical_offset for h in reindexed_hits(store.commitlog, view_of_plan(plan), t, ident)
                    if h.has_key]
    a = rep.as_offset_msg_id or {}
    if msg_id is not None and a.get("matches"):
        offsets.insert(0, a["message"]["physical_offset"])
    return RecordsAsked(sorted(set(offsets)), plan)


@dataclass
class FateReport:
    """``fate``'s answer: one ``MessageFate`` per record asked about, their transactions attached, and where the
    consumer offsets came from (None: there were none, consumption unknown)."""

    fates: list[MessageFate]
    consumer_offsets_source: str | None


def fates_of(store: Store, asked: RecordsAsked, svc, offsets_file: str | None = None) -> FateReport:
    """The fate of every record in ``asked`` under its plan, consumption from the committed offsets
    (``offsets_file``, default config/consumerOffset.json), and a transaction record's transaction (one pass of
    ``analyses.txn``, only when one is asked about)."""
    from .offsets import read_consumer_offsets
    from .txn import attach_transactions

    cfg, table = read_consumer_offsets(store, offsets_file)
    fates = [message_fate(store, o, plan=asked.plan, offsets=table, svc=svc) for o in asked.offsets]
    attach_transactions(store, fates, plan=asked.plan, offsets_file=offsets_file)
    return FateReport(fates, cfg.source if cfg is not None else None)


__all__ = ["AFTER_RESTART_FATES", "ConsumerState", "FateReport", "MessageFate", "RecordsAsked", "fates_of",
           "message_fate", "records_asked"]
