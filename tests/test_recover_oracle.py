"""`recover --dry-run` against what the real broker did (expected.json stateAfterLoad, filesBefore/After,
dispatchRecorded phase `load`), for every oracle scenario that carries a recovered state."""

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes


def _plan(name, version=None, **kw):
    p = require_oracle(name)
    e = load_expected(name)
    if "stateAfterLoad" not in e:
        pytest.skip(f"{name} has no recovered state")
    st = Store.open(p / "store")
    v = BrokerVersion.parse(version) if version else None
    return st, plan_recovery(st, RecoveryOptions(version=v, **kw)), e


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_truncation_point_and_commitlog_files(name):
    st, plan, e = _plan(name)
    s = e["stateAfterLoad"]
    assert plan.mode == ("abnormal" if e["abortFilePresentBeforeLoad"] else "normal")
    # the broker's max offset after load; for DLedger truncate_offset is where the data is cut (its data end)
    assert plan.max_offset_after_load == s["commitLogMaxOffset"]
    assert plan.truncate_offset == (s["dledger"]["dataMaxWrotePosition"] if "dledger" in s else s["commitLogMaxOffset"])
    assert [(f["name"], f["wrote_position"]) for f in plan.commitlog_files_after] == \
        [(f["name"], f["wrotePosition"]) for f in s["commitLogFiles"]]
    before = {f["path"] for f in e["filesBefore"]}
    after = {f["path"] for f in e["filesAfter"]}
    deleted = before - after
    assert sorted("commitlog/" + n for n in plan.commitlog_files_deleted) == \
        sorted(p for p in deleted if p.startswith("commitlog/"))
    assert sorted("index/" + n for n in plan.index_files_dropped) == \
        sorted(p for p in deleted if p.startswith("index/"))
    t = plan.commitlog_file_truncated
    last = s["commitLogFiles"][-1]
    assert t == {"name": last["name"], "position": last["wrotePosition"]}


def _lazy_rocksdb_queues(e, state):
    """README (rocksdb-cq-small): RocksDB consume queues are opened lazily, so the broker's state lists none
    until the harness opened every queue (stateAfterStartWithAllQueuesOpened). Nothing was dispatched while
    the copy was open, so that snapshot also holds the queues as load() left them."""
    expected = e[state]["consumeQueues"]
    if not expected and "stateAfterStartWithAllQueuesOpened" in e:
        assert not any(e["dispatchRecorded"].values())
        expected = e["stateAfterStartWithAllQueuesOpened"]["consumeQueues"]
        assert expected
    return expected


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_consume_queue_max_offsets_after_load(name):
    st, plan, e = _plan(name)
    expected = _lazy_rocksdb_queues(e, "stateAfterLoad")
    compared = 0
    for topic, queues in expected.items():
        for qid, v in queues.items():
            key = f"{topic}/{qid}"
            if not v["files"] and key not in plan.consume_queue_max_offsets:
                # README: RocketMQ keeps in-memory SCHEDULE_TOPIC_XXXX queues without files
                assert topic == "SCHEDULE_TOPIC_XXXX" and v["maxOffset"] == 0
                continue
            assert plan.consume_queue_max_offsets[key] == v["maxOffset"], key
            compared += 1
    for key in plan.consume_queue_max_offsets:
        topic, qid = key.rsplit("/", 1)
        assert qid in expected.get(topic, {}), f"{key} not known to the broker"
    if any(v["files"] for qs in expected.values() for v in qs.values()):
        assert compared > 0


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_redispatch_equals_broker_load_phase(name):
    st, plan, e = _plan(name)
    assert [r.as_list() for r in plan.redispatch] == e["dispatchRecorded"].get("load", [])


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_version_detection_matches_oracle(name):
    """The release the files prove or suggest is the broker's; where the files cannot tell the broker's release
    band from the one assumed (develop@8fc57f1 = 5.3.4 written without a 5.3.4-only layout looks like 5.3.3), the
    plan names the broker's band as the alternative and gives, under its rules, the broker's start file and
    truncation point."""
    st, plan, e = _plan(name)
    want = BrokerVersion.parse(e["rocketmqVersion"])
    va = plan.version
    assert va.source in ("detected", "default")
    if va.version.parts == want.parts:
        assert va.version.text == e["rocketmqVersion"] or want.text.startswith("develop-")
    else:
        assert want.recovery_band in [a.recovery_band for a in va.alternatives], va.describe()
        answers = {a["band"]: a for a in plan.band_answers}
        assert answers[want.recovery_band]["truncate_offset"] == e["stateAfterLoad"]["commitLogMaxOffset"]
        assert answers[want.recovery_band]["start_file"] == e["recovery"]["startFile"]
        same = all(a["truncate_offset"] == plan.truncate_offset for a in plan.band_answers)
        assert any(("cannot tell" if same else "give different answers") in n for n in plan.notes)


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_max_phy_offset_of_consume_queue_matches_broker_log(name):
    require_oracle(name)
    e = load_expected(name)
    lines = [ln for ln in e.get("rocketmqLogExcerpt", []) if "maxPhyOffsetOfConsumeQueue(" in ln]
    if not lines:
        pytest.skip(f"{name}: the broker logged no maxPhyOffsetOfConsumeQueue line (nothing truncated)")
    st, plan, _ = _plan(name)
    logged = int(lines[0].split("maxPhyOffsetOfConsumeQueue(")[1].split(")")[0])
    assert plan.max_phy_offset_of_consume_queue == logged, name
    assert plan.consume_queue_truncated


