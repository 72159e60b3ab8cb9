"""The report's replica view: given the stores of one broker group, the page leads with the copies on one offset
axis, the pairs, the truncation points and the loss windows, the same answer as `rmqinspect peers`; given stores of
different groups it has none."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.replica import diverging_replicas
from rmqinspect.fixtures.sample import mixed_messages
from support import load_replica_expected, require_replicas, tree_hashes

pytest.importorskip("plotly")

FAILOVER = "rocketmq-develop-8fc57f1/ha-autoswitch-failover"
AS_OF = "2026-11-27T18:00:00Z"


def _island(path) -> dict:
    text = open(path, encoding="utf-8").read()
    m = re.search(r"<script type='application/json' id='rmqinspect-data'>(.*?)</script>", text, re.S)
    assert m, "no data island"
    return json.loads(m.group(1))


def test_report_of_one_groups_replicas_has_the_replica_view_peers_gives(tmp_path):
    root = require_replicas(FAILOVER)
    stores = [str(root / w / "store") for w in ("master", "slave", "old-master-before")]
    before = tree_hashes(root)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["report", *stores, "--out", str(out), "--as-of", AS_OF])
    assert res.exit_code == 0, res.output
    d = _island(out)["replicas"]
    peers = json.loads(CliRunner().invoke(cli, ["peers", *stores, "--format", "json"]).stdout)
    assert d == peers
    tx = load_replica_expected(FAILOVER)["comparison"]["truncation"]
    assert [t["point"] for t in d["truncations"]] == [None, 950996, tx["truncatedAt"]]
    page = out.read_text(encoding="utf-8")
    assert "Replicas of one broker group" in page and "id='replicas-map'" in page
    assert tree_hashes(root) == before


def test_report_of_different_groups_has_no_replica_view(tmp_path):
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    diverging_replicas([a, b], [], [list(mixed_messages(30, seed=1)), list(mixed_messages(30, seed=2))])
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["report", a, b, "--out", str(out), "--as-of", AS_OF])
    assert res.exit_code == 0, res.output
    assert _island(out)["replicas"] is None
