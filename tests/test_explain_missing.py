"""`explain-missing`: the broker's look-up, then the diagnosis, on the oracle and on stores built here whose
index files were destroyed, never written for a period, lag behind the commitlog, or skip a message."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.javahash import build_index_key
from support import load_expected, require_oracle, tree_hashes
from tests.test_index_corrupt import IndexBuilder

T0 = 1_700_000_000_000


def build(root, n=12, index_files=((0, 12),), skip=(), props_of=None):
    """A store of n messages with KEYS `key-<i>`; one index file per (first, last+1) range, message ``skip``s left out."""
    os.makedirs(root / "index")
    recs = []
    with CommitLogWriter(str(root / "commitlog"), file_size=64 * 1024) as w:
        for i in range(n):
            ts = T0 + i * 1500
            props = props_of(i) if props_of else {"KEYS": f"key-{i}", "UNIQ_KEY": "%032X" % (0xC0A80001 << 96 | 77 << 80 | i)}
            r = w.append(MessageSpec("T", 0, b"b", encode_properties(props), store_timestamp=ts, born_timestamp=ts))
            recs.append((r.physical_offset, ts, props))
    for k, (a, b) in enumerate(index_files):
        ib = IndexBuilder(slots=16, max_items=64)
        for i in range(a, b):
            if i in skip:
                continue
            off, ts, props = recs[i]
            for key in [props.get("UNIQ_KEY")] + props.get("KEYS", "").split(" "):
                if key:
                    ib.put(build_index_key("T", key), off, ts)
        (root / "index" / f"2023111422132{k}000").write_bytes(ib.build())
    return recs


def explain(root, *args):
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["explain-missing", str(root), "--topic", "T", *args, "--format", "json"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert tree_hashes(root) == before
    return r, json.loads(r.stdout)


def codes(doc):
    return [x["code"] for x in doc["reasons"]]


def test_found_by_index(tmp_path):
    recs = build(tmp_path)
    r, doc = explain(tmp_path, "--key", "key-3")
    assert r.exit_code == 0 and doc["found_by_index"] and doc["broker_result"] == [recs[3][0]]


def test_index_behind_commitlog(tmp_path):
    recs = build(tmp_path, index_files=((0, 8),))
    r, doc = explain(tmp_path, "--key", "key-10")
    assert r.exit_code == 0 and not doc["found_by_index"]
    assert codes(doc) == ["index_behind"] and doc["located"][0]["physical_offset"] == recs[10][0]


def test_index_file_missing_for_a_period(tmp_path):
    recs = build(tmp_path, index_files=((0, 4), (8, 12)))
    _, doc = explain(tmp_path, "--key", "key-5")
    assert codes(doc) == ["index_gap"]
    assert "destroyed or never written" in doc["reasons"][0]["detail"]


def test_message_never_indexed_inside_a_file(tmp_path):
    build(tmp_path, skip={5})
    _, doc = explain(tmp_path, "--uniq-key", "%032X" % (0xC0A80001 << 96 | 77 << 80 | 5))
    assert codes(doc) == ["not_indexed"]


def test_no_index_files_at_all(tmp_path):
    build(tmp_path, index_files=())
    r, doc = explain(tmp_path, "--key", "key-2")
    assert r.exit_code == 0
    assert codes(doc)[0] == "no_index_files" and doc["located"]


def test_key_in_a_user_property_not_in_keys(tmp_path):
    build(tmp_path, props_of=lambda i: {"orderId": f"o-{i}"} if i == 4 else {"KEYS": f"key-{i}"})
    _, doc = explain(tmp_path, "--key", "o-4")
    assert codes(doc) == ["key_not_in_keys"]


def test_not_on_disk_and_bounded_scan(tmp_path):
    build(tmp_path)
    r, doc = explain(tmp_path, "--key", "nope")
    assert r.exit_code == 3 and codes(doc) == ["not_on_disk"] and doc["scan_complete"]
    r, doc = explain(tmp_path, "--key", "nope", "--scan-bytes", "100")
    assert r.exit_code == 3 and codes(doc) == ["not_in_scanned_range"] and not doc["scan_complete"]
    r = CliRunner().invoke(cli, ["explain-missing", str(tmp_path), "--topic", "T"])
    assert r.exit_code == 2 and "exactly one" in r.output


def test_oracle_time_window_and_other_topic():
    name = "rocketmq-all-4.9.8/clean"
    path = require_oracle(name)
    rec = next(x for x in load_expected(name)["queries"] if x["query"]["why"] == "exact-millisecond window")
    q = rec["query"]
    r = CliRunner().invoke(cli, ["explain-missing", str(path / "store"), "--topic", q["topic"], "--key", q["key"],
                                 "--begin", str(q["begin"]), "--end", str(q["end"]), "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["broker_result"] == rec["phyOffsets"] == []
    c = codes(doc)
    assert "time_window" in c and "other_topic" in c
    # the message stored exactly at the window's millisecond is excluded by the whole-second timeDiff
    exact = [x for x in doc["reasons"] if f"store time {q['begin']})" in x["detail"]]
    assert exact and "narrower than a second" in exact[0]["detail"]


def test_oracle_delayed_message_and_result_cap():
    name = "rocketmq-all-4.9.8/clean"
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    m = next(m for m in exp["messages"] if m["topic"] == "SCHEDULE_TOPIC_XXXX" and m["keys"] and " " not in m["keys"]
             and m["keys"].startswith("uk-"))
    real = m["properties"]["REAL_TOPIC"]
    r = CliRunner().invoke(cli, ["explain-missing", str(store), "--topic", real, "--key", m["keys"], "--format", "json"])
    doc = json.loads(r.stdout)
    assert codes(doc) == ["delayed_message"] and doc["located"][0]["physical_offset"] == m["physicalOffset"]
    rec = next(x for x in exp["queries"] if x["query"]["maxNum"] == 64 and len(x["phyOffsets"]) > 5)
    q = rec["query"]
    r = CliRunner().invoke(cli, ["explain-missing", str(store), "--topic", q["topic"], "--key", q["key"], "--max", "3"])
    assert r.exit_code == 0 and "result_cap" in r.stdout and "found by the broker" in r.stdout


def test_oracle_crash_torn_record():
    name = "rocketmq-all-4.9.8/crash-torn-tail"
    store = require_oracle(name) / "store"
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["explain-missing", str(store), "--topic", "LogTopic", "--key", "ключ-10",
                                 "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["broker_result"] == []
    hit = [x for x in doc["reasons"] if x["code"] == "hit_not_readable"]
    assert hit and "1197830" in hit[0]["detail"] and "deletes it on restart" in hit[0]["detail"]
    assert tree_hashes(store) == before


def test_msg_id_mode():
    name = "rocketmq-all-5.3.3/clean"
    store = require_oracle(name) / "store"
    m = load_expected(name)["messages"][10]
    r = CliRunner().invoke(cli, ["explain-missing", str(store), "--topic", m["topic"], "--msg-id", m["offsetMsgId"],
                                 "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["located"][0]["physical_offset"] == m["physicalOffset"] and doc["reasons"] == []
    r = CliRunner().invoke(cli, ["explain-missing", str(store), "--topic", "Other", "--msg-id", m["offsetMsgId"],
                                 "--format", "json"])
    assert codes(json.loads(r.stdout)) == ["other_topic"]
    bad = m["offsetMsgId"][:16] + "7FFFFFFF00000000"
    r = CliRunner().invoke(cli, ["explain-missing", str(store), "--topic", m["topic"], "--msg-id", bad])
    assert r.exit_code == 3 and "beyond_commitlog" in r.stdout
