"""The releases after 5.3.3 on the stores RocketMQ develop@8fc57f1 (the base of 5.3.4) wrote: with
``--broker-version 5.3.4`` and each store's own broker.conf, every message is decoded, ``recover --dry-run`` starts
and truncates where the broker did and leaves the broker's per-queue max offsets, ``cq --as-recovered`` gives both
queues of the combine store as the broker holds them, and ``index-lookup --as-recovered`` answers every recorded
query as the broker did. Where the files cannot tell 5.3.3 from 5.3.4+, the plan says both answers."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import load_expected, require_oracle, tree_hashes

DEVELOP = ["rocketmq-develop-8fc57f1/clean", "rocketmq-develop-8fc57f1/combine-cq-crash"]
COMBINE = "rocketmq-develop-8fc57f1/combine-cq-crash"


def _conf(tmp_path, exp) -> list[str]:
    """The scenario's MessageStoreConfig as a broker.conf (brokerRole of the observing open left out)."""
    p = tmp_path / "broker.conf"
    flat = {k: v for k, v in exp["storeConfig"].items()
            if v is not None and not isinstance(v, (dict, list)) and k != "brokerRole"}
    p.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in flat.items()))
    return ["--broker-version", "5.3.4", "--broker-config", str(p)]


def _run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert r.exit_code in (0, 1, 3), r.output
    return r


@pytest.mark.parametrize("name", DEVELOP)
def test_every_message_is_decoded_as_the_broker_read_it(name, tmp_path):
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    r = _run("decode-commitlog", store, "--from", 0, "--format", "ndjson", *_conf(tmp_path, exp))
    got = [json.loads(x) for x in r.stdout.splitlines()]
    want = exp["messages"]
    assert [m["physical_offset"] for m in got] == [m["physicalOffset"] for m in want]
    for g, w in zip(got, want, strict=True):
        assert (g["topic"], g["queue_id"], g["queue_offset"], g["store_timestamp"], g["body_crc"]) == \
            (w["topic"], w["queueId"], w["queueOffset"], w["storeTimestamp"], w["bodyCRC"]), w["genLabel"]


@pytest.mark.parametrize("name", DEVELOP)
def test_recover_dry_run_equals_the_broker(name, tmp_path):
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    before = tree_hashes(store)
    r = _run("recover", store, "--dry-run", "--format", "json", *_conf(tmp_path, exp))
    plan = json.loads(r.stdout)
    assert plan["broker_version"]["source"] == "option" and plan["broker_version"]["recovery_band"] == "5.3.4+"
    assert plan["mode"] == exp["recovery"]["lastExit"]
    assert plan["start_file"] == exp["recovery"]["startFile"]
    assert plan["truncate_offset"] == exp["recovery"]["maxPhyOffsetAfterRecovery"] == \
        exp["stateAfterLoad"]["commitLogMaxOffset"]
    for phase, key in (("stateAfterLoad", "consume_queue_max_offsets"),
                       ("stateAfterStart", "consume_queue_max_offsets_after_start")):
        want = {f"{t}/{q}": v["maxOffset"] for t, qs in exp[phase]["consumeQueues"].items() for q, v in qs.items()}
        assert {k: v for k, v in plan[key].items() if k in want or v} == want, phase
    deleted = {f["path"].split("/")[-1] for f in exp["filesBefore"] if f["path"].startswith("commitlog/")} - \
        {f["path"].split("/")[-1] for f in exp["filesAfter"] if f["path"].startswith("commitlog/")}
    assert set(plan["commitlog_files_deleted"]) == deleted
    assert tree_hashes(store) == before


def test_combine_store_recovery_spends_the_extra_files_as_the_broker_logged(tmp_path):
    exp = load_expected(COMBINE)
    store = require_oracle(COMBINE) / "store"
    plan = json.loads(_run("recover", store, "--dry-run", "--format", "json", *_conf(tmp_path, exp)).stdout)
    c = plan["combine"]
    assert (c["served"], c["assigns_offsets"]) == ("default", "default")  # currentReadStore=assignOffsetStore=file
    assert c["rocksdb_dispatch_from_phy_offset"] == exp["stateAfterLoadRocksDBCQ"]["dispatchFromPhyOffset"]
    # "CombineConsumeQueueStore can not recover all inner store ... store=RocksDBConsumeQueueStore"
    assert any("can not recover all inner store" in ln for ln in exp["recovery"]["evidenceLines"])
    assert c["extra_files_spent_at"] == exp["recovery"]["startFile"] and c["extra_files_left"] == 0
    logged = [ln for ln in exp["rocketmqLogExcerpt"] if "CombineConsumeQueueStore initialize offset in queue" in ln]
    assert [f"topic={i['queue'].split('/')[0]}, queueId={i['queue'].split('/')[1]}, "
            f"maxOffsetInAssign={i['maxOffsetInAssign']}" for i in c["initialized_at_start"]] == \
        [ln.split("queue, ")[1].split(", otherCQ")[0] for ln in logged]
    # the bands' start files differ on this store: 5.3.3's rule (file CQ timestamps only) would start later
    plan33 = json.loads(_run("recover", store, "--dry-run", "--format", "json", "--broker-version", "5.3.3").stdout)
    assert plan33["start_file"] != plan["start_file"]


