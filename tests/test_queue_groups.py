"""rebuild's grouping of a run's records by (topic, queue) - a linear radix sort of a 16-bit key when the run's
topic and queue ids are small, the 64-bit sort otherwise - gives exactly the groups of np.unique: members in run
order, groups in order of first appearance; hostile queue ids (negative, huge) included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.dispatcher import queue_groups


def _reference(tid, qid):
    key = (tid.astype(np.int64) << 32) | (qid.astype(np.int64) & 0xFFFFFFFF)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return [np.flatnonzero(inv == g).tolist() for g in np.argsort(first, kind="stable").tolist()]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.one_of(st.integers(0, 40), st.integers(-2**31, 2**31 - 1))),
                max_size=400))
def test_groups_equal_the_unique_based_grouping(pairs):
    tid = np.array([p[0] for p in pairs], dtype=np.int64)
    qid = np.array([p[1] for p in pairs], dtype=np.int64)
    order, bounds, groups = queue_groups(tid, qid)
    got = [order[bounds[g]:bounds[g + 1]].tolist() for g in groups]
    assert got == _reference(tid, qid)
