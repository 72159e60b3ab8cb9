"""The end-of-queue search of ConsumeQueue.recover and truncateDirtyLogicFiles (``first_invalid_entry``) gives the
same index from the compiled scanner's one pass (``first_invalid_cq_entry``) as from the numpy definition: on
generated entries with negative offsets, zero and negative sizes, a ``before`` bound and non-contiguous views, and on
every file of the oracle stores' consume queues, with bounds at, inside and past their entries."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.formats.consumequeue import CQ_ENTRY_TABLE
from rmqinspect.store.consumequeue import ConsumeQueue, first_invalid_entry, list_queues
from rmqinspect.store.scanner import compiled, selected
from support import ALL_SCENARIOS, require_oracle

EXT = compiled()
pytestmark = pytest.mark.skipif(EXT is None or not hasattr(EXT, "first_invalid_cq_entry"),
                                reason="the compiled scanner is not built")


def _both(arr: np.ndarray, before: int | None) -> tuple[int, int]:
    fast = first_invalid_entry(arr, before)
    with selected(False):
        slow = first_invalid_entry(arr, before)
    return fast, slow


entry = st.tuples(st.one_of(st.integers(-3, 5000), st.integers(-2**63, 2**63 - 1)),
                  st.one_of(st.integers(-2, 300), st.integers(-2**31, 2**31 - 1)), st.integers(-2**63, 2**63 - 1))


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(entry, max_size=60), before=st.one_of(st.none(), st.integers(-5, 6000)),
       valid_head=st.integers(0, 9000), start=st.integers(0, 3))
def test_compiled_end_of_queue_equals_numpy(entries, before, valid_head, start):
    head = [(i * 100, 100, i) for i in range(valid_head)]  # long valid stretches cross numpy's doubling blocks
    arr = np.array(head + entries, dtype=CQ_ENTRY_TABLE.dtype)[start:]
    fast, slow = _both(arr, before)
    assert fast == slow
    strided = arr[::2]  # not contiguous: the numpy path, same answer
    assert first_invalid_entry(strided, before) == _both(strided, before)[1]


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_queue_files_end_of_queue(scenario):
    root = require_oracle(scenario) / "store"
    seen = 0
    for q in list_queues(os.path.join(root, "consumequeue")):
        cq = ConsumeQueue(q.topic, q.queue_id, q.path)
        for f in cq.files:
            arr = cq.file_entries(f)
            n = _both(arr, None)
            assert n[0] == n[1]
            offs = arr["physical_offset"][: n[0]]
            for before in ([int(offs[0]), int(offs[len(offs) // 2]), int(offs[-1]) + 1] if len(offs) else [0]):
                fast, slow = _both(arr[1:], before)
                assert fast == slow
            seen += n[0]
    if not seen:
        pytest.skip("no file consume queue entries")
