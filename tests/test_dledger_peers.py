"""`dledger-peers` on writer-made members of one group: a leader change (different term from an index on), a
follower truncated short, a byte flip under an unchanged header; the first divergent index named exactly, and
what the elected leader makes each follower truncate. Also the entry rules verify adds in DLedger mode."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.dledger import compare_peers, entry_problems
from rmqinspect.analyses.recovery.dledger import dledger_recover
from rmqinspect.analyses.verify import verify
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.dledger import DLedgerWriter
from rmqinspect.store import Store
from support import tree_hashes
from support.dledger_peers import SIZE, flip_last_body_byte, leader_change_group, peer_spec, write_peer


@pytest.fixture
def group(tmp_path):
    return leader_change_group(tmp_path)


def test_leader_change_and_truncated_follower(group):
    a, b, c = group
    stores = [Store.open(p) for p in (a, b, c)]
    rep = compare_peers(stores, ["a", "b", "c"])
    assert rep.first_divergent_index == 15 and rep.divergence.how == "missing"
    assert rep.common_prefix_last_index == 14
    assert rep.leader == "a"
    pa, pb, pc = rep.peers
    assert (pa.last_index, pa.last_term, pb.last_index, pb.last_term, pc.last_index) == (34, 2, 23, 1, 14)
    assert (pb.matches_leader_to, pb.would_truncate, pb.truncate_from, pb.would_receive) == (19, 4, 20, 15)
    assert (pc.matches_leader_to, pc.would_truncate, pc.truncate_from, pc.would_receive) == (14, 0, None, 20)
    two = compare_peers(stores[:2], ["a", "b"])
    assert two.first_divergent_index == 20 and two.divergence.how == "term"
    assert two.divergence.per_peer["a"]["term"] == 2 and two.divergence.per_peer["b"]["term"] == 1
    for st in stores:
        st.close()


def test_bytes_divergence_and_identical_peers(tmp_path):
    plan = [(i, 1, b"") for i in range(12)]
    a = write_peer(tmp_path / "a", "n0", plan)
    b = write_peer(tmp_path / "b", "n1", plan)
    flip_last_body_byte(b, 7)  # same header fields (term, pos, size) but one byte of entry 7's body differs
    rep = compare_peers([Store.open(a), Store.open(b)], ["a", "b"])
    assert rep.first_divergent_index == 7 and rep.divergence.how == "bytes"
    same = compare_peers([Store.open(a), Store.open(write_peer(tmp_path / "c", "n2", plan))], ["a", "c"])
    assert same.first_divergent_index is None and same.common_prefix_last_index == 11


def test_cli_dledger_peers_exit_codes_and_never_writes(group):
    a, b, c = group
    before = {p: tree_hashes(p) for p in group}
    r = CliRunner().invoke(cli, ["dledger-peers", a, b, c, "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["first_divergent_index"] == 15 and doc["leader"] == a
    r = CliRunner().invoke(cli, ["dledger-peers", a, b])
    assert r.exit_code == 1 and "first divergent index" in r.stdout and "20" in r.stdout
    r = CliRunner().invoke(cli, ["dledger-peers", a, a + "/dledger-n0"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["dledger-peers", a])
    assert r.exit_code == 2
    assert {p: tree_hashes(p) for p in group} == before


def test_entry_rules_in_verify_and_recovery(tmp_path):
    root = tmp_path / "s"
    w = DLedgerWriter(str(root / "dledger-n0"), SIZE, 32 * 64)
    for i in range(10):
        w.append(peer_spec(i), 3)
    w.append(peer_spec(10), 2)  # term goes back: DLedger's recovery stops here
    w.write_checkpoint(10)
    w.write_currterm(3, "n0")
    with Store.open(root) as st:
        kinds = [(p.kind, p.start) for p in entry_problems(st.dledger)]
        e10 = w.entries[10]
        assert kinds == [("dledger_term", e10.pos)]
        r = dledger_recover(st)
        assert (r.ledger_end_index, r.data_end, r.stop_kind) == (9, e10.pos, "bad")
        assert r.committed_index == 9  # checkpoint's 10 clamped to the ledger end
        rep = verify(st, ("structure",))
        assert [p.kind for p in rep.problems] == ["dledger_term"]
    # an index unit that disagrees: reported; recovery rewrites the index and goes on
    unit = root / "dledger-n0" / "index" / ("%020d" % 0)
    data = bytearray(unit.read_bytes())
    data[4 * 32 + 31] ^= 1  # entry 4's unit term
    unit.write_bytes(bytes(data))
    with Store.open(root) as st:
        probs = [p.kind for p in entry_problems(st.dledger)]
        assert probs == ["dledger_index_unit", "dledger_term"]
        r = dledger_recover(st)
        assert r.index_rewritten_from == 4 and r.ledger_end_index == 9
