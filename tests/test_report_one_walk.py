"""The report counts the summary from verify's commit-log walk (one walk for both, the summary in a thread fed
through a bounded queue): the summary and the verify report are those of their own walks, on every oracle store,
the sample store and a damaged writer-made store; an error in the summary reaches the caller without a hang. The
recovery plan, the queue bounds and the index rows, computed in a thread beside that walk, are those computed
alone after it, and an error there reaches the caller too."""

from __future__ import annotations

import json
import os
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


def _txn_stores(tmp_path):
    from support.crash_stories import make
    from support.txn_stores import write_every_verdict

    roots = [require_oracle(s) / "store" for s in ALL_SCENARIOS] + [SAMPLE_STORE]
    write_every_verdict(tmp_path / "txn")
    roots.append(tmp_path / "txn")
    write_every_verdict(tmp_path / "txn-4x", five=False)
    roots.append(tmp_path / "txn-4x")
    roots.append(make("clean", tmp_path / "clean").root)
    fx = build_store(tmp_path / "s", n=400)
    fx.patch(fx.records[100].offset + 95, b"\xff")
    roots.append(fx.root)
    return roots


def test_transactions_section_skipped_only_where_it_is_empty(tmp_path):
    """``may_hold_transactions`` is True on every store whose transactions section is not empty (it skips the txn
    walk only where the section is None), and False on stores without a transaction record."""
    from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
    from rmqinspect.analyses.report_data import may_hold_transactions
    from rmqinspect.analyses.txn import report_section

    skipped = held = 0
    for root in _txn_stores(tmp_path):
        with Store.open(str(root)) as st:
            rep = verify(st)
            plan = plan_recovery(st, RecoveryOptions(keep_redispatch=False))
            section = report_section(st, plan, None)
            may = may_hold_transactions(st, rep)
        assert may or section is None, root
        skipped += not may
        held += section is not None
    assert skipped >= 3 and held >= 2


def test_a_prepared_record_inside_a_crc_damaged_range_is_seen(tmp_path):
    """The store's only transaction record (a 4.x PREPARED one) has a flipped body byte: verify's valid records
    hold none, the damaged range read without CRC check does, and txn's walk (no CRC check) finds it."""
    from rmqinspect.analyses.report_data import may_hold_transactions
    from rmqinspect.analyses.txn import report_section
    from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
    from rmqinspect.formats.commitlog import encode_properties
    from rmqinspect.formats.constants import TransactionType

    root = tmp_path / "s"
    with CommitLogWriter(str(root / "commitlog"), 1 << 16) as w:
        for i in range(41):
            flag = TransactionType.PREPARED if i == 20 else 0
            props = {"UNIQ_KEY": "%032X" % i}
            if i == 20:
                props |= {"TRAN_MSG": "true", "PGROUP": "pg"}
            res = w.append(MessageSpec("OrderTopic", 0, b"body %d" % i, encode_properties(props), sys_flag=flag,
                                       store_timestamp=1_795_000_000_000 + i))
            if i == 20:
                prepared = res.physical_offset
    with Store.open(str(root)) as st:
        rep = verify(st)
        assert rep.transaction_records == 1 and not rep.damaged
    name = root / "commitlog" / ("%020d" % 0)
    data = bytearray(name.read_bytes())
    data[data.index(b"body 20", prepared)] ^= 0xFF  # inside the body
    name.write_bytes(bytes(data))
    with Store.open(str(root)) as st:
        rep = verify(st)
        assert rep.transaction_records == 0 and any(a == prepared for a, _ in rep.damaged)
        assert may_hold_transactions(st, rep)
        assert report_section(st, None, None) is not None


