"""`verify` on the oracle stores: clean stores are clean; the torn tail is found exactly."""

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.verify import verify
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_verify_oracle(name):
    p = require_oracle(name)
    e = load_expected(name)
    rep = verify(Store.open(p / "store"))
    if "doctoring" not in e:
        assert rep.problems == [], [x.to_dict() for x in rep.problems]
        assert rep.counts["records"] > 0
        if "messages" in e:
            assert rep.counts["records"] == len(e["messages"])
        return
    torn = e["doctoring"]["tornMessage"]
    lo, hi = torn["wroteOffset"], torn["wroteOffset"] + torn["wroteBytes"]
    commitlog = [x for x in rep.problems if x.check in ("crc", "structure")]
    assert [(x.kind, x.start, x.end, x.file) for x in commitlog] == \
        [("torn_tail", lo, hi, "commitlog/" + e["doctoring"]["commitLogFile"])]
    assert commitlog[0].position == e["doctoring"]["filePosition"]
    # everything else is a consume-queue entry / index item that still points at the torn record
    others = [x for x in rep.problems if x not in commitlog]
    assert {x.kind for x in others} == {"cq_points_to_damage", "index_points_to_damage"}
    assert all(f"physical offset {lo}" in x.reason for x in others)
    cq = [x for x in others if x.check == "cq"]
    assert len(cq) == 1 and cq[0].start == torn["logicsOffset"] * 20
    assert cq[0].file.startswith(f"consumequeue/{torn['topic']}/{torn['queueId']}/")


def test_verify_checkpoint_ahead_of_data(tmp_path):
    """A checkpoint claiming a flush newer than every record means flushed data is gone."""
    import shutil

    p = require_oracle("rocketmq-all-4.9.8/clean")
    shutil.copytree(p / "store" / "commitlog", tmp_path / "commitlog")
    cp = bytearray((p / "store" / "checkpoint").read_bytes())
    cp[0:8] = (int.from_bytes(cp[0:8], "big") + 3_600_000).to_bytes(8, "big")
    (tmp_path / "checkpoint").write_bytes(bytes(cp))
    rep = verify(Store.open(tmp_path), ("checkpoint",))
    assert [x.kind for x in rep.problems] == ["checkpoint_ahead"]
    assert "physicMsgTimestamp" in rep.problems[0].reason


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_cli_verify_exit_codes_and_ndjson(name):
    p = require_oracle(name)
    e = load_expected(name)
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["verify", str(p / "store"), "--format", "ndjson"])
    want = 1 if "doctoring" in e else 0
    assert r.exit_code == want, r.output
    lines = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert "summary" in lines[-1] and lines[-1]["summary"]["ok"] == (want == 0)
    assert all({"check", "kind", "start", "end", "file", "position", "reason"} <= set(x) for x in lines[:-1])
    assert tree_hashes(p / "store") == before


def test_cli_verify_table_json_and_options():
    p = require_oracle("rocketmq-all-5.3.3/crash-torn-tail")
    r = CliRunner().invoke(cli, ["verify", str(p / "store")])
    assert r.exit_code == 1 and "torn_tail" in r.stdout and "Problems by kind" in r.stdout
    r = CliRunner().invoke(cli, ["verify", str(p / "store"), "--checks", "crc,structure", "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["checks"] == ["structure", "crc"] and len(doc["problem_ranges"]) == 1
    r = CliRunner().invoke(cli, ["verify", str(p / "store"), "--max-errors", "1", "--format", "json"])
    doc = json.loads(r.stdout)
    assert len(doc["problem_ranges"]) == 1 and doc["suppressed"] >= 1
    r = CliRunner().invoke(cli, ["verify", str(p / "store"), "--checks", "bogus"])
    assert r.exit_code == 2
    r = CliRunner().invoke(cli, ["verify", str(p / "nope")])
    assert r.exit_code == 3 and "Traceback" not in r.output


def test_verify_checks_rocksdb_consume_queue_entries():
    """5.x RocksDB consume queue: every entry is checked against its record like a file CQ entry (read from a
    private snapshot); the oracle store is clean and stays byte-identical."""
    from rmqinspect.analyses.verify import verify
    from rmqinspect.store import Store

    name = "rocketmq-all-5.3.3/rocksdb-cq-small"
    p = require_oracle(name)
    exp = load_expected(name)
    before = tree_hashes(p / "store")
    rep = verify(Store.open(p / "store"))
    assert rep.counts["cq_entries"] == sum(len(q["entries"]) for t in exp["consumeQueues"].values()
                                           for q in t.values())
    assert rep.problems == [] and any("RocksDB" in n for n in rep.notes)
    assert tree_hashes(p / "store") == before


def test_verify_broker_version_4x_flags_v2_records():
    """Under 4.x rules every V2 record of the 5.3.3 store is an illegal record (the walk resyncs past each)."""
    from click.testing import CliRunner

    from rmqinspect.cli.main import cli

    name = "rocketmq-all-5.3.3/clean"
    p = require_oracle(name)
    exp = load_expected(name)
    r = CliRunner().invoke(cli, ["verify", str(p / "store"), "--checks", "structure", "--format", "json",
                                 "--broker-version", "4.9.8"])
    assert r.exit_code == 1
    d = json.loads(r.stdout)
    flagged = sum(x["bytes"] for x in d["summary"] if x["kind"] == "illegal")
    assert flagged == sum(e["storeSize"] for e in exp["messages"] if e["magicCode"] == "0xDAA320AB")
    r = CliRunner().invoke(cli, ["verify", str(p / "store"), "--checks", "structure", "--broker-version", "5.3.3"])
    assert r.exit_code == 0
