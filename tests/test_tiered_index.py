"""Tiered-store index: unsealed files written from the spec, compaction into the compacted layout,
lookups agreeing across layouts, the broker's caps, schema vs fast path, CLI commands."""

from __future__ import annotations

import json
import os
import random

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.compact_index import compact_index_file
from rmqinspect.cli.main import cli
from rmqinspect.errors import CorruptDataError
from rmqinspect.fixtures.tiered_index import TieredIndexWriter
from rmqinspect.formats import tiered_index as F
from rmqinspect.formats.javahash import java_string_hash
from rmqinspect.store.tiered_index import COMPACTED, UNSEALED, ReadStats, TieredIndexFile
from support import tree_hashes

BEGIN = 1_795_000_000_000


def build(directory, n_msgs=300, slots=16, max_items=2000, seed=7, begin=BEGIN):
    """Messages with UNIQ-like keys and shared business keys; returns the model the lookup must match."""
    rnd = random.Random(seed)
    model = []  # (topic, key, offset, ts) in write order
    with TieredIndexWriter(str(directory), begin, slots, max_items) as w:
        for i in range(n_msgs):
            topic = rnd.choice(["OrderTopic", "PayTopic"])
            keys = {f"U{i:05d}", f"order-{rnd.randrange(20)}"}
            ts = begin + i * 1500 - 3000  # the first ones before beginTimestamp: negative timeDiff
            assert w.put_key(topic, 3, i % 4, keys, 1000 * i, 100 + i, ts) == "SUCCESS"
            for k in dict.fromkeys(keys):
                model.append((topic, k, 1000 * i, ts))
    return w.path, model


def expected(model, topic, key, begin=0, end=1 << 62):
    out = []
    for t, k, off, ts in reversed(model):
        td = F.time_diff(ts, BEGIN)
        if t == topic and k == key and begin <= td * 1000 + BEGIN <= end:
            out.append(off)
    return out


def test_unsealed_lookups_match_model_and_compaction_agrees(tmp_path):
    path, model = build(tmp_path / "tiered_index_file")
    f = TieredIndexFile(path)
    assert f.layout == UNSEALED and f.hash_slots == 16 and f.max_items == 2000
    assert f.index_item_count == len(model) and f.magic == F.BEGIN_MAGIC
    out = tmp_path / "compacted"
    res = compact_index_file(f, str(out))
    assert res.items == len(model) and res.items_dropped == 0
    assert os.path.getsize(res.output) == F.compacted_file_size(16, len(model))
    c = TieredIndexFile(res.output)
    assert c.layout == COMPACTED and c.magic == F.END_MAGIC and c.hash_slots == 16
    assert (c.begin_timestamp, c.end_timestamp, c.index_item_count) == (f.begin_timestamp, f.end_timestamp,
                                                                         f.index_item_count)
    for topic, key in {(t, k) for t, k, _, _ in model}:
        want = expected(model, topic, key)
        assert [i.offset for i in f.lookup(topic, key)] == want
        assert [i.offset for i in c.lookup(topic, key)] == want
        win = (BEGIN + 60_000, BEGIN + 200_000)
        assert [i.offset for i in f.lookup(topic, key, *win)] == expected(model, topic, key, *win) \
            == [i.offset for i in c.lookup(topic, key, *win)]
    assert f.lookup("OrderTopic", "nope") == [] == c.lookup("OrderTopic", "nope")
    # the compacted runs hold every item exactly once
    assert sorted((i.offset, i.hash_code) for i in c.all_items()) == sorted(
        (i.offset, i.hash_code) for i in f.all_items())


def test_reads_per_lookup_drop_after_compaction(tmp_path):
    path, model = build(tmp_path / "t", n_msgs=400, slots=8)
    f = TieredIndexFile(path)
    c = TieredIndexFile(compact_index_file(f, str(tmp_path / "c")).output)
    s1, s2 = ReadStats(), ReadStats()
    f.lookup("OrderTopic", "order-3", stats=s1)
    c.lookup("OrderTopic", "order-3", stats=s2)
    assert s2.read_calls == 2  # slot + one contiguous run
    assert s1.read_calls > 50  # slot + one read per chain item (800 items over 8 slots)


