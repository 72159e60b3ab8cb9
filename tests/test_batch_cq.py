"""BatchConsumeQueue, inner-batch records and ConsumeQueueExt, written from the spec and read back."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.errors import CorruptDataError
from rmqinspect.fixtures.batch import BatchQueueWriter, write_cq_ext_unit
from rmqinspect.fixtures.commitlog import CommitLogWriter
from rmqinspect.formats import batch as F
from rmqinspect.formats.constants import SysFlag
from rmqinspect.formats.javahash import tags_code
from rmqinspect.store import Store
from rmqinspect.store.batch import BatchConsumeQueue, decode_inner_batch, list_batch_queues, read_cq_ext_unit
from support import tree_hashes


def make_store(root):
    os.makedirs(root / "commitlog")
    with CommitLogWriter(str(root / "commitlog"), file_size=1 << 16) as cl:
        w = BatchQueueWriter(str(root), cl, "BatchTopic", 1, entries_per_file=4)
        for b in range(6):
            msgs = [(f"m{b}-{i}".encode(), {"KEYS": f"k{b}{i}", "a": "\u4e2d"}) for i in range(b + 1)]
            w.append_batch(msgs, tags="TagB", uniq_key=f"U{b}", store_timestamp=1000 + b, inner=(b != 2))
    return w


def test_bcq_roundtrip_and_inner_decode(tmp_path):
    make_store(tmp_path / "s")
    st = Store.open(tmp_path / "s")
    (q,) = list_batch_queues(st.root)
    bcq = BatchConsumeQueue(*q)
    assert len(bcq.files) == 2  # 6 entries, 4 per file
    ents = list(bcq.entries())
    assert [(e["msg_base_offset"], e["batch_size"]) for e in ents] == [(0, 1), (1, 2), (3, 1), (4, 4), (8, 5),
                                                                       (13, 6)]
    assert bcq.bounds() == (0, 19, 6)
    assert all(e["compacted_offset"] == -1 and e["tags_code"] == tags_code("TagB") for e in ents)
    for e in ents:
        m = st.commitlog.read_message(e["physical_offset"])
        assert m.total_size == e["size"] and m.queue_offset == e["msg_base_offset"]
        assert m.store_timestamp == e["store_timestamp"]
        if e["entry_index"] == 2:
            assert not m.sys_flag & SysFlag.INNER_BATCH
            continue
        assert m.sys_flag & (SysFlag.INNER_BATCH | SysFlag.NEED_UNWRAP) == 0xC0
        assert int(m.properties["INNER_NUM"]) == e["batch_size"]
        assert int(m.properties["INNER_BASE"]) == e["msg_base_offset"]
        inner = decode_inner_batch(m.body, m.queue_offset)
        b = e["entry_index"]
        assert [(i.queue_offset, i.body, i.properties["KEYS"]) for i in inner] == [
            (e["msg_base_offset"] + i, f"m{b}-{i}".encode(), f"k{b}{i}") for i in range(b + 1)]


def test_schema_equals_fast_path(tmp_path):
    make_store(tmp_path / "s")
    (q,) = list_batch_queues(str(tmp_path / "s"))
    bcq = BatchConsumeQueue(*q)
    raw = open(bcq.files[0].path, "rb").read()
    for i, e in enumerate(list(bcq.entries())[:4]):
        c = F.BatchConsumeQueueEntry.parse(raw[i * 46:(i + 1) * 46])
        assert all(c[k] == e[k] for k in ("physical_offset", "size", "tags_code", "store_timestamp",
                                          "msg_base_offset", "batch_size", "compacted_offset"))
        assert F.BCQ_ENTRY.unpack_from(raw, i * 46)[:7] == tuple(c[k] for k, _ in F.BCQ_FIELDS[:7])
    item = F.encode_inner_item(b"xyz", b"A\x01b\x02", 3)
    p = F.InnerBatchItem.parse(item)
    assert (p.total_size, p.flag, p.body, p.properties) == (len(item), 3, b"xyz", b"A\x01b\x02")


def test_inner_batch_damage():
    good = F.encode_inner_item(b"a", b"") + F.encode_inner_item(b"bb", b"")
    assert len(decode_inner_batch(good, 10)) == 2
    with pytest.raises(CorruptDataError, match="truncated"):
        decode_inner_batch(good[:-len(F.encode_inner_item(b"bb", b"")) + 5], 0)
    bad = bytearray(good)
    bad[0:4] = (10 ** 6).to_bytes(4, "big")
    with pytest.raises(CorruptDataError, match="absurd"):
        decode_inner_batch(bytes(bad), 0)


def test_cq_ext_unit(tmp_path):
    d = tmp_path / "consumequeue_ext" / "T" / "0"
    d.mkdir(parents=True)
    addr = write_cq_ext_unit(str(d / f"{0:020d}"), 40, -77, 1234, b"\x01" * 8)
    assert addr <= -2147483649
    u = read_cq_ext_unit(str(tmp_path), "T", 0, addr)
    assert (u["tags_code"], u["msg_store_time"], u["bit_map_size"], u["filter_bit_map"]) == (-77, 1234, 8,
                                                                                              b"\x01" * 8)
    raw = open(d / f"{0:020d}", "rb").read()
    assert F.CqExtUnit.parse(raw[40:]).tags_code == -77


def test_cli_batch_cq(tmp_path):
    make_store(tmp_path / "s")
    before = tree_hashes(tmp_path / "s")
    r = CliRunner().invoke(cli, ["batch-cq", str(tmp_path / "s"), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [x["batch_size"] for x in json.loads(r.stdout)] == [1, 2, 1, 4, 5, 6]
    r = CliRunner().invoke(cli, ["batch-cq", str(tmp_path / "s"), "--expand", "--format", "ndjson"])
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["queue_offset"] for x in rows] == list(range(19))
    r = CliRunner().invoke(cli, ["batch-cq", str(tmp_path / "s"), "--topic", "Nope"])
    assert r.exit_code == 3
    assert tree_hashes(tmp_path / "s") == before


def test_verify_checks_every_batch_unit(tmp_path):
    """verify reads batchconsumequeue/: clean when every unit matches its record; a unit whose size or
    msgBaseOffset was changed is named with its file and position; records past the queue's end are behind."""
    from rmqinspect.analyses.verify import verify

    make_store(tmp_path / "s")
    root = tmp_path / "s"
    assert not [p for p in verify(Store.open(root), ("structure", "cq")).problems]
    qdir = root / "batchconsumequeue" / "BatchTopic" / "1"
    first = qdir / f"{0:020d}"
    before = first.read_bytes()
    with open(first, "r+b") as f:
        f.seek(2 * F.BCQ_STORE_UNIT_SIZE + 8)  # unit 2: size
        f.write((999).to_bytes(4, "big"))
        f.seek(1 * F.BCQ_STORE_UNIT_SIZE + 28)  # unit 1: msgBaseOffset
        f.write((77).to_bytes(8, "big"))
    got = {(p.kind, p.file, p.position) for p in verify(Store.open(root), ("structure", "cq")).problems}
    rel = f"batchconsumequeue/BatchTopic/1/{0:020d}"
    assert got == {("cq_size", rel, 2 * F.BCQ_STORE_UNIT_SIZE), ("cq_queue_offset", rel, F.BCQ_STORE_UNIT_SIZE)}
    first.write_bytes(before)
    second = qdir / f"{4 * F.BCQ_STORE_UNIT_SIZE:020d}"
    second.write_bytes(b"\0" * len(second.read_bytes()))  # units 4 and 5 gone: their records are behind
    probs = verify(Store.open(root), ("structure", "cq")).problems
    assert [(p.kind, p.count) for p in probs] == [("cq_behind", 2)]
