"""Controller-mode and classic replica rules the shared replica sets do not exercise, on replica sets the writer
makes (``writer.replica``: identical specs give byte-identical records at identical offsets, as HA replication
does): findConsistentPoint over several epochs, no consistent point, a point that is not a record boundary, a new
replica, the epoch file's .bak fallback and CRC rules, hostile epoch files, wrong pairings, corruption, the
unconfirmed tail (V1 loads, V2 does not), consumer offsets past the survivor and broker.conf's role keys."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.peers import TruncationKind, Verdict, compare_replicas, open_replica
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.replica import diverging_replicas, set_confirm_offset, write_broker_conf, write_epoch_file
from rmqinspect.fixtures.sample import LONG_TOPIC, mixed_messages
from rmqinspect.formats.epoch import (
    LONG_MAX,
    EpochEntry,
    crc32_of_lines,
    encode_epoch_file,
    find_consistent_point,
    parse_epoch_file,
)
from rmqinspect.store import Store
from rmqinspect.store.broker_conf import read_broker_conf
from rmqinspect.store.epoch import read_epoch_checkpoint
from support import tree_hashes


def _specs(n: int, seed: int, v1_only: bool = True):
    out = [s for s in mixed_messages(n * 2, seed=seed) if not (v1_only and s.topic == LONG_TOPIC)]
    return out[:n]


def _compare(paths, **kw):
    stores = [Store.open(p) for p in paths]
    try:
        return compare_replicas(stores, labels=[os.path.basename(p) for p in paths], **kw)
    finally:
        for s in stores:
            s.close()


@pytest.fixture
def failover(tmp_path):
    """A was master of epoch 1 and wrote 30 messages nobody acknowledged; B became master of epoch 2 at the fork
    and wrote 12 more. Both confirm offsets as the protocol leaves them."""
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    fork, (end_a, end_b) = diverging_replicas([a, b], _specs(80, 1), [_specs(30, 2), _specs(12, 3)])
    write_epoch_file(a, [(1, 0)])
    write_epoch_file(b, [(1, 0), (2, fork)], bak=[(1, 0)])
    set_confirm_offset(a, fork)
    set_confirm_offset(b, end_b)
    return a, b, fork, end_a, end_b


def test_epoch_file_round_trip_crc_and_derived_end_offsets():
    raw = encode_epoch_file([(1, 0), (2, 884448)])
    assert raw == b"2\n43838420\n1-0\n2-884448\n"  # the bytes RocketMQ wrote in ha-autoswitch-failover
    p = parse_epoch_file(raw)
    assert p.ok and p.crc_checked and p.computed_crc == crc32_of_lines(["1-0", "2-884448"])
    assert [(e.epoch, e.start_offset, e.end_offset) for e in p.entries] == [(1, 0, 884448), (2, 884448, LONG_MAX)]
    # CRLF line ends read the same (readLine), the CRC is over "\n"-joined lines
    assert parse_epoch_file(raw.replace(b"\n", b"\r\n")).ok


def test_find_consistent_point_takes_the_newest_shared_epoch_with_the_same_start():
    local = [EpochEntry(1, 0, 100), EpochEntry(2, 100, 250), EpochEntry(4, 250, 400)]
    master = [EpochEntry(1, 0, 100), EpochEntry(2, 100, 180), EpochEntry(3, 180, 500)]
    assert find_consistent_point(local, master) == 180  # epoch 4 unknown there, epoch 2 agrees: min(250, 180)
    master[1] = EpochEntry(2, 120, 180)  # same epoch, another start: not consistent, go back to epoch 1
    assert find_consistent_point(local, master) == 100
    assert find_consistent_point([EpochEntry(5, 0, 10)], [EpochEntry(1, 0, 10)]) == -1


def test_failover_old_master_truncates_at_the_fork_and_cuts_its_unconfirmed_tail(failover):
    a, b, fork, end_a, end_b = failover
    before = tree_hashes(os.path.dirname(a))
    rep = _compare([a, b])
    assert rep.mode == "controller" and rep.newest == "B"
    (pair,) = rep.pairs
    assert pair.verdict == Verdict.FORKED_BY_EPOCH and pair.common_prefix_end == fork == pair.consistent_point
    assert pair.common_prefix_messages == 80
    assert (pair.only_on_a.messages, pair.only_on_b.messages) == (30, 12)
    assert pair.only_on_a.in_consume_queue == 0  # A's tail was never confirmed: in none of its queues
    ta = next(t for t in rep.truncations if t.replica == "A")
    assert ta.kind == TruncationKind.TRUNCATE and ta.point == fork
    assert (ta.cut.from_offset, ta.cut.to_offset, ta.cut.messages) == (fork, end_a, 30)
    assert ta.receives == (fork, end_b)
    if end_a > end_b:
        assert ta.stale_after_resync == (end_b, end_a)
    ra = next(r for r in rep.replicas if r.label == "A")
    assert ra.confirm_offset == fork and ra.unconfirmed.messages == 30
    assert ra.load_failure is None  # V1 records only: compensateForHA walks the tail and the broker starts
    assert all(q[1] <= 80 for q in ra.queues.values())
    assert sum(q[1] - q[0] for q in ra.queues.values()) < 80 + 30
    assert tree_hashes(os.path.dirname(a)) == before


def test_v2_record_in_the_unconfirmed_tail_stops_the_load(tmp_path):
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    tail = _specs(5, 2) + [s for s in mixed_messages(200, seed=9) if s.topic == LONG_TOPIC][:1] + _specs(3, 4)
    fork, (end_a, _) = diverging_replicas([a, b], _specs(20, 1), [tail, []])
    write_epoch_file(a, [(1, 0)])
    write_epoch_file(b, [(1, 0)])
    set_confirm_offset(a, fork)
    with Store.open(a) as st:
        r = open_replica(st, "A")
    assert r.load_failure is not None and r.load_failure.records_accepted == 5
    assert r.load_failure.topic == LONG_TOPIC and r.load_failure.compensate_from == fork
    # confirmed up to the end: nothing to compensate, the same V2 record is harmless
    set_confirm_offset(a, end_a)
    with Store.open(a) as st:
        assert open_replica(st, "A").load_failure is None


def test_no_consistent_point_and_new_replica(failover, tmp_path):
    a, b, fork, *_ = failover
    write_epoch_file(a, [(5, 0)])  # an epoch B never had
    rep = _compare([a, b], master="B")
    ta = next(t for t in rep.truncations if t.replica == "A")
    assert ta.kind == TruncationKind.NO_CONSISTENT_POINT and ta.point is None
    os.remove(os.path.join(a, "epochFileCheckpoint"))
    rep = _compare([a, b], master="B")
    ta = next(t for t in rep.truncations if t.replica == "A")
    assert ta.kind == TruncationKind.NEW_REPLICA and ta.receives == (0, rep.replicas[1].max_offset)


def test_consistent_point_inside_a_record_is_refused_not_cut(failover):
    a, b, fork, *_ = failover
    write_epoch_file(b, [(1, 0), (2, fork + 7)])  # hostile: epoch 2 starting 7 bytes into A's next record
    rep = _compare([a, b], master="B")
    ta = next(t for t in rep.truncations if t.replica == "A")
    assert ta.kind == TruncationKind.NOT_ALIGNED and ta.point == fork + 7
    rb = next(r for r in rep.replicas if r.label == "B")
    assert any("not the start of a valid record" in p for p in rb.problems)


def test_crc_mismatch_falls_back_to_bak_and_zero_crc_is_unchecked(failover):
    a, b, fork, *_ = failover
    write_epoch_file(b, [(1, 0), (2, fork)], crc=12345, bak=[(1, 0)])
    ef = read_epoch_checkpoint(b)
    assert ef.used == "bak" and [e.epoch for e in ef.entries] == [1]
    assert any("does not match the stored 12345" in p and "reads" in p for p in ef.problems)
    write_epoch_file(b, [(1, 0), (2, fork)], crc=0)
    ef = read_epoch_checkpoint(b)
    assert ef.used == "file" and [e.epoch for e in ef.entries] == [1, 2]
    assert any("CRC line is 0" in p for p in ef.problems)
    write_epoch_file(b, [], raw=b"3\n0\n1-0\n2-5\n", raw_bak=b"x\n")
    ef = read_epoch_checkpoint(b)
    assert ef.used is None and ef.read_fails and any("NumberFormatException" in p for p in ef.problems)
    write_epoch_file(b, [], raw=b"3\n0\n1-0\n2-5\n", raw_bak=encode_epoch_file([(1, 0)], crc=99))
    ef = read_epoch_checkpoint(b)
    assert ef.used is None and not ef.read_fails and any("rejected too" in p for p in ef.problems)


def test_hostile_epoch_files_out_of_order_and_past_the_data(failover):
    a, b, fork, end_a, end_b = failover
    write_epoch_file(b, [(2, fork), (1, 0)])
    with Store.open(b) as st:
        r = open_replica(st, "B")
    assert any("follows" in p and "must both increase" in p for p in r.problems)
    write_epoch_file(b, [(1, 0), (2, fork), (3, end_b + 1000)])
    with Store.open(b) as st:
        r = open_replica(st, "B")
    assert any(f"epoch 3 starts at {end_b + 1000}, past the end of the data" in p for p in r.problems)


def test_two_copies_of_different_groups_have_no_common_record(tmp_path):
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    diverging_replicas([a, b], [], [_specs(20, 1), _specs(20, 7)])
    rep = _compare([a, b])
    (pair,) = rep.pairs
    assert pair.verdict == Verdict.NO_COMMON_RECORD and pair.common_prefix_messages == 0
    assert "not copies of one broker group" in pair.sentence
    assert rep.problems


def test_classic_byte_damage_below_the_lower_end_is_corruption(tmp_path):
    m, s = str(tmp_path / "M"), str(tmp_path / "S")
    diverging_replicas([m, s], _specs(40, 1), [_specs(10, 2), []], checkpoint_fields=3)
    with Store.open(s) as st:
        victim = list(st.commitlog.messages())[20]
    path = os.path.join(s, "commitlog", "0" * 20)
    with open(path, "r+b") as f:  # a body byte: the record still parses, its CRC no longer matches
        f.seek(victim.physical_offset + victim.total_size - 1 - len(victim.properties_raw) - 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    rep = _compare([m, s])
    (pair,) = rep.pairs
    assert rep.mode == "classic"
    assert pair.verdict == Verdict.CORRUPT_OR_WRONG_PAIR and pair.common_prefix_end == victim.physical_offset
    assert "corruption of one copy or a wrong pairing" in pair.sentence


def test_classic_slave_ahead_of_the_new_master_is_never_cut(tmp_path):
    m, s = str(tmp_path / "M"), str(tmp_path / "S")
    fork, (end_m, end_s) = diverging_replicas([m, s], _specs(30, 1), [_specs(3, 2), _specs(9, 3)],
                                              checkpoint_fields=3)
    rep = _compare([m, s], master="M")
    ts = next(t for t in rep.truncations if t.replica == "S")
    assert ts.kind == TruncationKind.CLASSIC_DIVERGED and ts.cut.messages == 9 and ts.point is None
    assert rep.newest is None and "ambiguous" in rep.newest_why


def test_consumer_offsets_past_the_survivor_queues(tmp_path):
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    specs = [s for s in _specs(200, 1) if s.topic == "OrderTopic" and s.sys_flag == 0][:20]
    for s in specs:
        s.queue_id = 0
    tail = [s for s in _specs(200, 2) if s.topic == "OrderTopic" and s.sys_flag == 0][:10]
    assert (len(specs), len(tail)) == (20, 10)
    for s in tail:
        s.queue_id = 0
    offsets = json.dumps({"offsetTable": {"OrderTopic@g1": {"0": 28}, "OrderTopic@g2": {"0": 5}}})
    fork, _ = diverging_replicas([a, b], specs, [tail, []], config={"consumerOffset.json": offsets})
    write_epoch_file(a, [(1, 0)])
    write_epoch_file(b, [(1, 0), (2, fork)])
    set_confirm_offset(b, fork)
    rep = _compare([a, b], master="B")
    beyond = rep.consumer_offsets_beyond
    assert [(c["copy"], c["group"], c["offset"], c["survivor_max_offset"]) for c in beyond] == [
        ("A", "g1", 28, 20), ("B", "g1", 28, 20)]
    assert "#4771" in beyond[0]["sentence"]


def test_broker_conf_role_keys_and_the_cli(failover, tmp_path):
    a, b, *_ = failover
    ca, cb = str(tmp_path / "a.conf"), str(tmp_path / "b.conf")
    write_broker_conf(ca, brokerRole="SYNC_MASTER", brokerId=1, enableControllerMode=True)
    write_broker_conf(cb, brokerRole="SLAVE", brokerId=2, enableControllerMode=True)
    assert read_broker_conf(ca).get("brokerId") == 1
    res = CliRunner().invoke(cli, ["peers", a, b, "--conf", ca, "--conf", cb, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [(r["ha"]["role"], r["ha"]["broker_id"]) for r in doc["replicas"]] == [("SYNC_MASTER", 1), ("SLAVE", 2)]
    assert "a.conf" in doc["replicas"][0]["ha"]["role_evidence"]
    res = CliRunner().invoke(cli, ["peers", a, b, "--conf", ca])
    assert res.exit_code == 2 and "one per store" in res.output
    res = CliRunner().invoke(cli, ["peers", a])
    assert res.exit_code == 2
    res = CliRunner().invoke(cli, ["peers", a, b, "--master", "nope"])
    assert res.exit_code == 2 and "not one of the stores" in res.output


def test_dledger_members_fold_into_peers_with_the_dledger_peers_answer(tmp_path):
    from support.dledger_peers import leader_change_group

    a, b, c = leader_change_group(tmp_path)
    res = CliRunner().invoke(cli, ["peers", a, b, c, "--format", "json"])
    ref = CliRunner().invoke(cli, ["dledger-peers", a, b, c, "--format", "json"])
    assert res.exit_code == ref.exit_code == 1  # the members diverge
    doc = json.loads(res.stdout)
    assert doc.pop("mode") == "dledger" and doc == json.loads(ref.stdout)
    assert doc["first_divergent_index"] == 15
    mixed = CliRunner().invoke(cli, ["peers", a, str(_plain_store(tmp_path))])
    assert mixed.exit_code == 2 and "some STORES are DLedger members" in mixed.output


def _plain_store(tmp_path):
    p = str(tmp_path / "plain")
    diverging_replicas([p], _specs(5, 1), [[]])
    return p


def test_copies_with_different_file_sizes_are_named_a_likely_wrong_pairing(tmp_path):
    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    diverging_replicas([a], _specs(30, 1), [[]], commitlog_file_size=64 << 10)
    diverging_replicas([b], _specs(30, 1), [[]], commitlog_file_size=32 << 10)
    rep = _compare([a, b])
    assert any("different commit-log file sizes" in n and "wrong pairing" in n for n in rep.notes)


def test_a_missing_store_is_one_line_and_exit_3(tmp_path):
    res = CliRunner().invoke(cli, ["peers", str(tmp_path / "nope"), str(tmp_path / "nope2")])
    assert res.exit_code == 3
    assert "no such file or directory" in res.output and "Traceback" not in res.output


def test_stale_tail_after_resync_is_resurrected_when_the_master_ends_on_an_old_record_start(tmp_path):
    """apache/rocketmq#10666: B's epoch-2 data is exactly as long as A's first two unconfirmed records, so after the
    truncation and re-sync A's next old record starts where the re-synced data ends and a restart walks on."""
    import dataclasses

    a, b = str(tmp_path / "A"), str(tmp_path / "B")
    tail_a = _specs(6, 2)
    same_size = [dataclasses.replace(s, body=bytes(reversed(s.body)), born_timestamp=s.born_timestamp + 1)
                 for s in tail_a[:2]]
    fork, (end_a, end_b) = diverging_replicas([a, b], _specs(20, 1), [tail_a, same_size])
    write_epoch_file(a, [(1, 0)])
    write_epoch_file(b, [(1, 0), (2, fork)])
    set_confirm_offset(a, fork)
    rep = _compare([a, b], master="B")
    ta = next(t for t in rep.truncations if t.replica == "A")
    assert ta.kind == TruncationKind.TRUNCATE and ta.point == fork and ta.stale_after_resync == (end_b, end_a)
    assert ta.stale_records_after_resync == ta.resurrected_on_restart == 4
    assert "recovers all 4 as valid" in ta.sentence