def test_max_query_count_and_compact_cap(tmp_path):
    # 1 slot, 1100 items of one key: unsealed walks at most 512, compacted reads at most 1024 items
    with TieredIndexWriter(str(tmp_path / "t"), BEGIN, 1, 5000) as w:
        for i in range(1100):
            w.put_key("T", 1, 0, ["k"], i, 1, BEGIN)
    f = TieredIndexFile(w.path)
    assert [i.offset for i in f.lookup("T", "k")] == list(range(1099, 1099 - 512, -1))
    c = TieredIndexFile(compact_index_file(f, str(tmp_path / "c")).output)
    assert [i.offset for i in c.lookup("T", "k")] == list(range(1099, 1099 - 1024, -1))


def _min_value_key(prefix: str) -> str:
    """A key whose ``prefix + key`` hashes to Integer.MIN_VALUE (7 base-31 digit chars)."""
    r = (-(1 << 31) - java_string_hash(prefix) * 31 ** 7) % (1 << 32)
    digits = []
    for _ in range(7):
        digits.append(r % 31)
        r //= 31
    return "".join(chr(d) for d in reversed(digits))


def test_min_value_hash_never_indexed(tmp_path):
    key = _min_value_key("T#")
    assert java_string_hash("T#" + key) == -(1 << 31)
    with TieredIndexWriter(str(tmp_path / "t"), BEGIN, 7, 100) as w:
        w.put_key("T", 1, 0, [key, "ok"], 5, 1, BEGIN)
    f = TieredIndexFile(w.path)
    assert f.index_item_count == 1 and f.lookup("T", key) == [] and len(f.lookup("T", "ok")) == 1


def test_file_full_and_end_magic(tmp_path):
    with TieredIndexWriter(str(tmp_path / "t"), BEGIN, 4, 4) as w:
        assert w.put_key("T", 1, 0, ["a", "b"], 1, 1, BEGIN) == "SUCCESS"
        assert w.put_key("T", 1, 0, ["c"], 2, 1, BEGIN) == "SUCCESS"  # 3 == max-1: header magic END
        assert w.put_key("T", 1, 0, ["d"], 3, 1, BEGIN) == "FILE_FULL"
    f = TieredIndexFile(w.path, hash_slots=4, max_items=4)
    assert f.magic == F.END_MAGIC and f.layout == UNSEALED and f.index_item_count == 3


def test_schema_equals_fast_path(tmp_path):
    path, model = build(tmp_path / "t", n_msgs=30)
    f = TieredIndexFile(path)
    buf = f.mf.buffer
    h = F.TieredIndexHeader.parse(bytes(buf[:28]))
    assert (h.magic, h.begin_timestamp, h.end_timestamp, h.hash_slot_count, h.index_item_count) == (
        f.magic, f.begin_timestamp, f.end_timestamp, f.hash_slot_count, f.index_item_count)
    for it in f.all_items():
        p = F.TieredIndexItem.parse(bytes(buf[it.position:it.position + 32]))
        assert (p.hash_code, p.topic_id, p.queue_id, p.offset, p.size, p.time_diff, p.item_index) == (
            it.hash_code, it.topic_id, it.queue_id, it.offset, it.size, it.time_diff, it.prev)
    c = TieredIndexFile(compact_index_file(f, str(tmp_path / "c")).output)
    cb = c.mf.buffer
    for it in c.all_items():
        p = F.TieredIndexCompactItem.parse(bytes(cb[it.position:it.position + 28]))
        assert (p.hash_code, p.offset, p.time_diff) == (it.hash_code, it.offset, it.time_diff)


def test_damage(tmp_path):
    p = tmp_path / "1"
    p.write_bytes(b"\0" * 10)
    with pytest.raises(CorruptDataError, match="shorter"):
        TieredIndexFile(str(p))
    p.write_bytes(b"\x12\x34\x56\x78" + b"\0" * 100)
    with pytest.raises(CorruptDataError, match="bad magic"):
        TieredIndexFile(str(p))
    # a chain cycle: item 2's prev points to itself
    with TieredIndexWriter(str(tmp_path / "t"), BEGIN, 1, 8) as w:
        w.put_key("T", 1, 0, ["a"], 1, 1, BEGIN)
        w.put_key("T", 1, 0, ["a"], 2, 1, BEGIN)
    with open(w.path, "r+b") as fh:
        fh.seek(F.item_position(1, 2) + 28)
        fh.write((2).to_bytes(4, "big"))
    with pytest.raises(CorruptDataError, match="cycles"):
        TieredIndexFile(w.path, hash_slots=1).lookup("T", "a")


