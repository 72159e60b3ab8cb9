"""The report counts the summary from verify's commit-log walk (one walk for both, the summary in a thread fed
through a bounded queue): the summary and the verify report are those of their own walks, on every oracle store,
the sample store and a damaged writer-made store; an error in the summary reaches the caller without a hang."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from rmqinspect.analyses import report_data
from rmqinspect.analyses.report_data import summary_beside_verify
from rmqinspect.analyses.summary import summarize
from rmqinspect.analyses.verify import verify
from rmqinspect.store import Store
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle, tree_hashes
from support.recover_fixtures import build_store


def _same(root) -> dict:
    with Store.open(str(root)) as st:
        both_summary, both_verify = summary_beside_verify(st, None, True)
    with Store.open(str(root)) as st:
        alone_summary = summarize(st)
    with Store.open(str(root)) as st:
        alone_verify = verify(st)
    assert json.dumps(asdict(both_summary), sort_keys=True) == json.dumps(asdict(alone_summary), sort_keys=True)
    assert json.dumps(both_verify.to_dict(), sort_keys=True) == json.dumps(alone_verify.to_dict(), sort_keys=True)
    assert [p.to_dict() for p in both_verify.problems] == [p.to_dict() for p in alone_verify.problems]
    return asdict(both_summary)


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_summary_and_verify_from_one_walk(scenario):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    _same(root)
    assert tree_hashes(root) == before


def test_sample_store_summary_and_verify_from_one_walk():
    assert _same(SAMPLE_STORE)["messages"] > 0


def test_damaged_store_summary_and_verify_from_one_walk(tmp_path):
    fx = build_store(tmp_path / "s", n=400)
    fx.patch(fx.records[100].offset + 95, b"\xff")  # body CRC: counted by the summary, a problem for verify
    base = int(fx.file_names()[-3])
    fx.zero(base + 4096, base + 8192)  # lost page: the walk resynchronises after it
    got = _same(fx.root)
    assert got["damage"] and got["messages"] > 300


def test_summary_error_reaches_the_caller(tmp_path, monkeypatch):
    fx = build_store(tmp_path / "s", n=400)

    def failing(store, broker_version=None, events=None, **_):
        next(iter(events))
        raise ValueError("summary failed")

    monkeypatch.setattr(report_data, "summarize", failing)
    with Store.open(fx.root) as st, pytest.raises(ValueError, match="summary failed"):
        summary_beside_verify(st, None, True)
