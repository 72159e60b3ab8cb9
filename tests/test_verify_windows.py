"""verify joins the consume-queue entries and the index items with the records one window of the commit log at a
time, so its memory does not grow with the store. Its report is the same whatever the window: one run of records
per window against the whole store in one window (the join as it ran before), byte for byte, on every oracle
store, the sample store and writer-made stores with damaged records, queues ahead and behind, and an index behind
the commit log."""

from __future__ import annotations

import json
import os

import pytest

from rmqinspect.analyses import verify as verify_mod
from rmqinspect.analyses.verify import ALL_CHECKS, verify
from rmqinspect.store import Store
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle, tree_hashes
from support.crash_stories import make
from support.recover_fixtures import build_store


def _windowed_and_whole(monkeypatch, root, **kw) -> tuple[dict, dict, int]:
    """(report with a window per run of records and the queue entries sampled every second one, report with the
    whole store in one window, windows joined)."""
    joined = []
    real = verify_mod._CqJoin.window

    def counting(self, recs, lo, hi):
        joined.append((lo, hi))
        return real(self, recs, lo, hi)

    with monkeypatch.context() as m:
        m.setattr(verify_mod, "_WINDOW_BYTES", 1)
        m.setattr(verify_mod, "_SAMPLE", 2)  # a window's entries found between samples two entries apart
        m.setattr(verify_mod._CqJoin, "window", counting)
        small = verify(Store.open(str(root)), ALL_CHECKS, **kw).to_dict()
    with monkeypatch.context() as m:
        m.setattr(verify_mod, "_WINDOW_BYTES", 1 << 62)
        whole = verify(Store.open(str(root)), ALL_CHECKS, **kw).to_dict()
    return small, whole, len(joined)


def _same(monkeypatch, root, **kw) -> tuple[dict, int]:
    small, whole, n = _windowed_and_whole(monkeypatch, root, **kw)
    assert json.dumps(small, sort_keys=True) == json.dumps(whole, sort_keys=True)
    return small, n


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_report_is_the_same_window_by_window(scenario, monkeypatch):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    _same(monkeypatch, root)
    assert tree_hashes(root) == before


def test_sample_store_report_is_the_same_window_by_window(monkeypatch):
    got, _ = _same(monkeypatch, SAMPLE_STORE)
    assert got["checked"]["index_items"] > 0


def test_damaged_store_over_many_windows(tmp_path, monkeypatch):
    """16 KiB commit-log files (8 of them, a window per run): a body CRC flipped, a zeroed page, a stale copy, a queue
    entry pointing inside a record, one pointing past the data, and queues behind the commit log."""
    fx = build_store(tmp_path / "s", n=400)
    a = fx.records[10]
    b = next(r for r in fx.records[12:] if r.size == a.size and fx.file_of(r.offset) == fx.file_of(a.offset))
    raw = open(os.path.join(fx.commitlog, fx.file_of(a.offset)), "rb").read()
    fx.patch(b.offset, raw[a.offset % fx.file_size:a.end % fx.file_size or fx.file_size])  # stale copy
    fx.patch(fx.records[100].offset + 95, b"\xff")  # body CRC
    base = int(fx.file_names()[-3])
    fx.zero(base + 4096, base + 8192)  # lost page
    fx.write_consume_queues(fx.records[:300])  # queues behind the last 100 records
    q = os.path.join(fx.root, "consumequeue", fx.records[0].topic, str(fx.records[0].queue_id))
    first = os.path.join(q, sorted(os.listdir(q))[0])
    with open(first, "r+b") as f:  # entry 2: inside a record; entry 4: far past the data
        f.seek(2 * 20)
        f.write((fx.records[40].offset + 7).to_bytes(8, "big"))
        f.seek(4 * 20)
        f.write((fx.records[-1].end + (1 << 20)).to_bytes(8, "big"))
    got, windows = _same(monkeypatch, fx.root)
    kinds = {p["kind"] for p in got["summary"]}
    assert {"stale_data", "crc_mismatch", "zero_page", "cq_points_to_damage", "cq_dangling", "cq_ahead",
            "cq_behind"} <= kinds, kinds
    assert windows >= 5


@pytest.mark.parametrize("story", ["dispatcher_behind", "rocksdb_no_rows", "clean"])
def test_crash_stories_over_many_windows(tmp_path, monkeypatch, story):
    s = make(story, tmp_path / story)
    got, windows = _same(monkeypatch, s.root)
    assert got["checked"]["records"] > 0 and windows >= 2
    if story == "dispatcher_behind":
        kinds = {p["kind"] for p in got["summary"]}
        assert {"cq_behind", "index_behind"} <= kinds, kinds
        assert got["checked"]["index_items"] > 0
