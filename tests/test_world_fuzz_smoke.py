"""fuzz/world_fuzz.py in CI, bounded: one case of every world event (a broker's lock held, a signal at a random
moment, a file-size limit on --out, a writer racing a --live reader, a reader that goes away) on a small
writer-made store; every check of the fuzzer must pass (zero findings). Long runs: fuzz/RESULTS.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz import world_fuzz  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = world_fuzz.World(tmp_path_factory.mktemp("world"), light=True)
    yield w
    w.close()


@pytest.mark.parametrize("event", world_fuzz.EVENTS)
def test_world_event_cases_have_no_findings(world, event):
    res = world_fuzz.run_case(world, 7, world_fuzz.EVENTS.index(event), event)
    assert res["event"] == event and res["argv"]
    assert res["findings"] == [], res


def test_the_fuzzer_sees_what_it_must(world, tmp_path):
    """Its checks are not blind: a JSON array cut short, NDJSON ending mid-line and a process left in a group
    are findings."""
    from support.world import json_problem

    assert json_problem("json", b'[{"a": 1}') and json_problem("ndjson", b'{"a": 1}\n{"b"')
    assert json_problem("json", b"\xff") and json_problem("json", b"") is None
    res = {"findings": []}
    import subprocess

    p = subprocess.Popen(["sleep", "5"], start_new_session=True)
    world_fuzz._common(res, 0, b"", b"", "table", p.pid)
    assert res["findings"] == ["process left in the group"]  # and killed by the fuzzer
    p.wait(5)
    world_fuzz._common(res, -7, b"", b"", "table", p.pid)
    assert "died of SIGBUS" in res["findings"]
