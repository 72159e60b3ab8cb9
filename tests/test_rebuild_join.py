"""The parallel rebuild's in-order join (analyses/rebuild.py) on the cases its fast paths must not change: the
workers group each chunk's consume-queue entries by queue themselves (``RecordingCQ.put_run``) and say which blocks
are dense, so the join appends those after checking only their first entry; the index slot chains come with the
used slots in ascending order (``slot_links``). A store whose queues have gaps, repeats and a late start, records
that go to no consume queue (PREPARED, ROLLBACK), two unsafe topics in the same chunks, and small CQ and
index files (many rolls) gives with two workers and tiny chunks byte for byte the files and the report of jobs 1."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from rmqinspect.analyses import rebuild as rebuild_mod
from rmqinspect.analyses.dispatcher import RebuildOptions
from rmqinspect.analyses.rebuild import rebuild
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.consumequeue import CQ_DTYPE
from rmqinspect.sinks.indexfile import slot_links
from rmqinspect.store import Store
from rmqinspect.store.walk.parallel import CHUNK_ENV
from support import tree_bytes

REPEATS = ("RepTopic", 1)  # every fourth entry repeats the one before it: the dispatcher drops it (a repeat)
GAP = ("GapTopic", 2)  # one jump ahead: appended at the write position, and every entry after it too


def _store(root) -> None:
    qoff: dict = {}
    seen: dict = {}
    with CommitLogWriter(os.path.join(root, "commitlog"), 32 << 10) as w:
        for i in range(900):
            topic, qid = (f"T{i % 3}", i % 4)
            sys_flag = 0
            if i < 450 and i % 17 == 5:  # in the first half only: the later runs all go to consume queues
                sys_flag = 4  # PREPARED: no consume-queue entry, indexed
            elif i < 450 and i % 17 == 9:
                sys_flag = 0xC  # ROLLBACK: neither
            if i % 13 in (7, 8):
                topic = ("a/b", "../evil")[i % 13 - 7]  # unsafe: skipped, counted in order of appearance
            if i % 7 == 3:
                topic, qid = REPEATS
            elif i % 7 == 6:
                topic, qid = GAP
            key = (topic, qid)
            n = seen[key] = seen.get(key, -1) + 1
            q = qoff.get(key, 40 if key == ("T2", 3) else 0)  # T2/3 starts late: pre-blank entries first
            if key == REPEATS and n % 4 == 2:
                q -= 1
            elif key == GAP and n == 60:
                q += 3
            if sys_flag in (0, 8):
                qoff[key] = q + 1
            props = encode_properties([("UNIQ_KEY", "7F000001%012X" % i), ("TAGS", f"t{i % 4}"),
                                       ("KEYS", f"k{i} u{i % 9}")])
            w.append(MessageSpec(topic, qid, body=b"x" * (30 + i % 50), properties=props, sys_flag=sys_flag,
                                 queue_offset=q, store_timestamp=1_700_000_000_000 + i * 700))


def _run(store, out, jobs: int):
    run = rebuild(Store.open(store), str(out), jobs=jobs, cq_file_size=400, index_slots=13, index_max=170)
    d = run.to_dict()
    d.pop("out")
    files = tree_bytes(out)
    files.pop(rebuild_mod.MANIFEST)  # names the output directory; its content is run.to_dict()
    return d, list(run.report.skipped_topics.items()), files


def test_parallel_join_equals_jobs_1_with_gaps_skips_and_rolls(tmp_path, monkeypatch):
    store = tmp_path / "store"
    _store(store)
    one = _run(store, tmp_path / "one", 1)
    monkeypatch.setenv(CHUNK_ENV, "5000")
    two = _run(store, tmp_path / "two", 2)
    assert two == one
    doc, skipped, files = one
    assert [t for t, _ in skipped] == ["a/b", "../evil"]  # in the order the walk meets them
    assert doc["not_in_cq"] > 0 and doc["stop_kind"] == "end"
    assert len([n for n in files if n.startswith("index")]) > 5
    assert len([n for n in files if n.startswith(os.path.join("consumequeue", "RepTopic"))]) > 2
    # the chunks really went through both join paths: dense blocks, and blocks with a repeat inside
    with Store.open(store) as st:
        args = rebuild_mod.chunk_dispatch_args(st.commitlog, True, True, RebuildOptions())
    assert len(args) > 10
    flags: dict = {}
    for a in args:
        res = rebuild_mod.dispatch_file(a)
        for (topic, qid, qoff, packed), dense in zip(res["cq"], res["cq_dense"]):
            flags.setdefault((topic, qid), set()).add(dense)
            assert packed.dtype == CQ_DTYPE and packed.nbytes == len(qoff) * 20
    assert False in flags[REPEATS] and flags[("T0", 0)] == {True}


def test_recorded_blocks_keep_each_queue_in_commitlog_order():
    """Runs put in several pieces come back per queue in first-seen order, each queue's entries in put order,
    packed as the CQ files hold them; a block is dense only when its offsets step by one and its ends grow."""
    cq = rebuild_mod.RecordingCQ()
    cq.put_run(["A", "B"], np.array([0, 1, 0, 1]), np.array([2, 0, 2, 0]), np.array([5, 0, 6, 2]),
               np.array([100, 200, 300, 400]), np.array([10, 10, 10, 10]), np.array([7, 8, 9, 10]))
    cq.queue("B", 0).put_many(np.array([3]), np.array([500]), np.array([10]), np.array([11]))
    cq.put_run(["C", "A"], np.array([1, 0]), np.array([2, 1]), np.array([7, 0]), np.array([600, 700]),
               np.array([10, 10]), np.array([12, 13]))
    blocks, dense = cq.blocks()
    assert [(t, q, o.tolist()) for t, q, o, _ in blocks] == [("A", 2, [5, 6, 7]), ("B", 0, [0, 2, 3]),
                                                             ("C", 1, [0])]
    assert dense == [True, False, True]
    ent = np.frombuffer(blocks[0][3], dtype=CQ_DTYPE)
    assert ent["physical_offset"].tolist() == [100, 300, 600] and ent["tags_code"].tolist() == [7, 9, 12]


@pytest.mark.parametrize("slots", [1, 3, 5_000_000])
def test_slot_links_match_a_stable_sort(slots):
    rng = np.random.default_rng(slots)
    h = rng.integers(0, 2**31 - 1, 3000)
    h[::7] = h[0]  # long chains in one slot
    used, prev, heads, lasts = slot_links(h, slots)
    slot = h % slots
    order = np.argsort(slot, kind="stable")
    s = slot[order]
    first = np.r_[True, s[1:] != s[:-1]]
    last = np.r_[s[1:] != s[:-1], True]
    assert used.tolist() == s[first].tolist() and used.dtype == np.intp
    assert heads.tolist() == order[first].tolist() and lasts.tolist() == order[last].tolist()
    want = np.full(len(h), -1)
    want[order[1:][~first[1:]]] = order[:-1][~first[1:]]
    assert prev.tolist() == want.tolist()


_FAULTS_IN_A_WORKER = r"""
import resource, sys
import numpy as np
from rmqinspect.store.walk import parallel

def task(_):
    out = []
    for _ in range(3):  # a task's large temporaries, made and freed again and again (a rebuild chunk's arrays)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        a = np.ones(2 << 20, dtype=np.int64)  # 16 MiB
        del a
        out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return out

print(max(r[1] for r in parallel.map_files(task, [0, 1], 2)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc tuning: Linux only")
def test_workers_keep_freed_temporaries_instead_of_faulting_them_in_again():
    """A worker process keeps large freed blocks in its heap (parallel._worker_init): the second 16 MiB temporary of
    a task reuses the first one's pages (glibc's default maps the first one apart, gives it back when it is freed and
    grows the heap for the second one: hundreds of page faults, again for every new size)."""
    import subprocess

    r = subprocess.run([sys.executable, "-c", _FAULTS_IN_A_WORKER], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) < 100