def test_cli_compact_and_lookup(tmp_path):
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    path, model = build(store / "tiered_index_file", n_msgs=120)
    build(store / "tiered_index_file", n_msgs=50, seed=9, begin=BEGIN + 10_000_000)
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["tiered-index-lookup", str(store), "--topic", "OrderTopic", "--key", "order-3",
                                 "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert rows and all(x["topic_id"] == 3 for x in rows)
    r2 = CliRunner().invoke(cli, ["compact-index", str(store), "--out", str(tmp_path / "out"), "--format", "json"])
    assert r2.exit_code == 0, r2.output
    assert len(json.loads(r2.stdout)) == 2
    r3 = CliRunner().invoke(cli, ["tiered-index-lookup", str(tmp_path / "out"), "--topic", "OrderTopic", "--key",
                                  "order-3", "--format", "json"])
    rows3 = json.loads(r3.stdout)
    strip = lambda rs: [(x["file"], x["offset"], x["store_timestamp"]) for x in rs]  # noqa: E731
    assert strip(rows3) == strip(rows) and {x["layout"] for x in rows3} == {"compacted"}
    r4 = CliRunner().invoke(cli, ["compact-index", str(store), "--out", str(store / "x")])
    assert r4.exit_code == 6
    r5 = CliRunner().invoke(cli, ["tiered-index-lookup", str(tmp_path / "nope"), "--topic", "a", "--key", "b"])
    assert r5.exit_code == 3 and "Traceback" not in r5.output
    assert tree_hashes(store) == before


def test_index_lookup_command_reads_tiered_index(tmp_path):
    """`index-lookup` answers from tiered_index_file/ (automatically when the store has no index/, or with
    --tiered) with the same items as the dedicated tiered lookup and the write model."""
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    (store / "commitlog" / ("0" * 20)).write_bytes(b"\0" * 4096)
    path, model = build(store / "tiered_index_file", n_msgs=120)
    before = tree_hashes(store)
    args = ["--topic", "OrderTopic", "--key", "order-3", "--format", "json"]
    a = CliRunner().invoke(cli, ["index-lookup", str(store)] + args)
    b = CliRunner().invoke(cli, ["tiered-index-lookup", str(store)] + args)
    c = CliRunner().invoke(cli, ["index-lookup", str(store), "--tiered"] + args)
    assert a.exit_code == b.exit_code == c.exit_code == 0, a.output
    assert json.loads(a.stdout) == json.loads(b.stdout) == json.loads(c.stdout)
    assert [x["offset"] for x in json.loads(a.stdout)] == expected(model, "OrderTopic", "order-3")
    assert tree_hashes(store) == before


@pytest.mark.parametrize("slots,max_items,n", [(16, 66, 20), (4, 69, 30), (1, 50, 10), (7, 33, 12), (1000, 50, 40),
                                               (16, 2000, 300)])
def test_unsealed_geometry_is_proven(tmp_path, slots, max_items, n):
    """16 slots / 66 items and 4 / 69 are both 2,268 bytes: each opens as written (16/66 opened as 4/69 before),
    with no flag, and every key is found."""
    with TieredIndexWriter(str(tmp_path), BEGIN, slots, max_items) as w:
        for k in range(n):
            assert w.put_key("T", 1, 0, {f"k{k}"}, 100 * k, 10, BEGIN + k) == "SUCCESS"
    f = TieredIndexFile(w.path)
    assert (f.hash_slots, f.max_items, f.geometry.source) == (slots, max_items, "inferred"), f.geometry
    assert f.header_dict()["geometry"]["value"] == {"slots": slots, "max_items": max_items}
    assert all([it.offset for it in f.lookup("T", f"k{k}")] == [100 * k] for k in range(n))
    g = TieredIndexFile(w.path, hash_slots=slots)
    assert (g.hash_slots, g.max_items, g.geometry.source) == (slots, max_items, "flag")
    with pytest.raises(CorruptDataError, match="does not fit"):  # a flag the size cannot hold is refused
        TieredIndexFile(w.path, hash_slots=slots + 1)


def test_unsealed_geometry_damage_is_said_with_the_flags(tmp_path):
    with TieredIndexWriter(str(tmp_path), BEGIN, 16, 66) as w:
        for k in range(20):
            w.put_key("T", 1, 0, {f"k{k}"}, 100 * k, 10, BEGIN + k)
    with open(w.path, "r+b") as fh:  # item 5's prev pointing forward: no geometry is self-consistent
        fh.seek(F.item_position(16, 5) + 28)
        fh.write((9).to_bytes(4, "big"))
    with pytest.raises(CorruptDataError, match="--hash-slots/--max-items"):
        TieredIndexFile(w.path)
    assert TieredIndexFile(w.path, hash_slots=16, max_items=66).hash_slots == 16  # the flag settles it
