"""verify / recover / salvage consume the compiled scanner's record arrays in bulk. With the pure-Python
scanner (the fallback when the extension is missing, one record per step) every report must be the same,
on damaged writer-made stores and on hostile topic names."""

import os

import pytest

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery
from rmqinspect.analyses.verify import ALL_CHECKS, verify
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.store import Store, scanner
from rmqinspect.store.walk.resync import walk_with_resync
from support.recover_fixtures import build_store

pytestmark = pytest.mark.skipif(not scanner.compiled_built(), reason="compiled scanner not built")


def _reports(root):
    rep = verify(Store.open(root), ALL_CHECKS)
    plan = plan_recovery(Store.open(root), RecoveryOptions(BrokerVersion.parse("4.9.8"), force_mode="abnormal"))
    walk = [x.to_dict() if hasattr(x, "to_dict") else (x.kind, x.offset, x.size, x.body_pos, x.crc_ok, x.header)
            for x in walk_with_resync(Store.open(root))]
    return ([p.to_dict() for p in rep.problems], rep.to_dict(), plan.to_dict(with_redispatch=True),
            plan.salvage.to_dict(), walk)


def _both(root, monkeypatch):
    with scanner.selected(True):
        fast = _reports(root)
    with scanner.selected(False):
        slow = _reports(root)
    assert fast == slow
    return fast


def test_bulk_equals_per_record_on_damage(tmp_path, monkeypatch):
    fx = build_store(tmp_path / "s")
    a = fx.records[10]
    b = next(r for r in fx.records[12:] if r.size == a.size and fx.file_of(r.offset) == fx.file_of(a.offset))
    raw = open(os.path.join(fx.commitlog, fx.file_of(a.offset)), "rb").read()
    fx.patch(b.offset, raw[a.offset % fx.file_size:a.end % fx.file_size or fx.file_size])  # stale copy
    fx.patch(fx.records[100].offset + 95, b"\xff")  # body CRC
    base = int(fx.file_names()[-2])
    fx.zero(base + 4096, base + 8192)  # lost page
    problems, *_ = _both(fx.root, monkeypatch)
    kinds = {p["kind"] for p in problems}
    assert {"stale_data", "crc_mismatch", "zero_page", "cq_points_to_damage"} <= kinds


def test_topic_ids_in_first_appearance_order(tmp_path, monkeypatch):
    """Topics with zero bytes, non-ASCII text, a V2 record with a 300-character topic, and one queue on disk
    (so the CQ checks run): the CQ-behind report order (by topic id, assigned in first-appearance order)
    and the topic names in the wrong-queue reasons match the per-record walk."""
    import struct

    d = tmp_path / "s"
    topics = ["Z\x00a", "A", "\u00e9t\u00e9", "\u00e9", "T" * 300, "A\x00", "\U0001f600"]
    with CommitLogWriter(str(d / "commitlog"), 1 << 16) as w:
        res = [w.append(MessageSpec(topic=topics[(i * 5) % len(topics)], queue_id=i % 2, body=b"x" * i,
                                    properties=encode_properties({"KEYS": f"k{i}"}),
                                    store_timestamp=1795000000000 + i)) for i in range(70)]
    q = d / "consumequeue" / "A" / "0"
    q.mkdir(parents=True)
    # entry 0 of A/0 points at record 0 (topic "Z\x00a"): a wrong-queue entry
    (q / ("%020d" % 0)).write_bytes(struct.pack(">qiq", 0, res[0].total_size, 0))
    problems, rep, *_ = _both(d, monkeypatch)
    behind = [p for p in problems if p["kind"] == "cq_behind"]
    assert len(behind) == 2 * len(topics) and sum(p["count"] for p in behind) == 69
    assert [p["file"] for p in behind][:2] == ["consumequeue/Z\x00a/0", "consumequeue/Z\x00a/1"]
    wrong = [p for p in problems if p["kind"] == "cq_wrong_queue"]
    assert len(wrong) == 1 and "is Z\x00a/0" in wrong[0]["reason"]