def test_torn_tail_losses_match_doctoring():
    for name, torn, size in (("rocketmq-all-4.9.8/crash-torn-tail", 1197830, 249),
                             ("rocketmq-all-5.3.3/crash-torn-tail", 1049124, 522)):
        st, plan, e = _plan(name)
        lost = plan.messages_lost
        assert lost["count"] == 1 and lost["intact"] == 0 and lost["bytes"] == size
        assert [(r["kind"], r["start"], r["end"]) for r in lost["regions"]] == [("torn_tail", torn, torn + size)]
        torn_msg = e["doctoring"]["tornMessage"]
        assert torn_msg["wroteOffset"] == torn
        assert lost["cq_entries_cut"] == {f"{torn_msg['topic']}/{torn_msg['queueId']}": 1}
        assert lost["per_topic"] == {torn_msg["topic"]: 1}


def test_4x_rules_reject_v2_records():
    """FORMATS §1.10: 4.x accepts only the V1 magic. Forcing 4.9.8 rules on the 5.3.3 clean store (normal
    start: third-last file) must stop the scan at the first V2 record at or after that file."""
    name = "rocketmq-all-5.3.3/clean"
    st, plan, e = _plan(name, version="4.9.8")
    start = plan.start_file
    first_v2 = min(m["physicalOffset"] for m in e["messages"]
                   if m.get("messageVersion") == "V2" and m["physicalOffset"] >= int(start))
    assert plan.truncate_offset == first_v2
    assert plan.stop_kind == "illegal"


def test_version_rules_table():
    assert BrokerVersion.parse("4.9.8").normal_rule == "third-last"
    assert BrokerVersion.parse("5.3.1").normal_rule == "third-last"
    assert BrokerVersion.parse("5.3.2").normal_rule == "cq-max"
    assert BrokerVersion.parse("HEAD").normal_rule == "head"
    assert not BrokerVersion.parse("5.0.0").accepts_v2 and BrokerVersion.parse("5.1.0").accepts_v2
    with pytest.raises(ValueError):
        BrokerVersion.parse("banana")


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_cli_recover_dry_run_json_never_writes(name):
    p = require_oracle(name)
    e = load_expected(name)
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["recover", str(p / "store"), "--dry-run", "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.stdout)
    for k in ("mode", "truncate_offset", "commitlog_files_deleted", "commitlog_file_truncated",
              "consume_queue_max_offsets", "messages_lost"):
        assert k in doc
    assert doc["max_offset_after_load"] == e["stateAfterLoad"]["commitLogMaxOffset"]
    assert doc["max_offset_after_start"] == e["stateAfterStart"]["commitLogMaxOffset"]
    assert r.exit_code == (1 if doc["messages_lost"]["count"] else 0)
    assert tree_hashes(p / "store") == before


def test_cli_recover_requires_dry_run_and_table_output():
    p = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    r = CliRunner().invoke(cli, ["recover", str(p / "store")])
    assert r.exit_code == 2 and "--dry-run" in r.output
    r = CliRunner().invoke(cli, ["recover", str(p / "store"), "--dry-run"])
    assert r.exit_code == 1
    assert "truncate_offset" in r.stdout and "1197830" in r.stdout and "4.9.8" in r.output
    r = CliRunner().invoke(cli, ["recover", str(p / "store"), "--dry-run", "--broker-version", "nope"])
    assert r.exit_code == 2


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_consume_queue_max_offsets_after_start(name):
    """After start(), the ReputMessageService dispatches [max queue maxPhysicOffset, T): compare with the
    broker's stateAfterStart (4.9.8 rebuild: every queue is built in this phase)."""
    st, plan, e = _plan(name)
    expected = _lazy_rocksdb_queues(e, "stateAfterStart")
    compared = 0
    for topic, queues in expected.items():
        for qid, v in queues.items():
            key = f"{topic}/{qid}"
            if key not in plan.consume_queue_max_offsets_after_start:
                assert not v["files"] and v["maxOffset"] == 0, key
                continue
            assert plan.consume_queue_max_offsets_after_start[key] == v["maxOffset"], key
            compared += 1
    assert compared > 0


@pytest.mark.parametrize("version", ["rocketmq-all-4.9.8", "rocketmq-all-5.3.3"])
def test_redispatched_entries_equal_broker_rebuilt_consume_queues(version):
    """rebuild scenario: the store has no consumequeue/; the broker regenerated it (5.3.3 during load, 4.9.8
    in start()). The entries our model dispatches must be byte-identical to expected/consumequeue/."""
    import os

    name = f"{version}/rebuild"
    st, plan, e = _plan(name, cq_file_size=1200)  # README: mappedFileSizeConsumeQueue = 1200
    exp_root = require_oracle(name) / "expected" / "consumequeue"
    compared = 0
    for topic in sorted(os.listdir(exp_root)):
        for qid in sorted(os.listdir(exp_root / topic)):
            got = plan.consume_queue_files(f"{topic}/{qid}")
            for fname in sorted(os.listdir(exp_root / topic / qid)):
                want = (exp_root / topic / qid / fname).read_bytes().rstrip(b"\0")
                have = got[fname].rstrip(b"\0")
                assert have == want, (topic, qid, fname)
                compared += 1
    assert compared >= 40
