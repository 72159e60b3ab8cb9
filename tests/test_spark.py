"""The Spark engine in local mode (local[2]): export equals the local engine row for row and expected.json on
every oracle scenario with messages; the ``rocketmq`` data source; find/diff/stats/verify on writer-made stores
including two replicas where one has a divergent and a torn tail. One SparkSession for the whole module."""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Java (17+) not found: Spark cannot start", allow_module_level=True)

from rmqinspect.analyses.export import export_local, read_dataset  # noqa: E402
from rmqinspect.analyses.rows import topic_partition  # noqa: E402
from rmqinspect.cli.main import cli  # noqa: E402
from rmqinspect.store.layout import StoreLayout  # noqa: E402
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes  # noqa: E402
from support.export_rows import assert_rows_equal_expected, sorted_rows  # noqa: E402
from support.msgstores import common_specs, replicas, write_store  # noqa: E402


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    return replicas(str(tmp_path_factory.mktemp("replicas")))


def _norm(rows):
    for r in rows:
        r["properties"] = sorted(r["properties"])
    return rows


MESSAGE_SCENARIOS = [s for s in ALL_SCENARIOS if "rebuild" not in s]


@pytest.mark.parametrize("name", MESSAGE_SCENARIOS)
def test_spark_export_equals_local_and_expected(spark, name, tmp_path):
    from rmqinspect.spark.jobs import export_spark

    path = require_oracle(name)
    exp = load_expected(name)
    store = str(path / "store")
    before = tree_hashes(store)
    res = export_spark(spark, [store], str(tmp_path / "spark"), with_body=True)
    loc = export_local([store], str(tmp_path / "local"), with_body=True)
    assert [d.to_dict() for d in res.damage] == [d.to_dict() for d in loc.damage]
    assert bool(res.damage) == ("torn" in name)
    srows = sorted_rows(read_dataset(str(tmp_path / "spark")))
    lrows = sorted_rows(read_dataset(str(tmp_path / "local")))
    assert res.rows == len(exp["messages"]) == len(srows)
    # one task per commitlog file (DLedger mode: per data file of dledger-<selfId>/data)
    assert res.files == len(os.listdir(StoreLayout.open(store).commitlog_dirs[0]))
    assert _norm(srows) == _norm(lrows)
    assert_rows_equal_expected(srows, exp)
    # same partition directories
    assert sorted(d for d in os.listdir(tmp_path / "spark") if d.startswith("topic_partition=")) == \
        sorted(os.listdir(tmp_path / "local"))
    assert tree_hashes(store) == before


def test_datasource_tasks_filters_and_hostile_topic(spark, tmp_path):
    store = tmp_path / "store"
    specs = common_specs(40)
    specs[3].topic = "../../evil"
    results = write_store(str(store), specs)
    nfiles = len(os.listdir(store / "commitlog"))
    assert nfiles >= 3
    df = spark.read.format("rocketmq").load(str(store))
    assert df.rdd.getNumPartitions() == nfiles  # one task per commitlog file
    assert df.count() == 40
    since = specs[10].store_timestamp
    q = df.where((df.topic == "PayTopic") & (df.store_timestamp_ms >= since))
    want = [r.physical_offset for s, r in zip(specs, results) if s.topic == "PayTopic" and s.store_timestamp >= since]
    assert sorted(x.physical_offset for x in q.select("physical_offset").collect()) == want
    plan = q._jdf.queryExecution().executedPlan().toString()
    assert "PayTopic" not in plan and "store_timestamp_ms" in plan  # both conditions pushed into the scan
    opt = spark.read.format("rocketmq").option("topic", "OrderTopic").option("since", str(since)).load(str(store))
    assert opt.count() == sum(1 for s in specs if s.topic == "OrderTopic" and s.store_timestamp >= since)
    # Spark export of a hostile topic stays in --out; the real name is kept in the topic column
    from rmqinspect.spark.jobs import export_spark

    out = tmp_path / "out"
    export_spark(spark, [str(store)], str(out))
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        for n in dirnames + filenames:
            p = os.path.realpath(os.path.join(dirpath, n))
            assert p.startswith(str(store)) or p.startswith(str(out)), p
    assert f"topic_partition={topic_partition('../../evil')}" in os.listdir(out)
    assert "../../evil" in {r.topic for r in spark.read.parquet(str(out)).select("topic").collect()}


