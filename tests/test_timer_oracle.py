"""The timer store against RocketMQ 5.3.3's own: every timer-log unit, every wheel slot and its chain, the
pending count of the broker's wheel after load (allCongestNum) and the three delete markers with the
messages they cancel (oracle scenario 5.3.3/timer-clean)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import load_expected, require_oracle, tree_hashes
from rmqinspect.analyses.timers import list_timers
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.timer import TimerLog, TimerWheel, walk_slot

NAME = "rocketmq-all-5.3.3/timer-clean"
KIND = {"normal": "default", "roll": "roll", "delete": "delete"}


def _open():
    root = require_oracle(NAME) / "store"
    return root, load_expected(NAME)


def test_every_timerlog_unit_equals_the_broker():
    root, e = _open()
    scan = TimerLog(str(root / "timerlog")).scan()
    want = [u for u in e["timerlog"] if u["kind"] != "blank"]
    assert not scan.problems
    assert len(scan.units) == len(want) == 301
    for u, w in zip(scan.units, want):
        assert (u.pos, u.file, u.prev_pos, u.magic, u.kind, u.curr_write_time, u.delay, u.delivery_time,
                u.commitlog_offset, u.commitlog_size, u.real_topic_hash) == (
            w["position"], w["file"], w["prevPos"], w["magic"], KIND[w["kind"]], w["enqueueTimeMs"],
            w["delayDeltaMs"], w["delayedTimeMs"], w["offsetPy"], w["sizePy"], w["realTopicHashCode"]), w
    assert scan.end_pos == e["timerStoreAfterLoad"]["timerLogMaxOffset"]


def test_every_wheel_slot_and_chain_equals_the_broker():
    root, e = _open()
    precision = e["timerStoreAfterLoad"]["precisionMs"]
    wheel = TimerWheel(str(root / "timerwheel"), precision)
    log = TimerLog(str(root / "timerlog"))
    got = wheel.used_slots()
    want = e["timerWheelSlots"]
    assert len(got) == len(want) == 158
    for s, w in zip(got, want):
        assert (s.index, s.time_units * precision, s.first_pos, s.last_pos, s.num, s.magic) == (
            w["slotIndex"], w["timeMs"], w["firstPos"], w["lastPos"], w["num"], w["magic"])
        assert [u.pos for u in walk_slot(log, s)] == w["chainFromLastPos"]
        assert (wheel.slot_for(w["timeMs"]) is not None) == w["getSlotMatches"]


def test_pending_cancelled_and_markers_equal_the_broker_after_load():
    root, e = _open()
    rep = list_timers(Store.open(root), precision_ms=e["timerStoreAfterLoad"]["precisionMs"])
    assert not rep.problems and not any(r.problems for r in rep.rows)
    pending = e["pendingAfterLoad"]
    counts = rep.counts()
    assert counts["pending"] == pending["pendingEntries"] == e["timerStoreAfterLoad"]["allCongestNum"] == 271
    assert (counts["pending_normal"], counts["pending_roll"], counts["cancelled"]) == (
        pending["pendingNormalEntries"], pending["pendingRollEntries"], pending["cancelledEntries"])
    by_pos = {r.timerlog_pos: r for r in rep.rows}
    assert sorted(r.timerlog_pos for r in rep.rows if r.state == "pending") == sorted(
        p["position"] for p in pending["pending"])
    assert sorted(r.timerlog_pos for r in rep.rows if r.state == "cancelled") == sorted(
        p["position"] for p in pending["cancelled"])
    for c in pending["cancelled"]:
        assert f"{by_pos[c['position']].real_topic}+{by_pos[c['position']].uniq_key}" == c["cancelledByDeleteKey"]
    markers = [r for r in rep.rows if r.state == "delete-marker"]
    assert [m.timerlog_pos for m in markers] == [d["position"] for d in e["deleteMarkers"]]
    for m, d in zip(markers, e["deleteMarkers"]):
        assert m.delete_key == d["timerDelUniqKey"]
        assert m.cancels == [c["position"] for c in d["cancels"]]
        for c in d["cancels"]:
            assert by_pos[c["position"]].cancelled_by == m.timerlog_pos
    # the commit-log side of every unit, as lookMessageByOffset read it
    units = {u["position"]: u for u in e["timerlog"] if u["kind"] != "blank"}
    for r in rep.rows:
        w = units[r.timerlog_pos]
        assert (r.topic, r.real_topic, r.uniq_key, r.timer_out_ms) == (
            w["msgTopic"], w["realTopic"], w["uniqKey"], int(w["timerOutMs"]))
        assert (r.state == "dequeued") == (not w["slotCountedByGetAllNum"])


def test_cli_pending_is_what_the_wheel_will_fire():
    root, e = _open()
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["timers", str(root), "--pending", "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == e["timerStoreAfterLoad"]["allCongestNum"]
    assert {x["state"] for x in rows} == {"pending"}
    r = CliRunner().invoke(cli, ["timers", str(root), "--format", "ndjson"])
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    cancelled = [x for x in rows if x["state"] == "cancelled"]
    assert len(cancelled) == 3 and all(x["cancelled_by"] is not None for x in cancelled)
    assert tree_hashes(root) == before
