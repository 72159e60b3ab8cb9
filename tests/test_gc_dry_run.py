"""`gc --dry-run` on project-written stores whose file mtimes are set on copies in tmp_path."""

from __future__ import annotations

import datetime as dt
import json
import os

from click.testing import CliRunner

from rmqinspect.analyses.gc import GcSettings, disk_used_ratio, is_time_to_delete, plan_gc
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.consumequeue import CQ_ENTRY
from rmqinspect.formats.indexfile import INDEX_HEADER
from rmqinspect.store import Store
from support import require_oracle, tree_hashes

H = 3_600_000
NOW = int(dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)  # 10:00 UTC
CL_FILE = 2048
CQ_FILE_ENTRIES = 4


def make_store(root, n=40):
    """n messages of ~170 bytes in 2 KiB commitlog files (4 files), one queue, CQ files of 4 entries,
    index headers, consumerOffset.json for 2 groups."""
    os.makedirs(root / "commitlog")
    recs = []
    with CommitLogWriter(str(root / "commitlog"), file_size=CL_FILE) as w:
        for i in range(n):
            r = w.append(MessageSpec("T", 0, b"x" * 60, encode_properties({"TAGS": "a"}), store_timestamp=i))
            recs.append(r)
    qdir = root / "consumequeue" / "T" / "0"
    qdir.mkdir(parents=True)
    for j in range(0, n, CQ_FILE_ENTRIES):
        with open(qdir / f"{j * 20:020d}", "wb") as f:
            for r in recs[j:j + CQ_FILE_ENTRIES]:
                f.write(CQ_ENTRY.pack(r.physical_offset, r.total_size, 97))
            f.truncate(CQ_FILE_ENTRIES * 20)
    (root / "index").mkdir()
    for k, end in enumerate((CL_FILE - 100, 3 * CL_FILE + 10, 5 * CL_FILE)):
        with open(root / "index" / f"2026112{k}000000000", "wb") as f:
            f.write(INDEX_HEADER.pack(0, 0, 0, end, 0, 1))
    (root / "config").mkdir()
    (root / "config" / "consumerOffset.json").write_text(
        '{\n\t"offsetTable":{\n\t\t"T@slow":{0:3},\n\t\t"T@fast":{0:39}\n\t}\n}')
    return recs


def age(root, hours_by_file):
    files = sorted(os.listdir(root / "commitlog"))
    for name, h in zip(files, hours_by_file):
        t = (NOW - h * H) / 1000
        os.utime(root / "commitlog" / name, (t, t))
    return files


def test_expiry_order_and_cq_index_cascade(tmp_path):
    recs = make_store(tmp_path / "s")
    files = age(tmp_path / "s", [100, 80, 10, 1])  # first two expired, third young, fourth newest
    assert len(files) == 4
    st = Store.open(tmp_path / "s")
    p = plan_gc(st, GcSettings(NOW, delete_when="10", disk_ratio=0.5, tz=dt.timezone.utc))
    cl = [f for f in p.files if f.kind == "commitlog"]
    assert [f.delete for f in cl] == [True, True, False, False]
    assert "newest" in cl[-1].reason and "not expired" in cl[2].reason
    new_min = int(files[2])
    assert p.commitlog_min_offset_after == new_min
    # CQ files whose last entry < new_min are deleted, never the last one
    cqdel = [os.path.basename(f.path) for f in p.deleted if f.kind == "consumequeue"]
    want = [f"{j * 20:020d}" for j in range(0, 40, 4)
            if recs[j + 3].physical_offset < new_min and j + 4 < 40]
    assert cqdel == want and want
    first_kept = next(i for i, r in enumerate(recs) if r.physical_offset >= new_min)
    (q,) = p.queue_min_offsets
    assert q["min_offset_before"] == 0 and q["min_offset_after"] == first_kept
    assert [os.path.basename(f.path) for f in p.deleted if f.kind == "index"] == ["20261120000000000"]
    (loss,) = p.losses  # slow group (offset 3) loses 3..first_kept-1; fast group loses nothing
    assert (loss.group, loss.messages_lost, loss.first_lost_physical_offset) == ("slow", first_kept - 3,
                                                                                 recs[3].physical_offset)


def test_no_trigger_means_nothing(tmp_path):
    make_store(tmp_path / "s")
    age(tmp_path / "s", [100, 90, 80, 70])
    p = plan_gc(Store.open(tmp_path / "s"), GcSettings(NOW, delete_when="04", disk_ratio=0.5, tz=dt.timezone.utc))
    assert not p.triggered and not p.deleted and not p.losses


