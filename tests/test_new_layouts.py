"""The layouts and recovery opt-ins of 5.3.4, 5.4.0 and 5.5.x on stores the project's writer makes
(``writer.layouts``): each is detected with the release it proves, the combine store's recovery follows its
extra-file budget, accelerated recovery skips the records before the dispatch point, the 5.5 stale-offset stop
ends an abnormal scan, and RIP-82's column families read back. The 5.3.4 rules are checked against develop@8fc57f1
stores elsewhere (test_release_bands); everything 5.4/5.5 here is modelled from the change descriptions."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.layouts import (
    add_rocksdb_consume_queue,
    leave_bak_only,
    write_metadata_rocksdb,
    write_rip82_store,
    write_timerwheel_snapshot,
)
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.formats.commitlog import PHYSICAL_OFFSET_POSITION, encode_properties
from rmqinspect.formats.rip82 import IndexRecord, TimerRecord, TransRecord
from rmqinspect.sinks.rocksdb_cq import rows_from_consume_queues
from rmqinspect.store import Store
from rmqinspect.store.broker_conf import read_broker_conf
from rmqinspect.store.detect import detect_store
from rmqinspect.store.rip82 import RIP82Store, rip82_dir
from rmqinspect.store.rocksdb_cq import ConsumeQueues
from rmqinspect.store.version import BrokerVersion
from support import tree_hashes

pytest.importorskip("rocksdict")

FILE = 4096
V534, V550 = BrokerVersion.parse("5.3.4"), BrokerVersion.parse("5.5.0")


def _store(root, n=120, abort=False, bad_crc_at=None, config=None) -> list:
    """A 5.x store of ``n`` messages over several 4 KiB commit-log files; returns the append results."""
    out = []
    with StoreWriter(str(root), commitlog_file_size=FILE, cq_file_size=20 * 60, checkpoint_fields=5, abort=abort,
                     config=config) as w:
        for i in range(n):
            props = encode_properties({"KEYS": f"k-{i}", "UNIQ_KEY": f"U{i:08d}", "TAGS": "a"})
            out.append(w.append(MessageSpec("T", i % 2, b"m%03d-" % i * 8, props, born_timestamp=1000 + i,
                                            store_timestamp=2000 + i,
                                            body_crc=1 if i == bad_crc_at else None)))
    if abort:
        (root / "abort").write_text("4242")
    return out


def _conf(tmp_path, **kv) -> str:
    p = tmp_path / "broker.conf"
    p.write_text("".join(f"{k}={v}\n" for k, v in kv.items()))
    return str(p)


def _plan(root, version=V534, conf=None, **kw):
    st = Store.open(str(root), conf=read_broker_conf(conf) if conf else None)
    return plan_recovery(st, RecoveryOptions(version=version, with_salvage=False, **kw))


def test_combine_store_written_beside_the_file_queue_is_detected_as_5_3_4(tmp_path):
    root = tmp_path / "s"
    _store(root)
    add_rocksdb_consume_queue(str(root))
    d = detect_store(Store.open(str(root)))
    assert d.consume_queue_kind == "file+rocksdb" and d.min_release == V534
    assert "CombineConsumeQueueStore" in " ".join(d.layout_sentences())
    plan = _plan(root, version=None)
    assert plan.version.version == V534 and plan.version.source == "detected" and plan.combine is not None
    # both sides hold every entry: nothing differs and nothing is re-dispatched
    wp = plan.to_dict()["combine"]["write_progress"]
    assert wp["status"] == "CHECK_OK" and wp["queues_checked"] == 2
    # broker.conf saying the store is a pure RocksDB one (storeType=defaultRocksDB) turns the combine view off
    assert _plan(root, conf=_conf(tmp_path, storeType="defaultRocksDB")).combine is None


@pytest.mark.parametrize("budget", [0, 1, 2, 10])
def test_combine_recovery_walks_back_at_most_the_extra_files(tmp_path, budget):
    """The RocksDB side holds only the first file's entries: each later file the file queue accepts costs one
    extra file until combineCQMaxExtraSearchCommitLogFiles are spent, then the file is taken anyway."""
    root = tmp_path / "s"
    res = _store(root)
    files = sorted(os.listdir(root / "commitlog"))
    first_file = [r for r in res if r.physical_offset + r.total_size <= FILE]
    with ConsumeQueues(str(root / "consumequeue"), "file") as qs:
        rows = [r for r in rows_from_consume_queues(qs) if r[3] + r[4] <= FILE]
    assert len(rows) == len(first_file)
    add_rocksdb_consume_queue(str(root), rows=rows)
    before = tree_hashes(root)
    plan = _plan(root, conf=_conf(tmp_path, combineCQMaxExtraSearchCommitLogFiles=budget))
    last = len(files) - 1
    want = max(0, last - budget) if budget < last else 0
    assert plan.start_file == files[want]
    c = plan.to_dict()["combine"]
    assert c["extra_files_spent_at"] == (files[want] if budget < last else None)
    # records past the RocksDB side's dispatch offset from the start file on reach it again
    end_first = first_file[-1].physical_offset + first_file[-1].total_size
    assert c["rocksdb_dispatch_from_phy_offset"] == end_first
    # the files between the first and the start file never reach the RocksDB side: the offline
    # checkRocksdbCqWriteProgress finds the first unit the RocksDB queue lacks
    wp = c["write_progress"]
    assert (wp["status"] == "CHECK_NOT_OK") == (want > 1)
    for miss in wp["mismatches"]:
        assert miss["rocksdb"] is None and end_first <= miss["file"][1] < FILE * want
    assert tree_hashes(root) == before


def test_accelerated_recovery_keeps_a_damaged_record_before_the_dispatch_point(tmp_path):
    """enableAcceleratedRecovery with storeType=defaultRocksDB: the scan seeks to the RocksDB queue's dispatch
    offset, so a record with a bad CRC before it is never checked and survives; without it the scan ends there."""
    root = tmp_path / "s"
    res = _store(root, bad_crc_at=115)
    add_rocksdb_consume_queue(str(root), separate_dir="cq-tmp")
    os.rename(root / "consumequeue", root / "cq-files")
    os.rename(root / "cq-tmp", root / "consumequeue")
    bad = res[115].physical_offset
    plain = _plan(root, conf=_conf(tmp_path, storeType="defaultRocksDB"))
    assert plain.truncate_offset == bad and plain.accelerated_from is None
    conf = _conf(tmp_path, storeType="defaultRocksDB", enableAcceleratedRecovery="true")
    fast = _plan(root, conf=conf)
    end = res[-1].physical_offset + res[-1].total_size
    assert fast.accelerated_from is not None and fast.accelerated_from > bad
    assert fast.truncate_offset == end
    assert any("not checked (no CRC)" in n for n in fast.notes)
    # the same setting on 5.3.3 does not exist; on a file consume queue it has no effect
    assert _plan(root, version=BrokerVersion.parse("5.3.3"), conf=conf).accelerated_from is None
    r = CliRunner().invoke(cli, ["recover", str(root), "--dry-run", "--broker-version", "5.3.4", "--broker-config",
                                 conf, "--format", "json"])
    assert json.loads(r.stdout)["accelerated_from"] == fast.accelerated_from
    # verify finds the bad CRC and says the accelerated restart keeps it; fate says the same of the record
    r = CliRunner().invoke(cli, ["verify", str(root), "--checks", "crc", "--broker-version", "5.3.4",
                                 "--broker-config", conf, "--format", "json"])
    doc = json.loads(r.stdout)
    assert [p["start"] for p in doc["problem_ranges"]] == [bad]
    assert any("1 of the 1 problem(s) shown lie there and survive it" in n for n in doc["notes"])
    r = CliRunner().invoke(cli, ["fate", str(root), "--offset", str(bad), "--broker-version", "5.3.4",
                                 "--broker-config", conf])
    assert "a restart checks no record before" in r.stderr and "1 of the 1 record(s) asked about" in r.stderr


def test_stale_physical_offset_ends_an_abnormal_scan_from_5_5_0_when_enabled(tmp_path):
    root = tmp_path / "s"
    res = _store(root, abort=True)
    victim = res[100]
    name = root / "commitlog" / f"{victim.physical_offset // FILE * FILE:020d}"
    os.chmod(name, 0o644)
    with open(name, "r+b") as f:
        f.seek(victim.physical_offset % FILE + PHYSICAL_OFFSET_POSITION)
        f.write(struct.pack(">q", victim.physical_offset + 10 * FILE))  # written by a file long gone
    on = _conf(tmp_path, checkCommitLogOffsetOnRecover="true")
    plan = _plan(root, version=V550, conf=on, force_mode="abnormal")
    assert plan.truncate_offset == victim.physical_offset and plan.stop_kind == "stale"
    assert _plan(root, version=V550, force_mode="abnormal").truncate_offset > victim.physical_offset
    assert _plan(root, version=V534, conf=on, force_mode="abnormal").stop_kind != "stale"


def test_layouts_of_5_4_and_5_5_are_detected_with_their_release(tmp_path):
    cases = {
        "rip82": (lambda r: write_rip82_store(str(r)), "RocksDBMessageStore/", "5.4.0"),
        "separate": (lambda r: add_rocksdb_consume_queue(str(r), separate_dir="consumequeue_rocksdb"),
                     "separate RocksDB CQ directory", "5.5.0"),
        "metadata": (lambda r: write_metadata_rocksdb(str(r)), "config/metadata/", "5.3.4"),
        "bak": (lambda r: leave_bak_only(str(r), "topics.json"), ".bak-only configs", "5.3.4"),
        "snapshot": (lambda r: ((r / "timerwheel").write_bytes(b"\0" * 64), write_timerwheel_snapshot(str(r), 7)),
                     "timerwheel snapshots", "5.4.0"),
    }
    for name, (make, signal, release) in cases.items():
        root = tmp_path / name
        _store(root, n=20, config={"topics.json": "{}"})
        make(root)
        d = detect_store(Store.open(str(root)))
        assert signal in {e.signal for e in d.found()}, name
        assert d.min_release == BrokerVersion.parse(release), name
        r = CliRunner().invoke(cli, ["store-info", str(root), "--format", "json"])
        doc = json.loads(r.stdout)
        assert doc["min_release"] == release and any(signal.rstrip("/") in s or release in s
                                                     for s in doc["layouts"]), name
        assert "modelled" in " ".join(doc["layouts"]) or release == "5.3.4", name
        assert _plan(root, version=None).version.version == BrokerVersion.parse(release), name


def test_rip82_column_families_read_back(tmp_path):
    root = tmp_path / "s"
    res = _store(root, n=10)
    idx = [IndexRecord("T", "K", f"k-{i}", f"U{i:08d}", r.physical_offset, 2000 + i) for i, r in enumerate(res)]
    idx.append(IndexRecord("T", "U", "", "U00000003", res[3].physical_offset, 2003))
    timers = [TimerRecord(9_000 + i, f"U{i:08d}", r.total_size, r.physical_offset) for i, r in enumerate(res[:3])]
    trans = [TransRecord(res[4].physical_offset, "T", "U00000004", 2, res[4].total_size)]
    write_rip82_store(str(root), idx, timers, trans)
    with RIP82Store(rip82_dir(str(root))) as db:
        assert sorted(db.index_records(), key=lambda x: (x.offset_py, x.kind)) == \
            sorted(idx, key=lambda x: (x.offset_py, x.kind))
        assert list(db.timer_records()) == timers and list(db.trans_records()) == trans
        assert db.meta()["default/lastOffsetPy"] == res[-1].physical_offset and not db.malformed


def test_index_lookup_and_timers_answer_from_rip82_when_there_are_no_index_files(tmp_path):
    """indexFileWriteEnable=false: no index/ directory; index-lookup and timers read RocksDBMessageStore/ and
    check every row against its record (a row pointing at the wrong record is reported, not trusted)."""
    from rmqinspect.analyses.rip82 import open_rip82_transactions

    root = tmp_path / "s"
    res = _store(root, n=10)
    shutil.rmtree(root / "index")
    idx = [IndexRecord("T", "K", f"k-{i}", f"U{i:08d}", r.physical_offset, 2000 + i) for i, r in enumerate(res)]
    idx.append(IndexRecord("T", "K", "k-2", "U00000009", res[9].physical_offset, 2009))  # wrong record
    timers = [TimerRecord(9_000, "U00000001", res[1].total_size, res[1].physical_offset),
              TimerRecord(9_500, "U00000002", res[2].total_size + 1, res[2].physical_offset)]
    write_rip82_store(str(root), idx, timers, [TransRecord(res[4].physical_offset, "T", "U00000004", 1,
                                                           res[4].total_size)])
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["index-lookup", str(root), "--topic", "T", "--key", "k-2", "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["source"] == "rip82" and doc["phy_offsets"] == [res[2].physical_offset]
    assert [h["has_key"] for h in doc["hits"]] == [True, False] and "not checked against a broker" in r.stderr
    r = CliRunner().invoke(cli, ["index-lookup", str(root), "--topic", "T", "--key", "U00000005", "--format", "json"])
    assert r.exit_code == 3  # only K rows were written for it
    r = CliRunner().invoke(cli, ["timers", str(root), "--format", "json"])
    rows = json.loads(r.stdout)
    assert r.exit_code == 1 and [x["matches"] for x in rows] == [True, False]
    tx, _ = open_rip82_transactions(Store.open(str(root)))
    assert [(t.offset_py, t.matches) for t in tx] == [(res[4].physical_offset, True)]
    assert tree_hashes(root) == before


def test_separate_rocksdb_cq_directory_is_the_combine_stores_rocksdb_side(tmp_path):
    """5.5's useSeparateStorePathForRocksdbCQ: the RocksDB queue in consumequeue_rocksdb/, the file queues in
    consumequeue/: read as a combine store whose RocksDB side lives there (modelled; the name is PR #10174's)."""
    root = tmp_path / "s"
    res = _store(root, abort=True)
    add_rocksdb_consume_queue(str(root), separate_dir="consumequeue_rocksdb")
    plan = _plan(root, version=None)
    assert plan.version.version == V550 and plan.combine is not None
    c = plan.to_dict()["combine"]
    assert c["rocksdb_dispatch_from_phy_offset"] == res[-1].physical_offset + res[-1].total_size
    assert c["write_progress"]["status"] == "CHECK_OK" and c["write_progress"]["queues_checked"] == 2


def test_bands_that_truncate_differently_are_both_said(tmp_path):
    """A clean 5.x store (no 5.3.4-only layout) with a bad CRC in the third-last file: 5.3.2+ starts in the last
    file and keeps everything, <=5.3.1 starts at the third-last file and truncates at the damaged record. The
    files cannot tell which, so recover prints both and names the flag that settles it."""
    root = tmp_path / "s"
    files_before = _store(root, bad_crc_at=60)
    bad = files_before[60].physical_offset
    names = sorted(os.listdir(root / "commitlog"))
    assert bad // FILE == len(names) - 3  # the damaged record lies in the third-last file
    r = CliRunner().invoke(cli, ["recover", str(root), "--dry-run", "--format", "json"])
    plan = json.loads(r.stdout)
    answers = {a["band"]: a for a in plan["band_answers"]}
    end = files_before[-1].physical_offset + files_before[-1].total_size
    assert plan["truncate_offset"] == answers["5.3.2-5.3.3"]["truncate_offset"] == end
    assert answers["<=5.3.1"]["truncate_offset"] == bad and answers["<=5.3.1"]["start_file"] == names[-3]
    assert answers["5.3.4+"]["truncate_offset"] == end and answers["<=5.3.1"]["differs"]
    note = next(n for n in plan["notes"] if "give different answers" in n)
    assert f"truncate at {bad}" in note and "--broker-version" in note
    given = json.loads(CliRunner().invoke(cli, ["recover", str(root), "--dry-run", "--format", "json",
                                                "--broker-version", "5.3.1"]).stdout)
    assert given["truncate_offset"] == bad and "band_answers" not in given
