"""`rmqinspect report` without a browser: its data agree with the commands it is built from, traffic is
downsampled by time bucket while every damaged range is kept, and the command's output rules (a new file outside
the store, no silent overwrite, one line when plotly is missing). The page in a real browser:
tests/test_report_browser.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.report_data import collect_store_report
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import require_oracle, tree_hashes
from support.recover_fixtures import build_store

AS_OF = "2026-11-21T21:40:00Z"
OFFSETS = {"offsetTable": {"OrderTopic@billing": {"0": 79, "1": 20}, "PayTopic@billing": {"0": 80}}}


def island(path) -> dict:
    """The page's JSON data island."""
    text = open(path, encoding="utf-8").read()
    m = re.search(r"<script type='application/json' id='rmqinspect-data'>(.*?)</script>", text, re.S)
    assert m, "no data island"
    return json.loads(m.group(1))


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def crc_store(tmp_path, flips=(17290,)):
    """Writer-made store (240 records, five 16 KiB files, abort file), one body byte flipped in each record
    starting at an offset of ``flips``."""
    fx = build_store(tmp_path / "store")
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts)
    starts = {r.offset for r in fx.records}
    for off in flips:
        assert off in starts
        fx.patch(off + 100, b"\xff")
    return fx, str(tmp_path / "store")


def test_report_data_agree_with_recover_verify_and_cq(tmp_path):
    store = str(require_oracle("rocketmq-all-4.9.8/crash-torn-tail") / "store")
    rec = json.loads(run("recover", store, "--dry-run", "--format", "json").stdout)
    ver = json.loads(run("verify", store, "--format", "json").stdout)
    cq_all = json.loads(run("cq", store, "--all", "--format", "json").stdout)
    r = collect_store_report(Store.open(store))
    assert r.plan.truncate_offset == rec["truncate_offset"] == 1197830
    assert [(d.kind, d.start, d.end) for d in r.damage] == [(g["kind"], g["start"], g["end"])
                                                           for g in rec["messages_lost"]["regions"]]
    verify_findings = [(f.check, f.kind, f.start, f.end) for f in r.findings if f.source == "verify"]
    assert verify_findings == [(p["check"], p["kind"], p["start"], p["end"]) for p in ver["problem_ranges"]]
    cut = {q["queue"]: q["entries_cut"] for q in rec["consume_queues"]}
    assert {q.key: q.entries_cut for q in r.queues if q.entries_cut} == cut == {"LogTopic/1": 1}
    by_key = {q.key: q for q in r.queues}
    for b in cq_all:
        q = by_key[f"{b['topic']}/{b['queue_id']}"]
        assert (q.min_offset, q.max_offset, q.entries) == (b["min_offset"], b["max_offset"], b["entries"])
        assert q.max_offset_after_start == rec["consume_queue_max_offsets_after_start"][q.key]
    assert [i.name for i in r.index_files if i.dropped_on_restart] == rec["index_files_dropped"]
    # every record is in one traffic bucket: per topic, the bucket sums are the summary's counts
    summary = json.loads(run("summary", store, "--format", "json").stdout)
    assert r.traffic.excluded == 0
    assert {t: sum(v) for t, v in r.traffic.messages.items()} == {
        t: d["messages"] for t, d in summary["topics"].items()}
    assert sum(sum(v) for v in r.traffic.bytes.values()) == summary["message_bytes"]


def test_traffic_is_downsampled_by_time_bucket_and_damage_is_all_kept(tmp_path):
    flips = (1286, 17290, 33976, 50946)
    fx, store = crc_store(tmp_path)
    starts = sorted(r.offset for r in fx.records)
    flips = tuple(next(s for s in starts if s >= f) for f in flips)
    for off in flips[:1] + flips[2:]:
        fx.patch(off + 100, b"\xff")
    r = collect_store_report(Store.open(store), top_topics=1, max_buckets=20)
    # 240 records 1 s apart: 15 s buckets (the smallest step that gives at most 20), topics beyond the top one
    # folded into one series; no record lost by the folding
    assert r.traffic.bucket_ms == 15_000
    assert all(len(v) <= 20 for v in r.traffic.messages.values())
    assert r.traffic.topics == ["OrderTopic", "(other topics)"]
    assert sum(sum(v) for v in r.traffic.messages.values()) == r.traffic.records == 240 - len(flips)
    crc = [(d.start, d.kind) for d in r.damage]
    assert [s for s, _ in crc] == list(flips) and {k for _, k in crc} == {"crc_mismatch"}
    # each damaged range is a finding with the command that shows its bytes
    commands = [f.command for f in r.findings if f.source == "verify" and f.check == "crc"]
    assert [c.split("--offset ")[1].split()[0] for c in commands] == [str(f) for f in flips]


