"""The compiled one-pass summaries of a run of records (``_fastscan.run_stats``, ``_fastscan.trailer_rows``) give
what the numpy rules they replace give: the first record whose stored PHYSICALOFFSET is not where it lies, the
smallest and largest store time, the records' bytes, and the records carrying a __CRC32# trailer. Checked on every
run of every oracle store (5.2.0+ stores carry the trailer on every record, older ones on none) and on runs doctored
with stale offsets and extreme store times."""

from __future__ import annotations

import numpy as np
import pytest

from rmqinspect.formats.properties import CRC32_TRAILER_PREFIX, TRAILER_AT, crc32_trailer_rows
from rmqinspect.store import Store, scanner
from rmqinspect.store.walk.records import RecordRun
from rmqinspect.store.walk.resync import run_stats
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle

ext = scanner.compiled()
pytestmark = pytest.mark.skipif(ext is None or not hasattr(ext, "run_stats"), reason="compiled scanner not built")


def _numpy_stats(run: RecordRun, base: int) -> tuple[int, int, int, int]:
    with scanner.selected(False):  # run_stats' numpy rules
        return run_stats(run, base)


def _runs(root):
    with Store.open(root) as st:
        for ev in st.commitlog.walk(check_crc=False):
            if type(ev) is RecordRun:
                yield ev


def _same(run: RecordRun, base: int) -> None:
    assert ext.run_stats(run.rows, base) == _numpy_stats(run, base)
    u8 = np.frombuffer(run.file.buffer, dtype=np.uint8)
    r = run.records
    got = np.frombuffer(ext.trailer_rows(run.rows, run.file.buffer, CRC32_TRAILER_PREFIX, TRAILER_AT), np.int64)
    assert got.tolist() == crc32_trailer_rows(u8, r["position"] + r["total_size"]).tolist()


@pytest.mark.parametrize("name", [n for n in ALL_SCENARIOS if "dledger" not in n])
def test_compiled_run_summaries_equal_the_numpy_rules_on_every_oracle_run(name):
    seen = 0
    for run in _runs(require_oracle(name) / "store"):
        _same(run, run.file.start)
        seen += len(run)
    assert seen > 0


def test_the_trailer_rows_are_the_records_written_with_one(tmp_path):
    """A writer-made log where every third record carries __CRC32# (5.2.0+ enabledAppendPropCRC): exactly those."""
    from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec

    with CommitLogWriter(str(tmp_path / "store" / "commitlog"), 1 << 20) as w:
        for i in range(300):
            w.append(MessageSpec("T", i % 4, body=b"x" * (i % 50), append_property_crc=i % 3 == 0))
    runs = list(_runs(tmp_path / "store"))
    got = []
    for r in runs:
        _same(r, r.file.start)
        got += np.frombuffer(ext.trailer_rows(r.rows, r.file.buffer, CRC32_TRAILER_PREFIX, TRAILER_AT),
                             np.int64).tolist()
    assert len(runs) == 1 and got == list(range(0, 300, 3))


@pytest.mark.parametrize("k", [0, 1, 7, -1])
def test_the_first_stale_record_and_extreme_store_times(k):
    run = next(_runs(SAMPLE_STORE))
    recs = run.records.copy()
    n = len(recs)
    assert n > 8
    recs["physical_offset_field"][k] += 1  # this record claims another offset
    recs["physical_offset_field"][n - 1] -= 5  # and a later one (only the first counts)
    recs["store_timestamp"][2] = -(1 << 63)
    recs["store_timestamp"][3] = (1 << 63) - 1
    doctored = RecordRun(run.file, recs)
    got = ext.run_stats(doctored.rows, run.file.start)
    assert got == _numpy_stats(doctored, run.file.start)
    assert got[0] == (k if k >= 0 else n - 1) and got[1:3] == (-(1 << 63), (1 << 63) - 1)


def test_an_empty_run():
    run = next(_runs(SAMPLE_STORE))
    empty = RecordRun(run.file, run.records[:0].copy())
    assert ext.run_stats(empty.rows, 0) == _numpy_stats(empty, 0) == (-1, 0, 0, 0)
    assert ext.trailer_rows(empty.rows, run.file.buffer, CRC32_TRAILER_PREFIX, TRAILER_AT) == b""
