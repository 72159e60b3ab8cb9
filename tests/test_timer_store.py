"""Timer log / wheel / timercheck fixtures written from the spec, read back; `timers` command."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from rmqinspect.analyses.timers import list_timers
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.fixtures.timer import TimerStoreWriter
from rmqinspect.formats import timer as F
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.constants import TIMER_TOPIC
from rmqinspect.store import Store
from rmqinspect.store.timer import TimerLog, TimerWheel, read_timercheck, walk_slot
from support import tree_hashes

NOW = 1_795_300_000_000


def make_store(root, n=12, log_file_units=5):
    """n timer messages (3 share one delivery second), one delete marker, one roll unit; the timer log
    files hold 5 units so blanks are written at every file end."""
    os.makedirs(root / "commitlog")
    plan = []
    with CommitLogWriter(str(root / "commitlog"), file_size=1 << 16) as cl, \
            TimerStoreWriter(str(root), timerlog_file_size=F.UNIT_SIZE * log_file_units + 20) as tw:
        for i in range(n):
            deliver = NOW + (i // 3) * 1000 + 7 if i < 9 else NOW + 60_000 * i
            props = {"REAL_TOPIC": f"Biz{i % 2}", "REAL_QID": str(i % 4), "TIMER_OUT_MS": str(deliver),
                     "UNIQ_KEY": f"UK{i:04d}", "KEYS": f"k{i}", "TAGS": "t"}
            r = cl.append(MessageSpec(TIMER_TOPIC, 0, b"body%d" % i, encode_properties(props),
                                      store_timestamp=NOW - 5000 + i))
            pos = tw.enqueue(r.physical_offset, r.total_size, props["REAL_TOPIC"], NOW - 5000 + i, deliver)
            plan.append((pos, r.physical_offset, deliver, props["UNIQ_KEY"]))
        # cancel message 4 (delete marker in the same slot), re-enqueue a far timer with ROLL
        r = cl.append(MessageSpec(TIMER_TOPIC, 0, b"", encode_properties(
            {"REAL_TOPIC": "Biz0", "TIMER_OUT_MS": str(plan[4][2]), "UNIQ_KEY": "DEL4",
             "TIMER_DEL_UNIQKEY": "Biz0+UK0004"}), store_timestamp=NOW))
        tw.enqueue(r.physical_offset, r.total_size, "Biz0", NOW, plan[4][2], F.MAGIC_DELETE)
        r = cl.append(MessageSpec(TIMER_TOPIC, 0, b"", encode_properties(
            {"REAL_TOPIC": "Biz1", "TIMER_OUT_MS": str(NOW + 3 * 86_400_000), "UNIQ_KEY": "ROLL"}),
            store_timestamp=NOW))
        tw.enqueue(r.physical_offset, r.total_size, "Biz1", NOW, NOW + 2 * 86_400_000, F.MAGIC_DEFAULT | F.MAGIC_ROLL)
        tw.write_timercheck(NOW + 1000, 13, 1, NOW, 5)
    return plan


def test_timerlog_wheel_roundtrip(tmp_path):
    plan = make_store(tmp_path / "s")
    log = TimerLog(str(tmp_path / "s" / "timerlog"))
    assert len(log.files) == 3  # 14 units, 5 per file
    scan = log.scan()
    assert not scan.problems and len(scan.units) == 14
    assert [u.pos for u in scan.units[:12]] == [p for p, *_ in plan]
    assert scan.units[5].pos == log.file_size  # the 6th unit opens the second file after the blank
    for u, (pos, off, deliver, _) in zip(scan.units, plan):
        assert (u.commitlog_offset, u.delivery_time, u.kind) == (off, deliver, "default")
    assert scan.units[12].kind == "delete" and scan.units[13].kind == "roll"
    wheel = TimerWheel(str(tmp_path / "s" / "timerwheel"))
    assert not wheel.problems and wheel.mf.size == F.WHEEL_FILE_SIZE
    s = wheel.slot_for(plan[3][2])
    chain = walk_slot(log, s)
    # slot of messages 3,4,5 + the delete marker for 4; newest first; num = 3 + 1 - 1
    assert [u.pos for u in chain] == [scan.units[12].pos, plan[5][0], plan[4][0], plan[3][0]]
    assert s.num == 2 and s.first_pos == plan[3][0]
    assert wheel.slot_for(plan[3][2] + 7 * 86_400_000 * 2) is None  # same index, other time: empty
    tc = read_timercheck(str(tmp_path / "s" / "config" / "timercheck"))
    assert tc["last_read_time_ms"] == NOW + 1000 and tc["last_timer_log_flush_pos"] == scan.end_pos


def test_schema_equals_fast_path(tmp_path):
    make_store(tmp_path / "s")
    log = TimerLog(str(tmp_path / "s" / "timerlog"))
    for u in log.scan().units:
        f = next(f for f in log.files if f.start <= u.pos < f.end)
        c = F.TimerLogUnit.parse(bytes(f.buffer[u.pos - f.start:u.pos - f.start + 52]))
        assert (c.size, c.prev_pos, c.magic, c.curr_write_time, c.delay, c.commitlog_offset) == (
            52, u.prev_pos, u.magic, u.curr_write_time, u.delay, u.commitlog_offset)
    f0 = log.files[0]
    b = F.TimerLogBlank.parse(bytes(f0.buffer[5 * 52:5 * 52 + 16]))
    assert b.magic == F.BLANK_MAGIC_CODE and b.size == 20


def test_list_timers(tmp_path):
    plan = make_store(tmp_path / "s")
    rep = list_timers(Store.open(tmp_path / "s"))
    assert not rep.problems and len(rep.rows) == 14
    by = {r.uniq_key: r for r in rep.rows}
    for pos, off, deliver, uk in plan:
        r = by[uk]
        assert (r.timer_out_ms, r.delivery_time, r.topic, r.in_wheel) == (deliver, deliver, TIMER_TOPIC, True)
        want = "cancelled" if uk == "UK0004" else "dequeued" if deliver < NOW + 1000 else "pending"
        assert r.state == want and not r.problems
    marker = by["DEL4"]
    assert marker.state == "delete-marker" and marker.delete_key == "Biz0+UK0004" and by["ROLL"].kind == "roll"
    assert marker.cancels == [plan[4][0]] and by["UK0004"].cancelled_by == marker.timerlog_pos
    assert rep.counts() == {"pending": 9, "pending_normal": 8, "pending_roll": 1, "cancelled": 1, "dequeued": 3,
                            "delete_markers": 1}
    due = list_timers(Store.open(tmp_path / "s"), due_before=NOW + 2000)
    assert sorted(r.uniq_key for r in due.rows) == ["DEL4", "UK0000", "UK0001", "UK0002", "UK0003", "UK0004",
                                                    "UK0005"]


def test_damaged_unit_and_pointer(tmp_path):
    plan = make_store(tmp_path / "s")
    p = tmp_path / "s" / "timerlog" / f"{0:020d}"
    with open(p, "r+b") as f:
        f.seek(2 * 52 + 12)
        f.write(b"\x00\x00\x01\x00")  # magic with high bits: invalid
    scan = TimerLog(str(tmp_path / "s" / "timerlog")).scan()
    assert len(scan.units) == 2 and "@ 104" in scan.problems[0] and scan.end_pos == 104
    r = CliRunner().invoke(cli, ["timers", str(tmp_path / "s")])
    assert r.exit_code == 1 and "recovery truncates here" in r.stderr and "Traceback" not in r.output


def test_cli_timers(tmp_path):
    plan = make_store(tmp_path / "s")
    before = tree_hashes(tmp_path / "s")
    r = CliRunner().invoke(cli, ["timers", str(tmp_path / "s"), "--due-before", str(NOW + 3000), "--format",
                                 "ndjson"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["uniq_key"] for x in rows if x["kind"] == "default"] == [f"UK{i:04d}" for i in range(9)]
    assert all(x["real_topic"] in ("Biz0", "Biz1", None) for x in rows)
    r = CliRunner().invoke(cli, ["timers", str(tmp_path / "s"), "--pending"])
    assert r.exit_code == 0 and "UK0011" in r.stdout and "UK0000" not in r.stdout
    r = CliRunner().invoke(cli, ["timers", str(tmp_path / "nope")])
    assert r.exit_code == 3
    assert tree_hashes(tmp_path / "s") == before
