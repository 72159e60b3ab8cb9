"""`peers` on replica sets RocketMQ's own HA code wrote (../shared/replicas/rocketmq-develop-8fc57f1): the common
prefix, the loss windows message by message, the epochs, each replica's truncation point, the replica the broker
refuses to load, and every message and consume queue of each replica as RocketMQ read them back."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.peers import TruncationKind, Verdict, compare_replicas, open_replica
from rmqinspect.analyses.recovery.plan import RecoveryOptions, plan_recovery
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.epoch import read_epoch_checkpoint
from support import load_replica_expected, require_replicas, tree_hashes

CLASSIC = "rocketmq-develop-8fc57f1/ha-classic-lag"
FAILOVER = "rocketmq-develop-8fc57f1/ha-autoswitch-failover"
REPLICAS = {CLASSIC: ("master", "slave"), FAILOVER: ("master", "slave", "old-master-before")}


def _report(name: str, which: tuple[str, ...]):
    root = require_replicas(name)
    stores = [Store.open(root / w / "store") for w in which]
    try:
        return compare_replicas(stores, labels=list(which))
    finally:
        for s in stores:
            s.close()


def _window_rows(window) -> list[tuple]:
    return [(r.physical_offset, r.store_size, r.topic, r.queue_id, r.queue_offset, r.keys, r.uniq_key,
             r.in_consume_queue) for r in window.rows]


def _expected_rows(lst: list[dict]) -> list[tuple]:
    return [(m["physicalOffset"], m["storeSize"], m["topic"], m["queueId"], m["queueOffset"], m["keys"],
             m["uniqKey"], m["inConsumeQueue"]) for m in lst]


def _assert_loss_window(w, lw: dict, in_cq_expected: int, in_cq: int) -> None:
    """A loss window equal to the comparison's: range, bytes, messages, per queue, row by row."""
    assert (w.from_offset, w.to_offset, w.bytes, w.messages) == (lw["fromOffset"], lw["toOffset"], lw["bytes"],
                                                                 lw["messages"])
    assert w.per_queue == lw["perTopicQueue"]
    assert w.in_consume_queue == in_cq_expected == in_cq
    assert _window_rows(w) == _expected_rows(lw["list"])


def test_classic_lag_common_prefix_and_loss_window_equal_the_broker_reads():
    exp = load_replica_expected(CLASSIC)["comparison"]
    rep = _report(CLASSIC, ("master", "slave"))
    assert rep.mode == "classic"
    (pair,) = rep.pairs
    assert pair.verdict == Verdict.IDENTICAL
    assert pair.common_prefix_end == exp["commonPrefixEndOffset"] == 1214828
    assert pair.common_prefix_messages == exp["commonPrefixMessages"]
    lw = exp["lossWindow"]
    _assert_loss_window(pair.only_on_a, lw, lw["inConsumeQueueOfMaster"], 99)
    assert pair.only_on_b.messages == len(exp["onlyOnSlave"]) == 0
    assert rep.newest == "master"
    slave = next(t for t in rep.truncations if t.replica == "slave")
    assert slave.kind == TruncationKind.CLASSIC_RESUME and slave.receives == (1214828, 1342099)
    for r in rep.replicas:
        assert r.identity.mode == "classic" and r.load_failure is None and not r.stale_records


def test_classic_lag_queue_ends_differ_by_the_lost_messages():
    exp = load_replica_expected(CLASSIC)["comparison"]["consumeQueueMaxOffsetDifferences"]
    rep = _report(CLASSIC, ("master", "slave"))
    m, s = rep.replicas
    diffs = {k: {"master": m.queues[k][1], "slave": s.queues[k][1]} for k in m.queues
             if m.queues[k][1] != s.queues.get(k, (0, 0))[1]}
    assert diffs == exp


