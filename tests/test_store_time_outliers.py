"""A STORETIMESTAMP is not covered by the body CRC: a flipped bit there passes the broker's checks and used to
become a loop bound. verify reports it as damage, naming file and position; an undamaged store
(every oracle scenario) reports none."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.verify import verify
from rmqinspect.formats.commitlog import store_timestamp_position
from rmqinspect.store import Store
from rmqinspect.store.walk.records import RecordRun
from support import ALL_SCENARIOS, require_oracle


@pytest.mark.parametrize("name", [n for n in ALL_SCENARIOS if "dledger" not in n])
def test_no_outlier_in_broker_written_stores(name):
    store = require_oracle(name) / "store"
    assert [p for p in verify(Store.open(store), ("structure",)).problems if p.kind == "store_time_outlier"] == []


def _records(root):
    with Store.open(root) as st:
        return [(ev.file.path, ev.file.name, int(p), int(sf)) for ev in st.commitlog.walk(check_crc=False)
                if type(ev) is RecordRun for p, sf in zip(ev.records["position"], ev.records["sys_flag"])]


@pytest.mark.parametrize("bit, kind", [(44, "days from both neighbours"), (50, "outside the calendar"),
                                       (63, "outside the calendar")])
def test_flipped_store_time_is_reported_where_it_is(tmp_path, bit, kind):
    src = require_oracle("rocketmq-all-5.3.3/clean") / "store"
    root = tmp_path / "store"
    shutil.copytree(src, root)
    recs = _records(root)
    path, name, pos, sf = recs[len(recs) // 2]
    at = pos + store_timestamp_position(sf)
    with open(path, "r+b") as f:
        f.seek(at)
        ts = int.from_bytes(f.read(8), "big", signed=True)
        f.seek(at)
        f.write((ts ^ (1 << bit)).to_bytes(8, "big", signed=False if bit == 63 else True))
    probs = [p for p in verify(Store.open(root), ("structure", "crc")).problems]
    assert [(p.kind, p.file, p.position) for p in probs] == [("store_time_outlier", f"commitlog/{name}", pos)]
    assert kind in probs[0].reason


# --- the check split between the workers (each run alone) and the command (across runs) --------------------------

def _reference(runs: list[np.ndarray]) -> list[tuple]:
    """The check as one pass over every record in order, each record against its neighbours in the sequence, in
    Python integers (the command did all of it before the split, in int64 arithmetic that wrapped: -2**63 and 0
    "agreed"): what the split must give, in the same order per run."""
    from rmqinspect.analyses.verify import CALENDAR_MAX_MS, STORE_TIME_JUMP_MS

    out: list[tuple] = []
    carry: list[tuple] = []
    for k, r in enumerate(runs):
        ts = r["store_timestamp"].astype(np.int64)
        recs = [(int(ts[j]), f"f{k}", int(r["position"][j]), int(r["total_size"][j]), k) for j in range(len(r))]
        out += [rec for rec in recs if not 0 <= rec[0] <= CALENDAR_MAX_MS]
        seq = carry + recs
        a = np.array([x[0] for x in seq], dtype=np.int64)
        for i in range(1, len(seq) - 1):  # Python integers: no difference wraps
            far = (abs(int(a[i]) - int(a[i - 1])) > STORE_TIME_JUMP_MS and abs(int(a[i]) - int(a[i + 1])) >
                   STORE_TIME_JUMP_MS and abs(int(a[i + 1]) - int(a[i - 1])) <= STORE_TIME_JUMP_MS)
            if far and 0 <= seq[i][0] <= CALENDAR_MAX_MS:
                out.append(seq[i])
        carry = seq[-2:]
    return out


_TS = st.one_of(st.integers(1_700_000_000_000, 1_700_000_000_000 + 30 * 86_400_000),
                st.sampled_from([0, -1, 1 << 62, -(1 << 63), (1 << 63) - 1, 253_402_300_800_000, (1 << 61) - 1,
                                 1 << 61, -(1 << 61) + 1, -(1 << 61)]))


@settings(max_examples=300, deadline=None)
@given(times=st.lists(_TS, min_size=1, max_size=40), cuts=st.lists(st.integers(1, 6), min_size=1, max_size=40))
def test_the_split_check_is_the_whole_sequences(times, cuts):
    from rmqinspect.analyses.verify import _StoreTimeOutliers, store_time_candidates

    dt = np.dtype([("position", np.int64), ("total_size", np.int64), ("store_timestamp", np.int64)])
    bounds = [0]
    for c in cuts:  # runs of the given lengths, the last one taking what is left
        if bounds[-1] + c >= len(times):
            break
        bounds.append(bounds[-1] + c)
    bounds.append(len(times))
    runs = []
    for a, b in zip(bounds, bounds[1:]):
        r = np.zeros(b - a, dtype=dt)
        r["store_timestamp"] = times[a:b]
        r["position"] = np.arange(a, b) * 100
        r["total_size"] = 100
        runs.append(r)

    class F:
        def __init__(self, k):
            self.name, self.start = f"f{k}", k

    check = _StoreTimeOutliers()
    got = [o[:5] for k, r in enumerate(runs) for o in check.feed(F(k), store_time_candidates(r))]
    assert got == _reference(runs)
