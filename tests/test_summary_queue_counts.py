"""summary's counts of a run come from one compiled pass (``_fastscan.queue_counts``): the same ``RunCounts`` as the
numpy grouping they replace (queues in order of first appearance, messages, bytes, queue-offset bounds over the
records that take a queue position, store-time bounds, V2 and IPv6 counts), on generated runs with negative queue
ids, offsets and store times, PREPARED and ROLLBACK records, and int64 sums that wrap; and on every run of the
oracle stores."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.analyses import summary
from rmqinspect.store import Store
from rmqinspect.store.scanner import compiled
from rmqinspect.store.walk.records import RECORD_DTYPE, RECORD_FIELDS, RecordRun
from rmqinspect.store.walk.resync import walk_batches
from support import ALL_SCENARIOS, require_oracle

EXT = compiled()
pytestmark = pytest.mark.skipif(EXT is None or not hasattr(EXT, "queue_counts"),
                                reason="the compiled scanner is not built")


class _WithoutQueueCounts:
    """The compiled scanner as count_named_run sees it, less queue_counts: the numpy path runs."""

    def __getattr__(self, name):
        if name == "queue_counts":
            raise AttributeError(name)
        return getattr(EXT, name)


def _both(run: RecordRun, tids: np.ndarray, names: list[str]) -> tuple[dict, dict]:
    fast = asdict(summary.count_named_run(run, tids, names))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(summary, "compiled", lambda: _WithoutQueueCounts())
        slow = asdict(summary.count_named_run(run, tids, names))
    return fast, slow


def _int64(lo: int, hi: int):
    return st.integers(lo, hi)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_generated_runs_count_as_numpy_does(data):
    n = data.draw(st.integers(1, 300))
    ntop = data.draw(st.integers(1, 6))
    qids = data.draw(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=1, max_size=5))
    cols = {name: np.zeros(n, dtype=np.int64) for name in RECORD_FIELDS}
    cols["queue_id"] = np.array([data.draw(st.sampled_from(qids)) for _ in range(n)], dtype=np.int64)
    cols["sys_flag"] = np.array(data.draw(st.lists(st.integers(0, 0xFFFF), min_size=n, max_size=n)), dtype=np.int64)
    cols["queue_offset"] = np.array(data.draw(st.lists(_int64(-(1 << 63), (1 << 63) - 1), min_size=n, max_size=n)),
                                    dtype=np.int64)
    cols["store_timestamp"] = np.array(data.draw(st.lists(_int64(-(1 << 62), 1 << 62), min_size=n, max_size=n)),
                                       dtype=np.int64)
    big = data.draw(st.booleans())  # sizes whose sum wraps int64
    cols["total_size"] = np.array(data.draw(st.lists(st.integers(1, (1 << 62) if big else 1 << 22), min_size=n,
                                                     max_size=n)), dtype=np.int64)
    cols["magic_version"] = np.array(data.draw(st.lists(st.sampled_from([1, 2]), min_size=n, max_size=n)),
                                     dtype=np.int64)
    cols["position"] = np.arange(n, dtype=np.int64) * 100
    recs = np.zeros(n, dtype=RECORD_DTYPE)
    for name, col in cols.items():
        recs[name] = col
    tids = np.array(data.draw(st.lists(st.integers(0, ntop - 1), min_size=n, max_size=n)), dtype=np.int64)
    run = RecordRun(SimpleNamespace(buffer=b"\0" * 64, start=1 << 30, name="00000000001073741824"), recs)
    with np.errstate(over="ignore"):
        fast, slow = _both(run, tids, [f"T{i}" for i in range(ntop)])
    assert fast == slow


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_runs_count_as_numpy_does(scenario):
    from rmqinspect.analyses.rows import topic_ids

    runs = 0
    with Store.open(str(require_oracle(scenario) / "store")) as st_:
        for ev in walk_batches(st_.commitlog, None, check_crc=True, accept_v2=True, jobs=1):
            if type(ev) is not RecordRun or not len(ev):
                continue
            topics: dict[str, int] = {}
            tids = topic_ids(np.frombuffer(ev.file.buffer, dtype=np.uint8), ev.rows, topics)
            fast, slow = _both(ev, tids, list(topics))
            assert fast == slow
            assert fast["queues"]
            runs += 1
    assert runs
