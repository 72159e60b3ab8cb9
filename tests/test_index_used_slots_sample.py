"""The geometry proof's sample of used hash slots, found a chunk at a time, is exactly the even thinning of the
whole table's non-zero slots it replaced (every ``used // sample``-th), whatever the fill and the table size."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.store.indexfile import used_slots_sample


def thinned_whole_table(table: np.ndarray, sample: int) -> np.ndarray:
    nz = np.flatnonzero(table)
    return nz[::nz.size // sample] if nz.size > sample else nz


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 1_200_000), fill=st.floats(0, 1), sample=st.integers(1, 5000), seed=st.integers(0, 99))
def test_chunked_sample_equals_whole_table_thinning(size, fill, sample, seed):
    table = (np.random.default_rng(seed).random(size) < fill).astype(">i4") * 3
    assert np.array_equal(used_slots_sample(table, sample), thinned_whole_table(table, sample))


def test_full_default_table_sample_is_the_whole_table_thinning():
    # a 5 M-slot table with every slot used: many chunks, each starting mid-stride
    table = np.ones(5_000_000, dtype=">i4")
    assert np.array_equal(used_slots_sample(table, 4096), thinned_whole_table(table, 4096))
