"""Crash stories made with the project's writer (support.crash_stories), each defect of the restart story pinned:
what `recover --dry-run` says a restart does, and every other command saying the same.

Expectations come from the stories' own records (where the dispatcher stood, which entry is torn), not from
the code under test."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.fate import AFTER_RESTART_FATES, message_fate
from rmqinspect.analyses.lookup.explain import find_index_items
from rmqinspect.analyses.lookup.fates import query_as_recovered, recovery_view
from rmqinspect.analyses.lookup.query import IndexService
from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery.index import index_after_load
from rmqinspect.cli.main import cli
from rmqinspect.formats.constants import RMQ_SYS_SCHEDULE_TOPIC
from rmqinspect.formats.javahash import build_index_key, index_key_hash
from rmqinspect.store import Store
from support import tree_hashes
from support.crash_stories import make


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    root = tmp_path_factory.mktemp("stories")
    return {n: make(n, root / n) for n in ("dispatcher_behind", "dledger_torn", "rocksdb_no_rows", "clean")}


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# --- the dispatcher stopped before the crash ------------------------------------------------------------------


def test_dispatcher_behind_tail_keys_are_found_after_restart(stories):
    """Every key of the store, looked up as the recovered broker would: the kept index files' items up to their
    endPhyOffset E, then every record the restart dispatches from E on (the record at E a second time when a
    kept file already holds an item of that key for it: a record's keys can straddle two files)."""
    s = stories["dispatcher_behind"]
    with Store.open(s.root) as st:
        cp = st.checkpoint
        ia = index_after_load(st.layout.index_dir, False, cp.index_msg_timestamp)
        e = ia.end_phy_offset
        assert ia.dropped and ia.kept and e < s.dispatched_to  # the story: one index file dropped, one kept
        svc = IndexService.for_store(st)
        view = recovery_view(st, cache=False)
        keys = sorted({(r.topic, k) for r in s.records for k in r.keys + [r.uniq_key]})
        differ = []
        for topic, k in keys:
            carrying = [r.offset for r in s.records if r.topic == topic and k in r.keys + [r.uniq_key]]
            at_e = [i for i in find_index_items(svc, index_key_hash(build_index_key(topic, k)), e)
                    if i["file"] in ia.kept]
            want = sorted([o for o in carrying if o < e] + [e] * len(at_e) + [o for o in carrying if o >= e])
            got = query_as_recovered(svc, st, view, topic, k, 64)
            if [h.physical_offset for h in got.hits if h.has_key] != want:
                differ.append((topic, k))
        twice = [k for t, k in keys if k == next(r.uniq_key for r in s.records if r.offset == e)]
        svc.close()
    assert differ == []
    assert len(keys) > 300 and twice  # the record at E's UNIQ_KEY: found twice, as the broker does


def test_plain_index_lookup_says_the_record_carries_the_key_the_index_does_not_yet(stories):
    s = stories["dispatcher_behind"]
    tail = [r for r in s.tail() if len(r.keys) > 1 and r.topic == "OrderTopic"]
    r0 = tail[-1]
    only = r0.keys[1]
    r = run("index-lookup", s.root, "--topic", r0.topic, "--key", only)
    assert r.exit_code == 3
    assert f"record(s) at {r0.offset} carry it" in r.stderr and "indexes them when it restarts" in r.stderr
    assert "no record in topic" not in r.stderr
    r = run("index-lookup", s.root, "--topic", r0.topic, "--key", only, "--as-recovered", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verified_offsets"] == [r0.offset] and doc["hits"][0]["fate"] == "reindexed"


def test_dispatcher_behind_verify_counts_each_record_once_and_finds_the_index_behind(stories):
    s = stories["dispatcher_behind"]
    tail = s.tail()
    r = run("verify", s.root, "--format", "json")
    assert r.exit_code == 1
    summary = {row["kind"]: row for row in json.loads(r.stdout)["summary"]}
    dispatchable = [t for t in tail]  # every record of the story goes to a consume queue
    assert summary["cq_behind"]["items"] == len(dispatchable) == 57
    assert summary["cq_behind"]["bytes"] == sum(t.size for t in dispatchable)
    # every tail record has keys; the index's last file ends at the last record the dispatcher indexed
    assert summary["index_behind"]["items"] == len(tail)
    assert summary["index_behind"]["bytes"] == sum(t.size for t in tail)


def test_dispatcher_behind_fate_json_and_delayed_message(stories):
    s = stories["dispatcher_behind"]
    tail = s.tail()
    delayed = next(t for t in tail if t.topic == RMQ_SYS_SCHEDULE_TOPIC)
    plain = next(t for t in tail if t.topic != RMQ_SYS_SCHEDULE_TOPIC)
    r = run("fate", s.root, "--offset", plain.offset, "--format", "json")
    assert r.exit_code == 0, r.output
    (doc,) = json.loads(r.stdout)
    assert doc["after_restart_fate"] == "redispatched" and doc["reindexed_after_restart"] is True
    assert doc["after_restart_entry"][1] == plain.offset
    r = run("fate", s.root, "--offset", delayed.offset, "--format", "json")
    (doc,) = json.loads(r.stdout)
    assert doc["real_topic"] == delayed.real_topic
    assert doc["delivery_due"] == delayed.store_ts + 10_000  # level 3 of the default table: 10s
    # 4.9.8: the recovery dispatches it before the scheduler loads its levels: tagsCode is the TAGS hash
    assert doc["after_restart_entry"][3] != doc["delivery_due"]
    assert any("delivered to" in n and "at once after the restart" in n for n in doc["notes"])
    # a key only the restart indexes still finds its record
    r = run("fate", s.root, "--key", plain.keys[0], "--topic", plain.topic, "--format", "json")
    assert plain.offset in [d["physical_offset"] for d in json.loads(r.stdout)]


# --- DLedger: checkpoint lost, last entry torn ----------------------------------------------------------------


def test_dledger_torn_truncate_offset_is_where_nothing_is_cut(stories):
    s = stories["dledger_torn"]
    last = s.records[-1]
    with Store.open(s.root) as st:
        plan = plan_recovery(st, RecoveryOptions())
    assert plan.truncate_offset == last.end  # DLedger keeps the torn entry: its header is intact
    assert (plan.max_offset_after_load, plan.max_offset_after_start) == (0, last.end)
    assert plan.bytes_cut == 0 and "cuts nothing" in plan.headline_text()
    r = run("recover", s.root, "--dry-run", "--format", "json")
    doc = json.loads(r.stdout)
    assert (doc["truncate_offset"], doc["max_offset_after_load"], doc["max_offset_after_start"]) == \
        (last.end, 0, last.end)


def test_dledger_torn_salvage_discards_nothing_and_fate_keeps_every_message(stories):
    s = stories["dledger_torn"]
    r = run("salvage", s.root, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["messages"] == [] and doc["messages_lost"]["bytes"] == 0
    with Store.open(s.root) as st:
        plan = plan_recovery(st, RecoveryOptions(with_salvage=False))
        fates = [message_fate(st, rec.offset, plan=plan) for rec in s.records[:-1]]
    assert {f.after_restart_fate for f in fates} == {"survives"}


def test_dledger_torn_entry_decoded_as_the_broker_reads_it(stories):
    s = stories["dledger_torn"]
    last = s.records[-1]
    r = run("decode-commitlog", s.root, "--from", last.offset, "--format", "ndjson")
    assert r.exit_code == 0, r.output
    (doc,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert doc["physical_offset"] == last.offset and doc["crc_ok"] is False
    assert doc["topic"] == "" and doc["properties"] == {}
    assert "DLedger keeps this entry" in r.stderr


def test_dledger_torn_report_draws_the_damage_and_the_kept_end(stories, tmp_path):
    pytest.importorskip("plotly")
    s = stories["dledger_torn"]
    out = tmp_path / "r.html"
    r = run("report", s.root, "--out", out)
    assert r.exit_code == 0, r.output
    import re

    html = out.read_text()
    data = json.loads(re.search(r"<script[^>]*rmqinspect-data[^>]*>(.*?)</script>", html, re.S).group(1))
    st = data["stores"][0]
    last = s.records[-1]
    assert st["truncate_offset"] == last.end
    assert [(d["kind"], d["start"], d["end"]) for d in st["damage"]] == [("torn_tail", last.offset, last.end)]
    assert "truncate the commit log at 0" not in html and "cuts nothing" in st["headline_text"]


# --- RocksDB consume queue without a row ----------------------------------------------------------------------


def test_rocksdb_without_rows_is_cq_behind_in_entries(stories):
    s = stories["rocksdb_no_rows"]
    r = run("verify", s.root, "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    rows = {row["kind"]: row for row in doc["summary"]}
    assert rows["cq_behind"]["items"] == len(s.records)
    assert rows["cq_behind"]["bytes"] == sum(x.size for x in s.records)


def test_rocksdb_without_rows_fate_and_list(stories):
    s = stories["rocksdb_no_rows"]
    r = run("fate", s.root, "--offset", 0, "--format", "json")
    (doc,) = json.loads(r.stdout)
    assert "-1" not in doc["consume_queue"] and "dispatches every record" in doc["consume_queue"]
    assert doc["after_restart_fate"] == "redispatched"
    r = run("rocksdb-cq", s.root, "--list")
    assert r.exit_code == 3 and "holds no row at all" in r.stderr and "--list` lists" not in r.stderr
    r = run("recover", s.root, "--dry-run", "--format", "json")
    assert json.loads(r.stdout)["headline"]["cq_entries_written_by_start"] == len(s.records)


# --- a clean shutdown -----------------------------------------------------------------------------------------


def test_clean_store_words_say_nothing_is_cut(stories):
    s = stories["clean"]
    before = tree_hashes(s.root)
    r = run("recover", s.root, "--dry-run")
    assert r.exit_code == 0
    assert "truncated" not in r.stdout and "cuts nothing" in r.stdout
    assert "consume queues truncated" not in r.stdout
    doc = json.loads(run("recover", s.root, "--dry-run", "--format", "json").stdout)
    assert doc["headline"]["bytes_cut"] == 0 and doc["truncate_offset"] == s.records[-1].end
    assert run("verify", s.root).exit_code == 0
    assert tree_hashes(s.root) == before


def test_after_restart_fate_words_are_documented():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "restart.md").read_text()
    for word in AFTER_RESTART_FATES:
        assert f"`{word}`" in text


def test_lookup_view_is_the_plans_on_every_story(stories):
    from rmqinspect.analyses.lookup.fates import view_of_plan

    for s in stories.values():
        with Store.open(s.root) as st:
            quick = recovery_view(st, cache=False)
            full = view_of_plan(plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False)))
        assert quick == full, s.name


@pytest.mark.parametrize("zero_tail", [0, 1, 700, 5000])
def test_data_end_on_disk_is_after_the_last_non_zero_byte(tmp_path, zero_tail):
    """The backward search for where the commit log's data ends (recover's bytes cut) equals the last non-zero
    byte of the files, whether the tail record is whole or partly zeroed."""
    from rmqinspect.analyses.recovery.plan import data_end_on_disk
    from rmqinspect.store import Store
    from support.crash_stories import clean

    root = tmp_path / "s"
    clean(str(root))
    files = sorted((root / "commitlog").iterdir())
    last = max((p for p in files if any(p.read_bytes())), key=lambda p: p.name)
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    if zero_tail:
        data[max(end - zero_tail, 0):end] = bytes(min(zero_tail, end))
        last.write_bytes(bytes(data))
    want = next(int(p.name) + len(p.read_bytes().rstrip(b"\0")) for p in reversed(files) if any(p.read_bytes()))
    assert data_end_on_disk(Store.open(str(root))) == want


@pytest.mark.parametrize("write_at", [None, 0, 5000, 200_000])
def test_data_end_on_disk_skips_the_holes_of_a_sparse_file(tmp_path, write_at):
    """A newer commit-log file pre-allocated sparse (the broker's setLength) and holding nothing, or a few bytes
    between holes: the search that skips holes (SEEK_DATA/SEEK_HOLE) finds the same last non-zero byte."""
    from rmqinspect.analyses.recovery.plan import data_end_on_disk
    from rmqinspect.store import Store
    from support.crash_stories import clean

    root = tmp_path / "s"
    clean(str(root))
    files = sorted((root / "commitlog").iterdir())
    size = len(files[-1].read_bytes())
    nxt = root / "commitlog" / f"{int(files[-1].name) + size:020d}"
    with open(nxt, "wb") as f:
        f.truncate(size)  # a hole the whole length
        if write_at is not None:
            f.seek(write_at)
            f.write(b"\x07\x00\x09")
    want = next(int(p.name) + len(p.read_bytes().rstrip(b"\0")) for p in sorted(
        (root / "commitlog").iterdir(), reverse=True) if any(p.read_bytes()))
    assert want == (int(nxt.name) + write_at + 3 if write_at is not None else want)
    assert data_end_on_disk(Store.open(str(root))) == want
