"""The recovery plan's scan takes the runs verify's walk hands over (``recovery.walked``) only where they are its
own, and walks the rest itself: the plan is byte-for-byte the plan of its own walk, on crashed writer-made stores
where the two walks part (a body CRC the restart stops at, a stale PHYSICALOFFSET verify cuts a run at but the
restart accepts, SCHEDULE_TOPIC_XXXX records whose DELAY the scan parses, V2 records a 4.x release rejects, the
CRC not checked on recover, a confirm offset, a normal restart's dispatch-from offset, __CRC32# records, tiny
chunks over two workers, the hand-over overflowing) and on every oracle store; and where the runs are its own it
takes them instead of walking."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery.walked import WalkedRuns
from rmqinspect.analyses.report_data import TrafficTally, summary_beside_verify
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import PHYSICAL_OFFSET_POSITION, encode_properties
from rmqinspect.formats.constants import RMQ_SYS_SCHEDULE_TOPIC
from rmqinspect.store import Store
from rmqinspect.store.version import BrokerVersion
from support import ALL_SCENARIOS, require_oracle, tree_hashes
from support.recover_fixtures import BASE_TS, Fixture, Rec, build_store


def _handed(root, jobs: int, max_records: int | None = None) -> WalkedRuns:
    """The runs verify's walk hands the report's plan, all of them waiting (the plan runs after the walk here)."""
    handed = WalkedRuns(True) if max_records is None else WalkedRuns(True, max_records)
    with Store.open(str(root)) as st:
        summary_beside_verify(st, None, True, traffic=TrafficTally(), jobs=jobs, walked=handed)
    return handed


def _queues(plan) -> dict:
    """Every queue model's entries after the plan (what the re-dispatch wrote), as lists."""
    out = {}
    for key, m in sorted(plan.queue_models.items()):
        arrays = getattr(m, "arrays", None)
        if arrays is not None:
            out[key] = {s: np.asarray(a).tolist() for s, a in sorted(arrays.items())}
    return out


def _plans_agree(root, jobs: int = 1, max_records: int | None = None, **opts):
    """The plan that took verify's runs and the plan of its own walk, the same; returns (plan, records taken)."""
    handed = _handed(root, jobs, max_records)
    before = tree_hashes(root)
    with Store.open(str(root)) as st:
        took = plan_recovery(st, RecoveryOptions(keep_redispatch=False, tags_codes=False, walked=handed, **opts))
    with Store.open(str(root)) as st:
        own = plan_recovery(st, RecoveryOptions(keep_redispatch=False, tags_codes=False, **opts))
    assert json.dumps(took.to_dict(), sort_keys=True) == json.dumps(own.to_dict(), sort_keys=True)
    assert _queues(took) == _queues(own)
    assert handed.closed and not handed.runs  # the scan let go of what it did not take
    assert tree_hashes(root) == before
    return took, handed.taken


def _crashed(tmp_path, n: int = 600) -> Fixture:
    fx = build_store(tmp_path / "s", n=n)
    fx.set_abort()
    fx.write_checkpoint(fx.records[40].store_ts)  # older checkpoint: the abnormal scan starts files back
    return fx


@pytest.mark.parametrize("jobs", [1, 2])
def test_crc_stop_plan_takes_verify_runs_and_equals_its_own_walk(tmp_path, jobs, monkeypatch):
    monkeypatch.setenv("RMQINSPECT_CHUNK_BYTES", "4096")  # many chunks per file over two workers
    fx = _crashed(tmp_path)
    fx.patch(fx.records[450].offset + 95, b"\xff")  # body CRC: the restart truncates there
    plan, taken = _plans_agree(fx.root, jobs)
    assert plan.mode == "abnormal" and plan.truncate_offset == fx.records[450].offset
    assert plan.consume_queue_truncated and plan.redispatch_count > 300
    # every record the scan accepted came from verify's walk but those of the file it stopped in after the damage
    assert taken == plan.messages_scanned


