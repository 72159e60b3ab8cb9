"""The report's traffic cells are held as sorted arrays (24 bytes a cell) instead of a dict of lists: after every
run they hold the same cells, count the same number of distinct keys (so the coarsening happens after the same run)
and coarsen to the same cells as the dict did, on random runs with negative store times and many topics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.report_data import TrafficCells


def _dict_add(cells, uniq, counts, sums):
    for k, c, b in zip(uniq.tolist(), counts.tolist(), sums.tolist()):
        cell = cells.get(k)
        if cell is None:
            cells[k] = [c, int(b)]
        else:
            cell[0] += c
            cell[1] += int(b)


def _dict_coarsen(cells, unit, new_unit):
    out = {}
    factor = new_unit // unit
    mask = (1 << 20) - 1
    for k, (c, b) in cells.items():
        nk = (((k >> 20) // factor) << 20) | (k & mask)
        cell = out.get(nk)
        if cell is None:
            out[nk] = [c, b]
        else:
            cell[0] += c
            cell[1] += b
    return out, new_unit


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cells_equal_the_dict_of_lists(seed, monkeypatch):
    monkeypatch.setattr(TrafficCells, "_MERGE", 50)  # the arrays and the dict both in play
    rng = np.random.default_rng(seed)
    limit = 3000
    ref: dict[int, list[int]] = {}
    got = TrafficCells()
    unit_ref = unit_got = 1000
    coarsened = 0
    t = int(rng.integers(-5_000_000, 5_000_000))
    for _ in range(300):
        n = int(rng.integers(1, 400))
        ts = t + np.cumsum(rng.integers(0, 40, n))
        t = int(ts[-1])
        if rng.random() < 0.1:
            ts = ts - int(rng.integers(0, 10_000_000))  # records out of time order
        tids = rng.integers(0, 30, n)
        size = rng.integers(100, 5000, n).astype(np.int64)
        key = ((ts // unit_ref) << 20) | tids
        uniq, inv = np.unique(key, return_inverse=True)
        counts = np.bincount(inv.ravel(), minlength=len(uniq))
        sums = np.bincount(inv.ravel(), weights=size, minlength=len(uniq))
        _dict_add(ref, uniq, counts, sums)
        got.add(uniq, counts, sums)
        assert len(got) == len(ref)
        if len(ref) > limit:
            ref, unit_ref = _dict_coarsen(ref, unit_ref, unit_ref * 60)
            unit_got = got.coarsen(unit_got, unit_got * 60)
            coarsened += 1
        assert unit_got == unit_ref
    keys, vals = got.arrays()
    want = sorted(ref.items())
    assert keys.tolist() == [k for k, _ in want]
    assert vals.tolist() == [v for _, v in want]
    assert coarsened >= 1


def _cells_by_sort(ts, tids, size, unit):
    """run_cells' definition: the distinct keys sorted, messages and bytes of each (np.unique)."""
    uniq, inv = np.unique(((ts // unit) << 20) | tids, return_inverse=True)
    return uniq, np.bincount(inv.ravel(), minlength=len(uniq)), np.bincount(inv.ravel(), weights=size,
                                                                            minlength=len(uniq))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_run_cells_on_the_grid_equal_the_sorted_keys(data):
    """A run's cells counted on the (time unit, topic) grid equal those of the sort, keys, dtypes and bytes, both
    where the grid is used (a run within seconds) and where it is not (a wide span, an outlier years away,
    negative times, topic ids up to 2^20)."""
    from rmqinspect.analyses.report_data import run_cells

    n = data.draw(st.integers(1, 400))
    unit = data.draw(st.sampled_from([1, 1_000, 60_000]))
    t0 = data.draw(st.integers(-(1 << 40), 1 << 41))
    spread = data.draw(st.sampled_from([0, 5, 3_000, 10_000_000, 1 << 50]))
    ts = np.array(data.draw(st.lists(st.integers(t0, t0 + spread), min_size=n, max_size=n)), dtype=np.int64)
    top = data.draw(st.sampled_from([1, 8, 300, 1 << 20]))
    tid_dtype = data.draw(st.sampled_from([np.int64, np.int32]))
    tids = np.array(data.draw(st.lists(st.integers(0, top - 1), min_size=n, max_size=n)), dtype=tid_dtype)
    size = np.array(data.draw(st.lists(st.integers(1, 1 << 22), min_size=n, max_size=n)), dtype=np.int64)
    got, want = run_cells(ts, tids, size, unit), _cells_by_sort(ts, tids, size, unit)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        assert np.array_equal(g, w)


def test_run_cells_of_the_bench_shaped_run_take_the_grid(monkeypatch):
    """A run as a broker writes it (store times increasing over a few seconds, a handful of topics) is counted on
    the grid, and the grid gives the sort's cells: the path the report's walk takes is the one proven above."""
    from rmqinspect.analyses import report_data

    rng = np.random.default_rng(7)
    ts = np.sort(1_700_000_000_000 + rng.integers(0, 4_000, 50_000)).astype(np.int64)
    tids = rng.integers(0, 6, 50_000).astype(np.int64)
    size = rng.integers(200, 4_000, 50_000).astype(np.int64)
    real_unique = np.unique
    calls = []
    monkeypatch.setattr(report_data.np, "unique", lambda *a, **k: calls.append(1) or real_unique(*a, **k))
    got = report_data.run_cells(ts, tids, size, 1_000)
    monkeypatch.undo()
    assert not calls
    for g, w in zip(got, _cells_by_sort(ts, tids, size, 1_000), strict=True):
        assert np.array_equal(g, w)
