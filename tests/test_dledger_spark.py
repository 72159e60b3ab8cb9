"""`spark dledger-peers`: many DLedger groups compared on Spark (local[2]), one task per group, through the same
``analyses.dledger.compare_peers`` - each group's row equals what `dledger-peers` prints for its peers. Groups are
writer-made: a leader change with a truncated follower, a byte flip under an unchanged header, identical peers."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Java (17+) not found: Spark cannot start", allow_module_level=True)

from rmqinspect.cli.main import cli  # noqa: E402
from support import tree_hashes  # noqa: E402
from support.dledger_peers import flip_last_body_byte, leader_change_group, write_peer  # noqa: E402


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Three group directories, one subdirectory per peer copy (relative paths, as an operator types them)."""
    base = tmp_path_factory.mktemp("fleet")
    leader_change_group(base / "RaftNode00")
    plan = [(i, 1, b"") for i in range(12)]
    write_peer(base / "RaftNode01" / "a", "n0", plan)
    # same term, pos and size at entry 7; one body byte differs
    flip_last_body_byte(write_peer(base / "RaftNode01" / "b", "n1", plan), 7)
    write_peer(base / "RaftNode02" / "x", "n0", plan)
    write_peer(base / "RaftNode02" / "y", "n1", plan)
    return base


def _peers_doc(peers: list[str]) -> tuple[int, dict]:
    r = CliRunner().invoke(cli, ["dledger-peers", *peers, "--format", "json"])
    return r.exit_code, json.loads(r.stdout)


def test_rows_equal_dledger_peers_per_group(spark, fleet, monkeypatch):
    from rmqinspect.spark.jobs import DLedgerGroup, dledger_group_dir, dledger_peers

    monkeypatch.chdir(fleet)
    before = tree_hashes(".")
    groups = [dledger_group_dir(g) for g in ("RaftNode00", "RaftNode01", "RaftNode02")]
    assert groups[0].peers == ["RaftNode00/a", "RaftNode00/b", "RaftNode00/c"]
    # the same peers named explicitly, one as its dledger-<selfId> directory
    groups.append(DLedgerGroup("named", ["RaftNode00/a/dledger-n0", "RaftNode00/b"]))
    rows = dledger_peers(spark, groups)
    assert [r["group"] for r in rows] == ["RaftNode00", "RaftNode01", "RaftNode02", "named"]
    for g, row in zip(groups, rows):
        _, doc = _peers_doc(g.peers)
        assert {k: v for k, v in row.items() if k != "group"} == doc
    r0, r1, r2, named = rows
    assert (r0["first_divergent_index"], r0["divergence"]["how"], r0["common_prefix_last_index"]) == (15, "missing", 14)
    assert r0["leader"] == "RaftNode00/a"
    assert [(p["last_index"], p["last_term"], p["would_truncate"], p["truncate_from"]) for p in r0["peers"]] == \
        [(34, 2, 0, None), (23, 1, 4, 20), (14, 1, 0, None)]
    assert (r1["first_divergent_index"], r1["divergence"]["how"]) == (7, "bytes")
    assert (r2["first_divergent_index"], r2["common_prefix_last_index"]) == (None, 11)
    assert (named["first_divergent_index"], named["divergence"]["how"]) == (20, "term")
    assert named["peers"][0]["root"] == "RaftNode00/a"
    assert tree_hashes(".") == before


def test_cli_spark_dledger_peers(spark, fleet, monkeypatch):
    monkeypatch.chdir(fleet)
    before = tree_hashes(".")
    r = CliRunner().invoke(cli, ["spark", "dledger-peers", "RaftNode00", "RaftNode02", "--group",
                                 "n01=RaftNode01/a,RaftNode01/b", "--format", "json"])
    assert r.exit_code == 1, r.output
    rows = json.loads(r.stdout)
    assert [(x["group"], x["first_divergent_index"]) for x in rows] == [("RaftNode00", 15), ("RaftNode02", None),
                                                                        ("n01", 7)]
    r = CliRunner().invoke(cli, ["spark", "dledger-peers", "RaftNode02"])
    assert r.exit_code == 0, r.output
    assert "RaftNode02" in r.stdout and "no divergence" in r.stdout and "RaftNode02/x: 11/1" in r.stdout
    r = CliRunner().invoke(cli, ["spark", "dledger-peers", "--group", "g=RaftNode02/x"])
    assert r.exit_code == 2 and "1 peer(s)" in r.output
    r = CliRunner().invoke(cli, ["spark", "dledger-peers", "missing-group"])
    assert r.exit_code == 3 and "missing-group" in r.output
    assert tree_hashes(".") == before


def test_broker_config_reaches_the_executors(spark, fleet, tmp_path, monkeypatch):
    """--broker-config is in effect in the Spark tasks too: peers whose roots hold two DLedger members are read
    with the member dLegerSelfId names, on the executors as on the driver (before, the executors saw no broker.conf
    and refused the roots: "several DLedger members")."""
    grp = tmp_path / "TwoMembers"
    for peer in ("x", "y"):
        shutil.copytree(fleet / "RaftNode02" / peer, grp / peer)
        # a second member in the same root (another node's directory copied along)
        shutil.copytree(grp / peer / f"dledger-{'n0' if peer == 'x' else 'n1'}", grp / peer / "dledger-n7")
    conf = tmp_path / "broker.conf"
    monkeypatch.chdir(tmp_path)
    before = tree_hashes(grp)
    r = CliRunner().invoke(cli, ["spark", "dledger-peers", "TwoMembers", "--format", "json"])
    assert r.exit_code != 0 and "several DLedger members" in r.output  # never guessed
    conf.write_text("dLegerSelfId=n7\n")
    r = CliRunner().invoke(cli, ["spark", "dledger-peers", "TwoMembers", "--broker-config", str(conf),
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 1 and "error" not in rows[0], rows
    single = CliRunner().invoke(cli, ["dledger-peers", "TwoMembers/x", "TwoMembers/y", "--broker-config", str(conf),
                                      "--format", "json"])
    assert single.exit_code == 0, single.output
    assert {k: v for k, v in rows[0].items() if k != "group"} == json.loads(single.stdout)
    assert rows[0]["first_divergent_index"] is None and rows[0]["common_prefix_last_index"] == 11
    assert tree_hashes(grp) == before
