"""RocksDB ConsumeQueue: oracle rocksdb-cq-small read through a private snapshot, fixtures written by
the project's writer read back, schema vs struct fast path, evidence hashes."""

from __future__ import annotations

import os

import pytest

from rmqinspect.errors import UnsafeOutputError
from rmqinspect.formats import rocksdb_cq as F
from rmqinspect.sinks.rocksdb_cq import rows_from_consume_queues, write_rocksdb_consume_queue
from rmqinspect.store import Store
from rmqinspect.store.rocksdb_cq import (
    RocksDBConsumeQueueStore,
    is_rocksdb_dir,
    list_rocksdb_queues,
    open_consume_queues,
)
from support import load_expected, require_oracle, tree_hashes

ROCKS = "rocketmq-all-5.3.3/rocksdb-cq-small"
CLEAN5 = "rocketmq-all-5.3.3/clean"


def test_oracle_every_entry_and_bounds():
    p = require_oracle(ROCKS)
    exp = load_expected(ROCKS)
    before = tree_hashes(p / "store")
    st = Store.open(p / "store")
    with open_consume_queues(st) as qs:
        assert qs.kind == "rocksdb"
        snap = qs.db.snapshot_dir
        seen = set()
        for q in qs:
            seen.add((q.topic, str(q.queue_id)))
            e = exp["consumeQueues"][q.topic][str(q.queue_id)]
            assert [list(x) for x in q.entries()] == e["entries"]
            s = exp["stateAfterStartWithAllQueuesOpened"]["consumeQueues"][q.topic][str(q.queue_id)]
            lo, hi, n = q.bounds()
            assert (lo, hi) == (s["minOffset"], s["maxOffset"])
            assert q.max_physical_offset == s["maxPhysicOffset"]
            assert q.min_offset_for(exp["stateAfterStart"]["commitLogMinOffset"]) == s["minOffset"]
        assert seen == {(t, qq) for t, v in exp["consumeQueues"].items() for qq in v}
        # checkpoint row = highest physicalOffset + size dispatched = commitlog max offset here
        assert qs.db.offset_table.checkpoint == exp["stateAfterStart"]["commitLogMaxOffset"]
        assert not qs.db.offset_table.problems
    assert not os.path.exists(snap), "snapshot directory must be removed"
    assert tree_hashes(p / "store") == before


def test_oracle_entries_window_and_store_timestamps():
    p = require_oracle(ROCKS)
    exp = load_expected(ROCKS)
    ts = {m["physicalOffset"]: m["storeTimestamp"] for m in exp["messages"]}
    with RocksDBConsumeQueueStore(str(p / "store" / "consumequeue")) as db:
        q = db.queue("CartTopic", 1)
        all_ = list(q.entries(with_timestamp=True))
        assert all(t == ts[phy] for _, phy, _, _, t in all_)
        assert list(q.entries(from_offset=5, count=3)) == [x[:4] for x in all_[5:8]]
        chunks = list(q.chunks())
        assert len(chunks) == 1 and chunks[0][0] == 0 and len(chunks[0][1]) == len(all_)


def test_construct_schema_equals_struct_fast_path():
    p = require_oracle(ROCKS)
    with RocksDBConsumeQueueStore(str(p / "store" / "consumequeue")) as db:
        n = 0
        for k, v in db._db.items():
            c = F.RocksDBCQKey.parse(k)
            assert (c.topic, c.queue_id, c.cq_offset) == F.parse_cq_key(k)
            cv = F.RocksDBCQValue.parse(v)
            assert tuple(cv[n] for n, _ in F.CQ_VALUE_FIELDS) == F.CQ_VALUE.unpack(v)
            assert F.RocksDBCQKey.build(dict(topic_length=len(c.topic.encode()), topic=c.topic, queue_id=c.queue_id,
                                             cq_offset=c.cq_offset)) == k
            n += 1
        assert n == 398
        for k, v in db._db.get_column_family("offset").items():
            c = F.RocksDBOffsetKey.parse(k)
            assert (c.topic, c.kind.decode(), c.queue_id) == F.parse_offset_key(k)


def test_list_rocksdb_queues_and_detection(tmp_path):
    p = require_oracle(ROCKS)
    cq = str(p / "store" / "consumequeue")
    assert is_rocksdb_dir(cq)
    qs = list_rocksdb_queues(cq)
    assert len(qs) == 15 and qs[0].topic == "AuditTopic"