def test_metadata_of_the_copies_compared_topics_groups_and_offsets(tmp_path):
    """A slave's config/*.json is a periodic copy of its master's: what differs is replication lag."""
    m, s = str(tmp_path / "M"), str(tmp_path / "S")
    specs = _specs(20, 1)

    def cfg(topics, groups, offsets):
        return {"topics.json": json.dumps({"topicConfigTable": {t: {"topicName": t} for t in topics}}),
                "subscriptionGroup.json": json.dumps({"subscriptionGroupTable": {g: {"groupName": g}
                                                                                 for g in groups}}),
                "consumerOffset.json": json.dumps({"offsetTable": offsets})}

    diverging_replicas([m], specs, [[]], checkpoint_fields=3,
                       config=cfg(["OrderTopic", "NewTopic"], ["g1", "g2"], {"OrderTopic@g1": {"0": 5, "1": 3}}))
    diverging_replicas([s], specs, [[]], checkpoint_fields=3,
                       config=cfg(["OrderTopic"], ["g1"], {"OrderTopic@g1": {"0": 2, "1": 3}}))
    rep = _compare([m, s])
    md = rep.metadata
    assert md["copies_with_config"] == ["M", "S"]
    assert md["topics_only_in"] == {"M": ["NewTopic"]}
    assert md["subscription_groups_only_in"] == {"M": ["g2"]}
    assert md["consumer_offset_differences"] == [
        {"group": "g1", "topic": "OrderTopic", "queue_id": 0, "offsets": {"M": 5, "S": 2}}]