def _beside_equals_alone(root, jobs: int) -> dict:
    from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
    from rmqinspect.analyses.report_data import collect_store_report, index_file_rows, queue_rows

    with Store.open(str(root)) as st:
        got = collect_store_report(st, jobs=jobs)
    with Store.open(str(root)) as st:
        plan = plan_recovery(st, RecoveryOptions(keep_redispatch=False))
        bounds = list(report_data.all_queue_bounds(st))
        queues = queue_rows(bounds, got.summary, got.verify, plan)
        index_files = index_file_rows(st, plan)
    assert json.dumps(got.plan.to_dict(), sort_keys=True) == json.dumps(plan.to_dict(), sort_keys=True)
    assert [asdict(q) for q in got.queues] == [asdict(q) for q in queues]
    assert [asdict(r) for r in got.index_files] == [asdict(r) for r in index_files]
    return plan.to_dict()


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_recovery_plan_beside_the_walk_is_the_plan_alone(scenario):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    _beside_equals_alone(root, jobs=1)
    assert tree_hashes(root) == before


def test_crashed_store_recovery_plan_beside_worker_walk_is_the_plan_alone(tmp_path):
    """With worker processes (the thread starts after they are forked), on a crashed multi-file store whose
    restart truncates, cuts queues and re-dispatches."""
    fx = build_store(tmp_path / "s", n=400)
    fx.set_abort()
    fx.write_checkpoint(fx.records[150].store_ts)  # an older checkpoint: the scan starts files back
    fx.patch(fx.records[300].offset + 95, b"\xff")  # body CRC: the restart truncates there
    plan = _beside_equals_alone(fx.root, jobs=2)
    assert plan["mode"] == "abnormal" and plan["messages_scanned"] > 100 and plan["consume_queue_truncated"]
    assert plan["truncate_offset"] == fx.records[300].offset


def test_recovery_error_beside_the_walk_reaches_the_caller(tmp_path, monkeypatch):
    from rmqinspect.analyses.report_data import collect_store_report

    fx = build_store(tmp_path / "s", n=400)

    def failing(store, options):
        raise ValueError("plan failed")

    monkeypatch.setattr(report_data, "plan_recovery", failing)
    with Store.open(fx.root) as st, pytest.raises(ValueError, match="plan failed"):
        collect_store_report(st)


def test_index_rows_take_verify_geometries_and_equal_a_fresh_proof(tmp_path, monkeypatch):
    """The report's index rows use the geometries verify's index check proved (each file proved once in the
    command, not twice) and equal the rows of a fresh proof: on the sample store's files (inferred), beside a file
    no geometry settles (ambiguous: its row says why) and one shorter than its header (unreadable)."""
    import shutil

    from rmqinspect.store import indexfile
    from support.msgstores import write_ambiguous_index

    root = tmp_path / "store"
    shutil.copytree(SAMPLE_STORE, root)
    write_ambiguous_index(str(root / "index" / "20261121213699999"))
    (root / "index" / "20261121213699998").write_bytes(b"\x00" * 10)
    proofs = []
    real = indexfile.prove_index_geometry
    monkeypatch.setattr(indexfile, "prove_index_geometry", lambda *a, **k: proofs.append(1) or real(*a, **k))
    with Store.open(str(root)) as st:
        verify(st, jobs=1)
    proved_by_verify, proofs[:] = len(proofs), []
    with Store.open(str(root)) as st:
        got = report_data.collect_store_report(st, jobs=1)
    proved_by_report = len(proofs)
    with Store.open(str(root)) as st:
        fresh = report_data.index_file_rows(st, got.plan)
    assert [asdict(r) for r in got.index_files] == [asdict(r) for r in fresh]
    sources = {r.name: r.geometry_source for r in got.index_files}
    assert [sources[n] for n in sorted(os.listdir(SAMPLE_STORE / "index"))] == ["inferred"] * 3
    errors = {r.name: r.problem for r in got.index_files}
    assert "maxHashSlotNum" in errors["20261121213699999"] and "header" in errors["20261121213699998"]
    # the report proves what verify alone proves (every file with a header), and its rows prove none again
    assert proved_by_report == proved_by_verify >= 4
