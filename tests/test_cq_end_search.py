"""The end-of-queue search (store.consumequeue.first_invalid_entry, first_failing) tests blocks that double in
size instead of every slot; it must find the entry the whole-array rule finds, wherever it lies and whatever
follows it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.formats.consumequeue import CQ_DTYPE
from rmqinspect.store.consumequeue import FIRST_BLOCK, first_invalid_entry


def _reference(arr: np.ndarray, before: int | None) -> int:
    bad = (arr["physical_offset"] < 0) | (arr["size"] <= 0)
    if before is not None:
        bad |= arr["physical_offset"] >= before
    hit = np.flatnonzero(bad)
    return int(hit[0]) if hit.size else len(arr)


@settings(max_examples=300, deadline=None)
@given(n=st.sampled_from([0, 1, 2, FIRST_BLOCK - 1, FIRST_BLOCK, FIRST_BLOCK + 1, 3 * FIRST_BLOCK + 5, 40_000]),
       valid=st.floats(0, 1), holes=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(["neg", "zero", "far"])),
                                             max_size=4),
       before=st.one_of(st.none(), st.integers(0, 1 << 40)))
def test_first_invalid_entry_is_the_whole_array_rule(n, valid, holes, before):
    arr = np.zeros(n, dtype=CQ_DTYPE)
    k = int(valid * n)
    arr["physical_offset"][:k] = np.arange(k, dtype=np.int64) * 1000
    arr["size"][:k] = 1000
    for where, kind in holes:
        if n:
            i = min(int(where * n), n - 1)
            arr["physical_offset"][i] = {"neg": -1, "zero": 5, "far": 1 << 41}[kind]
            arr["size"][i] = 0 if kind == "zero" else 7
    assert first_invalid_entry(arr, before) == _reference(arr, before)