def test_failover_old_master_loss_window_truncation_and_stale_records_equal_the_broker():
    exp = load_replica_expected(FAILOVER)["comparison"]
    rep = _report(FAILOVER, ("master", "slave", "old-master-before"))
    assert rep.mode == "controller"
    pairs = {(p.a, p.b): p for p in rep.pairs}
    ms = pairs[("master", "slave")]
    mvs = exp["masterVsSlave"]
    assert ms.verdict == Verdict.IDENTICAL
    assert (ms.common_prefix_end, ms.common_prefix_messages) == (mvs["commonPrefixEndOffset"],
                                                                 mvs["commonPrefixMessages"])
    assert ms.only_on_a.messages == mvs["lossWindow"]["messages"] == 0 and ms.only_on_b.messages == 0
    mo = pairs[("master", "old-master-before")]
    om = exp["oldMasterBeforeVsMaster"]
    assert mo.verdict == Verdict.FORKED_BY_EPOCH
    assert mo.common_prefix_end == om["commonPrefixEndOffset"] == exp["epoch2StartOffset"] == 884448
    assert mo.common_prefix_messages == om["commonPrefixMessages"] == 700
    assert mo.consistent_point == 884448
    lw = om["lossWindow"]
    _assert_loss_window(mo.only_on_b, lw, lw["inConsumeQueueOfOldmasterbefore"], 0)
    assert _window_rows(mo.only_on_a) == _expected_rows(om["onlyOnMaster"])
    assert {r.epoch for r in mo.only_on_b.rows} == {1} and {r.epoch for r in mo.only_on_a.rows} == {2}
    # the newest confirmed data, and what each replica cuts when it rejoins it
    assert rep.newest == rep.master == "master"
    tr = {t.replica: t for t in rep.truncations}
    tx = exp["truncation"]
    old = tr["old-master-before"]
    assert old.kind == TruncationKind.TRUNCATE and old.point == tx["truncatedAt"]
    assert (old.cut.from_offset, old.cut.to_offset) == tuple(tx["truncatedRange"])
    assert old.cut.messages == tx["truncatedMessages"]
    assert old.receives == (884448, tx["slaveMaxOffsetAfter"])
    assert old.stale_after_resync == tuple(tx["staleBytesAfterNewEnd"]["range"])
    # the re-synced end 950996 falls inside old record A763: the broker's recovery of the copy after the re-sync
    # stops there (slave/store's recovered end), so the 36 old records do not come back
    assert old.resurrected_on_restart == 0 and "A restart stops at 950996" in old.sentence
    straddling = tx["staleBytesAfterNewEnd"]["oldRecordStraddlingNewEnd"]
    assert straddling["physicalOffset"] < old.stale_after_resync[0] < straddling["physicalOffset"] + straddling[
        "storeSize"]
    assert tr["slave"].kind == TruncationKind.NONE and tr["master"].kind == TruncationKind.MASTER


def test_failover_slave_after_truncation_keeps_36_crc_valid_records_the_broker_never_serves():
    tx = load_replica_expected(FAILOVER)["comparison"]["truncation"]["staleBytesAfterNewEnd"]
    rep = _report(FAILOVER, ("master", "slave", "old-master-before"))
    slave = next(r for r in rep.replicas if r.label == "slave")
    old = next(r for r in rep.replicas if r.label == "old-master-before")
    assert slave.max_offset == 950996
    assert len(slave.stale_records) == 36
    first = slave.stale_records[0]
    assert (first.physical_offset, first.store_size) == (tx["firstOldRecordStartingInRange"]["physicalOffset"],
                                                         tx["firstOldRecordStartingInRange"]["storeSize"])
    # they are the old master's records A764..A799, byte for byte at the same offsets
    old_by_offset = {m["physicalOffset"]: m["uniqKey"] for m in load_replica_expected(FAILOVER)["replicas"][
        "old-master-before"]["messages"]}
    assert [old_by_offset[r.physical_offset] for r in slave.stale_records] == [r.uniq_key for r in
                                                                                slave.stale_records]
    assert slave.stale_range[1] == tx["range"][1] == old.max_offset
    # the truncation prediction on the old master's copy says the same number
    tr = next(t for t in rep.truncations if t.replica == "old-master-before")
    assert tr.stale_records_after_resync == 36


def test_old_master_copy_would_not_load_compensate_for_ha_v2_record():
    lf = load_replica_expected(FAILOVER)["replicas"]["old-master-before"]["loadFailure"]
    rep = _report(FAILOVER, ("master", "slave", "old-master-before"))
    by = {r.label: r for r in rep.replicas}
    assert by["master"].load_failure is None and by["slave"].load_failure is None
    f = by["old-master-before"].load_failure
    assert f is not None
    assert f.compensate_from == int(lf["compensateStartOffset"])
    assert f.records_accepted == lf["recordsAcceptedBeforeFailure"]
    assert f.physical_offset == lf["failingRecordPhysicalOffset"]
    assert (f.store_size, f.topic, f.queue_id, f.queue_offset) == (
        lf["failingRecord"]["storeSize"], lf["failingRecord"]["topic"], lf["failingRecord"]["queueId"],
        lf["failingRecord"]["queueOffset"])
    assert f"0x{f.magic_code & 0xFFFFFFFF:08X}" == lf["failingRecordMagicCode"]
    assert by["old-master-before"].unconfirmed.messages == 100


