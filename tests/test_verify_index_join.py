"""verify's index check settles the items that agree with the dispatcher's keys in bulk (the key hashes rebuild
computes, vectorised) and decodes only the rest one by one. Its report is the record-by-record check's (every item
decoded through read_message, as the check ran before), byte for byte, on every oracle store, the sample store and
writer-made stores whose index items were damaged in every way the check names."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from rmqinspect.analyses import verify as verify_mod
from rmqinspect.analyses.dispatcher import close_sinks, dispatch_commitlog
from rmqinspect.analyses.verify import ALL_CHECKS, verify
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.constants import DEFAULT_CQ_FILE_SIZE
from rmqinspect.sinks.consumequeue import ConsumeQueueSet
from rmqinspect.sinks.indexfile import IndexFileSet
from rmqinspect.store import Store
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle, tree_hashes

SLOTS, MAX_ITEMS = 97, 600
T0 = 1_700_000_000_000


def _one_by_one(recs, items, first_n, rec_of, begin, end, min_offset):
    """No item settled in bulk except the expired ones: every item decoded as the check did before."""
    return items[items.dtype.names[1]].astype(np.int64) < min_offset


def _both(monkeypatch, root, **kw) -> tuple[str, str]:
    fast = verify(Store.open(str(root)), ALL_CHECKS, **kw).to_dict()
    with monkeypatch.context() as m:
        m.setattr(verify_mod, "_items_fine", _one_by_one)
        slow = verify(Store.open(str(root)), ALL_CHECKS, **kw).to_dict()
    return json.dumps(fast, sort_keys=True), json.dumps(slow, sort_keys=True)


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_index_check_equals_record_by_record(scenario, monkeypatch):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    fast, slow = _both(monkeypatch, root)
    assert fast == slow
    assert tree_hashes(root) == before


def test_sample_store_index_check_equals_record_by_record(monkeypatch):
    fast, slow = _both(monkeypatch, SAMPLE_STORE)
    assert fast == slow
    assert json.loads(fast)["checked"]["index_items"] > 0


def _write_store(root: str) -> list[int]:
    """300 records with keys (one with 20 KEYS tokens, one with a non-UTF-8 key), its queues and index; returns the
    records' offsets."""
    offs = []
    with CommitLogWriter(os.path.join(root, "commitlog"), file_size=1 << 20) as w:
        for n in range(300):
            keys = f"k-{n} u-{n % 7}"
            if n == 40:
                keys = " ".join(f"many-{i}" for i in range(20))
            props = encode_properties([("KEYS", keys), ("UNIQ_KEY", "7F0000010000%020X" % n), ("TAGS", f"t{n % 3}")])
            if n == 41:
                props = props.replace(b"k-41", b"k-\xff\xfe41")
            offs.append(w.write_offset)
            w.append(MessageSpec("TopicA" if n % 2 else "TopicB", n % 4, body=os.urandom(100 + n % 50),
                                 properties=props, born_timestamp=T0 + n * 1500 - 2, store_timestamp=T0 + n * 1500))
    st = Store.open(root)
    cq = ConsumeQueueSet(os.path.join(root, "consumequeue"), DEFAULT_CQ_FILE_SIZE)
    ix = IndexFileSet(os.path.join(root, "index"), SLOTS, MAX_ITEMS)
    rep = dispatch_commitlog(st.commitlog, cq, ix)
    close_sinks(cq, ix, rep)
    st.close()
    return offs


def _item_at(n: int) -> int:
    return 40 + SLOTS * 4 + n * 20


def test_damaged_index_items_reported_as_record_by_record(tmp_path, monkeypatch):
    root = str(tmp_path / "store")
    offs = _write_store(root)
    names = sorted(os.listdir(os.path.join(root, "index")))
    assert len(names) >= 2  # 300 records x 3+ keys roll the 600-item files
    first = os.path.join(root, "index", names[0])
    with open(first, "r+b") as f:
        def patch(n, field_off, fmt, fn):
            f.seek(_item_at(n) + field_off)
            (v,) = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
            f.seek(_item_at(n) + field_off)
            f.write(struct.pack(fmt, fn(v)))

        patch(3, 0, ">i", lambda v: v ^ 0x10)  # keyHash of no key of the record
        patch(5, 12, ">i", lambda v: v + 7)  # timeDiff
        patch(7, 4, ">q", lambda v: v + 4)  # inside a record: no record starts there
        patch(9, 4, ">q", lambda v: offs[250])  # the record whose body is flipped below
        patch(11, 4, ">q", lambda v: offs[120])  # another record: keyHash of none of its keys
        f.seek(16)  # endTimestamp: the last items' records are now after the file's range
        (end,) = struct.unpack(">q", f.read(8))
        f.seek(16)
        f.write(struct.pack(">q", end - 4000))
    seg = os.path.join(root, "commitlog", "%020d" % 0)
    st = Store.open(root)
    rec = next(r for r in st.commitlog.scan(start=0, check_crc=False) if r.offset == offs[250])
    st.close()
    with open(seg, "r+b") as f:
        f.seek(rec.body_pos + 3)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    before = tree_hashes(root)
    fast, slow = _both(monkeypatch, root, index_slots=SLOTS, index_max=MAX_ITEMS)
    assert fast == slow
    got = json.loads(fast)
    kinds = {r["kind"] for r in got["summary"] if r["check"] == "index"}
    assert kinds == {"index_hash", "index_time", "index_dangling", "index_points_to_damage"}, kinds
    assert got["checked"]["index_items"] == 300 * 3 + 18
    assert tree_hashes(root) == before


def test_clean_writer_store_has_no_index_problem(tmp_path):
    root = str(tmp_path / "store")
    _write_store(root)
    rep = verify(Store.open(root), ("structure", "crc", "index"), index_slots=SLOTS, index_max=MAX_ITEMS)
    assert rep.ok, [p.to_dict() for p in rep.problems]
    # every record's UNIQ_KEY and KEYS tokens are items (20 for record 40, non-UTF-8 text in record 41)
    assert rep.counts["index_items"] == 300 * 3 + 18
