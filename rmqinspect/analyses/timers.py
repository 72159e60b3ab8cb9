"""`timers`: scheduled (timer-wheel) messages with their delivery time and the commit-log record each
timer-log unit points to (FORMATS.md §3.3, §10.2)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..formats.constants import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_TIMER_OUT_MS
from ..formats.javahash import java_string_hash
from ..store.errors import RmqInspectError
from ..store.timer import TimerLog, TimerWheel, read_timercheck, walk_slot


@dataclass
class TimerRow:
    timerlog_pos: int
    kind: str
    enqueue_time: int
    delivery_time: int
    commitlog_offset: int
    size: int
    state: str  # pending | dequeued (before the checkpoint's lastReadTimeMs) | delete-marker
    in_wheel: bool | None
    topic: str | None = None
    real_topic: str | None = None
    real_queue_id: int | None = None
    uniq_key: str | None = None
    keys: str | None = None
    tags: str | None = None
    timer_out_ms: int | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class TimerReport:
    rows: list[TimerRow]
    timercheck: dict | None
    wheel_slots_used: int
    problems: list[str]


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
        if due_before is not None and u.delivery_time >= due_before:
            continue
        state = "delete-marker" if u.kind == "delete" else (
            "dequeued" if last_read is not None and u.delivery_time < last_read else "pending")
        in_wheel = None
        if wheel is not None:
            s = wheel.slot_for(u.delivery_time)
            in_wheel = s is not None and u.pos in wheel_members.get(s.index, ())
        r = TimerRow(u.pos, u.kind, u.curr_write_time, u.delivery_time, u.commitlog_offset, u.commitlog_size,
                     state, in_wheel)
        try:
            m = store.commitlog.read_message(u.commitlog_offset)
            p = m.properties
            r.topic, r.uniq_key, r.keys, r.tags = m.topic, m.uniq_key, m.keys_string, m.tags
            r.real_topic = p.get(PROPERTY_REAL_TOPIC)
            rq = p.get(PROPERTY_REAL_QUEUE_ID)
            r.real_queue_id = int(rq) if rq and rq.lstrip("-").isdigit() else None
            t = p.get(PROPERTY_TIMER_OUT_MS)
            r.timer_out_ms = int(t) if t and t.lstrip("-").isdigit() else None
            if m.total_size != u.commitlog_size:
                r.problems.append(f"record size {m.total_size} != unit size {u.commitlog_size}")
            if u.real_topic_hash and r.real_topic is not None and java_string_hash(r.real_topic) != u.real_topic_hash:
                r.problems.append("REAL_TOPIC hash differs from the unit's")
        except RmqInspectError as e:
            r.problems.append(f"commitlog record unreadable: {e}")
        rows.append(r)
    return TimerReport(rows, check, used, problems)