@pytest.mark.parametrize("name,which", [(CLASSIC, w) for w in REPLICAS[CLASSIC]]
                         + [(FAILOVER, w) for w in REPLICAS[FAILOVER]])
def test_each_replica_messages_and_served_queues_equal_what_rocketmq_read(name, which):
    root = require_replicas(name)
    exp = load_replica_expected(name)["replicas"][which]
    with Store.open(root / which / "store") as st:
        rep = open_replica(st, which)
        msgs = [(m.physical_offset, m.total_size, m.topic, m.queue_id, m.queue_offset, m.uniq_key, m.keys_string,
                 m.body_crc, m.crc_ok) for m in st.commitlog.messages(rep.min_offset, rep.max_offset)]
        assert msgs == [(m["physicalOffset"], m["storeSize"], m["topic"], m["queueId"], m["queueOffset"],
                         m["uniqKey"], m["keys"], m["bodyCRC"], m["bodyCrcCheckPassed"]) for m in exp["messages"]]
        assert rep.max_offset == exp["haAfterStart"]["maxPhyOffset"]
        assert rep.confirm_offset == exp["haAfterStart"]["confirmOffset"]
        plan = plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False))
        # each copy's own recovery: a slave's checkpoint follows its dispatch, so its start file is its own
        assert rep.recovery_start_file == plan.start_file == exp["recovery"]["startFile"]
        assert plan.redispatch_count == len(exp["dispatchRecorded"]["load"])
        got = {}
        for key in plan.consume_queue_keys():  # the plan dispatches up to the confirm offset in controller mode
            ents = plan.consume_queue_entries(key) or []
            if ents:
                got[key] = [list(e) for e in ents]
    want = {f"{t}/{q}": v["entries"] for t, qs in exp["consumeQueues"].items() for q, v in qs.items()
            if v["entries"]}
    assert got == want


@pytest.mark.parametrize("which", REPLICAS[FAILOVER])
def test_epoch_files_decode_as_epoch_file_cache_read_them(which):
    root = require_replicas(FAILOVER)
    exp = load_replica_expected(FAILOVER)["replicas"][which]
    ef = read_epoch_checkpoint(str(root / which / "store"))
    want = exp["epochFileBeforeLoad"]["entries"]
    assert [(e.epoch, e.start_offset, e.end_offset) for e in ef.entries] == [
        (e["epoch"], e["startOffset"], e["endOffset"]) for e in want]
    assert ef.used == "file" and not ef.problems
    raw = exp["epochFileRaw"]
    assert ef.primary is not None and ef.primary.crc_checked and ef.primary.stored_crc == ef.primary.computed_crc
    assert (ef.bak is not None) == (raw["epochFileCheckpoint.bak"] is not None)


def test_peers_cli_json_and_exit_code_and_no_writes():
    root = require_replicas(FAILOVER)
    before = tree_hashes(root)
    args = [str(root / w / "store") for w in REPLICAS[FAILOVER]]
    res = CliRunner().invoke(cli, ["peers", *args, "--format", "json"])
    assert res.exit_code == 1, res.output  # the old master's copy would not load
    doc = json.loads(res.stdout)
    assert [r["will_start"] for r in doc["replicas"]] == [True, True, False]
    assert [t["point"] for t in doc["truncations"]] == [None, 950996, 884448]
    res = CliRunner().invoke(cli, ["peers", *args[:2]])
    assert res.exit_code == 0, res.output
    assert "identical" in res.output
    res = CliRunner().invoke(cli, ["peers", *args, "--format", "ndjson"])
    kinds = [json.loads(line)["kind"] for line in res.stdout.splitlines()]
    assert kinds.count("replica") == 3 and kinds.count("only_on") == 2 * (31 + 100)  # master|slave vs the old master
    assert tree_hashes(root) == before
