"""The fastjson config reader (.bak fallback) and the per-consumer-group lost window."""

import json

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.errors import CorruptDataError
from rmqinspect.store.config_files import quote_bare_keys, read_config
from support import tree_hashes
from support.recover_fixtures import build_store

FASTJSON = '{\n\t"offsetTable":{\n\t\t"OrderTopic@gid-a":{0:80,1:10\n\t\t},\n\t\t"PayTopic@gid-a":{0:79}\n\t}\n}'


def test_fastjson_unquoted_integer_keys_outside_strings_only():
    assert json.loads(quote_bare_keys('{0:250,-1:3, 12 :4}')) == {"0": 250, "-1": 3, "12": 4}
    # a string value that looks like a map must be left alone
    assert json.loads(quote_bare_keys('{"note":"{1:2,3:4}",5:6}')) == {"note": "{1:2,3:4}", "5": 6}
    assert json.loads(quote_bare_keys(FASTJSON))["offsetTable"]["OrderTopic@gid-a"] == {"0": 80, "1": 10}


def test_read_config_bak_fallback(tmp_path):
    d = tmp_path
    assert read_config(str(d), "consumerOffset.json") is None
    (d / "consumerOffset.json.bak").write_text(FASTJSON)
    (d / "consumerOffset.json").write_text('{"offsetTable":{"OrderTopic@gid-a":{0:8')  # torn write
    cfg = read_config(str(d), "consumerOffset.json")
    assert cfg.used_backup and cfg.source == "consumerOffset.json.bak"
    assert any("unparseable" in p for p in cfg.problems)
    (d / "consumerOffset.json").write_text(FASTJSON)
    cfg = read_config(str(d), "consumerOffset.json")
    assert not cfg.used_backup and cfg.source == "consumerOffset.json"
    (d / "consumerOffset.json").write_text("")
    (d / "consumerOffset.json.bak").write_text("{broken")
    with pytest.raises(CorruptDataError):
        read_config(str(d), "consumerOffset.json")


def test_lost_window_after_cq_truncation(tmp_path):
    """Zero the last 6 records (CQ ahead of the commit log): truncateDirtyLogicFiles cuts their entries.
    A group that had consumed everything has consumed_then_cut entries and an overflowing offset; a group
    that lagged behind will never see the cut entries it had not consumed yet."""
    fx = build_store(tmp_path / "s")
    cut = fx.records[-6:]
    fx.zero(cut[0].offset, cut[-1].end)
    full = fx.queue_counts()
    kept = fx.queue_counts(before=cut[0].offset)
    q = "OrderTopic/0"
    lag = kept[q] - 5
    table = {"OrderTopic@done": {0: full[q]}, "OrderTopic@slow": {0: lag}, "Nope@x": {0: 1}}
    text = json.dumps({"offsetTable": table}).replace('"0":', "0:")
    (tmp_path / "s" / "config" / "consumerOffset.json").write_text(text)
    before = tree_hashes(fx.root)
    r = CliRunner().invoke(cli, ["consumer-lag", fx.root, "--broker-version", "4.9.8", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = {(g["group"], g["topic"]): g for g in doc["groups"]}
    done, slow = rows[("done", "OrderTopic")], rows[("slow", "OrderTopic")]
    assert done["max_offset_before"] == full[q] and done["max_offset_after"] == kept[q]
    assert done["consumed_then_cut"] == full[q] - kept[q] and done["status"] == "overflow"
    assert done["never_see"] == 0
    assert slow["never_see"] == full[q] - kept[q] and slow["backlog"] == 5 and slow["status"] == "ok"
    assert rows[("x", "Nope")]["status"] == "no_queue"
    assert doc["source"] == "consumerOffset.json" and not doc["used_backup"]
    r = CliRunner().invoke(cli, ["recover", fx.root, "--dry-run", "--consumers", "--broker-version", "4.9.8"])
    assert "Lost window per consumer group" in r.stdout and r.exit_code == 1
    r = CliRunner().invoke(cli, ["consumer-lag", fx.root, "--format", "ndjson"])
    assert len(r.stdout.splitlines()) == 3
    assert tree_hashes(fx.root) == before
