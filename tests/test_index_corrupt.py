"""Index files built in the test from the formats schema (IndexFile.putKey semantics), then damaged: a prevIndex
cycle, out-of-range slot values, a prevIndex beyond indexCount, a negative timeDiff, truncated files. Every look-up
must terminate with a clear report and no traceback."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from rmqinspect.analyses.lookup.query import IndexService, query_message
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.indexfile import (
    INDEX_HEADER_SIZE,
    INDEX_ITEM_SIZE,
    IndexHeader,
    IndexItem,
    index_file_schema,
    item_position,
    slot_position,
)
from rmqinspect.formats.javahash import build_index_key, index_key_hash
from rmqinspect.store import Store
from support import tree_hashes

SLOTS, MAX_ITEMS = 8, 40  # few slots: chains with several keys, and collisions
T0 = 1_700_000_000_000
TOPIC = "T"


class IndexBuilder:
    """IndexFile.putKey as the broker does it, on plain Python lists, serialised with the construct schema."""

    def __init__(self, slots=SLOTS, max_items=MAX_ITEMS, begin_ts=0, begin_phy=0):
        self.slots, self.max_items = slots, max_items
        self.slot = [0] * slots
        self.items = [dict(key_hash=0, phy_offset=0, time_diff=0, prev_index=0) for _ in range(max_items)]
        self.h = dict(begin_timestamp=begin_ts, end_timestamp=begin_ts, begin_phy_offset=begin_phy,
                      end_phy_offset=begin_phy, hash_slot_count=0, index_count=1)

    def put(self, key_string, phy, store_ts):
        h = self.h
        if h["index_count"] >= self.max_items:
            return False
        kh = index_key_hash(key_string)
        pos = kh % self.slots
        sv = self.slot[pos]
        if sv <= 0 or sv > h["index_count"]:
            sv = 0
        td = store_ts - h["begin_timestamp"]
        td //= 1000
        if h["begin_timestamp"] <= 0:
            td = 0
        elif td > 0x7FFFFFFF:
            td = 0x7FFFFFFF
        elif td < 0:
            td = 0
        n = h["index_count"]
        self.items[n] = dict(key_hash=kh, phy_offset=phy, time_diff=td, prev_index=sv)
        self.slot[pos] = n
        if n <= 1:
            h["begin_phy_offset"], h["begin_timestamp"] = phy, store_ts
        if sv == 0:
            h["hash_slot_count"] += 1
        h["index_count"] += 1
        h["end_phy_offset"], h["end_timestamp"] = phy, store_ts
        return True

    def build(self) -> bytes:
        return index_file_schema(self.slots, self.max_items).build(
            dict(header=self.h, slots=self.slot, items=self.items))


def make_store(root, n=12, keys_of=lambda i: [f"k{i % 4}"]):
    """A commitlog written by the project's writer plus one index file built like the broker would."""
    os.makedirs(root / "index")
    b = IndexBuilder()
    offsets = []
    with CommitLogWriter(str(root / "commitlog"), file_size=64 * 1024) as w:
        for i in range(n):
            ts = T0 + i * 1500
            props = {"KEYS": " ".join(keys_of(i)), "UNIQ_KEY": "%032X" % (0xC0A80001 << 96 | i)}
            r = w.append(MessageSpec(TOPIC, i % 2, b"body%d" % i, encode_properties(props), store_timestamp=ts,
                                     born_timestamp=ts - 5))
            offsets.append((r.physical_offset, ts))
            for k in [props["UNIQ_KEY"]] + keys_of(i):
                b.put(build_index_key(TOPIC, k), r.physical_offset, ts)
    (root / "index" / "20231114221320000").write_bytes(b.build())
    return b, offsets


def patch(path, pos, data):
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def lookup(root, key, **kw):
    st = Store.open(root)
    svc = IndexService.for_store(st, slots=kw.pop("slots", None), max_items=kw.pop("max_items", None))
    return svc, query_message(svc, st.commitlog, TOPIC, key, kw.pop("max_num", 64), explain=True, **kw)


def run_cli(root, key, *extra):
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["index-lookup", str(root), "--topic", TOPIC, "--key", key, "--explain", *extra])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    assert tree_hashes(root) == before
    return r


def test_builder_reproduces_broker_lookup(tmp_path):
    b, offs = make_store(tmp_path)
    _, q = lookup(tmp_path, "k1")
    want = [o for i, (o, _) in enumerate(offs) if i % 4 == 1]
    assert q.phy_offsets == want and q.raw == want[::-1]
    assert all(h.has_key for h in q.hits)
    # with 8 slots other keys share k1's slot: the walk visits them and says why they did not match
    steps = [s for w in q.rounds[0].walks for s in w.lookup.steps]
    assert any(s.reason == "hash differs" for s in steps)


