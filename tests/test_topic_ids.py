"""``rows.topic_ids`` numbers a run's topics in order of first appearance: the compiled scanner's one-pass table
(``intern_topics``) gives the same ids and the same topic dict as the numpy path, on every oracle store's runs and
on a writer-made run with the topics that stress the numpy path (many topics, topics longer than its fixed-width
limit, equal prefixes, a topic of NUL bytes, bytes that are not UTF-8 and decode alike), and rows the scanner did
not make are refused."""

from __future__ import annotations

import numpy as np
import pytest

from rmqinspect.analyses import rows as rows_module
from rmqinspect.analyses.rows import topic_ids
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.store import Store
from rmqinspect.store.scanner import compiled
from rmqinspect.store.walk.records import RecordRun
from rmqinspect.store.walk.resync import walk_batches
from support import ALL_SCENARIOS, require_oracle, tree_hashes

pytestmark = pytest.mark.skipif(compiled() is None, reason="the compiled scanner is not built")


def _both(run: RecordRun, monkeypatch) -> tuple[np.ndarray, dict]:
    u8 = np.frombuffer(run.file.buffer, dtype=np.uint8)
    fast_topics: dict[str, int] = {"Existing": 0}
    fast = topic_ids(u8, run.rows, fast_topics)
    # the named records (RECORD_DTYPE), whole and as the non-contiguous subset a caller selects
    for records in (run.records, run.records[::2]):
        named: dict[str, int] = {"Existing": 0}
        got = topic_ids(u8, records, named)
        with monkeypatch.context() as m:
            m.setattr(rows_module, "compiled", lambda: None)
            ref_named: dict[str, int] = {"Existing": 0}
            assert np.array_equal(got, topic_ids(u8, records, ref_named))
        assert list(named.items()) == list(ref_named.items())
    with monkeypatch.context() as m:
        m.setattr(rows_module, "compiled", lambda: None)
        ref_topics: dict[str, int] = {"Existing": 0}
        ref = topic_ids(u8, run.rows, ref_topics)
    assert fast.dtype == ref.dtype == np.int64
    assert np.array_equal(fast, ref)
    assert list(fast_topics.items()) == list(ref_topics.items())
    return fast, fast_topics


def _runs(root) -> list[RecordRun]:
    with Store.open(str(root)) as st:
        return [ev for ev in walk_batches(st.commitlog) if type(ev) is RecordRun]


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_runs_topic_ids_compiled_equal_numpy(scenario, monkeypatch):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    with Store.open(str(root)) as st:
        runs = [ev for ev in walk_batches(st.commitlog) if type(ev) is RecordRun]
        assert runs
        for run in runs:
            _both(run, monkeypatch)
    assert tree_hashes(root) == before


def test_hard_topics_compiled_equal_numpy(tmp_path, monkeypatch):
    topics = ([f"T{i}" for i in range(300)] + ["L" * 300, "L" * 299 + "M", "L" * 300 + "x", "\0\0\0", "Ab", "A"]
              + ["badA", "badB", "bad\ufffd"])
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(topics), 3000).tolist()
    with CommitLogWriter(str(tmp_path / "commitlog"), 1 << 24) as w:
        for i, k in enumerate(picks):
            w.append(MessageSpec(topics[k], i % 4, b"b%d" % i, b"", store_timestamp=1_795_000_000_000 + i,
                                 version=2))
    # topic bytes that are not UTF-8: different bytes, one decoded name (the topic CRC-free: only bodies are summed)
    path = tmp_path / "commitlog" / "00000000000000000000"
    data = path.read_bytes().replace(b"badA", b"bad\xff").replace(b"badB", b"bad\xfe")
    path.write_bytes(data)
    runs = _runs(tmp_path)
    assert sum(len(r.records) for r in runs) == len(picks)
    ids, names = _both(runs[0], monkeypatch)
    assert len(names) > 300 and "bad\ufffd" in names and "badA" not in names
    assert ids[0] == 1  # the dict's existing topic keeps id 0, new ones follow in order of first appearance


def test_rows_outside_the_buffer_are_refused():
    ext = compiled()
    rows = np.zeros((1, 16), dtype=np.int64)
    rows[0, 11], rows[0, 12] = 10, 100
    with pytest.raises(ValueError, match="outside the buffer"):
        ext.intern_topics(b"x" * 50, rows)