def test_fresh_slave_starting_at_the_masters_file_boundary_is_aligned_by_offset(tmp_path):
    """DefaultHAConnection sends a slave that reports 0 the master's data from its last file boundary: the slave's
    first file has the master's name and bytes, its min offset is higher; nothing below it counts as lost."""
    import shutil

    m, s = str(tmp_path / "M"), str(tmp_path / "S")
    fork, (end_m,) = diverging_replicas([m], _specs(120, 1), [_specs(5, 2)], checkpoint_fields=3,
                                        commitlog_file_size=32 << 10)
    shutil.copytree(m, s)
    names = sorted(os.listdir(os.path.join(s, "commitlog")))
    kept = [n for n in names if int(n) <= fork][-1]  # the master's last file boundary before the fork
    assert kept != names[0]
    for n in names:
        if int(n) < int(kept):
            os.remove(os.path.join(s, "commitlog", n))
    shutil.rmtree(os.path.join(s, "consumequeue"))  # the slave's reput builds its own
    # the slave stopped at the fork: the master's last five records never reached it
    with Store.open(s) as st:
        f, pos = st.commitlog.locate(fork)
        path = f.path
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(b"\0" * (end_m - fork))
    rep = _compare([m, s])
    (pair,) = rep.pairs
    first = int(kept)
    assert pair.overlap == (first, fork) and pair.verdict == Verdict.IDENTICAL
    assert pair.common_prefix_end == fork
    assert pair.only_on_a.from_offset == fork and pair.only_on_a.messages == 5 and pair.only_on_b.messages == 0
    ts = next(t for t in rep.truncations if t.replica == "S")
    assert ts.kind == TruncationKind.CLASSIC_RESUME and ts.receives == (fork, end_m)
