"""`fate` on the oracle: the consume-queue entry after a restart and whether the record survives it are
the broker's after-recovery state in expected.json (RocketMQ started on a copy of the store)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.fate import message_fate
from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import require_oracle

SCENARIOS = ["rocketmq-all-4.9.8/clean", "rocketmq-all-4.9.8/crash-torn-tail", "rocketmq-all-5.3.3/clean",
             "rocketmq-all-5.3.3/crash-torn-tail"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fate_agrees_with_the_broker_after_restart(scenario):
    root = require_oracle(scenario)
    exp = json.loads((root / "expected.json").read_text())
    after = {e[1]: e for qs in exp["consumeQueues"].values() for q in qs.values() for e in q.get("entries", [])}
    max_after = exp["stateAfterStart"]["commitLogMaxOffset"]
    msgs = exp["messages"]
    sample = msgs[::41] + msgs[-2:]
    torn = exp.get("doctoring", {}).get("tornMessage", {}).get("wroteOffset")
    with Store.open(root / "store") as st:
        plan = plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False))
        for m in sample:
            off = m["physicalOffset"]
            f = message_fate(st, off, plan=plan)
            assert f.topic == m["topic"] and f.queue_offset == m["queueOffset"], off
            if off + m["storeSize"] > max_after:
                assert f.after_restart.startswith("cut"), (off, f.after_restart)
                assert f.after_restart_entry is None
            else:
                assert f.after_restart_entry == after.get(off), off
                assert f.after_restart.startswith("survives"), (off, f.after_restart)
        # why a record has no consume-queue entry, and when a delayed one is due: the broker's dispatch in
        # expected.json (inConsumeQueue, cqTagsCode = the delivery time in SCHEDULE_TOPIC_XXXX)
        special = [m for m in msgs if not m["inConsumeQueue"] or m["topic"] == "SCHEDULE_TOPIC_XXXX"][:12]
        for m in special:
            if m["physicalOffset"] + m["storeSize"] > max_after:
                continue
            f = message_fate(st, m["physicalOffset"], plan=plan)
            if not m["inConsumeQueue"]:
                assert f.consume_queue.startswith("none: a ") and f.consume_queue_entry is None, f.consume_queue
                assert "transaction" in f.consume_queue and m["transactionType"] in (4, 12)
            else:
                assert f.delivery_due == m["cqTagsCode"] and f.consume_queue_entry[3] == m["cqTagsCode"]
                assert m["properties"]["REAL_TOPIC"] in f.consume_queue
        assert special or scenario.endswith("5.3.3/clean")
        if torn is not None:
            f = message_fate(st, torn, plan=plan)
            assert f.after_restart.startswith("cut") and torn >= max_after and torn not in after
            assert f.record != "intact"


def test_fate_cli_key_and_consumers(tmp_path):
    root = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    exp = json.loads((root / "expected.json").read_text())
    m = next(x for x in exp["messages"] if x["topic"] == "LogTopic" and "ord-15" in (x["keys"] or ""))
    offsets = tmp_path / "consumerOffset.json"  # a copied consumerOffset.json, outside the store
    offsets.write_text(json.dumps({"offsetTable": {
        "LogTopic@done": {str(m["queueId"]): m["queueOffset"] + 1},
        "LogTopic@behind": {str(m["queueId"]): m["queueOffset"]}}}))
    r = CliRunner().invoke(cli, ["fate", str(root / "store"), "--uniq-key", m["uniqKey"].lower(), "--offsets",
                                 str(offsets), "--format", "json"])
    assert r.exit_code == 0, r.output
    [f] = json.loads(r.stdout)
    assert f["physical_offset"] == m["physicalOffset"] and f["uniq_key"] == m["uniqKey"]
    assert {c["group"]: c["consumed"] for c in f["consumers"]} == {"done": True, "behind": False}
    assert any(i["key"] == m["uniqKey"] for i in f["index_items"])
    r = CliRunner().invoke(cli, ["fate", str(root / "store"), "--key", "nosuchkey", "--topic", "LogTopc"])
    assert r.exit_code == 3 and "nearest: LogTopic" in r.stderr
