"""ConsumeQueue reader and `cq` against the oracle: every entry of every file consume queue, min/max offsets,
the numpy fast path against the construct schema, and `cq --join` finding exactly the damage the oracle has."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.compare.cq_vs_commitlog import join_queue
from rmqinspect.cli.main import cli
from rmqinspect.formats.consumequeue import CQ_STORE_UNIT_SIZE, ConsumeQueueEntry
from rmqinspect.store import Store
from rmqinspect.store.consumequeue import ConsumeQueue, list_queues
from support import load_expected, tree_hashes
from support.dledger_ref import cq_truncation_point, is_dledger


def cq_dir_of(path):
    """The scenario's file consume queues: store/consumequeue, or the broker-rebuilt expected/consumequeue."""
    for d in (path / "expected" / "consumequeue", path / "store" / "consumequeue"):
        if d.is_dir() and list_queues(str(d)):
            return d
    return None


def crashed(exp) -> bool:
    return bool(exp.get("abortFilePresentBeforeLoad"))


def test_every_consume_queue_entry_matches_oracle(scenario):
    path, exp = scenario
    d = cq_dir_of(path)
    if d is None:
        pytest.skip(f"{path.name}: no file consume queue (RocksDB consume queue store; covered by the RocksDB reader)")
    recovered_max = cq_truncation_point(exp)
    on_disk = {(q.topic, q.queue_id) for q in list_queues(str(d))}
    compared = 0
    for topic, queues in exp["consumeQueues"].items():
        for qid, want in queues.items():
            qid = int(qid)
            if (topic, qid) not in on_disk:
                # RocketMQ keeps in-memory SCHEDULE_TOPIC_XXXX queues that never got a file
                assert want["entries"] == [] and want["maxOffset"] == want["minOffset"], (topic, qid)
                continue
            cq = ConsumeQueue.open(str(d), topic, qid)
            got = [list(e) for e in cq.entries()]
            lo, hi, n = cq.bounds()
            if crashed(exp):
                # the broker truncated entries pointing at or past the recovered commitlog end (truncateDirtyLogicFiles)
                extra = [e for e in got if e[1] >= recovered_max]
                got = [e for e in got if e[1] < recovered_max]
                assert hi - len(extra) == want["maxOffset"], (topic, qid)
            else:
                assert hi == want["maxOffset"], (topic, qid)
            assert got == want["entries"], (topic, qid)
            assert lo == want["minOffset"] and n == len(got) + (len(extra) if crashed(exp) else 0)
            compared += len(got)
            cq.close()
    assert compared > 0
    assert on_disk <= {(t, int(q)) for t, qs in exp["consumeQueues"].items() for q in qs}


def test_numpy_entries_equal_construct_schema(scenario):
    path, exp = scenario
    d = cq_dir_of(path)
    if d is None:
        pytest.skip("no file consume queue in this scenario")
    for q in list_queues(str(d))[:6]:
        cq = ConsumeQueue(q.topic, q.queue_id, q.path)
        for f in cq.files:
            arr = cq.file_entries(f)
            raw = bytes(f.buffer)
            for i in range(0, len(arr), 7):
                c = ConsumeQueueEntry.parse(raw[i * CQ_STORE_UNIT_SIZE:(i + 1) * CQ_STORE_UNIT_SIZE])
                assert (c.physical_offset, c.size, c.tags_code) == tuple(int(x) for x in arr[i])
        cq.close()


def test_join_clean_scenarios_have_no_problems(scenario):
    path, exp = scenario
    d = cq_dir_of(path)
    if d is None:
        pytest.skip("no file consume queue in this scenario")
    st = Store.open(path / "store")
    problems, delivery, pointers = [], 0, []
    for q in list_queues(str(d)):
        cq = ConsumeQueue(q.topic, q.queue_id, q.path)
        for e in join_queue(cq, st.commitlog):
            pointers.append(e.physical_offset)
            if e.problems:
                problems.append((e.topic, e.queue_id, e.queue_offset, e.physical_offset))
            if any("delivery time" in n for n in e.notes):
                assert e.topic == "SCHEDULE_TOPIC_XXXX"
                delivery += 1
        cq.close()
    msgs = {m["physicalOffset"]: m for m in load_messages(path, exp)}
    if crashed(exp) and not is_dledger(exp):
        # exactly the entries pointing at or past where the broker's recovery ended (truncateDirtyLogicFiles cuts
        # them): the torn last message's entry, or none where the crash tore no record (combine-cq-crash: the
        # broker's queues after recovery hold every entry on disk; dledger-crash-intact: every entry intact)
        end = exp["stateAfterLoad"]["commitLogMaxOffset"]
        assert [p[3] for p in problems] == sorted(p for p in pointers if p >= end)
        if "torn" in exp["scenario"]:
            assert [p[3] for p in problems] == [end]
    else:
        assert problems == []
    if msgs:
        assert delivery == sum(1 for m in msgs.values() if m.get("cqTopic") == "SCHEDULE_TOPIC_XXXX")
    else:
        assert delivery > 0


def load_messages(path, exp):
    if exp.get("messages"):
        return exp["messages"]
    return []