def test_roundtrip_file_cq_to_rocksdb(tmp_path):
    """Convert the 5.3.3 clean store's file CQ into RocksDB with our writer; read back equal."""
    p = require_oracle(CLEAN5)
    exp = load_expected(CLEAN5)
    st = Store.open(p / "store")
    out = tmp_path / "consumequeue"
    with open_consume_queues(st) as qs:
        assert qs.kind == "file"
        res = write_rocksdb_consume_queue(str(out), rows_from_consume_queues(qs, st.commitlog), write_min=True)
    assert res["rows"] == sum(len(v["entries"]) for t in exp["consumeQueues"].values() for v in t.values())
    assert not (out / "rocksdict-config.json").exists()
    assert is_rocksdb_dir(str(out))
    with RocksDBConsumeQueueStore(str(out)) as db:
        got = {(q.topic, q.queue_id): [list(x) for x in q.entries()] for q in db.queues()}
        exp_q = {(t, int(q)): v["entries"] for t, qs_ in exp["consumeQueues"].items() for q, v in qs_.items()
                 if v["entries"]}
        assert got == exp_q
        for (t, q), ents in exp_q.items():
            assert db.offset_table.max[(t, q)] == (ents[-1][1], ents[-1][0])
            assert db.offset_table.min[(t, q)] == (ents[0][1], ents[0][0])
        ts = {m["physicalOffset"]: m["storeTimestamp"] for m in exp["messages"]}
        for q in db.queues():
            assert all(t == ts[phy] for _, phy, _, _, t in q.entries(with_timestamp=True))


def test_writer_refuses_nonempty_dir(tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(UnsafeOutputError):
        write_rocksdb_consume_queue(str(tmp_path), [])


def test_gaps_and_hostile_topic(tmp_path):
    topic = "t" * 300 + "\u4e2d\x01"
    rows = [(topic, 7, o, 1000 + o * 10, 10, -5, 123) for o in (3, 4, 5, 9, 10)]
    write_rocksdb_consume_queue(str(tmp_path / "db"), rows)
    with RocksDBConsumeQueueStore(str(tmp_path / "db")) as db:
        (q,) = db.queues()
        assert q.topic == topic and q.queue_id == 7
        assert [b for b, _ in q.chunks()] == [3, 9]
        assert q.bounds() == (3, 11, 5)
        assert q.min_offset_for(1060) == 9
        assert list(q.entries(from_offset=5, count=2)) == [(5, 1050, 10, -5), (9, 1090, 10, -5)]


def test_cli_rocksdb_cq_oracle():
    import json

    from click.testing import CliRunner

    from rmqinspect.cli.main import cli

    p = require_oracle(ROCKS)
    exp = load_expected(ROCKS)
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(p / "store"), "--format", "ndjson"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 398
    assert set(rows[0]) == {"topic", "queue_id", "queue_offset", "physical_offset", "size", "tags_code",
                            "store_timestamp"}
    got = {}
    for x in rows:
        got.setdefault((x["topic"], str(x["queue_id"])), []).append(
            [x["queue_offset"], x["physical_offset"], x["size"], x["tags_code"]])
    assert got == {(t, q): v["entries"] for t, qs in exp["consumeQueues"].items() for q, v in qs.items()}
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(p / "store"), "--list", "--format", "json"])
    lst = json.loads(r.stdout)
    st = exp["stateAfterStartWithAllQueuesOpened"]["consumeQueues"]
    assert all(x["max_offset"] == st[x["topic"]][str(x["queue_id"])]["maxOffset"] for x in lst)
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(p / "store"), "--offsets", "--format", "json"])
    assert json.loads(r.stdout)[-1] == {"topic": "CHECKPOINT_TOPIC", "queue_id": 0, "kind": "max",
                                        "physical_offset": 298436, "queue_offset": None}
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(p / "store"), "--topic", "NoSuch"])
    assert r.exit_code == 3 and "NoSuch" in r.stderr and "Traceback" not in r.output
    assert tree_hashes(p / "store") == before


def test_cli_rocksdb_cq_on_written_fixture(tmp_path):
    from click.testing import CliRunner

    from rmqinspect.cli.main import cli

    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    write_rocksdb_consume_queue(str(root / "consumequeue"), [("A", 1, o, o * 100, 100, 7, 99) for o in range(5)])
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(root), "--from", "3", "--format", "json"])
    import json
    assert [x["queue_offset"] for x in json.loads(r.stdout)] == [3, 4]
    assert tree_hashes(root) == before


def test_not_rocksdb_and_corrupt(tmp_path):
    from rmqinspect.errors import CorruptDataError, StoreNotFoundError

    with pytest.raises(StoreNotFoundError):
        RocksDBConsumeQueueStore(str(tmp_path))
    (tmp_path / "CURRENT").write_text("MANIFEST-000001\n")
    (tmp_path / "MANIFEST-000001").write_bytes(b"garbage")
    with pytest.raises(CorruptDataError):
        RocksDBConsumeQueueStore(str(tmp_path))


