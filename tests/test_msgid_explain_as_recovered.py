"""`msgid --as-recovered` and `explain-missing --as-recovered` on the crash-torn-tail stores: the
broker's answer after it recovered the directory (expected.json's queries and messages, read through RocketMQ
after load/start) equals ours, with no flags and with the scenario's broker.conf; without the flag each answer
carries its fate after restart."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.lookup.explain import explain_missing
from rmqinspect.analyses.lookup.fates import recovery_view
from rmqinspect.analyses.lookup.msgid import find_msg_id
from rmqinspect.analyses.lookup.query import IndexService
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.broker_conf import read_broker_conf
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes

TORN = [n for n in ALL_SCENARIOS if n.endswith("crash-torn-tail")] or ALL_SCENARIOS[:1]
HEX32 = re.compile(r"^[0-9A-F]{32}$")


def _conf(tmp_path, exp):
    p = tmp_path / "broker.conf"
    flat = {k: v for k, v in exp["storeConfig"].items() if v is not None and not isinstance(v, (dict, list))}
    p.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in flat.items()))
    return p


@pytest.mark.parametrize("with_conf", [False, True], ids=["inferred", "broker.conf"])
@pytest.mark.parametrize("name", TORN)
def test_explain_and_msgid_as_recovered_equal_the_broker(name, with_conf, tmp_path):
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    torn = exp["doctoring"]["tornMessage"]
    conf = read_broker_conf(_conf(tmp_path, exp)) if with_conf else None
    before = tree_hashes(store)
    st = Store.open(str(store), conf=conf)
    svc = IndexService.for_store(st)
    view = recovery_view(st)
    assert view.truncate_offset == exp["stateAfterLoad"]["commitLogMaxOffset"] == torn["wroteOffset"]
    explained = uniq = 0
    for rec in exp["queries"]:
        q = rec["query"]
        if not q["key"]:
            continue  # explain-missing needs a key
        kind = "uniq_key" if HEX32.match(q["key"]) else "key"
        rep = explain_missing(st, svc, q["topic"], q["key"], kind, q["begin"], q["end"], q["maxNum"],
                              view=view, as_recovered=True)
        assert rep.query.phy_offsets == rec["phyOffsets"], q
        assert rep.found_by_index == bool(rec["phyOffsets"]) or not rec["phyOffsets"]
        explained += 1
        if kind == "uniq_key":
            m = find_msg_id(st, svc, q["key"], q["topic"], q["maxNum"], view, as_recovered=True)
            assert [h["physical_offset"] for h in m.as_uniq_key["hits"]] == rec["phyOffsets"], q
            uniq += 1
    assert explained >= 25 and uniq >= 3
    # the torn message: on disk its keys still reach it through the index, after recovery nothing does
    for key in torn["keys"].split() + [torn["uniqKey"]]:
        rep = explain_missing(st, svc, torn["topic"], key, "uniq_key" if key == torn["uniqKey"] else "key",
                              view=view, as_recovered=True)
        assert torn["wroteOffset"] not in rep.query.phy_offsets
        assert rep.fates.get(torn["wroteOffset"]) == "beyond_truncation"
        assert "beyond_truncation" in {r.code for r in rep.reasons}
    # every message the recovered broker still serves is found by its offsetMsgId; the torn one is not
    for m in exp["messages"][-40:]:
        r = find_msg_id(st, svc, m["offsetMsgId"], m["topic"], view=view, as_recovered=True)
        assert r.as_offset_msg_id["matches"] and r.as_offset_msg_id["fate"] == "survives", m["offsetMsgId"]
    on_disk = find_msg_id(st, svc, torn["msgId"], torn["topic"], view=view)
    assert on_disk.as_offset_msg_id["fate"] == "beyond_truncation"
    gone = find_msg_id(st, svc, torn["msgId"], torn["topic"], view=view, as_recovered=True)
    assert not gone.found and str(torn["wroteOffset"]) in gone.as_offset_msg_id["error"]
    assert tree_hashes(store) == before


@pytest.mark.parametrize("name", TORN)
def test_cli_as_recovered(name):
    store = str(require_oracle(name) / "store")
    torn = load_expected(name)["doctoring"]["tornMessage"]
    run = CliRunner().invoke
    r = run(cli, ["msgid", torn["msgId"], "--store", store, "--topic", torn["topic"], "--format", "json"])
    assert r.exit_code == 3 and json.loads(r.stdout)["as_offset_msg_id"]["fate"] == "beyond_truncation", r.output
    r = run(cli, ["msgid", torn["msgId"], "--store", store, "--topic", torn["topic"], "--as-recovered"])
    assert r.exit_code == 3 and "truncates the commit log" in r.stdout and "beyond_truncation" in r.stdout
    assert run(cli, ["msgid", torn["msgId"], "--as-recovered"]).exit_code == 2  # needs --store
    key = torn["keys"].split()[0]
    r = run(cli, ["explain-missing", store, "--key", key, "--topic", torn["topic"], "--as-recovered",
                  "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["as_recovered"] and doc["recovery_truncate_offset"] == torn["wroteOffset"]
    assert doc["broker_result_fates"][str(torn["wroteOffset"])] == "beyond_truncation"
    assert "beyond_truncation" in [x["code"] for x in doc["reasons"]]
