"""A message's fate in one answer (issue 13): where its record is and in what state, its consume-queue entry or
why it has none, its index items, whether it survives a restart of this directory, and which consumer groups
already consumed it.

Nothing here re-implements a rule: the record comes from ``CommitLog.read_message``, the entry from the store's
ConsumeQueue, the restart from the recovery model (``plan_recovery``: ``truncate_offset`` and
``RecoveryPlan.consume_queue_entries``, the queue the broker holds after load() and start()), the index items from
``find_index_items`` and the dispatch rules from ``analyses.dispatch``; consumption from the committed offsets
(``analyses.offsets.read_consumer_offsets``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..formats.constants import PROPERTY_REAL_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, TransactionType
from ..formats.javahash import build_index_key, index_key_hash
from ..store import Store
from ..store.consumequeue import ConsumeQueue
from ..store.errors import RmqInspectError
from .dispatch import goes_to_consume_queue, goes_to_index, index_keys
from .lookup import find_index_items


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
    after_restart: str = ""  # "survives" | "survives, consume-queue entry rebuilt" | "cut by recovery ..."
    after_restart_entry: list[int] | None = None  # the entry the broker holds after load() and start()
    delivery_due: int | None = None  # a delayed message: when SCHEDULE_TOPIC_XXXX hands it to its topic
    consumers: list[ConsumerState] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # a half, PREPARED, op, commit, rollback or given-up record: its transaction (analyses.txn.attach_transactions)
    transaction: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)


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
            fate.after_restart = ("cut: the recovery truncates the commit log at "
                                  f"{plan.truncate_offset}" if offset >= plan.truncate_offset else
                                  "inside the recovered range, but no record starts here")
        return fate
    fate = MessageFate(offset, f.name, pos, "intact" if not msg.problems else "; ".join(msg.problems),
                       msg.topic, msg.queue_id, msg.queue_offset, msg.total_size, msg.store_timestamp, msg.keys,
                       msg.uniq_key)
    # the consume queue the dispatcher writes it to (CommitLogDispatcherBuildConsumeQueue)
    real_topic = msg.properties.get(PROPERTY_REAL_TOPIC)
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
                fate.delivery_due = entry[3]  # the schedule queue's tagsCode is the delivery time
                fate.consume_queue += (f" (delayed: SCHEDULE_TOPIC_XXXX hands it to {real_topic} when due, "
                                       f"tagsCode {entry[3]})")
        else:
            where = f"none on disk at {msg.topic}/{msg.queue_id} queue offset {msg.queue_offset}: "
            reached = plan.max_phy_offset_of_consume_queue if plan is not None else None
            if reached is not None and offset >= reached:
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
    # the restart: the recovery model's truncation and the queue it holds after load() and start()
    if plan is not None:
        end = offset + msg.total_size
        if end > plan.truncate_offset:
            fate.after_restart = f"cut: the recovery truncates the commit log at {plan.truncate_offset}"
        else:
            entries = plan.consume_queue_entries(f"{msg.topic}/{msg.queue_id}")
            after = next((list(e) for e in entries or () if e[1] == offset), None)
            fate.after_restart_entry = after
            if after is not None:
                fate.after_restart = f"survives, in {msg.topic}/{msg.queue_id} at queue offset {after[0]}"
            elif not goes_to_consume_queue(msg.sys_flag):
                fate.after_restart = "survives in the commit log (never in a consume queue)"
            elif entries is None:
                fate.after_restart = "survives in the commit log (its queue is not modelled as files)"
            else:
                fate.after_restart = "survives in the commit log, but no consume-queue entry points to it"
    # consumption: the committed offset of every group subscribed to its queue
    if offsets and fate.consume_queue_entry is not None:
        for (t, group), qmap in sorted(offsets.items(), key=lambda kv: kv[0][1]):
            if t == msg.topic and msg.queue_id in qmap:
                c = qmap[msg.queue_id]
                fate.consumers.append(ConsumerState(group, c, c > msg.queue_offset))
    return fate


__all__ = ["ConsumerState", "MessageFate", "message_fate"]