def test_hash_collision_dropped_client_side(tmp_path):
    b, offs = make_store(tmp_path)
    path = tmp_path / "index" / "20231114221320000"
    # rewrite item 2 (UNIQ_KEY of message 0... ) to carry k1's hash while pointing at message 0 (keys k0)
    kh = index_key_hash(build_index_key(TOPIC, "k1"))
    slot = kh % SLOTS
    head = b.slot[slot]
    b.items[head]["prev_index"]  # chain head stays; add a forged collision as a new head
    n = b.h["index_count"]
    b.items[n] = dict(key_hash=kh, phy_offset=offs[0][0], time_diff=0, prev_index=head)
    b.slot[slot] = n
    b.h["index_count"] += 1
    path.write_bytes(b.build())
    _, q = lookup(tmp_path, "k1")
    assert offs[0][0] in q.phy_offsets  # the broker returns it: only hashes are compared
    assert [h.physical_offset for h in q.collisions] == [offs[0][0]]
    r = run_cli(tmp_path, "k1", "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["collisions"] == [offs[0][0]] and offs[0][0] not in doc["verified_offsets"]
    r = run_cli(tmp_path, "k1")
    assert "hash collision" in r.stdout and r.exit_code == 0


def test_prev_index_cycle_terminates(tmp_path):
    b, offs = make_store(tmp_path)
    path = tmp_path / "index" / "20231114221320000"
    kh = index_key_hash(build_index_key(TOPIC, "k1"))
    head = b.slot[kh % SLOTS]
    # point the head's predecessor's prevIndex back at the head: head -> p -> head -> ...
    p = b.items[head]["prev_index"]
    assert p > 0
    patch(path, item_position(SLOTS, p) + 16, head.to_bytes(4, "big"))
    # a forward prevIndex breaks the geometry proof: without the flag the file is not read (said, naming it)
    r = run_cli(tmp_path, "k1")
    assert r.exit_code == 3 and "--index-slots" in r.output and "maxHashSlotNum" in r.output
    _, q = lookup(tmp_path, "k1", slots=SLOTS)
    stops = [w.lookup.stopped for w in q.rounds[0].walks]
    assert any("cycle" in s for s in stops)
    r = run_cli(tmp_path, "k1", "--index-slots", str(SLOTS))
    assert r.exit_code == 0 and "cycle" in r.stdout


def test_slot_values_out_of_range(tmp_path):
    b, offs = make_store(tmp_path)
    path = tmp_path / "index" / "20231114221320000"
    kh = index_key_hash(build_index_key(TOPIC, "k1"))
    for bad in (999_999, -5):
        patch(path, slot_position(kh % SLOTS), bad.to_bytes(4, "big", signed=True))
        r = run_cli(tmp_path, "k1", "--index-slots", str(SLOTS))
        assert r.exit_code == 3
        assert "out of range" in r.stdout


def test_prev_index_beyond_index_count_and_negative_time_diff(tmp_path):
    b, offs = make_store(tmp_path)
    path = tmp_path / "index" / "20231114221320000"
    kh = index_key_hash(build_index_key(TOPIC, "k1"))
    head = b.slot[kh % SLOTS]
    patch(path, item_position(SLOTS, head) + 16, (10_000).to_bytes(4, "big"))
    r = run_cli(tmp_path, "k1", "--index-slots", str(SLOTS))
    assert "prevIndex 10000 out of range" in r.stdout
    doc = json.loads(run_cli(tmp_path, "k1", "--index-slots", str(SLOTS), "--format", "json").stdout)
    # the chain is cut after the head: only what the head itself matched survives
    assert doc["raw"] == ([b.items[head]["phy_offset"]] if b.items[head]["key_hash"] == kh else [])
    patch(path, item_position(SLOTS, head) + 12, (-7).to_bytes(4, "big", signed=True))
    r = run_cli(tmp_path, "k1", "--index-slots", str(SLOTS))
    assert r.exit_code == 3 and "negative timeDiff" in r.stdout


def test_truncated_index_file(tmp_path):
    b, offs = make_store(tmp_path)
    path = tmp_path / "index" / "20231114221320000"
    data = path.read_bytes()
    kh = index_key_hash(build_index_key(TOPIC, "k1"))
    head = b.slot[kh % SLOTS]
    # cut inside the head item: geometry cannot be inferred without --index-slots, with it the walk stops cleanly
    path.write_bytes(data[:item_position(SLOTS, head) + 10])
    r = run_cli(tmp_path, "k1")
    assert r.exit_code == 3 and "fits no geometry" in r.output and "--index-slots" in r.output
    r = run_cli(tmp_path, "k1", "--index-slots", str(SLOTS), "--index-max", str(MAX_ITEMS))
    assert r.exit_code == 3 and "truncated" in r.output
    # shorter than the header
    path.write_bytes(data[:INDEX_HEADER_SIZE - 3])
    r = run_cli(tmp_path, "k1", "--index-slots", str(SLOTS))
    assert r.exit_code == 3 and "shorter than its 40-byte header" in r.output
    # empty index directory
    path.unlink()
    r = run_cli(tmp_path, "k1")
    assert r.exit_code == 3


def test_schema_round_trip_matches_fast_path(tmp_path):
    """The struct/numpy fast path of store/indexfile.py reads what the construct schema wrote."""
    b, offs = make_store(tmp_path)
    st = Store.open(tmp_path)
    svc = IndexService.for_store(st, slots=SLOTS, max_items=MAX_ITEMS)
    f = svc.files[0]
    data = (tmp_path / "index" / "20231114221320000").read_bytes()
    assert IndexHeader.parse(data[:INDEX_HEADER_SIZE]) == IndexHeader.parse(IndexHeader.build(b.h))
    items = f.items()
    for n in range(1, b.h["index_count"]):
        c = IndexItem.parse(data[item_position(SLOTS, n):item_position(SLOTS, n) + INDEX_ITEM_SIZE])
        assert (c.key_hash, c.phy_offset, c.time_diff, c.prev_index) == tuple(int(x) for x in items[n - 1])
        assert f.item(n) == (c.key_hash, c.phy_offset, c.time_diff, c.prev_index)
