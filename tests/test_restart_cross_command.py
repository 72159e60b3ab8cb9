"""One restart model, every command telling the same story: on every oracle scenario and every writer-made crash
story, what `fate`, `salvage`, `index-lookup --as-recovered`, `explain-missing --as-recovered`, `msgid
--as-recovered`, `cq --as-recovered` and `consumer-lag` say of the restart agrees with `recover --dry-run` (same
cut, same re-dispatched records, same index hits), and with the oracle broker's own answers where it recorded
them (its max offsets after load and after start)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.fate import AFTER_RESTART_FATES, message_fate
from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import ALL_SCENARIOS, ORACLE_MISSING, load_expected, require_oracle, tree_hashes
from support.crash_stories import STORIES, make

CASES = [f"oracle:{s}" for s in ALL_SCENARIOS if s != ORACLE_MISSING] + [f"story:{n}" for n in STORIES]


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    return r


def _store(case, tmp_path):
    kind, name = case.split(":", 1)
    if kind == "oracle":
        return require_oracle(name) / "store", load_expected(name)
    return make(name, tmp_path / name).root, None


def _in(ranges, off):
    return any(a <= off < b for a, b in ranges)


@pytest.mark.parametrize("case", CASES)
def test_every_command_tells_the_restart_recover_tells(case, tmp_path):
    root, exp = _store(case, tmp_path)
    before = tree_hashes(root)
    r = run("recover", root, "--dry-run", "--format", "json")
    assert r.exit_code in (0, 1), r.output
    rec = json.loads(r.stdout)
    t = rec["truncate_offset"]
    dispatched = [tuple(x) for x in rec["index_rebuild"]["dispatched"]]
    reindexed = [tuple(x) for x in rec["index_rebuild"]["reindexed"]]
    after_start = rec["consume_queue_max_offsets_after_start"] or rec["consume_queue_max_offsets"]
    if exp is not None:  # the broker's own max offsets
        assert rec["max_offset_after_load"] == exp["stateAfterLoad"]["commitLogMaxOffset"]
        assert rec["max_offset_after_start"] == exp["stateAfterStart"]["commitLogMaxOffset"]

    # salvage: the same cut
    r = run("salvage", root, "--format", "json")
    sal = json.loads(r.stdout)
    assert sal["truncate_offset"] == t
    assert r.exit_code == (1 if sal["messages"] or sal["regions"] else 0)
    assert (rec["headline"]["bytes_cut"] == 0) or sal["messages_lost"]["bytes"] > 0

    # fate: every record, its one word from the plan's cut / re-dispatch / index rebuild
    with Store.open(root) as st:
        plan = plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False))
        assert plan.truncate_offset == t
        msgs = list(st.commitlog.messages(None, None, keep_going=True))
        sample = msgs if len(msgs) <= 300 else msgs[:50] + msgs[-150:]
        for m in sample:
            f = message_fate(st, m.physical_offset, plan=plan)
            assert f.after_restart_fate in AFTER_RESTART_FATES
            assert (f.after_restart_fate == "cut") == (m.physical_offset + m.total_size > t), f
            if f.after_restart_fate == "redispatched":
                assert _in(dispatched, m.physical_offset), f
            if f.after_restart_entry is not None:
                key = f"{m.topic}/{m.queue_id}"
                assert f.after_restart_entry[0] < after_start[key]
            assert f.reindexed_after_restart == (_in(reindexed, m.physical_offset) and f.after_restart_fate != "cut"
                                                 and (m.sys_flag & 0xC) != 0xC)
    last = sample[-1]
    r = run("fate", root, "--offset", last.physical_offset, "--format", "json")
    (doc,) = json.loads(r.stdout)
    assert doc["after_restart_fate"] == ("cut" if last.physical_offset + last.total_size > t else doc[
        "after_restart_fate"]) and doc["after_restart_fate"] in AFTER_RESTART_FATES

    # index-lookup / explain-missing / msgid as recovered: the same hits; none past the cut; the items only the
    # restart puts lie in recover's reindexed ranges
    keyed = [m for m in sample if m.keys and m.physical_offset + m.total_size <= t][-3:]
    for m in keyed:
        r = run("index-lookup", root, "--topic", m.topic, "--key", m.keys[0], "--as-recovered", "--format", "json")
        # found after the restart iff a kept index file covers it (up to their endPhyOffset) or the restart
        # indexes it (a DLedger restart re-dispatches nothing: a dropped index file's records stay unfound)
        found = m.physical_offset <= rec["index_rebuild"]["index_end_phy_offset"] or _in(reindexed, m.physical_offset)
        assert r.exit_code in ((0,) if found else (0, 3)), (m.physical_offset, r.output)
        look = json.loads(r.stdout)
        assert (m.physical_offset in look["verified_offsets"]) == found
        for h in look["hits"]:
            assert h["physical_offset"] < t
            if h["fate"] == "reindexed":
                assert _in(reindexed, h["physical_offset"])
        r = run("explain-missing", root, "--topic", m.topic, "--key", m.keys[0], "--as-recovered", "--format", "json")
        assert json.loads(r.stdout)["broker_result"] == look["phy_offsets"]
        if m.uniq_key and found:
            r = run("msgid", m.uniq_key, "--store", root, "--topic", m.topic, "--as-recovered", "--format", "json")
            hits = json.loads(r.stdout)["as_uniq_key"]["hits"]
            assert m.physical_offset in [h["physical_offset"] for h in hits]

    # cq --as-recovered: the queue recover says the broker holds after start()
    key = next((k for k in sorted(after_start) if after_start[k] and not k.startswith("SCHEDULE")), None)
    if key is not None and not rec["broker_version"].get("dledger") and plan.consume_queue_entries(key) is not None:
        topic, qid = key.rsplit("/", 1)
        r = run("cq", root, "--topic", topic, "--queue", qid, "--as-recovered", "--format", "ndjson")
        assert r.exit_code == 0, r.output
        rows = [json.loads(x) for x in r.stdout.splitlines()]
        assert rows[-1]["queue_offset"] + 1 == after_start[key]
        assert all(x["physical_offset"] < t for x in rows)

    # consumer-lag: the queues after restart are recover's
    r = run("consumer-lag", root, "--format", "json")
    if r.exit_code == 0:
        for row in json.loads(r.stdout).get("rows", []):
            assert row["max_offset_after"] == after_start.get(f"{row['topic']}/{row['queue_id']}")
    assert tree_hashes(root) == before