def test_disk_ratio_forcing_ignores_age_and_batch_max(tmp_path):
    make_store(tmp_path / "s")
    age(tmp_path / "s", [3, 2, 1, 0])  # all young
    st = Store.open(tmp_path / "s")
    p = plan_gc(st, GcSettings(NOW, delete_when="04", disk_ratio=0.80, tz=dt.timezone.utc))
    assert p.triggered and not p.clean_immediately and not p.deleted  # over 75 %: triggered, age still applies
    p = plan_gc(st, GcSettings(NOW, delete_when="04", disk_ratio=0.86, tz=dt.timezone.utc))
    assert p.clean_at_once and [f.delete for f in p.files if f.kind == "commitlog"] == [True, True, True, False]
    assert all("forced" in f.reason for f in p.deleted if f.kind == "commitlog")
    p = plan_gc(st, GcSettings(NOW, delete_when="04", disk_ratio=0.95, delete_file_batch_max=2,
                               tz=dt.timezone.utc))
    assert "warning" in p.triggers[0] and [f.delete for f in p.files if f.kind == "commitlog"][:3] == [True, True,
                                                                                                       False]
    p = plan_gc(st, GcSettings(NOW, delete_when="04", disk_ratio=0.86, clean_file_forcibly_enable=False,
                               tz=dt.timezone.utc))
    assert not p.deleted


def test_helpers():
    assert is_time_to_delete("03;10", NOW, dt.timezone.utc) and not is_time_to_delete("04", NOW, dt.timezone.utc)
    r = disk_used_ratio("/")
    assert 0 <= r <= 1 and abs(round(r * 100) - r * 100) < 1e-9  # whole percent, rounded up


def test_cli_gc(tmp_path):
    make_store(tmp_path / "s")
    age(tmp_path / "s", [100, 80, 10, 1])
    before = tree_hashes(tmp_path / "s")
    args = ["gc", str(tmp_path / "s"), "--dry-run", "--now", str(NOW), "--delete-when", "10", "--tz", "UTC",
            "--disk-ratio", "0.5"]
    r = CliRunner().invoke(cli, args + ["--format", "json"])
    assert r.exit_code == 1, r.output  # losses found
    doc = json.loads(r.stdout)
    assert [x["group"] for x in doc["losses"]] == ["slow"]
    r = CliRunner().invoke(cli, args)
    assert "DELETE" in r.stdout and "unconsumed messages destroyed" in r.stdout
    r = CliRunner().invoke(cli, ["gc", str(tmp_path / "s")])
    assert r.exit_code == 2  # --dry-run is required
    assert tree_hashes(tmp_path / "s") == before


def test_gc_rocksdb_oracle():
    p = require_oracle("rocketmq-all-5.3.3/rocksdb-cq-small")
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["gc", str(p / "store"), "--dry-run", "--disk-ratio", "0.9", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    # disk forcing deletes the older of the two commitlog files; RocksDB min offsets move past it
    assert [f["delete"] for f in doc["files"] if f["kind"] == "commitlog"] == [True, False]
    assert doc["commitlog_min_offset_after"] == 262144
    assert all(q["min_offset_after"] >= q["min_offset_before"] for q in doc["queue_min_offsets"])
    assert any("compaction filter" in n for n in doc["notes"])
    assert tree_hashes(p / "store") == before


def test_gc_losses_through_rocksdb_cq_fixture(tmp_path):
    """A store copy whose consume queue is a RocksDB CQ written by the project (from the 5.3.3 clean commit
    log): gc computes min offsets and per-group losses through the RocksDB reader, equal to the file CQ."""
    import shutil

    from rmqinspect.analyses.rebuild import rebuild_rocksdb_consume_queue
    from rmqinspect.store.rocksdb_cq import RocksDBConsumeQueueStore, open_consume_queues

    src = require_oracle("rocketmq-all-5.3.3/clean") / "store"
    work = tmp_path / "s"
    (work / "config").mkdir(parents=True)
    shutil.copytree(src / "commitlog", work / "commitlog")
    for p in (work / "commitlog").iterdir():
        p.chmod(0o644)
    rebuild_rocksdb_consume_queue(Store.open(src), str(work / "consumequeue"))
    with RocksDBConsumeQueueStore(str(work / "consumequeue")) as db:
        q = max(db.queues(), key=lambda q: q.bounds()[2])
        topic, qid = q.topic, q.queue_id
    (work / "config" / "consumerOffset.json").write_text('{"offsetTable":{"%s@g1":{%d:0}}}' % (topic, qid))
    files = sorted((work / "commitlog").iterdir())
    for f in files:
        os.utime(f, (NOW / 1000 - 100 * 3600, NOW / 1000 - 100 * 3600))
    st = Store.open(work)
    settings = GcSettings(NOW, delete_when="10", disk_ratio=0.5, tz=dt.timezone.utc)
    with open_consume_queues(st) as qs:
        assert qs.kind == "rocksdb"
        p_rocks = plan_gc(st, settings, list(qs))
    assert [f.delete for f in p_rocks.files if f.kind == "commitlog"] == [True] * (len(files) - 1) + [False]
    new_min = int(files[-1].name)
    assert p_rocks.commitlog_min_offset_after == new_min
    (loss,) = p_rocks.losses
    with RocksDBConsumeQueueStore(str(work / "consumequeue")) as db:
        ents = list(db.queue(topic, qid).entries())
    lost = [e for e in ents if e[1] < new_min]
    assert (loss.topic, loss.group, loss.messages_lost, loss.new_min_offset) == (topic, "g1", len(lost), len(lost))
    assert not [f for f in p_rocks.deleted if f.kind == "consumequeue"]  # RocksDB: rows, not files