def test_cli_writes_a_new_file_outside_the_store_and_never_overwrites_silently(tmp_path):
    fx, store = crc_store(tmp_path)
    before = tree_hashes(store)
    out = tmp_path / "report.html"
    res = run("report", store, "--out", out, "--as-of", AS_OF)
    assert res.exit_code == 0, res.output
    first = out.read_bytes()
    assert 1_500_000 < len(first) < 5_000_000
    data = island(out)
    assert data["generated_at"] == "2026-11-21 21:40:00.000Z"
    assert data["stores"][0]["truncate_offset"] == 17290
    # inside the store: refused (exit 6), nothing written there
    res = run("report", store, "--out", os.path.join(store, "report.html"))
    assert res.exit_code == 6 and "inside the inspected store" in res.output
    assert tree_hashes(store) == before
    # an existing file: refused without --force, replaced with it and said so; same --as-of, same bytes
    out.write_text("keep me")
    res = run("report", store, "--out", out, "--as-of", AS_OF)
    assert res.exit_code == 6 and "--force" in res.output and out.read_text() == "keep me"
    res = run("report", store, "--out", out, "--as-of", AS_OF, "--force")
    assert res.exit_code == 0 and "replaced the existing" in res.output
    assert out.read_bytes() == first
    assert tree_hashes(store) == before


def test_offsets_file_from_elsewhere_gives_the_consumer_section(tmp_path):
    fx, store = crc_store(tmp_path)
    copy = tmp_path / "copied-consumerOffset.json"
    copy.write_text(json.dumps(OFFSETS))
    out = tmp_path / "r.html"
    assert run("report", store, "--out", out, "--offsets", copy, "--as-of", AS_OF).exit_code == 0
    got = island(out)["stores"][0]["consumers"]
    # the same offsets in the store's own config/: recover --consumers computes the same lost window
    with open(os.path.join(store, "config", "consumerOffset.json"), "w") as f:
        json.dump(OFFSETS, f)
    rec = json.loads(run("recover", store, "--dry-run", "--consumers", "--format", "json").stdout)
    assert got["groups"] == rec["consumer_lost_window"]["groups"]
    assert {(g["topic"], g["queue_id"], g["never_see"], g["consumed_then_cut"]) for g in got["groups"]} == {
        ("OrderTopic", 0, 1, 60), ("OrderTopic", 1, 60, 1), ("PayTopic", 0, 0, 61)}


def test_missing_plotly_is_one_line_with_the_extra_to_install(tmp_path):
    fx, store = crc_store(tmp_path)
    code = ("import sys; sys.modules['plotly'] = None; from rmqinspect.cli.main import main; "
            f"sys.argv = ['rmqinspect', 'report', {store!r}, '--out', {str(tmp_path / 'r.html')!r}]; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert "pip install 'rmqinspect[report]'" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("text", ["</script><script>alert(1)</script>", "<!--"])
def test_store_text_cannot_break_out_of_the_data_island(tmp_path, text):
    """Topic names and reasons come from the store: inside <script> JSON they must not end the element."""
    from rmqinspect.report.html import script_json

    s = script_json({"topic": text})
    assert "</" not in s and "<!--" not in s and json.loads(s) == {"topic": text}


def test_a_page_over_the_size_budget_is_said_with_its_damage_count(tmp_path, monkeypatch):
    """Damage is never dropped to fit 5 MB; a page over the budget is written and the reason said."""
    import rmqinspect.cli.report as report_cli

    fx, store = crc_store(tmp_path)
    monkeypatch.setattr(report_cli, "SIZE_BUDGET", 1_000_000)
    res = run("report", store, "--out", tmp_path / "r.html")
    assert res.exit_code == 0
    assert "over 1000000: every one of its 1 damaged ranges is drawn" in res.output
    assert (tmp_path / "r.html").stat().st_size > 1_000_000