def test_stale_physical_offset_verify_cuts_at_is_walked_by_the_scan(tmp_path):
    """verify cuts its run at a record whose stored PHYSICALOFFSET is not its offset; the restart (no
    checkCommitLogOffsetOnRecover) accepts it: the scan walks that file on from there itself."""
    fx = _crashed(tmp_path)
    stale = fx.records[300]
    fx.patch(stale.offset + PHYSICAL_OFFSET_POSITION, (stale.offset + 7).to_bytes(8, "big"))
    plan, taken = _plans_agree(fx.root)
    assert plan.truncate_offset == fx.records[-1].end  # nothing stops the restart
    assert 0 < taken < plan.messages_scanned


def test_crc_not_checked_on_recover_walks_past_the_damage_itself(tmp_path):
    fx = _crashed(tmp_path)
    fx.patch(fx.records[250].offset + 95, b"\xff")
    plan, taken = _plans_agree(fx.root, check_crc=False)
    assert plan.truncate_offset == fx.records[-1].end
    assert 0 < taken < plan.messages_scanned


def test_normal_restart_dispatch_from_and_confirm_offset_cut_agree(tmp_path):
    fx = build_store(tmp_path / "s", n=600)
    fx.write_consume_queues(fx.records[:500])  # the queues stop short: a 5.x normal restart dispatches the rest
    plan, taken = _plans_agree(fx.root, version=BrokerVersion.parse("5.3.3"))
    # recoverNormally dispatches records past maxPhyOffsetOfConsumeQueue (the 500th record's end), strictly:
    # the first record after the queues' last entry starts exactly there and is left to the reput
    assert plan.mode == "normal" and plan.redispatch_count == 99 and taken > 0
    fx2 = _crashed(tmp_path / "b")
    plan, taken = _plans_agree(fx2.root, confirm_offset=fx2.records[420].end + 3)
    assert plan.redispatch_count and taken > 0


