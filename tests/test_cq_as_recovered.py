"""`cq --as-recovered`: every file consume queue as the broker holds it after recovering the directory equals
expected.json's consumeQueues (read back by RocketMQ after load/start), crashed stores included, with no flags
and with the scenario's own broker.conf."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes

SCENARIOS = [n for n in ALL_SCENARIOS if "dledger" not in n and "rocksdb" not in n]


def _broker_conf(tmp_path, exp) -> str:
    p = tmp_path / "broker.conf"
    flat = {k: v for k, v in exp["storeConfig"].items() if v is not None and not isinstance(v, (dict, list))}
    p.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in flat.items()))
    return str(p)


@pytest.mark.parametrize("with_conf", [False, True], ids=["inferred", "broker.conf"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_recovered_queue_equals_the_broker(name, with_conf, tmp_path):
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    before = tree_hashes(store)
    conf = ["--broker-config", _broker_conf(tmp_path, exp)] if with_conf else []
    r = CliRunner().invoke(cli, ["cq", str(store), "--all", "--as-recovered", "--format", "json", *conf])
    assert r.exit_code == 0, r.output
    modelled = {(q["topic"], q["queue_id"]) for q in json.loads(r.stdout)}
    compared = 0
    for topic, queues in exp["consumeQueues"].items():
        for qid, want in queues.items():
            args = ["cq", str(store), "--topic", topic, "--queue", qid, "--as-recovered", "--format", "json", *conf]
            r = CliRunner().invoke(cli, args)
            if (topic, int(qid)) not in modelled or exp.get("batchConsumeQueues", {}).get(topic):
                # the broker keeps empty in-memory queues (e.g. SCHEDULE_TOPIC_XXXX levels) without files
                assert want["entries"] == [] or exp.get("batchConsumeQueues", {}).get(topic), (topic, qid)
                continue
            assert r.exit_code == 0, r.output
            got = [[e["queue_offset"], e["physical_offset"], e["size"], e["tags_code"]] for e in json.loads(r.stdout)]
            assert got == want["entries"], (topic, qid)
            compared += 1
    assert compared > 0
    assert tree_hashes(store) == before
