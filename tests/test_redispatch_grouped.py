"""RecordBatch.dispatch_to_queues (queues grouped by queue_groups, a ConsumeQueue whose records all end at or
below its maxPhysicOffset skipped before its columns are gathered, the others from their first new record on)
has the effect of record-by-record ``ConsumeQueueModel.dispatch``: the same queue files, maxPhysicOffset, notes,
re-dispatch counts and queues created in the same order, on a crashed fixture store whose queues are cut back
by different amounts and on the oracle stores."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.recovery import BrokerVersion
from rmqinspect.analyses.recovery.queues import ConsumeQueueModel
from rmqinspect.analyses.recovery.redispatch import GOES_TO_CONSUME_QUEUE, RecordBatch, has_crc32_property
from rmqinspect.store import Store
from rmqinspect.store.consumequeue import ConsumeQueue, list_queues
from rmqinspect.store.walk.records import RecordRun
from support import ALL_SCENARIOS, require_oracle
from support.recover_fixtures import build_store

VERSION = BrokerVersion.parse("4.9.8")


class Queues:
    """findConsumeQueue over the store's queues (those in ``present``, each cut back to ``cut[key]`` by
    truncateDirtyLogicFiles); a queue not there is created empty on first use. ``created`` keeps the order."""

    def __init__(self, root: str, present: set[str], cut: dict[str, int]):
        self.root = root
        self.models: dict[str, ConsumeQueueModel] = {}
        for q in list_queues(os.path.join(root, "consumequeue")):
            key = f"{q.topic}/{q.queue_id}"
            if key in present:
                cq = ConsumeQueue(q.topic, q.queue_id, q.path)
                m = ConsumeQueueModel(cq, VERSION, cq.file_size or 400)
                m.recover()
                if key in cut:
                    m.truncate_dirty(cut[key])
                self.models[key] = m
        self.created: list[str] = []

    def queue(self, topic: str, queue_id: int) -> ConsumeQueueModel:
        key = f"{topic}/{queue_id}"
        m = self.models.get(key)
        if m is None:
            d = os.path.join(self.root, "consumequeue", "-absent-", topic, str(queue_id))
            m = self.models[key] = ConsumeQueueModel(ConsumeQueue(topic, queue_id, d), VERSION, 400)
            self.created.append(key)
        return m

    def state(self) -> dict:
        return {"created": self.created,
                "queues": {k: (m.files(), m.max_phys, m.max_offset(), m.rec.notes, m.rec.redispatched)
                           for k, m in self.models.items()}}


def runs(root: str) -> list[RecordRun]:
    cl = Store.open(root).commitlog
    return [ev for ev in cl.walk(check_crc=False, run_records=97) if type(ev) is RecordRun]


def one_by_one(q: Queues, b: RecordBatch, idx: np.ndarray, base: int, count: bool) -> None:
    """DefaultMessageStore.doDispatch record by record (the definition dispatch_to_queues must equal)."""
    r = b.records
    for j in idx.tolist():
        if not GOES_TO_CONSUME_QUEUE[int(r["sys_flag"][j]) & 0xF]:
            continue
        st = q.queue(b.topics[int(b.tid[j])], int(r["queue_id"][j]))
        n = st.dispatch(int(r["position"][j]) + base, int(r["total_size"][j]), int(r["queue_offset"][j]),
                        int(b.codes[j]))
        if count:
            st.rec.redispatched += n


def both_ways(root: str, present: set[str], cut: dict[str, int], pick, count: bool, tags: bool) -> tuple:
    grouped, reference = Queues(root, present, cut), Queues(root, present, cut)
    names: dict[bytes, str] = {}
    for run in runs(root):
        b = RecordBatch(run, names, tags)
        idx = pick(len(run.records))
        b.dispatch_to_queues(idx, run.base, grouped.queue, count)
        one_by_one(reference, b, idx, run.base, count)
    return grouped.state(), reference.state()


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    fx = build_store(tmp_path_factory.mktemp("crashed") / "s", n=400)
    fx.write_consume_queues(fx.records[:200])  # the queues are behind the commit log
    return fx


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(present=st.sets(st.sampled_from(["OrderTopic/0", "OrderTopic/1", "PayTopic/0"])),
       cuts=st.dictionaries(st.sampled_from(["OrderTopic/0", "OrderTopic/1", "PayTopic/0"]),
                            st.integers(0, 400)),
       keep=st.floats(0.0, 1.0), seed=st.integers(0, 2**16), count=st.booleans(), tags=st.booleans())
def test_grouped_dispatch_equals_record_by_record(crashed, present, cuts, keep, seed, count, tags):
    rng = np.random.default_rng(seed)
    cut = {k: crashed.records[i].offset for k, i in cuts.items() if i < len(crashed.records)}

    def pick(n):
        return np.flatnonzero(rng.random(n) < keep)

    grouped, reference = both_ways(crashed.root, present, cut, pick, count, tags)
    assert grouped == reference


def test_crashed_store_skips_the_queues_that_hold_every_record(crashed):
    """The case the shortcut is for: queues holding the first 200 records, every record re-dispatched."""
    keys = {"OrderTopic/0", "OrderTopic/1", "PayTopic/0"}
    grouped, reference = both_ways(crashed.root, keys, {}, np.arange, True, True)
    assert grouped == reference
    assert sum(q[4] for q in reference["queues"].values()) == 200  # only the records past the queues' ends


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_stores_grouped_dispatch_equals_record_by_record(scenario):
    root = str(require_oracle(scenario) / "store")
    cq = os.path.join(root, "consumequeue")
    keys = {f"{q.topic}/{q.queue_id}" for q in list_queues(cq)}
    if not keys:
        pytest.skip("no file consume queues")
    ends = [int(r["position"][-1]) + run.base for run in runs(root) for r in [run.records]]
    cut = {k: ends[len(ends) // 2] for k in sorted(keys)[::2]}  # half the queues cut back to the middle
    present = set(sorted(keys)[1:])  # one queue missing: created by the dispatch
    grouped, reference = both_ways(root, present, cut, np.arange, True, True)
    assert grouped == reference
    assert any(q[4] for q in reference["queues"].values())


@pytest.mark.parametrize("crc_at", [None, 0, 37, 59])
def test_crc32_property_candidates_compiled_equal_numpy(tmp_path, crc_at):
    """has_crc32_property takes its trailer candidates from the compiled trailer_rows or from numpy: same answer,
    on every run of a store with the property on one record (or none) and on every oracle store."""
    from rmqinspect.store.scanner import selected
    from support.msgstores import write_crc_property_log

    root = tmp_path / "s"
    write_crc_property_log(root, crc_at)
    stores = [str(root)] + [str(require_oracle(s) / "store") for s in ALL_SCENARIOS if crc_at is None]
    seen = []
    for path in stores:
        for run in runs(path):
            for recs in (run.records, run.records[1::3]):
                fast = has_crc32_property(run.file.buffer, recs)
                with selected(False):
                    assert has_crc32_property(run.file.buffer, recs) == fast
                seen.append(fast)
    if crc_at is not None:
        assert any(seen)  # at least the run holding the record
