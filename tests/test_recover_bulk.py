"""The bulk re-dispatch paths of `recover --dry-run` against their record-by-record references:
``CommitLog.walk``'s record runs (what the recovery dispatches) hold exactly ``CommitLog.scan``'s MESSAGE records, and
``ConsumeQueueModel.dispatch_many`` leaves a queue exactly as calling ``dispatch`` (putMessagePositionInfo)
once per record does, including the cases where entries are refused or appended out of order."""

import os

import numpy as np
import pytest

from rmqinspect.analyses.recovery import BrokerVersion, ConsumeQueueModel, RecoveryOptions, plan_recovery
from rmqinspect.formats.consumequeue import CQ_STORE_UNIT_SIZE
from rmqinspect.store import Store
from rmqinspect.store.consumequeue import ConsumeQueue
from rmqinspect.store.walk.kinds import MESSAGE
from rmqinspect.store.walk.records import RecordRun
from support import require_oracle
from support.recover_fixtures import build_store


def _messages_by_scan(cl, start, end, **kw):
    return [(s.offset, s.size) for s in cl.scan(start, end, **kw) if s.kind == MESSAGE]


def _messages_by_runs(cl, start, end, **kw):
    out = []
    for ev in cl.walk(start, end, **kw):
        if type(ev) is RecordRun:
            out.extend(zip((ev.records["position"] + ev.base).tolist(), ev.records["total_size"].tolist()))
    return out


def _damaged(tmp_path):
    fx = build_store(tmp_path / "s")
    names = fx.file_names()
    os.remove(os.path.join(fx.commitlog, names[2]))  # missing middle file
    mid = fx.records[20]
    fx.patch(mid.offset + 40, b"\xff\xff")  # body CRC mismatch
    last = fx.records[-2]
    fx.zero(last.offset + last.size // 2, last.end)  # torn tail
    return fx


@pytest.mark.parametrize("check_crc", [True, False])
@pytest.mark.parametrize("stop_at_end", [True, False])
def test_walk_runs_equal_commitlog_scan(tmp_path, check_crc, stop_at_end):
    fx = _damaged(tmp_path)
    cl = Store.open(fx.root).commitlog
    recs = fx.records
    for start, end in ((None, None), (recs[5].offset, None), (recs[30].offset, recs[200].offset),
                       (recs[100].offset, recs[100].end), (recs[-1].end + 10, None)):
        kw = dict(check_crc=check_crc, stop_at_end=stop_at_end)
        want = _messages_by_scan(cl, start, end, **kw)
        assert _messages_by_runs(cl, start, end, **kw) == want, (start, end)
    assert want == [] and len(_messages_by_scan(cl, None, None, check_crc=False, stop_at_end=False)) > 150


def test_walk_runs_on_oracle_stores():
    for name in ("rocketmq-all-4.9.8/crash-torn-tail", "rocketmq-all-5.3.3/clean"):
        cl = Store.open(require_oracle(name) / "store").commitlog
        want = _messages_by_scan(cl, None, None, check_crc=False)
        assert len(want) > 300
        assert _messages_by_runs(cl, None, None, check_crc=False) == want


def _state(tmp_path, fx, topic="OrderTopic", qid=0):
    cq = ConsumeQueue(topic, qid, os.path.join(fx.root, "consumequeue", topic, str(qid)), fx.cq_file_size)
    st = ConsumeQueueModel(cq, BrokerVersion.parse("5.3.3"), fx.cq_file_size)
    st.recover()
    return st


def _snapshot(st):
    return ({st.names[s]: st.arrays[s][: st.wrote[s] // CQ_STORE_UNIT_SIZE].tobytes() for s in st.starts},
            st.max_phys, st.rec.notes, st.max_offset())


@pytest.mark.parametrize("case", ["append", "overlap", "gap", "zero", "fresh", "shuffled", "held_twice"])
def test_dispatch_many_equals_dispatch(tmp_path, case):
    fx = build_store(tmp_path / "s")
    rs = [r for r in fx.records if (r.topic, r.queue_id) == ("OrderTopic", 0)]
    if case == "fresh":
        import shutil

        shutil.rmtree(os.path.join(fx.root, "consumequeue"))
    else:
        fx.write_consume_queues([r for r in fx.records if r.queue_offset < 30])  # the queue is behind
    phys = np.array([r.offset for r in rs], dtype=np.int64)
    size = np.array([r.size for r in rs], dtype=np.int64)
    qoff = np.array([r.queue_offset for r in rs], dtype=np.int64)
    codes = np.arange(len(rs), dtype=np.int64) * 7 - 3
    if case == "overlap":
        sel = np.r_[20:40, 35:60, 10:15, 60:len(rs)]  # already-built and repeated entries
    elif case == "gap":
        sel = np.r_[25:40, 45:len(rs)]  # queue offsets jump: "logic queue order maybe wrong"
    elif case == "zero":
        qoff = qoff.copy()
        qoff[50] = 0  # cq offset 0 bypasses the order check
        sel = np.arange(len(rs))
    elif case == "held_twice":
        sel = np.r_[0:30, 0:30, 5:len(rs)]  # stretches the queue already holds (skipped in one step each)
    elif case == "shuffled":
        sel = np.random.default_rng(7).permutation(len(rs))
    else:
        sel = np.arange(len(rs))
    one, many = _state(tmp_path, fx), _state(tmp_path, fx)
    n_one = sum(one.dispatch(int(a), int(b), int(c), int(d)) for a, b, c, d in
                zip(phys[sel], size[sel], qoff[sel], codes[sel]))
    n_many = many.dispatch_many(phys[sel], size[sel], qoff[sel], codes[sel])
    assert n_many == n_one and n_one > 0
    assert _snapshot(many) == _snapshot(one)


@pytest.mark.parametrize("crc_at", [None, 0, 37])
def test_crc32_property_note(tmp_path, crc_at):
    """A record with the 5.2.0+ __CRC32# trailer among the re-dispatched ones makes the plan note that the
    store was written by 5.2.0+ when 4.x rules are applied (one such record is enough; none, no note)."""
    from support.msgstores import write_crc_property_log

    root = tmp_path / "s"
    write_crc_property_log(root, crc_at)
    (root / "abort").write_bytes(b"")
    plan = plan_recovery(Store.open(str(root)), RecoveryOptions(version=BrokerVersion.parse("4.9.8")))
    assert plan.mode == "abnormal" and plan.redispatch_count == 60
    noted = any("__CRC32#" in n for n in plan.notes)
    assert noted == (crc_at is not None)
