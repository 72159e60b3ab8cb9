"""config/*.json: fastjson unquoted integer keys, .bak fallback, `config` command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.store.config_files import load_config_file, parse_fastjson, quote_bare_keys, read_config_files
from support import require_oracle, tree_hashes

# fastjson 1.x pretty output shape (tabs, unquoted int keys), incl. the PR #10283 compatibility case
CONSUMER_OFFSET = """{
\t"offsetTable":{
\t\t"TopicTest@gid-test":{0:123,1:456
\t\t},
\t\t"%RETRY%gid-test@gid-test":{0:0},
\t\t"weird{0:1}@g":{-1:7},
\t\t"no-separator":{0:1}
\t},
\t"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000}
}"""
TOPICS = """{"dataVersion":{"counter":2,"timestamp":1700000000000},"topicConfigTable":{
"TopicTest":{"attributes":{"queue.type":"BatchCQ"},"order":false,"perm":6,"readQueueNums":4,
"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},
"note{1:2}":{"topicName":"note{1:2}","perm":4,"attributes":{"desc":"a,2:b"}}}}"""
GROUPS = """{"subscriptionGroupTable":{"gid-test":{"groupName":"gid-test","consumeEnable":true,
"retryMaxTimes":16,"retryQueueNums":1}},"forbiddenTable":{}}"""
DELAY = """{\n\t"offsetTable":{1:5,3:0,18:2}\n}"""


def make_store(root, files: dict):
    (root / "commitlog").mkdir(parents=True)
    (root / "config").mkdir()
    for name, text in files.items():
        (root / "config" / name).write_text(text, encoding="utf-8")
    return root


def test_quote_bare_keys_outside_strings_only():
    assert quote_bare_keys('{0:1, -2 :3,"a{4:5}":{6:7}}') == '{"0":1, "-2" :3,"a{4:5}":{"6":7}}'
    assert parse_fastjson('{"s":"x,1:y","l":[1,2,{3:4}]}') == {"s": "x,1:y", "l": [1, 2, {"3": 4}]}
    with pytest.raises(json.JSONDecodeError):
        json.loads(CONSUMER_OFFSET)  # the reason for the loader


def test_read_all_tables(tmp_path):
    root = make_store(tmp_path / "s", {"consumerOffset.json": CONSUMER_OFFSET, "topics.json": TOPICS,
                                       "subscriptionGroup.json": GROUPS, "delayOffset.json": DELAY})
    cfg = read_config_files(str(root / "config"))
    assert [(r["topic"], r["group"], r["queue_id"], r["offset"]) for r in cfg.consumer_offsets] == [
        ("%RETRY%gid-test", "gid-test", 0, 0), ("TopicTest", "gid-test", 0, 123), ("TopicTest", "gid-test", 1, 456),
        ("weird{0:1}", "g", -1, 7)]
    assert any("no-separator" in p for p in cfg.problems)
    t = {r["topic"]: r for r in cfg.topics}
    assert t["TopicTest"]["attributes"] == {"queue.type": "BatchCQ"} and t["TopicTest"]["perm_text"] == "-RW-"
    assert t["note{1:2}"]["attributes"] == {"desc": "a,2:b"} and t["note{1:2}"]["read_queue_nums"] == 16
    assert cfg.subscription_groups[0]["group"] == "gid-test"
    assert cfg.delay_offsets == [{"delay_level": 1, "queue_id": 0, "offset": 5},
                                 {"delay_level": 3, "queue_id": 2, "offset": 0},
                                 {"delay_level": 18, "queue_id": 17, "offset": 2}]


@pytest.mark.parametrize("main", [None, "", "{\"offsetTable\":{\"a@b\":{0:1", "\xff"])
def test_bak_fallback(tmp_path, main):
    cfgdir = tmp_path / "config"
    cfgdir.mkdir()
    if main is not None:
        (cfgdir / "consumerOffset.json").write_bytes(main.encode("latin-1"))
    (cfgdir / "consumerOffset.json.bak").write_text('{"offsetTable":{"a@b":{0:9}}}')
    ld = load_config_file(str(cfgdir), "consumerOffset.json")
    assert ld.source == "bak" and ld.used.endswith(".bak") and "instead" in ld.reason
    assert ld.data == {"offsetTable": {"a@b": {"0": 9}}}


def test_both_corrupt(tmp_path):
    cfgdir = tmp_path / "config"
    cfgdir.mkdir()
    (cfgdir / "topics.json").write_text("{")
    (cfgdir / "topics.json.bak").write_text("[1]")
    ld = load_config_file(str(cfgdir), "topics.json")
    assert ld.source == "missing" and ld.data is None and len(ld.problems) == 2


def test_cli_config(tmp_path):
    root = make_store(tmp_path / "s", {"consumerOffset.json": "{broken", "consumerOffset.json.bak": CONSUMER_OFFSET,
                                       "topics.json": TOPICS})
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["config", str(root), "--format", "json"])
    assert r.exit_code == 1, r.output  # problems: .bak used
    doc = json.loads(r.stdout)
    assert doc["files"]["consumerOffsets"]["source"] == "bak"
    assert {x["offset"] for x in doc["consumerOffsets"]} == {0, 123, 456, 7}
    assert "loaded consumerOffset.json.bak instead" in r.stderr
    r = CliRunner().invoke(cli, ["config", str(root), "--only", "topics"])
    assert "TopicTest" in r.stdout and "BatchCQ" in r.stdout
    assert tree_hashes(root) == before


def test_cli_config_oracle_delay_offsets():
    p = require_oracle("rocketmq-all-4.9.8/clean")
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["config", str(p / "store"), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["files"]["delayOffsets"]["source"] == "main" and doc["delayOffsets"] == []
    assert tree_hashes(p / "store") == before
