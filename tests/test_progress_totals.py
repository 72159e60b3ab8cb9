"""Progress bars tell the truth: the total is the bytes the command reads (commit-log data, consume-queue blocks,
index items), each counted once; the bar moves forward only, after every run of records, and ends at the total.
Checked on the sample store and a writer-made store of several commit-log files whose newest is pre-allocated."""

from __future__ import annotations

import os

import pytest

from rmqinspect.analyses.dispatcher import close_sinks, dispatch_commitlog
from rmqinspect.analyses.report_data import collect_store_report, report_read_bytes
from rmqinspect.analyses.verify import ALL_CHECKS, read_bytes, verify
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.constants import DEFAULT_CQ_FILE_SIZE
from rmqinspect.sinks.consumequeue import ConsumeQueueSet
from rmqinspect.sinks.indexfile import IndexFileSet
from rmqinspect.store import Store
from support import SAMPLE_STORE

FILE = 1 << 20


@pytest.fixture(scope="module")
def multi_file_store(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("progress") / "store")
    with CommitLogWriter(os.path.join(root, "commitlog"), file_size=FILE) as w:
        n = 0
        while w.write_offset < 2 * FILE + FILE // 3:  # two full files and a third one third written
            props = encode_properties([("KEYS", f"k{n}"), ("UNIQ_KEY", "%032X" % n)])
            w.append(MessageSpec("T%d" % (n % 3), n % 4, body=os.urandom(900), properties=props,
                                 born_timestamp=1_700_000_000_000 + n, store_timestamp=1_700_000_000_000 + n))
            n += 1
        data_end = w.write_offset
    st = Store.open(root)
    cq = ConsumeQueueSet(os.path.join(root, "consumequeue"), DEFAULT_CQ_FILE_SIZE)
    ix = IndexFileSet(os.path.join(root, "index"), 101, 40_000)
    close_sinks(cq, ix, dispatch_commitlog(st.commitlog, cq, ix))
    st.close()
    return root, data_end


def _calls(root, **kw):
    seen = []
    rep = verify(Store.open(root), ALL_CHECKS, read_progress=seen.append, **kw)
    return rep, seen


@pytest.mark.parametrize("which", ["sample", "multi"])
def test_verify_progress_moves_forward_to_the_bytes_it_reads(which, multi_file_store):
    root = str(SAMPLE_STORE) if which == "sample" else multi_file_store[0]
    sizes = read_bytes(Store.open(root))
    total = sum(sizes.values())
    rep, seen = _calls(root, jobs=1)
    assert seen == sorted(seen), "the bar went backwards"
    assert seen[-1] == total
    assert all(0 <= s <= total for s in seen)
    if which == "multi":
        root, data_end = multi_file_store
        # the commit log counts its data, not the pre-allocated rest of the newest file (a hole)
        assert data_end <= sizes["commitlog"] < data_end + 64 * 1024
        assert sizes["index"] == rep.counts["index_items"] * 20
        # at least one call per run of records: more calls than files
        assert len([s for s in seen if s < sizes["commitlog"]]) >= 3


def test_report_progress_moves_forward_once_over_the_store(multi_file_store):
    root, _ = multi_file_store
    st = Store.open(root)
    total = report_read_bytes(st)
    seen, phases = [], []

    def tick(done, phase=None):
        seen.append(done)
        if phase:
            phases.append(phase)

    collect_store_report(st, progress=tick)
    assert seen == sorted(seen) and seen[-1] == total
    # one walk for summary, verify and traffic, the recovery plan beside it: one phase
    assert phases == ["report: verify and recovery"]
    # the bar moves while the walk reads, not only at its end: a step after every run of records, at least one per
    # commit-log file (how many more the plan's share adds depends on how the threads interleave)
    assert len({s for s in seen if 0 < s < total}) >= 3
