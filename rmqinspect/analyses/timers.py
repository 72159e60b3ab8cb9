"""`timers`: scheduled (timer-wheel) messages with their delivery time and the commit-log record each
timer-log unit points to (FORMATS.md §3.3, §10.2), and what the broker's wheel will still fire.

A message is *pending* when its wheel slot is at or after the timer checkpoint's read time (the window
``TimerWheel.getAllNum(currReadTimeMs)`` counts), *dequeued* when the read time has passed its slot. A delete
marker (magic DELETE without ROLL) cancels the messages of its own slot whose ``REAL_TOPIC + "+" + UNIQ_KEY``
equals its ``TIMER_DEL_UNIQKEY``: ``TimerMessageStore.dequeue`` reads a slot's chain, collects the markers'
keys first and drops every normal or roll entry of that slot that matches (``buildDeleteKey``). A marker in
another slot cancels nothing, so a cancelled message is only ever matched within its slot."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..formats.constants import (PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_TIMER_DEL_UNIQKEY,
                                 PROPERTY_TIMER_OUT_MS)
from ..formats.timer import MAGIC_DELETE, MAGIC_ROLL
from ..formats.javahash import java_string_hash
from ..errors import RmqInspectError
from ..store.timer import TimerLog, TimerWheel, read_timercheck, walk_slot


@dataclass
class TimerRow:
    timerlog_pos: int
    kind: str
    enqueue_time: int
    delivery_time: int
    commitlog_offset: int
    size: int
    # pending | dequeued (slot before the checkpoint's lastReadTimeMs) | delete-marker | cancelled
    state: str
    in_wheel: bool | None
    topic: str | None = None
    real_topic: str | None = None
    real_queue_id: int | None = None
    uniq_key: str | None = None
    keys: str | None = None
    tags: str | None = None
    timer_out_ms: int | None = None
    delete_key: str | None = None  # a marker's TIMER_DEL_UNIQKEY (REAL_TOPIC + "+" + UNIQ_KEY)
    cancelled_by: int | None = None  # timer-log position of the marker that cancels this message
    cancels: list[int] = field(default_factory=list)  # a marker: timer-log positions it cancels
    problems: list[str] = field(default_factory=list)
    magic: int = 0  # the unit's magic bits (DEFAULT 1, ROLL 2, DELETE 4)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class TimerReport:
    rows: list[TimerRow]
    timercheck: dict | None
    wheel_slots_used: int
    problems: list[str]
    precision_ms: int = 1000

    def counts(self) -> dict[str, int]:
        """Rows per state; ``pending`` is what the broker's wheel still holds (its allCongestNum after load)."""
        out = {"pending": 0, "pending_normal": 0, "pending_roll": 0, "cancelled": 0, "dequeued": 0,
               "delete_markers": 0}
        for r in self.rows:
            if r.state == "delete-marker":
                out["delete_markers"] += 1
            else:
                out[r.state] += 1
                if r.state == "pending":
                    out["pending_roll" if r.magic & MAGIC_ROLL else "pending_normal"] += 1
        return out


def list_timers(store, due_before: int | None = None, precision_ms: int = 1000) -> TimerReport:
    root = store.layout.root
    log = TimerLog(os.path.join(root, "timerlog"))
    scan = log.scan()
    problems = list(scan.problems)
    check = read_timercheck(os.path.join(store.layout.config_dir, "timercheck"))
    wheel = None
    wheel_members: dict[int, set] = {}
    used = 0
    wp = os.path.join(root, "timerwheel")
    if os.path.isfile(wp):
        wheel = TimerWheel(wp, precision_ms)
        problems += wheel.problems
        slots = wheel.used_slots()
        used = len(slots)
        for s in slots:
            try:
                wheel_members[s.index] = {u.pos for u in walk_slot(log, s)}
            except RmqInspectError as e:
                problems.append(str(e))
    last_read = check["last_read_time_ms"] if check else None
    rows = []
    for u in scan.units:
        # needDelete && !needRoll: a ROLL|DELETE unit is re-rolled like a normal entry, not a marker
        state = "delete-marker" if u.magic & MAGIC_DELETE and not u.magic & MAGIC_ROLL else (
            "dequeued" if last_read is not None and u.delivery_time < last_read else "pending")
        in_wheel = None
        if wheel is not None:
            s = wheel.slot_for(u.delivery_time)
            in_wheel = s is not None and u.pos in wheel_members.get(s.index, ())
        r = TimerRow(u.pos, u.kind, u.curr_write_time, u.delivery_time, u.commitlog_offset, u.commitlog_size,
                     state, in_wheel, magic=u.magic)
        try:
            m = store.commitlog.read_message(u.commitlog_offset)
            p = m.properties
            r.topic, r.uniq_key, r.keys, r.tags = m.topic, m.uniq_key, m.keys_string, m.tags
            r.real_topic = p.get(PROPERTY_REAL_TOPIC)
            rq = p.get(PROPERTY_REAL_QUEUE_ID)
            r.real_queue_id = int(rq) if rq and rq.lstrip("-").isdigit() else None
            t = p.get(PROPERTY_TIMER_OUT_MS)
            r.timer_out_ms = int(t) if t and t.lstrip("-").isdigit() else None
            r.delete_key = p.get(PROPERTY_TIMER_DEL_UNIQKEY) if state == "delete-marker" else None
            if m.total_size != u.commitlog_size:
                r.problems.append(f"record size {m.total_size} != unit size {u.commitlog_size}")
            if u.real_topic_hash and r.real_topic is not None and java_string_hash(r.real_topic) != u.real_topic_hash:
                r.problems.append("REAL_TOPIC hash differs from the unit's")
        except RmqInspectError as e:
            r.problems.append(f"commitlog record unreadable: {e}")
        rows.append(r)
    _apply_delete_markers(rows, precision_ms)
    if due_before is not None:
        rows = [r for r in rows if r.delivery_time < due_before]
    return TimerReport(rows, check, used, problems, precision_ms)


def _apply_delete_markers(rows: list[TimerRow], precision_ms: int) -> None:
    """Cancel what each marker cancels in its own slot; say where a marker's target is instead."""
    by_key: dict[str, list[TimerRow]] = {}
    for r in rows:
        if r.state != "delete-marker" and r.real_topic is not None and r.uniq_key is not None:
            by_key.setdefault(f"{r.real_topic}+{r.uniq_key}", []).append(r)
    for m in rows:
        if m.state != "delete-marker":
            continue
        if m.delete_key is None:
            m.problems.append("delete marker without TIMER_DEL_UNIQKEY: it cancels nothing")
            continue
        slot = m.delivery_time // precision_ms
        targets = by_key.get(m.delete_key, [])
        for t in targets:
            if t.delivery_time // precision_ms == slot:
                m.cancels.append(t.timerlog_pos)
                if t.cancelled_by is None:
                    t.cancelled_by = m.timerlog_pos
                    t.state = "cancelled"
        if not targets:
            m.problems.append(f"cancels {m.delete_key}, which is not in the timer log (already delivered and "
                              "rolled out, or never written)")
        elif not m.cancels:
            m.problems.append(f"cancels {m.delete_key}, but that message is in another wheel slot (timer-log "
                              f"{', '.join(str(t.timerlog_pos) for t in targets)}): the broker only cancels "
                              "within the marker's slot, so it will still fire")