def test_stats(spark, tmp_path):
    import numpy as np

    from rmqinspect.spark.jobs import stats

    store = tmp_path / "store"
    specs = common_specs(60)
    results = write_store(str(store), specs)
    rows = stats(spark, [str(store)], labels=["broker-a"])
    groups = collections.defaultdict(list)
    for s, r in zip(specs, results):
        hour = dt.datetime.fromtimestamp(s.store_timestamp // 3_600_000 * 3600, dt.timezone.utc)
        groups[(s.topic, s.queue_id, hour.strftime("%Y-%m-%dT%H:00Z"))].append((r.total_size, s.store_timestamp -
                                                                                 s.born_timestamp))
    assert len(rows) == len(groups)
    for row in rows:
        g = groups[(row["topic"], row["queue_id"], row["hour"])]
        lags = [lag for _, lag in g]
        assert row["source"] == "broker-a"
        assert row["messages"] == len(g) and row["bytes"] == sum(sz for sz, _ in g)
        assert row["lag_p50_ms"] == pytest.approx(np.percentile(lags, 50))
        assert row["lag_p99_ms"] == pytest.approx(np.percentile(lags, 99))
        assert row["lag_max_ms"] == max(lags)


def test_find_across_replicas(spark, two_replicas):
    from rmqinspect.spark.jobs import find

    a, b, ra, rb, torn = two_replicas
    hits = find(spark, [a, b], ["m-key-7"], by="key")
    assert [(h["source"], h["physical_offset"]) for h in hits] == [("replica-a", ra[7].physical_offset),
                                                                   ("replica-b", rb[7].physical_offset)]
    hits = find(spark, [a, b], ["AUNIQ00000101"], by="uniq")
    assert [(h["source"], h["physical_offset"]) for h in hits] == [("replica-a", ra[31].physical_offset)]
    msgid = hits[0]["offset_msg_id"]
    hits = find(spark, [a, b], [msgid.lower()])  # any: the offsetMsgId, case-insensitive
    assert {h["physical_offset"] for h in hits} == {ra[31].physical_offset} and \
        {h["source"] for h in hits} == {"replica-a", "replica-b"}  # same offset on both, different message
    assert find(spark, [a, b], ["BUNIQ00000202"]) == []  # the torn record is no message


def test_diff_two_replicas(spark, two_replicas):
    from rmqinspect.spark.jobs import diff

    a, b, ra, rb, torn = two_replicas
    rep = diff(spark, [a, b])
    recs_a = {r.physical_offset: r.record for r in ra}
    recs_b = {r.physical_offset: r.record for r in rb}
    differing = sorted(o for o in set(recs_a) | set(recs_b) if recs_a.get(o) != recs_b.get(o))
    assert [d["physical_offset"] for d in rep.by_offset] == differing
    assert rep.first_divergence == ra[30].physical_offset == rb[30].physical_offset
    for d in rep.by_offset:
        o = d["physical_offset"]
        assert d["missing_on"] == [s for s, recs in (("replica-a", recs_a), ("replica-b", recs_b)) if o not in recs]
    uk = {u["uniq_key"]: u["missing_on"] for u in rep.by_uniq_key}
    assert uk == {**{f"AUNIQ{100 + i:08d}": ["replica-b"] for i in range(3)},
                  **{f"BUNIQ{200 + i:08d}": ["replica-a"] for i in range(2)}}
    assert [r["messages"] for r in rep.replicas] == [33, 32]
    assert rep.replicas[1]["data_end"] == torn.physical_offset


def test_verify(spark, two_replicas):
    from rmqinspect.spark.jobs import verify

    a, b, ra, rb, torn = two_replicas
    rep = verify(spark, [a, b])
    assert rep["messages"] == 33 + 32
    assert [(p["source"], p["physical_offset"], p["check"]) for p in rep["problems"]] == \
        [("replica-b", torn.physical_offset, "structure")]
    assert not rep["ok"]


def test_verify_oracle(spark):
    from rmqinspect.spark.jobs import verify

    for name, bad in (("rocketmq-all-4.9.8/clean", None), ("rocketmq-all-4.9.8/crash-torn-tail", True)):
        path = require_oracle(name)
        exp = load_expected(name)
        rep = verify(spark, [str(path / "store")])
        assert rep["messages"] == len(exp["messages"])
        assert bool(rep["problems"]) == bool(bad)
        if bad:
            torn = [r for r in exp["records"] if r["kind"] == "invalid"] or None
            offs = {p["physical_offset"] for p in rep["problems"]}
            assert min(offs) == exp["stateAfterLoad"]["commitLogMaxOffset"], (offs, torn)


def test_spark_cli(spark, two_replicas, tmp_path):
    a, b, ra, rb, torn = two_replicas
    before = (tree_hashes(a), tree_hashes(b))
    run = CliRunner().invoke
    r = run(cli, ["spark", "diff", a, b, "--master", "local[2]", "--format", "json"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.output)["first_divergence"] == ra[30].physical_offset
    r = run(cli, ["spark", "find", a, b, "--value", "m-key-3", "--format", "ndjson", "--label", "A", "--label", "B"])
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["source"] for x in r.output.splitlines()] == ["A", "B"]
    r = run(cli, ["spark", "find", a, "--value", "nope"])
    assert r.exit_code == 3 and "no message in 1 store(s) carries 'nope'" in r.stderr
    r = run(cli, ["spark", "stats", a, "--topic", "NoSuchTopic", "--format", "json"])
    assert r.exit_code == 3 and "no message in 1 store(s) matches --topic NoSuchTopic" in r.stderr
    r = run(cli, ["spark", "stats", a, os.path.join(a, "no-such-store")])
    assert r.exit_code == 3 and "no-such-store" in r.output and "Traceback" not in r.output
    r = run(cli, ["spark", "verify", a, "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["ok"] is True
    r = run(cli, ["spark", "verify", a, b])
    assert r.exit_code == 1 and "structure" in r.output
    r = run(cli, ["spark", "stats", a, "--format", "json"])
    assert r.exit_code == 0 and sum(x["messages"] for x in json.loads(r.output)) == 33
    out = tmp_path / "out"
    r = run(cli, ["export", a, b, "--out", str(out), "--engine", "spark", "--format", "json"])
    assert r.exit_code == 1, r.output  # the torn record of replica-b is named, not exported
    assert f"@ {torn.physical_offset}: half:" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["rows"] == 65 and [d["physical_offset"] for d in doc["damage"]] == [torn.physical_offset]
    r = run(cli, ["export", a, "--out", os.path.join(a, "x"), "--engine", "spark"])
    assert r.exit_code == 6
    assert (tree_hashes(a), tree_hashes(b)) == before


def test_spark_submit_available():
    """The cluster recipe in docs/spark.md uses spark-submit from the pyspark install."""
    import pyspark

    sub = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    assert os.access(sub, os.X_OK) or shutil.which("spark-submit")
    assert subprocess.run(["java", "-version"], capture_output=True).returncode == 0


@pytest.mark.parametrize("name", ["rocketmq-all-4.9.8/rebuild", "rocketmq-all-5.3.3/rebuild",
                                  "rocketmq-all-5.3.3/crash-torn-tail"])
def test_rebuild_engine_spark_same_bytes(spark, name, tmp_path):
    """rebuild --engine spark == the broker's own regenerated files (rebuild scenarios) and == the local
    engine byte for byte (also on a torn tail, where the walk skips a half record)."""
    from support.rebuild import GEOMETRY, assert_same_cq, assert_same_index

    sc = require_oracle(name)
    before = tree_hashes(sc)
    docs = {}
    for engine in ("spark", "local"):
        out = tmp_path / engine
        r = CliRunner().invoke(cli, ["rebuild", str(sc / "store"), "--out", str(out), *GEOMETRY, "--engine", engine,
                                     "--format", "json"])
        assert r.exit_code in (0, 1), r.output
        docs[engine] = json.loads(r.stdout)
    if "rebuild" in name:
        assert docs["spark"]["messages"] > 0 and docs["spark"]["half_records"] == []
        assert_same_cq(sc / "expected" / "consumequeue", tmp_path / "spark" / "consumequeue")
        assert_same_index(sc / "expected" / "index", tmp_path / "spark" / "index")
    assert_same_cq(tmp_path / "local" / "consumequeue", tmp_path / "spark" / "consumequeue")
    assert_same_index(tmp_path / "local" / "index", tmp_path / "spark" / "index")
    assert sorted(os.listdir(tmp_path / "local" / "index")) == sorted(os.listdir(tmp_path / "spark" / "index"))
    for k in ("messages", "cq_entries", "not_in_cq", "index_records", "index_puts", "end_offset", "stop_kind",
              "stop_reason", "half_records", "skipped_topics", "index_files"):
        assert docs["spark"][k] == docs["local"][k], k
    assert tree_hashes(sc) == before


def test_rebuild_spark_multi_file_index_roll(spark, tmp_path):
    """A writer-made store with many commitlog files and an index that rolls several times, with
    PREPARED/ROLLBACK records and a trailing blank-only file: spark == local byte for byte."""
    from support.rebuild import assert_same_cq, assert_same_index

    store = tmp_path / "store"
    specs = common_specs(120)
    for i in (5, 50, 51):
        specs[i].sys_flag = 4  # PREPARED: no CQ entry, indexed
    specs[60].sys_flag = 12  # ROLLBACK: neither
    specs[70].queue_offset = 40  # a jump in its queue (the broker appends it at the write position)
    specs[90].queue_offset = 2  # a repeat (below the write position: ignored by the broker)
    write_store(str(store), specs)
    assert len(os.listdir(store / "commitlog")) >= 8
    geo = ["--cq-file-size", "200", "--index-slots", "8", "--index-max", "40"]
    for engine in ("spark", "local"):
        r = CliRunner().invoke(cli, ["rebuild", str(store), "--out", str(tmp_path / engine), *geo, "--engine", engine])
        assert r.exit_code == 0, r.output
    assert len(os.listdir(tmp_path / "local" / "index")) >= 4
    assert_same_cq(tmp_path / "local" / "consumequeue", tmp_path / "spark" / "consumequeue")
    assert_same_index(tmp_path / "local" / "index", tmp_path / "spark" / "index")
    assert sorted(os.listdir(tmp_path / "local" / "index")) == sorted(os.listdir(tmp_path / "spark" / "index"))


def test_ordered_partitions_in_order_concurrent_and_bounded(spark, tmp_path):
    """Rows come partition after partition in order; with two executor slots two partitions run at the same time
    (toLocalIterator ran one at a time); a consumer that stops early leaves the later partitions' jobs unstarted."""
    from rmqinspect.spark.session import ordered_partitions

    def mark(args):  # a local function: Spark ships it by value (this module is not importable on the executors)
        import time

        d, i = args
        with open(os.path.join(d, f"{i}.start"), "w") as f:
            f.write(str(time.time()))
        time.sleep(0.4)
        with open(os.path.join(d, f"{i}.end"), "w") as f:
            f.write(str(time.time()))
        return [i * 10 + k for k in range(3)]

    sc = spark.sparkContext
    d = str(tmp_path)
    n = 8
    rdd = sc.parallelize([(d, i) for i in range(n)], n).flatMap(mark)
    assert list(ordered_partitions(rdd, window=3)) == [i * 10 + k for i in range(n) for k in range(3)]
    spans = [tuple(float(open(os.path.join(d, f"{i}.{e}")).read()) for e in ("start", "end")) for i in range(n)]
    assert any(a[0] < b[1] and b[0] < a[1] for j, a in enumerate(spans) for b in spans[j + 1:])  # overlapping
    for name in os.listdir(d):
        os.remove(os.path.join(d, name))
    it = ordered_partitions(rdd, window=2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    started = sorted(int(x.split(".")[0]) for x in os.listdir(d) if x.endswith(".start"))
    assert started == list(range(len(started))) and 2 <= len(started) <= 3 < n


def test_rebuild_spark_stops_where_local_stops(spark, tmp_path):
    """A record with a bad magic code in a middle file stops the broker's dispatch there: spark stops at the same
    record, with the same files and report, and does not wait for the files after it."""
    from support.rebuild import assert_same_cq, assert_same_index

    store = tmp_path / "store"
    write_store(str(store), common_specs(120))
    names = sorted(os.listdir(store / "commitlog"))
    assert len(names) >= 8
    victim = store / "commitlog" / names[len(names) // 2]
    data = bytearray(victim.read_bytes())
    data[4:8] = b"\x12\x34\x56\x78"  # the file's first record
    victim.write_bytes(bytes(data))
    docs = {}
    for engine in ("spark", "local"):
        r = CliRunner().invoke(cli, ["rebuild", str(store), "--out", str(tmp_path / engine), "--cq-file-size", "200",
                                     "--index-slots", "8", "--index-max", "40", "--engine", engine,
                                     "--format", "json"])
        assert r.exit_code in (0, 1), r.output
        docs[engine] = json.loads(r.stdout)
    assert docs["local"]["stop_kind"] == "illegal" and docs["local"]["end_offset"] == int(names[len(names) // 2])
    for k in ("messages", "cq_entries", "index_puts", "end_offset", "stop_kind", "stop_reason", "index_files"):
        assert docs["spark"][k] == docs["local"][k], k
    assert_same_cq(tmp_path / "local" / "consumequeue", tmp_path / "spark" / "consumequeue")
    assert_same_index(tmp_path / "local" / "index", tmp_path / "spark" / "index")


def test_spark_rows_carry_the_transaction_state(spark, tmp_path):
    from rmqinspect.analyses.txn import scan_transactions
    from rmqinspect.store import Store
    from support.txn_stores import write_every_verdict

    store = str(tmp_path / "s")
    write_every_verdict(tmp_path / "s")
    scan = scan_transactions(Store.open(store))
    offs, states = scan.state_index()
    rows = spark.read.format("rocketmq").load(store).select("physical_offset", "uniq_key", "txn_state").collect()
    got = {r.physical_offset: r.txn_state for r in rows if r.txn_state is not None}
    assert got == dict(zip(offs.tolist(), states.tolist())) and len(got) >= 20
    assert next(r.txn_state for r in rows if r.uniq_key == "PLAIN") is None
