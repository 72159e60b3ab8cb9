"""`timers`: the 5.x timer store (timerlog/, timerwheel): scheduled messages and their delivery times."""

from __future__ import annotations

import os
import sys

import click

from ..errors import EXIT_PROBLEMS, StoreNotFoundError
from ..store import Store
from ._params import POSITIVE_INT, TIME, TIME_FORMS, broker_conf, broker_version_option, store_argument
from .output import emit, format_option, handle_errors, ms_to_iso, no_match, print_kv, render, topic_names, warn


@click.command("timers")
@store_argument
@click.option("--topic", help="Only timers for this topic (REAL_TOPIC: where the message is delivered).")
@click.option("--due-before", type=TIME, default=None,
              help=f"Only timers whose delivery time is before this: {TIME_FORMS}.")
@click.option("--pending", is_flag=True, help="Only timers the wheel will still fire: not yet dequeued (delivery >= "
              "timercheck lastReadTimeMs) and not cancelled by a delete marker in their slot.")
@click.option("--precision-ms", type=POSITIVE_INT, default=1000, show_default=True,
              help="timerPrecisionMs of the broker.")
@click.option("--rip82", is_flag=True,
              help="List the timer column family of RocksDBMessageStore/ (RIP-82 timerRocksDBEnable, 5.4.0+; modelled "
                   "from the change descriptions) instead of timerlog/ (automatic when the store has no timerlog/). "
                   "Each row is checked against its commit-log record.")
@broker_version_option
@format_option
@handle_errors
def timers(store, topic, due_before, pending, precision_ms, rip82, broker_version, fmt):
    """List scheduled (timer) messages: timerlog/ units, their delivery time and the commit-log record
    in rmq_sys_wheel_timer each points to (REAL_TOPIC, UNIQ_KEY, TIMER_OUT_MS), checked against the
    timerwheel and config/timercheck.
    """
    from ..analyses.timers import list_timers
    from ..store.rip82 import rip82_dir

    st = Store.open(store, conf=broker_conf())
    if rip82 or (not os.path.isdir(os.path.join(st.root, "timerlog")) and rip82_dir(st.root) is not None):
        _rip82_timers(st, due_before, fmt)
        return
    rep = list_timers(st, due_before, precision_ms)
    for p in rep.problems:
        warn(p)

    def rows():
        for r in rep.rows:
            if (pending and r.state != "pending") or (topic is not None and r.real_topic != topic):
                continue
            d = r.to_dict()
            d["delivery"] = ms_to_iso(r.delivery_time)
            yield d

    def table(rep) -> int:
        n = emit(rows(), "table", ("timerlog_pos", "kind", "state", "delivery", "commitlog_offset", "size",
                                   "real_topic", "real_queue_id", "uniq_key", "in_wheel", "cancelled_by"))
        c = rep.counts()
        print_kv("the wheel after load", [
            ("pending (will fire)", f"{c['pending']} ({c['pending_normal']} normal, {c['pending_roll']} roll)"),
            ("cancelled by a delete marker", c["cancelled"]), ("dequeued (slot before lastReadTimeMs)", c["dequeued"]),
            ("delete markers", c["delete_markers"])])
        return n

    n = render(rep, fmt, table, rows=lambda rep: rows())
    if rep.problems or any(r.problems for r in rep.rows):
        for r in rep.rows:
            for p in r.problems:
                warn(f"timerlog @ {r.timerlog_pos}: {p}")
        sys.exit(EXIT_PROBLEMS)
    if n == 0:
        # after the wheel's counts (they describe the whole timer store, which is an answer too)
        filters = " ".join(f for f, on in ((f"--topic {topic}", topic is not None), ("--pending", pending), (
            f"--due-before {ms_to_iso(due_before)}", due_before is not None)) if on)
        # a timer's topic may have no queue yet (nothing delivered): its REAL_TOPIC counts as a topic too
        names = set(topic_names(st.root)) | {r.real_topic for r in rep.rows if r.real_topic}
        no_match(f"no timer in the timerlog matches {filters}" if filters else
                 "the timerlog holds no timer", topic=topic, names=sorted(names))


def _rip82_timers(st, due_before, fmt) -> None:
    """Pending timers from RIP-82's timer column family (analyses.rip82), checked against the commit log."""
    from ..analyses.rip82 import pending_rip82_timers
    from ..store.rip82 import RIP82_DIR
    from .output import note

    got = pending_rip82_timers(st)
    if got is None:
        raise StoreNotFoundError("no RocksDBMessageStore/ (RIP-82) database", os.path.join(st.root, RIP82_DIR))
    rows, why = got
    note(why)
    sel = [r for r in rows if due_before is None or r.delay_time < due_before]
    n = emit(({"delivery": ms_to_iso(r.delay_time), "uniq_key": r.uniq_key, "commitlog_offset": r.offset_py,
               "size": r.size_py, "record": r.record, "matches": r.matches} for r in sel), fmt,
             ("delivery", "uniq_key", "commitlog_offset", "size", "record", "matches"))
    if any(not r.matches for r in sel):
        warn(f"{sum(not r.matches for r in sel)} timer row(s) do not match the record at their offset")
        sys.exit(EXIT_PROBLEMS)
    if n == 0:
        no_match("no pending timer in RocksDBMessageStore/")


COMMANDS = [timers]