def test_combine_store_both_queues_as_recovered_equal_the_broker(tmp_path):
    exp = load_expected(COMBINE)
    store = require_oracle(COMBINE) / "store"
    conf = _conf(tmp_path, exp)
    for side, want in (("file", exp["consumeQueues"]), ("rocksdb", exp["consumeQueuesRocksDB"])):
        for topic, queues in want.items():
            for qid, w in queues.items():
                r = _run("cq", store, "--topic", topic, "--queue", qid, "--as-recovered", "--cq-format", side,
                         "--format", "json", *conf)
                got = [[e["queue_offset"], e["physical_offset"], e["size"], e["tags_code"]]
                       for e in json.loads(r.stdout)]
                assert got == w["entries"], (side, topic, qid)
    rows = json.loads(_run("cq", store, "--all", "--as-recovered", "--cq-format", "rocksdb", "--format", "json",
                           *conf).stdout)
    want_b = exp["stateAfterStartRocksDBCQWithAllQueuesOpened"]["consumeQueues"]
    assert {(r["topic"], r["queue_id"]): (r["min_offset"], r["max_offset"]) for r in rows} == \
        {(t, int(q)): (v["minOffset"], v["maxOffset"]) for t, qs in want_b.items() for q, v in qs.items()}
    # the RocksDB side misses exactly the broker's messagesNotInRocksDBCQ that a queue serves
    in_rocks = {e[1] for qs in exp["consumeQueuesRocksDB"].values() for v in qs.values() for e in v["entries"]}
    in_file = {e[1] for qs in exp["consumeQueues"].values() for v in qs.values() for e in v["entries"]}
    assert sorted(in_file - in_rocks) == sorted(set(exp["rocksDBCQCoverage"]["messagesNotInRocksDBCQ"]) & in_file)


def test_cq_serves_the_preferred_queue_and_names_the_other():
    store = require_oracle(COMBINE) / "store"
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "LogTopic", "--queue", "0", "--format", "json"])
    assert r.exit_code == 0 and "CombineConsumeQueueStore" in r.stderr and "--cq-format rocksdb" in r.stderr
    assert json.loads(r.stdout)[0]["queue_offset"] == 0  # the file queue, complete from 0


@pytest.mark.parametrize("name", DEVELOP)
def test_index_lookup_as_recovered_answers_every_query_as_the_broker(name, tmp_path):
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    conf = _conf(tmp_path, exp)
    for rec in exp["queries"]:
        q = rec["query"]
        r = _run("index-lookup", store, "--topic", q["topic"], "--key", q["key"], "--max", q["maxNum"],
                 "--begin", q["begin"], "--end", q["end"], "--as-recovered", "--format", "json", *conf)
        assert json.loads(r.stdout)["phy_offsets"] == rec["phyOffsets"], q


def test_files_that_cannot_tell_the_band_give_both_answers():
    """The clean develop store has no 5.3.4-only layout: detection assumes 5.3.3, names 5.3.4+ as the other
    band, and says both bands agree here; --broker-version settles it and the band answers go away."""
    store = require_oracle(DEVELOP[0]) / "store"
    plan = json.loads(_run("recover", store, "--dry-run", "--format", "json").stdout)
    assert plan["broker_version"]["alternatives"] == ["5.3.1", "5.3.4"]
    answers = {a["band"]: a for a in plan["band_answers"]}
    assert list(answers) == ["<=5.3.1", "5.3.2-5.3.3", "5.3.4+"]
    exp = load_expected(DEVELOP[0])
    assert answers["5.3.4+"]["start_file"] == answers["5.3.2-5.3.3"]["start_file"] == exp["recovery"]["startFile"]
    assert answers["<=5.3.1"]["start_file"] != exp["recovery"]["startFile"]  # the third-last file
    assert {a["truncate_offset"] for a in answers.values()} == {exp["stateAfterLoad"]["commitLogMaxOffset"]}
    assert not plan["band_answers"][0]["differs"] and any("cannot tell" in n for n in plan["notes"])
    assert "--broker-version" in plan["broker_version"]["description"]
    given = json.loads(_run("recover", store, "--dry-run", "--format", "json", "--broker-version", "5.3.4").stdout)
    assert "band_answers" not in given and given["broker_version"]["alternatives"] == []


@pytest.mark.parametrize("command", ["recover", "salvage", "consumer-lag", "fate", "verify", "report", "cq",
                                     "index-lookup", "msgid", "explain-missing", "summary", "store-info"])
def test_every_release_dependent_command_takes_broker_version(command):
    """One option and one parser: every command whose answer depends on the release accepts --broker-version
    and refuses a value that is not a release with the same usage error."""
    r = CliRunner().invoke(cli, [command, "--help"])
    assert r.exit_code == 0 and "--broker-version" in r.output, command
    r = CliRunner().invoke(cli, [command, "/nonexistent", "--broker-version", "five"])
    assert r.exit_code == 2 and "not a RocketMQ version" in r.output, (command, r.output)
