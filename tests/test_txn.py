"""`txn`: transaction verdicts from the commit log, on the oracle stores (store-level PREPARED/COMMIT/ROLLBACK
written by RocketMQ itself) and on writer-made stores of the broker-level half/op convention."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.txn import checker_progress, scan_transactions
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.fixtures.transaction import TransactionalBroker
from rmqinspect.formats.constants import TransactionType
from rmqinspect.store import Store
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes
from support.txn_stores import T0, write_every_verdict


def _scan(root, restart=True):
    s = Store.open(str(root))
    plan = plan_recovery(s, RecoveryOptions(with_salvage=False, keep_redispatch=False)) if restart else None
    off, src = checker_progress(s)
    return scan_transactions(s, plan=plan, checker_offsets=off, checker_source=src)


def _by_uniq(scan) -> dict:
    return {t.uniq_key: t for t in scan.transactions(scan.select())}


# --- the oracle: RocketMQ's own store-level transaction records -------------------------------------------------

@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_oracle_verdicts_are_what_the_records_prove(name):
    require_oracle(name)
    exp = load_expected(name)
    msgs = exp.get("messages")
    if not msgs:
        pytest.skip(f"{name}: expected.json records no messages to compare with")
    prepared = {m["physicalOffset"]: m for m in msgs if m["sysFlag"] & 0xC == TransactionType.PREPARED}
    commits: dict[int, list[int]] = {}
    rollbacks: dict[int, list[int]] = {}
    for m in msgs:
        tt = m["sysFlag"] & 0xC
        if tt in (TransactionType.COMMIT, TransactionType.ROLLBACK):
            (commits if tt == TransactionType.COMMIT else rollbacks).setdefault(
                m["preparedTransactionOffset"], []).append(m["physicalOffset"])
    root = require_oracle(name) / "store"
    scan = _scan(root, restart=False)
    rows = {t.physical_offset: t for t in scan.transactions()}
    # recorded messages are what RocketMQ read back: every PREPARED record is a transaction and nothing else is
    assert set(rows) == set(prepared), name
    for off, m in prepared.items():
        t = rows[off]
        want = ("committed" if off in commits else "rolled_back" if off in rollbacks else "open")
        assert t.state == want, (name, off)
        assert t.convention == "prepared" and t.real_topic == m["topic"] and t.uniq_key == m["uniqKey"]
        assert t.first_store_time == m["storeTimestamp"]
        if off in commits:
            first = min(commits[off])
            assert t.commit_offset == first
            cm = next(x for x in msgs if x["physicalOffset"] == first)
            # the commit's consume-queue entry is the one RocketMQ read back for that record
            if cm.get("inConsumeQueue") and (root / "consumequeue").is_dir():
                assert t.commit_cq_entry == [cm["cqOffset"], first, cm["cqSize"], cm["cqTagsCode"]]
        if off in rollbacks:
            assert t.rollback_offset == min(rollbacks[off])
    # an end naming no PREPARED record is said, not silently dropped
    orphans = sum(len(v) for k, v in (commits | rollbacks).items() if k not in prepared)
    assert scan.notes.counts.get("ends naming no half", 0) == orphans


# --- writer-made stores: the broker-level convention -------------------------------------------------------------

def test_every_broker_level_verdict(tmp_path):
    h = write_every_verdict(tmp_path / "s")
    before = tree_hashes(tmp_path / "s")
    scan = _scan(tmp_path / "s")
    t = _by_uniq(scan)
    assert {k: v.state for k, v in t.items()} == {
        "UKC": "committed", "UKR": "rolled_back", "UKD": "in_doubt", "UKO": "open", "UKG": "given_up",
        "UKK": "committed", "UKP": "committed", "UKQ": "rolled_back", "UKN": "open", "UKX": "committed"}
    assert t["UKO"].check_count == 3 and len(t["UKO"].copies) == 3
    assert t["UKO"].half_queue_offsets == [h["O"].queue_offset + i for i in range(4)]
    # CID_RMQ_SYS_TRANS is at half-queue offset 4: past C, R, D and O's original, not O's last copy
    assert t["UKO"].checker_passed is False and t["UKC"].checker_passed is True
    assert t["UKG"].check_count == 2 and t["UKG"].given_up_offset is not None
    assert t["UKK"].commit_offset is not None and t["UKK"].op_offset is not None
    assert t["UKC"].keys == ["ord-1", "ord-2"] and t["UKC"].producer_group == "pg-tx"
    assert t["UKC"].transaction_id == "UKC" and t["UKC"].real_queue_id == 1
    assert t["UKC"].commit_cq_entry is not None and t["UKC"].commit_cq_entry[1] == t["UKC"].commit_offset
    assert t["UKC"].op_offset == t["UKR"].op_offset  # the batched op
    assert t["UKP"].convention == "prepared" and t["UKC"].convention == "half"
    assert all(v.after_restart == "" for v in t.values())  # no abort file: nothing is cut
    total, by_topic = scan.summary()
    assert total == {"committed": 4, "rolled_back": 2, "in_doubt": 1, "open": 2, "given_up": 1}
    assert tree_hashes(tmp_path / "s") == before


def test_4x_broker_level_op_bodies_without_separator(tmp_path):
    write_every_verdict(tmp_path / "s", five=False)
    t = _by_uniq(_scan(tmp_path / "s"))
    assert t["UKC"].state == "committed" and t["UKR"].state == "rolled_back"
    assert t["UKC"].op_offset != t["UKR"].op_offset  # 4.9.8: one op per half
    assert t["UKC"].transaction_id == "UKC"  # no __transactionId__ before 5.x: the UNIQ_KEY


@pytest.mark.parametrize("where,after", [("commit", "open"), ("op", "in_doubt")])
def test_a_crash_cutting_between_half_commit_and_op(tmp_path, where, after):
    write_every_verdict(tmp_path / "s", crash_record_before=where)
    scan = _scan(tmp_path / "s")
    t = _by_uniq(scan)
    x = t["UKX"]
    assert x.state == "committed"  # the records are all in the files now
    assert x.state_after_restart == after
    past = x.op_offset if where == "op" else x.commit_offset
    assert f"at {past} lies past the recovery's cut at {scan.truncate_offset}" in x.after_restart
    assert scan.truncate_offset < past
    assert all(v.after_restart == "" for k, v in t.items() if k != "UKX")


def test_a_cut_half_is_gone_after_restart(tmp_path):
    w = StoreWriter(str(tmp_path / "s"), commitlog_file_size=1 << 16, abort=True)
    b = TransactionalBroker(w)
    w.append(MessageSpec("OrderTopic", 0, b"torn", b"", store_timestamp=T0, body_crc=1))
    b.half("OrderTopic", 0, b"x", "UKX", T0 + 1)
    w.close()
    (x,) = _scan(tmp_path / "s").transactions()
    assert x.state == "open" and x.state_after_restart == "cut" and "is gone" in x.after_restart


def test_cli_formats_filters_and_summary(tmp_path):
    write_every_verdict(tmp_path / "s")
    root = str(tmp_path / "s")
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["txn", root, "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 10 and rows == sorted(rows, key=lambda d: d["physical_offset"])
    r = CliRunner().invoke(cli, ["txn", root, "--format", "ndjson", "--state", "open", "--state", "in_doubt"])
    assert sorted(json.loads(x)["uniq_key"] for x in r.stdout.splitlines()) == ["UKD", "UKN", "UKO"]
    r = CliRunner().invoke(cli, ["txn", root, "--format", "ndjson", "--topic", "PayTopic"])
    assert sorted(json.loads(x)["uniq_key"] for x in r.stdout.splitlines()) == ["UKN", "UKQ", "UKR"]
    r = CliRunner().invoke(cli, ["txn", root, "--format", "ndjson", "--key", "ord-2"])
    assert [json.loads(x)["uniq_key"] for x in r.stdout.splitlines()] == ["UKC"]
    r = CliRunner().invoke(cli, ["txn", root, "--format", "ndjson", "--msgid", "ukg"])
    assert [json.loads(x)["state"] for x in r.stdout.splitlines()] == ["given_up"]
    r = CliRunner().invoke(cli, ["txn", root, "--format", "ndjson", "--since", str(T0 + 20), "--until",
                                 str(T0 + 31)])
    assert sorted(json.loads(x)["uniq_key"] for x in r.stdout.splitlines()) == ["UKG", "UKK"]
    r = CliRunner().invoke(cli, ["txn", root, "--summary", "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["transactions"]["committed"] == 4
    assert {d["topic"]: d["open"] for d in doc["by_topic"]} == {"OrderTopic": 1, "PayTopic": 1, "LogTopic": 0}
    r = CliRunner().invoke(cli, ["txn", root])
    assert r.exit_code == 0 and "Transactions by state" in r.stdout and "in_doubt" in r.stdout
    r = CliRunner().invoke(cli, ["txn", root, "--topic", "NoSuchTopic"])
    assert r.exit_code == 3 and "no transaction matches --topic NoSuchTopic" in r.stderr
    assert tree_hashes(root) == before


# --- hostile input -------------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(st.binary(max_size=64) | st.text(alphabet="0123456789,-x ", max_size=40).map(str.encode),
                       min_size=1, max_size=4),
       preps=st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=3),
       tpqos=st.lists(st.text(alphabet="0123456789-a \t", max_size=25), max_size=3))
def test_hostile_ops_ends_and_copies_give_notes_not_tracebacks(tmp_path_factory, bodies, preps, tpqos):
    root = tmp_path_factory.mktemp("h") / "s"
    w = StoreWriter(str(root), commitlog_file_size=1 << 16)
    b = TransactionalBroker(w)
    half = b.half("OrderTopic", 0, b"x", "UK", T0)
    for i, v in enumerate(tpqos):  # copies whose TRAN_PREPARED_QUEUE_OFFSET points anywhere (itself, later, junk)
        half.properties["TRAN_PREPARED_QUEUE_OFFSET"] = v
        half = b.check(half, T0 + 1 + i)
    for body in bodies:
        b.raw_op(body, T0 + 10)
    for p in preps:
        w.append(MessageSpec("OrderTopic", 0, b"c", b"", sys_flag=TransactionType.COMMIT, store_timestamp=T0 + 20,
                             prepared_transaction_offset=p))
    w.close()
    r = CliRunner().invoke(cli, ["txn", str(root), "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    assert "Traceback (most recent call last)" not in r.output  # a body may spell the word
    rows = json.loads(r.stdout)
    assert len(rows) == 1 and rows[0]["state"] in ("open", "rolled_back", "in_doubt", "committed")
    assert rows[0]["check_count"] == len(tpqos) and len(rows[0]["copies"]) == len(tpqos)
    named = [p for p in preps if p != rows[0]["physical_offset"] and p not in rows[0]["copies"]]
    if named:
        assert "where no half or PREPARED record starts" in r.stderr
    # Long.parseLong per token: no blanks, within a long, and the offsets are never negative
    bad = [x for x in bodies if any(t and not (t.isascii() and t.isdigit() and int(t) < 1 << 63)
                                    for t in x.split(b","))]
    if bad:
        assert r.exit_code == 1 and "op message at" in r.stderr


def test_many_open_halves_stay_compact(tmp_path):
    """20,000 open halves: the scan keeps array columns, not objects (the million is in benchmarks/bench_txn.py)."""
    w = StoreWriter(str(tmp_path / "s"), commitlog_file_size=1 << 24, build_index=False)
    b = TransactionalBroker(w)
    for i in range(20_000):
        b.half("OrderTopic", i % 4, b"", f"UK{i:08d}", T0 + i)
    w.close()
    scan = _scan(tmp_path / "s", restart=False)
    assert len(scan) == 20_000 and scan.summary()[0]["open"] == 20_000
    held = sum(a.nbytes for d in (scan.h, scan.e, scan.o, scan.g) for a in d.values())
    assert held <= 20_000 * 13 * 8  # thirteen int64 per half, nothing per transaction besides


# --- export / Spark rows: txn_state ------------------------------------------------------------------------------

def test_export_rows_carry_the_transaction_state(tmp_path):
    from rmqinspect.analyses.export import export_local, read_dataset

    write_every_verdict(tmp_path / "s")
    scan = _scan(tmp_path / "s", restart=False)
    export_local([str(tmp_path / "s")], str(tmp_path / "out"))
    rows = {r["physical_offset"]: r for r in read_dataset(str(tmp_path / "out")).to_pylist()}
    want = {}
    for t in scan.transactions(scan.select()):
        for off in [t.physical_offset, *t.copies, t.commit_offset, t.rollback_offset, t.op_offset,
                    t.given_up_offset]:
            if off is not None:  # the batched op ending C and R says C's state: the first half it lists
                want.setdefault(off, t.state)
    assert {o: r["txn_state"] for o, r in rows.items() if r["txn_state"] is not None} == want
    (plain,) = [r for r in rows.values() if r["uniq_key"] == "PLAIN"]
    assert plain["txn_state"] is None


def test_export_txn_state_on_the_oracle_is_the_prepared_records_verdict():
    name = "rocketmq-all-4.9.8/clean"
    root = require_oracle(name) / "store"
    from rmqinspect.analyses.export import file_tasks
    from rmqinspect.analyses.rows import file_batches

    msgs = load_expected(name)["messages"]
    committed = {m["preparedTransactionOffset"] for m in msgs if m["sysFlag"] & 0xC == TransactionType.COMMIT}
    seen = {}
    for task in file_tasks([str(root)], txn_states=True):
        for b in file_batches(task):
            for r in b.select(["physical_offset", "transaction_type", "txn_state"]).to_pylist():
                if r["txn_state"] is not None:
                    seen[r["physical_offset"]] = (r["transaction_type"], r["txn_state"])
    for m in msgs:
        if m["sysFlag"] & 0xC == TransactionType.PREPARED:
            assert seen.pop(m["physicalOffset"]) == (
                "PREPARED", "committed" if m["physicalOffset"] in committed else "open")
        elif m["sysFlag"] & 0xC == TransactionType.COMMIT and m["preparedTransactionOffset"] in committed and \
                any(p["physicalOffset"] == m["preparedTransactionOffset"] and p["sysFlag"] & 0xC == 4 for p in msgs):
            assert seen.pop(m["physicalOffset"]) == ("COMMIT", "committed")
    assert seen == {}


# --- fate -------------------------------------------------------------------------------------------------------

def test_fate_of_each_transaction_record_gives_its_transaction(tmp_path):
    write_every_verdict(tmp_path / "s", crash_record_before="op")
    root = str(tmp_path / "s")
    t = _by_uniq(_scan(tmp_path / "s"))
    cases = {t["UKX"].physical_offset: "half", t["UKX"].commit_offset: "commit", t["UKX"].op_offset: "op",
             t["UKO"].copies[1]: "copy", t["UKG"].given_up_offset: "given_up", t["UKQ"].rollback_offset: "rollback",
             t["UKP"].physical_offset: "prepared"}
    for off, role in cases.items():
        r = CliRunner().invoke(cli, ["fate", root, "--offset", str(off), "--format", "json"])
        assert r.exit_code == 0, r.output
        (f,) = json.loads(r.stdout)
        tx = f["transaction"]
        assert tx["role"] == role, off
        want = next(v for v in t.values() if v.physical_offset == tx["physical_offset"])
        assert tx["state"] == want.state and tx["state_after_restart"] == want.state_after_restart
    r = CliRunner().invoke(cli, ["fate", root, "--offset", str(t["UKX"].op_offset)])
    assert "Its transaction (the op record)" in r.stdout and "in_doubt after restart" in r.stdout
    plain = _plain_offset(root)
    r = CliRunner().invoke(cli, ["fate", root, "--offset", str(plain), "--format", "json"])
    assert json.loads(r.stdout)[0]["transaction"] is None


def _plain_offset(root) -> int:
    return next(m.physical_offset for m in Store.open(root).commitlog.messages() if m.uniq_key == "PLAIN")


# --- report -----------------------------------------------------------------------------------------------------

def test_report_has_a_transactions_section_only_when_the_store_has_transactions(tmp_path):
    from rmqinspect.analyses.report_data import collect_store_report

    write_every_verdict(tmp_path / "s", crash_record_before="op")
    r = collect_store_report(Store.open(str(tmp_path / "s")))
    scan = _scan(tmp_path / "s")
    assert r.transactions is not None and r.transactions.counts == scan.summary()[0]
    assert r.transactions.changed_by_restart == 1
    listed = {t.uniq_key: t.state for t in r.transactions.rows}
    assert listed == {"UKR": "rolled_back", "UKD": "in_doubt", "UKO": "open", "UKG": "given_up",
                      "UKQ": "rolled_back", "UKN": "open", "UKX": "committed"}  # UKX: in doubt after restart
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "s"), "--out", str(out)])
    assert res.exit_code in (0, 1), res.output
    page = out.read_text()
    assert "8. Transactions" in page and "in_doubt after restart" in page
    w = StoreWriter(str(tmp_path / "plain"), commitlog_file_size=1 << 16)
    w.append(MessageSpec("OrderTopic", 0, b"x", b"", store_timestamp=T0))
    w.close()
    assert collect_store_report(Store.open(str(tmp_path / "plain"))).transactions is None


def test_txn_checks_the_rip82_trans_rows_against_the_commit_log(tmp_path):
    """RocksDBMessageStore/'s trans column family (5.4.0+, modelled) lists open halves: the txn command says which
    the commit log also shows open, which it shows ended, and which name no half."""
    from rmqinspect.fixtures.layouts import TransRecord, write_rip82_store

    root = tmp_path / "s"
    h = write_every_verdict(root)
    size = {k: Store.open(str(root)).commitlog.read_message(v.physical_offset).total_size for k, v in h.items()}
    write_rip82_store(str(root), trans=[
        TransRecord(h["O"].physical_offset, "RMQ_SYS_TRANS_HALF_TOPIC", "UKO", 3, size["O"]),  # open in the log
        TransRecord(h["C"].physical_offset, "RMQ_SYS_TRANS_HALF_TOPIC", "UKC", 0, size["C"]),  # committed
        TransRecord(h["R"].physical_offset, "RMQ_SYS_TRANS_HALF_TOPIC", "NOPE", 0, size["R"]),  # wrong row
    ])
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["txn", str(root), "--format", "json"])
    assert "3 open half(s), 1 open in the commit log too" in r.stderr
    assert f"trans row at {h['C'].physical_offset} (UNIQ_KEY UKC) still lists it open; the commit log says " \
           "committed" in r.stderr
    assert f"trans row at {h['R'].physical_offset} (UNIQ_KEY NOPE): no half" in r.stderr
    assert tree_hashes(root) == before


def _store_with_system_topic_records(root, topics: tuple[str, str, str]) -> None:
    """An in-doubt half (UKD) and an open one (UKG), then an op ending UKD, a given-up copy of UKG and a half UKZ,
    written to ``topics`` (half, op, check-max-time topic names)."""
    from rmqinspect.formats.commitlog import encode_properties

    half_topic, op_topic, max_topic = topics
    w = StoreWriter(str(root), commitlog_file_size=1 << 16)
    b = TransactionalBroker(w)
    d = b.half("OrderTopic", 0, b"a", "UKD", T0)
    b.commit(d, T0 + 1)
    g = b.half("OrderTopic", 1, b"b", "UKG", T0 + 2)
    w.append(MessageSpec(op_topic, 0, f"{d.queue_offset},".encode(), encode_properties({"TAGS": "d"}),
                         store_timestamp=T0 + 3))
    w.append(MessageSpec(max_topic, 0, b"b", encode_properties(g.properties), store_timestamp=T0 + 4))
    w.append(MessageSpec(half_topic, 0, b"z", encode_properties({**d.properties, "UNIQ_KEY": "UKZ"}),
                         store_timestamp=T0 + 5))
    w.close()


def test_topics_as_long_as_the_transaction_topics_are_not_read_as_them(tmp_path):
    """The pass tells topics apart only for records with a transaction type or a topic of a transaction system
    topic's length: records in topics of that length but another name are no op, given-up copy or half (the same
    records under the real names are: the control)."""
    from rmqinspect.formats.constants import (
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
    )

    real = (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
    decoys = tuple(t[:-1] + ("X" if t[-1] != "X" else "Y") for t in real)
    assert [len(t) for t in decoys] == [len(t) for t in real]
    _store_with_system_topic_records(tmp_path / "real", real)
    _store_with_system_topic_records(tmp_path / "decoys", decoys)
    assert {k: v.state for k, v in _by_uniq(_scan(tmp_path / "real", restart=False)).items()} == {
        "UKD": "committed", "UKG": "given_up", "UKZ": "open"}
    assert {k: v.state for k, v in _by_uniq(_scan(tmp_path / "decoys", restart=False)).items()} == {
        "UKD": "in_doubt", "UKG": "open"}
