"""Config JSON no broker writes: nesting 1,000 deep, 100,000-digit integers, and null / string /
list values where an object or a number belongs. Each gives a problem line naming the file and key, or the
.bak fallback ConfigManager.load takes - never RecursionError / ValueError / TypeError / AttributeError."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.store.config_files import parse_fastjson
from support import require_oracle, tree_hashes

GOOD = '{"offsetTable":{"PayTopic@g1":{0:3,1:5}}}'


@pytest.fixture
def store(tmp_path):
    src = require_oracle("rocketmq-all-4.9.8/clean") / "store"
    dst = tmp_path / "store"
    shutil.copytree(src, dst)
    return dst


def _run(argv):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, argv)


def _write(store, name, text):
    (store / "config" / name).write_text(text)


HOSTILE = {
    "deep": "[" * 1000 + "]" * 1000,
    "deep-object": '{"offsetTable":' + '{"a":' * 1000 + "1" + "}" * 1001,
    "huge-int-offset": '{"offsetTable":{"PayTopic@g1":{0:' + "9" * 100_000 + "}}}",
    "5000-digit": '{"offsetTable":{"PayTopic@g1":{0:' + "1" * 5000 + "}}}",
    "string-offset": '{"offsetTable":{"PayTopic@g1":{0:"abc"}}}',
    "duplicate-key-string": '{"offsetTable":{"PayTopic@g1":{0:1,0:"abc"}}}',
    "null-offset": '{"offsetTable":{"PayTopic@g1":{0:null}}}',
    "null-queue-table": '{"offsetTable":{"PayTopic@g1":null}}',
    "list-table": '{"offsetTable":[]}',
    "string-table": '{"offsetTable":"x"}',
    "string-queue-table": '{"offsetTable":{"PayTopic@g1":"x"}}',
    "list-queue-table": '{"offsetTable":{"PayTopic@g1":[1,2]}}',
    "float-offset": '{"offsetTable":{"PayTopic@g1":{0:1e400}}}',
    "bool-offset": '{"offsetTable":{"PayTopic@g1":{0:true}}}',
    "beyond-long": '{"offsetTable":{"PayTopic@g1":{0:99999999999999999999}}}',
}


@pytest.mark.parametrize("target", ["consumerOffset.json", "consumerOffset.json.bak", "delayOffset.json"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("command", [["config"], ["consumer-lag"], ["gc", "--dry-run", "--now", "2030-01-01"]])
def test_hostile_config_never_tracebacks(store, target, case, command):
    if target.endswith(".bak"):
        _write(store, "consumerOffset.json", "")  # the main file unusable: the .bak is read
    _write(store, target, HOSTILE[case])
    before = tree_hashes(store)
    r = _run([command[0], str(store), *command[1:], "--format", "json"])
    # 3: consumer-lag on a store without consumerOffset.json (the clean oracle store has none): the no-match rule
    assert r.exit_code in (0, 1, 4) or (r.exit_code == 3 and "no consumer offsets" in r.stderr), (r.exit_code,
                                                                                                  r.stderr)
    assert "Traceback" not in r.stderr
    if r.exit_code != 4:
        json.loads(r.stdout)
    else:
        assert len(r.stderr.strip().splitlines()) >= 1 and "consumerOffset" in r.stderr + r.stdout
    assert tree_hashes(store) == before


def test_the_problem_names_file_and_key(store):
    _write(store, "consumerOffset.json", '{"offsetTable":{"PayTopic@g1":{0:"abc",1:7}}}')
    r = _run(["config", str(store), "--format", "json"])
    assert r.exit_code in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    probs = " ".join(doc["problems"])
    assert "consumerOffset.json" in probs and "PayTopic@g1" in probs and "'0'" in probs
    assert {"topic": "PayTopic", "group": "g1", "queue_id": 1, "offset": 7} in doc["consumerOffsets"]

    r = _run(["consumer-lag", str(store), "--format", "json"])
    doc = json.loads(r.stdout)
    assert any("PayTopic@g1" in p for p in doc["problems"]), doc["problems"]


def test_too_deep_falls_back_to_bak_like_configmanager(store):
    _write(store, "consumerOffset.json", "[" * 1000 + "]" * 1000)
    _write(store, "consumerOffset.json.bak", GOOD)
    r = _run(["config", str(store), "--format", "json"])
    doc = json.loads(r.stdout)
    f = doc["files"]["consumerOffsets"]
    assert f["source"] == "bak" and "nested deeper" in f["reason"], f
    assert {"topic": "PayTopic", "group": "g1", "queue_id": 1, "offset": 5} in doc["consumerOffsets"]


def test_parser_limits():
    from rmqinspect.store.config_files import MAX_CONFIG_DEPTH, ConfigSyntaxError

    with pytest.raises(ConfigSyntaxError):
        parse_fastjson("[" * (MAX_CONFIG_DEPTH + 1) + "]" * (MAX_CONFIG_DEPTH + 1))
    with pytest.raises(ConfigSyntaxError):
        parse_fastjson("[" + "7" * 100_000 + "]")
    assert parse_fastjson("[" * MAX_CONFIG_DEPTH + "]" * MAX_CONFIG_DEPTH) is not None
    assert parse_fastjson('{0:{"x":"{[[[[["}}') == {"0": {"x": "{[[[[["}}