def test_rebuild_from_commitlog_equals_broker_rocksdb(tmp_path):
    """Regenerating the RocksDB CQ of rocksdb-cq-small from its commit log reproduces every row the broker
    wrote (key, physical offset, size, tagsCode, store timestamp) and its offset table."""
    from rmqinspect.analyses.rebuild import rebuild_rocksdb_consume_queue

    p = require_oracle(ROCKS)
    before = tree_hashes(p / "store")
    st = Store.open(p / "store")
    out = tmp_path / "new" / "consumequeue"
    res = rebuild_rocksdb_consume_queue(st, str(out))
    assert res["rows"] == 398 and res["checkpoint"] == 298436
    with RocksDBConsumeQueueStore(str(p / "store" / "consumequeue")) as a, RocksDBConsumeQueueStore(str(out)) as b:
        assert list(a._db.items()) == list(b._db.items())  # byte-identical keys and values, same order
        assert a.offset_table.max == b.offset_table.max and a.offset_table.checkpoint == b.offset_table.checkpoint
    with pytest.raises(UnsafeOutputError):
        rebuild_rocksdb_consume_queue(st, str(p / "store" / "cq2"))
    assert tree_hashes(p / "store") == before


def test_migration_compare_file_vs_rocksdb(tmp_path):
    """The RocksDB CQ rebuilt from the 5.3.3 clean commit log equals the broker's file CQ; a changed row is
    reported with its queue offset."""
    from rmqinspect.analyses.compare.cq_vs_cq import compare_consume_queues
    from rmqinspect.analyses.rebuild import rebuild_rocksdb_consume_queue

    p = require_oracle(CLEAN5)
    st = Store.open(p / "store")
    out = tmp_path / "consumequeue"
    rebuild_rocksdb_consume_queue(st, str(out))
    with open_consume_queues(st) as files, RocksDBConsumeQueueStore(str(out)) as db:
        res = compare_consume_queues(list(files), db.queues())
        assert res.equal and res.entries_compared == sum(
            len(v["entries"]) for t in load_expected(CLEAN5)["consumeQueues"].values() for v in t.values())
    # tamper one row in a second RocksDB CQ
    rows = []
    with RocksDBConsumeQueueStore(str(out)) as db:
        for q in db.queues():
            for e in q.entries(with_timestamp=True):
                rows.append((q.topic, q.queue_id, *e))
    t, qid, off, phy, size, tags, ts = rows[5]
    rows[5] = (t, qid, off, phy, size, tags + 1, ts)
    write_rocksdb_consume_queue(str(tmp_path / "cq2"), rows)
    with open_consume_queues(st) as files, RocksDBConsumeQueueStore(str(tmp_path / "cq2")) as db:
        res = compare_consume_queues(list(files), db.queues())
        (d,) = res.diffs
        assert (d.topic, d.queue_id, d.mismatch_count, d.mismatches[0][0]) == (t, qid, 1, off)


def test_cli_compare_file_cq(tmp_path):
    from click.testing import CliRunner

    from rmqinspect.analyses.rebuild import rebuild_rocksdb_consume_queue
    from rmqinspect.cli.main import cli

    p = require_oracle(CLEAN5)
    st = Store.open(p / "store")
    new = tmp_path / "new"
    (new / "commitlog").mkdir(parents=True)
    rebuild_rocksdb_consume_queue(st, str(new / "consumequeue"))
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(new), "--compare-file-cq", str(p / "store" / "consumequeue"),
                                 "--format", "json"])
    assert r.exit_code == 0 and r.stdout.strip() == "[]" and "0 queues differ" in r.stderr
    other = require_oracle("rocketmq-all-5.3.3/crash-torn-tail") / "store" / "consumequeue"
    r = CliRunner().invoke(cli, ["rocksdb-cq", str(new), "--compare-file-cq", str(other)])
    assert r.exit_code == 1  # a different store's queues differ
    assert tree_hashes(p / "store") == before


def test_rebuild_command_cq_format_rocksdb_equals_broker(tmp_path):
    """`rebuild --cq-format rocksdb` (the same dispatcher as the file rebuild) writes the rows and offset
    table the broker wrote, byte for byte; the index is rebuilt beside it as usual."""
    from click.testing import CliRunner

    from rmqinspect.cli.main import cli

    p = require_oracle(ROCKS)
    before = tree_hashes(p / "store")
    out = tmp_path / "new"
    r = CliRunner().invoke(cli, ["rebuild", str(p / "store"), "--out", str(out), "--cq-format", "rocksdb",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = __import__("json").loads(r.stdout)
    assert doc["rocksdb"]["rows"] == 398 and doc["rocksdb"]["checkpoint"] == 298436
    assert sorted(os.listdir(out)) == ["consumequeue", "index", "rebuild.json"]
    with RocksDBConsumeQueueStore(str(p / "store" / "consumequeue")) as a, \
            RocksDBConsumeQueueStore(str(out / "consumequeue")) as b:
        assert list(a._db.items()) == list(b._db.items())
        assert a.offset_table.max == b.offset_table.max
    assert tree_hashes(p / "store") == before