def test_queue_bounds_and_cli_all(scenario):
    path, exp = scenario
    d = cq_dir_of(path)
    store = path / "store"
    rocks = d is None and (store / "consumequeue" / "CURRENT").exists()
    if d is None and not rocks:
        pytest.skip("no consume queue in this scenario")
    before = tree_hashes(store)
    args = ["cq", str(store), "--all", "--format", "ndjson"]
    if d is not None and d.parent.name == "expected":
        args += ["--cq-dir", str(d)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    # RocksDB queues are opened lazily by the broker: the harness recorded them after opening all
    want = exp["stateAfterStartWithAllQueuesOpened" if rocks else "stateAfterStart"]["consumeQueues"]
    recovered_max = exp["stateAfterLoad"]["commitLogMaxOffset"]
    for row in rows:
        w = want[row["topic"]][str(row["queue_id"])]
        assert row["min_offset"] == w["minOffset"]
        if not crashed(exp):
            assert row["max_offset"] == w["maxOffset"]
            assert row["entries"] == w["maxOffset"] - w["minOffset"]
        else:
            assert row["max_offset"] in (w["maxOffset"], w["maxOffset"] + 1)
    assert rows and len(rows) == sum(1 for t in want.values() for q in t.values() if q["maxOffset"] > 0)
    assert tree_hashes(store) == before


def _store(name):
    from support import require_oracle
    return require_oracle(name) / "store"


def test_cli_cq_entries_and_from_count():
    store = _store("rocketmq-all-4.9.8/clean")
    from support import load_expected
    exp = load_expected("rocketmq-all-4.9.8/clean")
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "OrderTopic", "--queue", "1", "--from", "58",
                                 "--count", "5", "--format", "ndjson"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [[x["queue_offset"], x["physical_offset"], x["size"], x["tags_code"]] for x in rows] == \
        exp["consumeQueues"]["OrderTopic"]["1"]["entries"][58:63]  # crosses the 60-entry file boundary
    assert set(rows[0]) == {"topic", "queue_id", "queue_offset", "physical_offset", "size", "tags_code", "fate"}
    assert {x["fate"] for x in rows} == {"survives"}  # a clean shutdown: every entry survives the restart
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "OrderTopic", "--queue", "1", "--count", "2"])
    assert r.exit_code == 0 and "physical_offset" in r.output
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "OrderTopic", "--queue", "1", "--count", "2",
                                 "--format", "json"])
    assert len(json.loads(r.stdout)) == 2
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "NoSuch", "--queue", "0"])
    assert r.exit_code == 3 and "no consume queue" in r.output and "Traceback" not in r.output
    assert tree_hashes(store) == before


def test_cli_join_flags_torn_entry():
    for name in ("rocketmq-all-4.9.8/crash-torn-tail",):
        store = _store(name)
        before = tree_hashes(store)
        r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "LogTopic", "--queue", "1", "--from", "124",
                                     "--join", "--format", "ndjson"])
        assert r.exit_code == 1, r.output
        rows = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        assert rows[0]["problems"] == [] and rows[0]["message"]["queue_offset"] == 124
        assert rows[1]["physical_offset"] == 1197830 and "TOTALSIZE says 249" in rows[1]["problems"][0]
        assert tree_hashes(store) == before


def test_cli_join_schedule_topic_delivery_time_not_flagged():
    store = _store("rocketmq-all-5.3.3/clean")
    qs = [q for q in list_queues(str(store / "consumequeue")) if q.topic == "SCHEDULE_TOPIC_XXXX"]
    assert qs
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "SCHEDULE_TOPIC_XXXX", "--queue", str(qs[0].queue_id),
                                 "--join", "--format", "ndjson"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert rows and all(x["problems"] == [] and "delivery time" in x["notes"][0] for x in rows)
    # the delivery time is far from any tag hash: it is the record's store time + the level's delay
    assert all(x["tags_code"] > x["message"]["store_timestamp"] for x in rows)


def test_rocksdb_scenario_cq_reads_rocksdb_entries():
    """A 5.x RocksDB consume queue is read through the same `cq` command (from a private snapshot)."""
    name = "rocketmq-all-5.3.3/rocksdb-cq-small"
    store = _store(name)
    exp = load_expected(name)
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["cq", str(store), "--all", "--cq-format", "file"])
    assert r.exit_code == 0 and "no consume queues" in r.stderr
    for topic, queues in exp["consumeQueues"].items():
        for qid, q in queues.items():
            r = CliRunner().invoke(cli, ["cq", str(store), "--topic", topic, "--queue", qid, "--join",
                                         "--format", "ndjson"])
            assert r.exit_code == 0, r.output
            rows = [json.loads(x) for x in r.stdout.splitlines()]
            assert [[x["queue_offset"], x["physical_offset"], x["size"], x["tags_code"]] for x in rows] == \
                q["entries"]
            assert all(not x["problems"] for x in rows)
    assert tree_hashes(store) == before


def test_hostile_topic_name_refused(tmp_path):
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "consumequeue").mkdir()
    for t in ("../../etc", "..", "a/b"):
        r = CliRunner().invoke(cli, ["cq", str(tmp_path), "--topic", t, "--queue", "0"])
        assert r.exit_code == 2 and "not a topic name" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["cq", str(tmp_path / "nope"), "--all"])
    assert r.exit_code == 3 and "Traceback" not in r.output