def _writer_store(root, specs: list[MessageSpec], file_size: int = 16384) -> Fixture:
    fx = Fixture(str(root), file_size, 400)
    os.makedirs(os.path.join(fx.root, "config"), exist_ok=True)
    with CommitLogWriter(fx.commitlog, file_size) as w:
        for s in specs:
            res = w.append(s)
            fx.records.append(Rec(res.physical_offset, res.total_size, s.topic, s.queue_id, res.queue_offset,
                                  s.store_timestamp, s.body, ""))
    fx.write_consume_queues(fx.records[:len(fx.records) // 3])
    fx.write_checkpoint(fx.records[0].store_ts)
    fx.set_abort()
    return fx


def _spec(i: int, topic: str = "OrderTopic", **kw) -> MessageSpec:
    props = kw.pop("props", {"UNIQ_KEY": "%032X" % i, "KEYS": f"k-{i}"})
    return MessageSpec(topic=topic, queue_id=i % 2, body=b"body %d" % i * 8, properties=encode_properties(props),
                       born_timestamp=BASE_TS + i, store_timestamp=BASE_TS + i * 1000, **kw)


def test_schedule_topic_records_get_their_delivery_time_and_a_bad_delay_stops_the_scan_in_its_own_walk(tmp_path):
    specs = [_spec(i) for i in range(300)]
    for i, delay in ((90, "3"), (91, "0"), (200, "99"), (201, "-2")):  # a level past the table's, none, below
        specs[i] = _spec(i, RMQ_SYS_SCHEDULE_TOPIC, props={"DELAY": delay, "REAL_TOPIC": "OrderTopic",
                                                           "REAL_QID": "0", "TAGS": "TagA"})
    specs[95] = _spec(95, RMQ_SYS_SCHEDULE_TOPIC, props={"REAL_TOPIC": "OrderTopic", "TAGS": "TagB"})
    fx = _writer_store(tmp_path / "s", specs)
    plan, taken = _plans_agree(fx.root)
    assert plan.truncate_offset == fx.records[-1].end and taken == plan.messages_scanned
    sched = [k for k in plan.queue_models if k.startswith(RMQ_SYS_SCHEDULE_TOPIC)]
    assert sched and any(plan.queue_models[k].rec.redispatched for k in sched)
    specs[260] = _spec(260, RMQ_SYS_SCHEDULE_TOPIC, props={"DELAY": "x3", "REAL_TOPIC": "OrderTopic"})
    fx = _writer_store(tmp_path / "s2", specs)
    plan, taken = _plans_agree(fx.root)
    assert plan.stop_kind == "illegal" and plan.truncate_offset == fx.records[260].offset
    assert 0 < taken < plan.messages_scanned  # the run holding it is walked by the scan itself


def test_v2_records_a_4x_release_rejects_stop_the_scan_as_its_own_walk_does(tmp_path):
    specs = [_spec(i) for i in range(300)]
    specs[150] = _spec(150, "T" * 130)  # a topic over 127 bytes: a V2 record
    fx = _writer_store(tmp_path / "s", specs)
    old, taken_old = _plans_agree(fx.root, version=BrokerVersion.parse("4.9.8"))
    new, taken_new = _plans_agree(fx.root, version=BrokerVersion.parse("5.3.3"))
    # the run holding the V2 record is walked by the 4.x scan itself, up to that record
    assert old.truncate_offset == fx.records[150].offset and 0 < taken_old < old.messages_scanned
    assert new.truncate_offset == fx.records[-1].end and taken_new == new.messages_scanned


def test_crc32_property_records_are_noticed_from_verify_runs(tmp_path):
    """__CRC32# records in a store a 4.x release is assumed for: the scan notes them, from the handed runs."""
    specs = [_spec(i, append_property_crc=120 <= i < 210) for i in range(300)]
    fx = _writer_store(tmp_path / "s", specs)
    plan, taken = _plans_agree(fx.root, version=BrokerVersion.parse("4.9.8"))
    assert any("__CRC32#" in n for n in plan.notes) and taken == plan.messages_scanned
    # a 5.1 normal restart dispatches only past the queues' end, inside a run (a file) whose __CRC32# records
    # begin before that end and stop a few records after it: only that run's last ones say so
    fx.set_abort(False)
    k = next(k for k in range(150, 205) if len({fx.file_of(fx.records[j].offset) for j in range(k - 1, k + 4)}) == 1)
    fx.write_consume_queues(fx.records[:k])
    fx.write_checkpoint(fx.records[-1].store_ts)
    plan, taken = _plans_agree(fx.root, version=BrokerVersion.parse("5.1.0"))
    assert plan.mode == "normal" and plan.redispatch_count == 299 - k and taken == plan.messages_scanned
    assert any("__CRC32#" in n for n in plan.notes)


def test_handing_over_stops_past_its_bound_and_the_scan_walks_the_rest(tmp_path):
    fx = _crashed(tmp_path)
    plan, taken = _plans_agree(fx.root, max_records=100)
    assert taken == 0 and plan.messages_scanned > 100


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_plan_taking_verify_runs_is_its_own(scenario):
    _plans_agree(require_oracle(scenario) / "store")


@pytest.mark.parametrize("jobs", [1, 2])
def test_report_plan_takes_verify_runs_beside_the_walk(tmp_path, jobs, monkeypatch):
    """In the report, the plan's thread takes the runs as verify's walk hands them: every record its scan accepts
    comes from them, and the plan is the one ``plan_recovery`` makes alone."""
    from rmqinspect.analyses import report_data

    made: list[WalkedRuns] = []

    class Recorded(WalkedRuns):
        def __init__(self, *a):
            super().__init__(*a)
            made.append(self)

    monkeypatch.setattr(report_data, "WalkedRuns", Recorded)
    fx = _crashed(tmp_path)
    fx.patch(fx.records[450].offset + 95, b"\xff")
    with Store.open(fx.root) as st:
        got = report_data.collect_store_report(st, jobs=jobs)
    with Store.open(fx.root) as st:
        alone = plan_recovery(st, RecoveryOptions(keep_redispatch=False))
    assert json.dumps(got.plan.to_dict(), sort_keys=True) == json.dumps(alone.to_dict(), sort_keys=True)
    assert len(made) == 1 and made[0].closed and made[0].taken == got.plan.messages_scanned > 300
