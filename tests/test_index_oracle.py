"""`index-lookup` against every recorded DefaultMessageStore.queryMessage / IndexService.queryOffset of the oracle.

Clean, rebuild and RocksDB-CQ scenarios must match exactly (offsets, order, indexLastUpdate*, the key check).
Crash scenarios were recorded AFTER the broker's abnormal recovery, which deleted the newest index file and
rebuilt it from the recovered commitlog: there, every difference must be a hit from that deleted file pointing
at the torn record the broker cut off, and the returned offsets must still match.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from rmqinspect.analyses.lookup.query import IndexService, query_message
from rmqinspect.cli.main import cli
from rmqinspect.formats.javahash import index_key_hash, java_string_hash
from rmqinspect.store import Store
from support import load_expected, require_oracle, tree_hashes
from support.dledger_ref import is_dledger


def open_scenario(path):
    st = Store.open(path / "store")
    idx = path / "expected" / "index"
    return st, IndexService.for_store(st, str(idx) if idx.is_dir() else None)


def test_every_recorded_query_matches(scenario):
    path, exp = scenario
    st, svc = open_scenario(path)
    assert svc.files, "scenario has index files"
    crash = bool(exp.get("abortFilePresentBeforeLoad"))
    recovered_max = exp["stateAfterLoad"]["commitLogMaxOffset"]
    dropped = {i.name for i in svc.infos if i.dropped_on_abnormal_restart}
    if crash and is_dledger(exp):
        # DLedger recovery re-dispatches nothing (README): after the restart the broker answers from the index
        # files it kept, exactly
        assert dropped
        svc.files = [f for f in svc.files if f.name not in dropped]
        crash = False
    non_ascii = 0
    for rec in exp["queries"]:
        q = rec["query"]
        r = query_message(svc, st.commitlog, q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        ctx = (q["topic"], q["key"], q["why"])
        non_ascii += not q["key"].isascii()
        assert r.phy_offsets == rec["phyOffsets"], ctx
        assert [h.has_key for h in r.hits] == (rec["returnedMessageActuallyHasKey"] or []), ctx
        if not crash:
            assert r.raw == rec["indexServiceQueryOffsetRaw"], ctx
            assert (r.index_last_update_phy_offset, r.index_last_update_timestamp) == \
                (rec["indexLastUpdatePhyoffset"], rec["indexLastUpdateTimestamp"]), ctx
        else:
            first = r.rounds[0]
            extra = [(o, f) for o, f in zip(first.offsets, first.offset_files) if o not in rec["indexServiceQueryOffsetRaw"]]
            # the only extra raw hits: the torn record, found through the file the broker deleted at restart
            assert all(o >= recovered_max and f in dropped for o, f in extra), (ctx, extra)
            assert [o for o in r.raw if o < recovered_max] == rec["indexServiceQueryOffsetRaw"], ctx
            assert svc.abort_present
    assert non_ascii > 0


def test_crash_scenarios_flag_the_index_file_the_broker_deletes():
    for name in ("rocketmq-all-4.9.8/crash-torn-tail", "rocketmq-all-5.3.3/crash-torn-tail"):
        path = require_oracle(name)
        exp = load_expected(name)
        st, svc = open_scenario(path)
        deleted = {p.split("/")[-1] for p in (f["path"] for f in exp["filesBefore"])
                   if p.startswith("index/") and p not in {f["path"] for f in exp["filesAfter"]}}
        assert deleted and {i.name for i in svc.infos if i.dropped_on_abnormal_restart} == deleted


def test_java_hash_vectors_and_non_bmp():
    assert java_string_hash("TopicTest#OrderID001") == -1231272886
    assert index_key_hash("TopicTest#OrderID001") % 5_000_000 == 1272886
    assert index_key_hash("polygenelubricants") == 0  # Integer.MIN_VALUE -> 0
    # an emoji is a surrogate pair: two UTF-16 code units
    assert java_string_hash("🙂") == 0xD83D * 31 + 0xDE42


def _run(args):
    return CliRunner().invoke(cli, args)


def test_cli_index_lookup_json_matches_oracle_and_is_read_only():
    name = "rocketmq-all-4.9.8/clean"
    path = require_oracle(name)
    exp = load_expected(name)
    store = path / "store"
    before = tree_hashes(store)
    rec = next(x for x in exp["queries"] if x["query"]["maxNum"] == 5)
    q = rec["query"]
    r = _run(["index-lookup", str(store), "--topic", q["topic"], "--key", q["key"], "--max", "5", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["phy_offsets"] == rec["phyOffsets"] and doc["raw"] == rec["indexServiceQueryOffsetRaw"]
    assert [h["physical_offset"] for h in doc["hits"]] == rec["phyOffsets"]
    # non-ASCII key through the command line, table and ndjson
    rec = next(x for x in exp["queries"] if not x["query"]["key"].isascii() and x["phyOffsets"])
    q = rec["query"]
    r = _run(["index-lookup", str(store), "--topic", q["topic"], "--key", q["key"], "--format", "ndjson"])
    assert [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()] == rec["phyOffsets"]
    r = _run(["index-lookup", str(store), "--topic", q["topic"], "--key", q["key"], "--explain"])
    assert r.exit_code == 0 and "Items visited" in r.output and "hash and time match" in r.output
    # time window: the narrow-window query
    rec = next(x for x in exp["queries"] if x["query"]["why"].startswith("narrow"))
    q = rec["query"]
    r = _run(["index-lookup", str(store), "--topic", q["topic"], "--key", q["key"], "--begin", str(q["begin"]),
              "--end", str(q["end"]), "--format", "json"])
    assert json.loads(r.stdout)["phy_offsets"] == rec["phyOffsets"]
    # not found -> exit 3
    r = _run(["index-lookup", str(store), "--topic", "LogTopic", "--key", "no-such-key-xyz"])
    assert r.exit_code == 3
    assert tree_hashes(store) == before


def test_cli_max_batch_and_geometry_options():
    name = "rocketmq-all-5.3.3/clean"
    path = require_oracle(name)
    exp = load_expected(name)
    rec = next(x for x in exp["queries"] if x["query"]["maxNum"] == 1000)
    q = rec["query"]
    base = ["index-lookup", str(path / "store"), "--topic", q["topic"], "--key", q["key"], "--format", "json"]
    doc = json.loads(_run(base + ["--max", "1000", "--index-slots", "64", "--index-max", "2000"]).output)
    assert doc["phy_offsets"] == rec["phyOffsets"]
    doc = json.loads(_run(base + ["--max", "1000", "--max-batch", "2"]).output)
    assert doc["raw"] == rec["indexServiceQueryOffsetRaw"][:2]
    assert doc["phy_offsets"] == sorted(rec["indexServiceQueryOffsetRaw"][:2])


def test_cli_crash_hits_from_dropped_file_are_marked():
    name = "rocketmq-all-4.9.8/crash-torn-tail"
    path = require_oracle(name)
    store = path / "store"
    before = tree_hashes(store)
    r = _run(["index-lookup", str(store), "--topic", "LogTopic", "--key", "ord-15", "--format", "json", "--explain"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["raw"][0] == 1197830 and doc["phy_offsets"] == [1020415]
    assert any("1197830" in n and "not readable" in n for n in doc["notes"])
    assert doc["hits"][0]["from_dropped_index_file"] is True
    assert "deletes" in r.stderr
    assert tree_hashes(store) == before
