"""StoreWriter: a whole store (commitlog, consume queues, index, checkpoint, abort, config) whose CQ and
index come from the rebuild dispatch path. Re-encoding an oracle store must reproduce the broker's files."""

from __future__ import annotations

import os

import pytest

from rmqinspect.fixtures.commitlog import MessageSpec, spec_from_message
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.store import Store
from rmqinspect.store.consumequeue import ConsumeQueue, list_queues
from rmqinspect.store.indexfile import IndexFile
from support import require_oracle, tree_hashes

VERSIONS = ["rocketmq-all-4.9.8", "rocketmq-all-5.3.3"]


def _files(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = p
    return out


def _read(p):
    with open(p, "rb") as f:
        return f.read()


@pytest.mark.parametrize("version", VERSIONS)
def test_reencoded_oracle_store_has_the_brokers_cq_and_index(version, tmp_path):
    """The writer's CQ/index for the oracle's own records equal what the broker rebuilt from them."""
    sc = require_oracle(f"{version}/rebuild")
    before = tree_hashes(sc)
    out = tmp_path / "store"
    with Store.open(sc / "store") as src:
        with StoreWriter(str(out), commitlog_file_size=src.commitlog.file_size, cq_file_size=1200, index_slots=64,
                         index_max=2000, checkpoint_fields=5 if "5.3.3" in version else 3) as w:
            for m in src.commitlog.messages():
                w.append(spec_from_message(m))
    # commitlog re-encoded byte for byte (written data; the writer does not pre-allocate the spare next file)
    for name, p in _files(sc / "store" / "commitlog").items():
        q = out / "commitlog" / name
        if q.exists():
            assert _read(q) == _read(p), name
    exp_cq = _files(sc / "expected" / "consumequeue")
    got_cq = _files(out / "consumequeue")
    assert sorted(got_cq) == sorted(exp_cq)
    for rel, p in exp_cq.items():
        assert _read(got_cq[rel]) == _read(p), rel
    exp_ix = sorted(os.listdir(sc / "expected" / "index"))
    got_ix = sorted(os.listdir(out / "index"))
    assert len(got_ix) == len(exp_ix)
    for a, b in zip(exp_ix, got_ix):
        assert _read(out / "index" / b) == _read(sc / "expected" / "index" / a), (a, b)
    assert tree_hashes(sc) == before


def test_store_writer_whole_store_reads_back(tmp_path):
    root = tmp_path / "s"
    props = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AC11000100002A9F0000000000000001"})
    with StoreWriter(str(root), commitlog_file_size=4096, cq_file_size=100, index_slots=8, index_max=6,
                     abort=True, config={"topics.json": "{}"}, checkpoint_fields=5) as w:
        for i in range(12):
            w.append(MessageSpec("T1", i % 2, body=b"x" * 50, properties=props, store_timestamp=1_700_000_000_000 + i))
        w.append(MessageSpec("T1", 0, body=b"p", properties=props, sys_flag=0x4, store_timestamp=1_700_000_001_000))
    assert (root / "abort").exists() and (root / "config" / "topics.json").read_text() == "{}"
    st = Store.open(root)
    cp = st.checkpoint
    assert cp.physic_msg_timestamp == 1_700_000_001_000
    assert cp.logics_msg_timestamp == 1_700_000_000_011
    assert cp.confirm_phy_offset == w.write_offset
    qs = list_queues(str(root / "consumequeue"))
    assert [(q.topic, q.queue_id) for q in qs] == [("T1", 0), ("T1", 1)]
    msgs = {m.physical_offset: m for m in st.commitlog.messages()}
    for q in qs:
        cq = ConsumeQueue(q.topic, q.queue_id, q.path)
        assert cq.file_size == 100
        ents = list(cq.entries())
        assert len(ents) == 6
        for qoff, phys, size, tags in ents:
            m = msgs[phys]
            assert (m.queue_id, m.queue_offset, m.total_size) == (q.queue_id, qoff, size)
            assert tags == 2598919  # "TagA".hashCode()
    # 13 records x 3 keys = 39 puts (PREPARED is indexed), 5 per file -> 8 files
    names = sorted(os.listdir(root / "index"))
    assert len(names) == 8
    total = 0
    for n in names:
        ix = IndexFile(str(root / "index" / n), slots=8, max_items=6)
        total += ix.header.index_count - 1
        # every key is found through the broker's lookup
        for it in ix.items():
            assert int(it["phy_offset"]) in msgs
    assert total == 39
    ix = IndexFile(str(root / "index" / names[0]), slots=8, max_items=6)
    m0 = min(msgs)
    r = ix.select_phy_offset("T1#k1", 64, 0, 2**62)
    assert m0 in r.offsets


def test_store_writer_refuses_non_empty_directory(tmp_path):
    (tmp_path / "x").write_text("evidence")
    with pytest.raises(FileExistsError):
        StoreWriter(str(tmp_path))
