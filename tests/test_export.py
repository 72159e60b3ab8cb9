"""`export` (local engine): the per-file rows against the oracle's expected.json, the Parquet dataset, hostile
topics, output-directory safety."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.export import (
    COLUMNS,
    FileResult,
    RowFilter,
    file_column_chunks,
    file_tasks,
    topic_partition,
)
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.commitlog import MESSAGE
from _msgstores import common_specs, spec, write_store
from conftest import tree_hashes

pa = pytest.importorskip("pyarrow")

from rmqinspect.analyses.export import export_local, read_dataset  # noqa: E402

EXPECTED_FIELDS = {
    "physicalOffset": "physical_offset", "storeSize": "total_size", "bodyCRC": "body_crc", "queueId": "queue_id",
    "flag": "flag", "queueOffset": "queue_offset", "sysFlag": "sys_flag", "bornTimestamp": "born_timestamp_ms",
    "bornHost": "born_host", "storeTimestamp": "store_timestamp_ms", "storeHost": "store_host",
    "reconsumeTimes": "reconsume_times", "preparedTransactionOffset": "prepared_transaction_offset",
    "bodyLength": "body_size", "topic": "topic", "tags": "tags", "uniqKey": "uniq_key",
    "offsetMsgId": "offset_msg_id", "physicalOffsetField": "physical_offset_field", "dispatchTagsCode": "tags_code",
}
TX = {0: "NOT_TYPE", 4: "PREPARED", 8: "COMMIT", 12: "ROLLBACK"}


def assert_rows_equal_expected(rows: list[dict], exp: dict) -> None:
    """Every exported row against RocketMQ's own reading of the message (expected.json ``messages``)."""
    assert [r["physical_offset"] for r in rows] == [e["physicalOffset"] for e in exp["messages"]]
    for r, e in zip(rows, exp["messages"]):
        for ek, rk in EXPECTED_FIELDS.items():
            assert r[rk] == e[ek], (e["physicalOffset"], ek, r[rk], e[ek])
        props = dict(r["properties"])
        assert props == e["properties"]
        assert r["keys"] == ([k for k in e["keys"].split(" ") if k] if e["keys"] else [])
        assert r["transaction_type"] == TX[e["transactionType"]]
        assert r["magic_version"] == (1 if e.get("magicCode", "0xDAA320A7") == "0xDAA320A7" else 2)
        if e["bodyLength"] > 0:
            assert r["crc_ok"] == e["bodyCrcCheckPassed"]
        if "body" in r:
            assert hashlib.sha256(r["body"]).hexdigest() == e["bodySha256"]
        assert r["store_timestamp"].timestamp() * 1000 == pytest.approx(e["storeTimestamp"], abs=0.5)
        assert r["topic_partition"] == topic_partition(e["topic"])


def sorted_rows(table) -> list[dict]:
    rows = table.to_pylist()
    rows.sort(key=lambda r: (r["source"], r["physical_offset"]))
    return rows


def test_file_rows_equal_expected_and_whole_store_scan(scenario):
    """Per-file scans (the unit of both engines) == CommitLog.messages over the whole store == expected.json."""
    path, exp = scenario
    if not exp.get("messages"):
        pytest.skip("scenario has no messages (rebuild)")
    store = str(path / "store")
    rows = []
    for t in file_tasks([store]):
        for cols in file_column_chunks(t, with_body=True, batch_rows=100):
            rows.extend(dict(zip(cols, vals)) for vals in zip(*cols.values()))
    import datetime as dt

    for r in rows:
        r["store_timestamp"] = dt.datetime.fromtimestamp(r["store_timestamp"] / 1e6, dt.timezone.utc)
    assert_rows_equal_expected(rows, exp)
    with Store.open(store) as st:
        whole = [s.offset for s in st.commitlog.scan(check_crc=False, stop_at_end=False) if s.kind == MESSAGE]
    assert [r["physical_offset"] for r in rows] == whole


def test_export_local_dataset_equals_expected(scenario, tmp_path):
    path, exp = scenario
    if not exp.get("messages"):
        pytest.skip("scenario has no messages (rebuild)")
    store = str(path / "store")
    before = tree_hashes(store)
    res = export_local([store], str(tmp_path / "out"), with_body=True)
    assert res.rows == len(exp["messages"])
    rows = sorted_rows(read_dataset(str(tmp_path / "out")))
    assert_rows_equal_expected(rows, exp)
    assert tree_hashes(store) == before
    # the damaged record of the torn-tail scenarios is reported, not exported
    if "torn" in str(path):
        assert res.damage and res.damage[0].kind == "half"


def test_schema_is_documented():
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "spark.md"), encoding="utf-8").read()
    for name, typ, _ in COLUMNS:
        assert f"`{name}`" in doc, name


def test_hostile_topic_stays_inside_out(tmp_path):
    store = tmp_path / "store"
    hostile = ["../../evil", "/abs/evil", "..", "a/b\\c", "topic=x", "x" * 300, "%2e%2e%2fevil", "ñ名"]
    write_store(str(store), [spec(i, topic=t) for i, t in enumerate(hostile)] + common_specs(4))
    out = tmp_path / "sub" / "out"
    res = export_local([str(store)], str(out))
    assert res.rows == len(hostile) + 4
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        for n in dirnames + filenames:
            p = os.path.realpath(os.path.join(dirpath, n))
            assert p.startswith(str(store)) or p.startswith(str(out)) or p == str(tmp_path / "sub"), p
    parts = sorted(os.listdir(out))
    assert all(p.startswith("topic_partition=") and "/" not in p and ".." not in p for p in parts)
    assert len(parts) == len(set(topic_partition(t) for t in hostile)) + 2
    topics = set(read_dataset(str(out)).column("topic").to_pylist())
    assert set(hostile) <= topics  # the real names survive in the topic column


def test_filters_and_cli(tmp_path):
    store = tmp_path / "store"
    results = write_store(str(store), common_specs(30))
    before = tree_hashes(store)
    specs = common_specs(30)
    since, until = specs[5].store_timestamp, specs[20].store_timestamp
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(out), "--topic", "PayTopic", "--since",
                                 str(since), "--until", str(until), "--label", "broker-a", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    want = [res.physical_offset for s, res in zip(specs, results)
            if s.topic == "PayTopic" and since <= s.store_timestamp <= until]
    assert doc["rows"] == len(want) and doc["files"] == len(os.listdir(store / "commitlog"))
    t = sorted_rows(read_dataset(str(out)))
    assert [x["physical_offset"] for x in t] == want
    assert {x["source"] for x in t} == {"broker-a"}
    assert tree_hashes(store) == before
    # the filter applied in the scan gives the same rows as filtering afterwards
    flt = RowFilter(frozenset(["PayTopic"]), since, until)
    tasks = file_tasks([str(store)])
    n = sum(len(c["physical_offset"]) for t_ in tasks for c in file_column_chunks(t_, flt=flt, result=FileResult(t_)))
    assert n == len(want)


def test_output_inside_store_refused(tmp_path):
    store = tmp_path / "store"
    write_store(str(store), common_specs(3))
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(store / "commitlog" / "x")])
    assert r.exit_code == 6 and "inside the store" in r.output
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(tmp_path)])
    assert r.exit_code == 6
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(tmp_path / "full")])
    assert r.exit_code == 6 and "not empty" in r.output
    r = CliRunner().invoke(cli, ["export", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 3
    assert tree_hashes(store) == before
