"""The report's traffic cells are held as sorted arrays (24 bytes a cell) instead of a dict of lists: after every
run they hold the same cells, count the same number of distinct keys (so the coarsening happens after the same run)
and coarsen to the same cells as the dict did, on random runs with negative store times and many topics."""

import numpy as np
import pytest

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
