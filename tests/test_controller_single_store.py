"""Controller mode (AutoSwitch HA) in the single-store commands: store-info says the HA mode, role and brokerId with
their evidence; recover --dry-run says the confirm offset, the unconfirmed tail and whether the broker loads the
store; verify reports the load failure and hostile epoch files and does not call the unconfirmed tail 'cq_behind'.
Checked on the replicas RocketMQ wrote (../shared/replicas) and on writer-made stores."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rmqinspect.analyses.recovery.controller import detect_confirm_offset
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.replica import diverging_replicas, set_confirm_offset, write_broker_conf, write_epoch_file
from rmqinspect.fixtures.sample import LONG_TOPIC, mixed_messages
from rmqinspect.store import Store
from support import load_replica_expected, require_replicas, tree_hashes

FAILOVER = "rocketmq-develop-8fc57f1/ha-autoswitch-failover"
CLASSIC = "rocketmq-develop-8fc57f1/ha-classic-lag"


def _json(args):
    res = CliRunner().invoke(cli, args)
    return res, (json.loads(res.stdout) if res.stdout.strip().startswith("{") else None)


def test_store_info_says_the_ha_mode_and_decodes_the_epoch_file():
    root = require_replicas(FAILOVER)
    exp = load_replica_expected(FAILOVER)["replicas"]["master"]
    res, doc = _json(["store-info", str(root / "master" / "store"), "--format", "json"])
    assert res.exit_code == 0, res.output
    ha = doc["ha"]
    assert ha["mode"] == "controller" and "epochFileCheckpoint is present" in ha["mode_evidence"]
    assert ha["role"] is None and "broker.conf" in ha["role_evidence"]
    assert ha["checkpoint_confirm_phy_offset"] == exp["checkpointBeforeLoad"]["confirmPhyOffset"]
    assert [(e["epoch"], e["start_offset"]) for e in ha["epoch_file"]["entries"]] == [
        (e["epoch"], e["startOffset"]) for e in exp["epochFileBeforeLoad"]["entries"]]
    assert ha["epoch_file"]["bak"]["entries"][0]["epoch"] == 1  # the .bak: the previous write, one entry
    croot = require_replicas(CLASSIC)
    res, doc = _json(["store-info", str(croot / "slave" / "store"), "--format", "json"])
    assert doc["ha"]["mode"] == "classic" and doc["ha"]["epoch_file"]["present"] is False


def test_store_info_reads_broker_conf_role_keys(tmp_path):
    root = require_replicas(CLASSIC)
    conf = tmp_path / "broker.conf"
    write_broker_conf(str(conf), brokerRole="SLAVE", brokerId=1, enableControllerMode=False)
    res, doc = _json(["store-info", str(root / "slave" / "store"), "--broker-config", str(conf), "--format", "json"])
    assert res.exit_code == 0, res.output
    ha = doc["ha"]
    assert (ha["mode"], ha["role"], ha["broker_id"]) == ("classic", "SLAVE", 1)
    assert "enableControllerMode=false in" in ha["mode_evidence"] and str(conf) in ha["role_evidence"]


def test_recover_dry_run_says_the_old_master_would_not_load_and_its_unconfirmed_tail():
    root = require_replicas(FAILOVER)
    store = root / "old-master-before" / "store"
    before = tree_hashes(store)
    exp = load_replica_expected(FAILOVER)["replicas"]["old-master-before"]
    res, doc = _json(["recover", str(store), "--dry-run", "--format", "json"])
    assert res.exit_code == 1  # the broker would not start
    c = doc["controller"]
    assert c["confirm_offset"] == exp["haAfterLoad"]["confirmOffset"] == 884448
    assert (c["unconfirmed"]["from_offset"], c["unconfirmed"]["to_offset"], c["unconfirmed"]["messages"]) == (
        884448, 973721, 100)
    assert c["will_start"] is False and c["load_failure"]["physical_offset"] == 892492
    # the plan itself stops the dispatch at the confirm offset: the queues as RocketMQ served them after start
    got = doc["consume_queue_max_offsets_after_start"]
    want = {f"{t}/{q}": v["maxOffset"] for t, qs in exp["stateAfterStart"]["consumeQueues"].items()
            for q, v in qs.items()}
    assert got == want
    assert doc["redispatched"]["count"] == 700  # recoverAbnormally dispatches only the confirmed records
    res = CliRunner().invoke(cli, ["recover", str(store), "--dry-run"])
    assert "will it start" in res.output and "compensateForHA" in res.output
    assert tree_hashes(store) == before
    res, doc = _json(["recover", str(require_replicas(CLASSIC) / "master" / "store"), "--dry-run", "--format",
                      "json"])
    assert "controller" not in doc


def test_verify_reports_the_load_failure_and_not_the_unconfirmed_tail_as_cq_behind():
    root = require_replicas(FAILOVER)
    res, doc = _json(["verify", str(root / "old-master-before" / "store"), "--format", "json"])
    assert res.exit_code == 1
    kinds = [(p["check"], p["kind"], p["start"]) for p in doc["problem_ranges"]]
    assert kinds == [("checkpoint", "will_not_load", 892492)]
    assert any("[884448, 973721) is past confirmPhyOffset" in n for n in doc["notes"])
    res, doc = _json(["verify", str(root / "master" / "store"), "--format", "json"])
    assert res.exit_code == 0 and doc["ok"]


def test_verify_names_hostile_epoch_files_and_a_confirm_offset_past_the_data(tmp_path):
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    specs = [s for s in mixed_messages(60, seed=5) if s.topic != LONG_TOPIC][:25]
    fork, (end, _) = diverging_replicas([a, b], specs, [[], []])
    write_epoch_file(a, [(2, 100), (1, 0), (3, end + 500)], crc=0)
    set_confirm_offset(a, end + 10)
    assert detect_confirm_offset(Store.open(a)) == end + 10
    res, doc = _json(["verify", a, "--format", "json"])
    assert res.exit_code == 1
    got = {p["kind"]: p["reason"] for p in doc["problem_ranges"]}
    assert "must both increase" in got["epoch_file"]
    assert f"epoch 3 starts at {end + 500}, past the end of the data ({end})" == got["epoch_past_data"]
    assert "epoch 2 starts at 100, not at a valid record" in got["epoch_not_record"]
    assert f"confirmPhyOffset {end + 10} is past the end of the data ({end})" in got["confirm_past_data"]
    # the same store without an epoch file and without broker.conf: classic, none of this applies
    set_confirm_offset(b, end)
    assert detect_confirm_offset(Store.open(b)) == -1


def test_cq_join_and_fate_call_the_unconfirmed_tail_unconfirmed_not_missing():
    root = require_replicas(FAILOVER)
    store = str(root / "old-master-before" / "store")
    lost = load_replica_expected(FAILOVER)["comparison"]["oldMasterBeforeVsMaster"]["lossWindow"]["list"]
    n = sum(1 for m in lost if (m["topic"], m["queueId"]) == ("LogTopic", 0))
    res = CliRunner().invoke(cli, ["cq", store, "--topic", "LogTopic", "--queue", "0", "--join"])
    assert res.exit_code == 0, res.output  # before: cq_behind, exit 1
    assert f"LogTopic/0: {n} more record(s) of this queue lie past confirmPhyOffset 884448" in res.stderr
    first = lost[0]
    res = CliRunner().invoke(cli, ["fate", store, "--offset", str(first["physicalOffset"]), "--format", "json"])
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    assert doc["consume_queue_entry"] is None and doc["uniq_key"] == first["uniqKey"]
    assert doc["after_restart"].startswith("survives in the commit log, unconfirmed (controller mode: past "
                                           "confirmPhyOffset 884448)")


def test_a_set_confirm_offset_alone_does_not_make_a_store_controller_mode(tmp_path):
    """A classic broker's recovery writes confirmPhyOffset too (setConfirmOffset(lastValidMsgPhyOffset)): the
    ha-classic-lag master's checkpoint holds it after RocketMQ loaded the copy."""
    require_replicas(CLASSIC)
    exp = load_replica_expected(CLASSIC)["replicas"]["master"]
    assert exp["checkpointBeforeLoad"]["confirmPhyOffset"] == 0
    assert exp["haAfterLoad"]["checkpointConfirmPhyOffset"] > 0  # what the broker wrote when it loaded the copy
    a = str(tmp_path / "A")
    diverging_replicas([a], [s for s in mixed_messages(20, seed=3) if s.topic != LONG_TOPIC], [[]])
    set_confirm_offset(a, 1234)
    res, doc = _json(["store-info", a, "--format", "json"])
    assert doc["ha"]["mode"] == "classic" and "does not tell the modes apart" in doc["ha"]["mode_evidence"]
    res, doc = _json(["recover", a, "--dry-run", "--format", "json"])
    assert "controller" not in doc
    conf = tmp_path / "broker.conf"
    write_broker_conf(str(conf), brokerRole="SLAVE", brokerId=1)
    res = CliRunner().invoke(cli, ["recover", a, "--dry-run", "--broker-config", str(conf)])
    assert "classic SLAVE" in res.stderr and "start file above is its own" in res.stderr
