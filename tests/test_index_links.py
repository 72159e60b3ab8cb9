"""The index files' hash-slot chains computed where the puts are made (``slot_links``, in the parallel rebuild's
workers) and applied by ``IndexFileSet.put_linked`` give byte for byte the files that putting one key at a time
gives (``put_batch`` of single puts: IndexFile.putKey's order), whatever the batch boundaries, with few slots (long
chains, collisions) and small files (rolls inside a batch), for 4.9/5.x and for 4.4.0's hashSlotCount rule."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.sinks.indexfile import IndexFileSet, slot_links


def _files(d: str) -> dict[str, bytes]:
    out = {}
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as f:
            out[n] = f.read()
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(2, 40), st.lists(st.integers(0, 2**31 - 1), min_size=0, max_size=300),
       st.lists(st.integers(1, 50), min_size=1, max_size=20), st.booleans(), st.integers(-3000, 3000))
def test_linked_batches_equal_one_put_at_a_time(tmp_path_factory, slots, max_items, hashes, cuts, every, ts_step):
    h = np.array(hashes, dtype=np.int64)
    n = len(h)
    p = np.arange(n, dtype=np.int64) * 97 + 13
    t = 1_700_000_000_000 + np.arange(n, dtype=np.int64) * ts_step  # store times may run backwards
    one_dir, linked_dir = (str(tmp_path_factory.mktemp(x)) for x in ("one", "linked"))
    one = IndexFileSet(one_dir, slots, max_items, count_every_put=every)
    for i in range(n):
        one.put_batch(h[i:i + 1], p[i:i + 1], t[i:i + 1])
    one.close(None)
    linked = IndexFileSet(linked_dir, slots, max_items, count_every_put=every)
    i = k = 0
    while i < n:
        j = min(n, i + cuts[k % len(cuts)])
        k += 1
        linked.put_linked(h[i:j].astype(np.int32), p[i:j], t[i:j], *slot_links(h[i:j], slots))
        i = j
    linked.close(None)
    assert linked.puts == one.puts == n
    assert linked.headers == one.headers
    assert _files(linked_dir) == _files(one_dir)
