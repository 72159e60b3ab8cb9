"""verify's cq and index joins are made in a thread that starts with the walk (``verify._joins_beside``, a
``parallel.Beside``): after the walk's worker processes are forked (``parallel.map_files``' ``on_start``), never
before; an error in making them reaches the caller as it did when they were made before the walk; and the report
is the one made with the joins made first, with workers and files split into many chunks
(tests/test_json_unchanged.py holds every command's JSON on every oracle store)."""

from __future__ import annotations

import multiprocessing

import pytest

from rmqinspect.analyses import verify as verify_mod
from rmqinspect.errors import CorruptDataError
from rmqinspect.store import Store
from rmqinspect.store.walk import parallel
from support import tree_hashes
from support.recover_fixtures import build_store


def _square(x: int) -> int:
    return x * x


def test_on_start_comes_after_the_workers_are_forked():
    seen = []

    def started():
        seen.append(len(multiprocessing.active_children()))

    assert list(parallel.map_files(_square, range(6), 2, started)) == [x * x for x in range(6)]
    assert seen == [2]
    seen.clear()
    assert list(parallel.map_files(_square, range(3), 1, started)) == [0, 1, 4]  # no worker: before the first item
    assert seen == [0]


def _store(tmp_path):
    fx = build_store(tmp_path / "s", n=400)
    fx.set_abort()
    fx.patch(fx.records[300].offset + 95, b"\xff")  # a damaged body beside the queues and index
    return fx.root


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_joins_made_beside_the_walk_give_the_report_made_before_it(tmp_path, monkeypatch, jobs):
    root = _store(tmp_path)
    monkeypatch.setenv(parallel.CHUNK_ENV, "3000")
    before = tree_hashes(root)
    with Store.open(str(root)) as st:
        rep = verify_mod.verify(st, jobs=jobs)
        beside = (rep.to_dict(), [p.to_dict() for p in rep.problems])

    made_here = verify_mod._joins_beside

    def joins_first(stack, make, then):
        """The joins made before the walk, as verify made them before the thread."""
        joins, started = made_here(stack, make, then)
        joins.result()
        return joins, started

    monkeypatch.setattr(verify_mod, "_joins_beside", joins_first)
    with Store.open(str(root)) as st:
        rep = verify_mod.verify(st, jobs=jobs)
        first = (rep.to_dict(), [p.to_dict() for p in rep.problems])
    assert beside == first
    assert [p for p in beside[1] if p["check"] in ("cq", "index")]  # the joins found something
    assert tree_hashes(root) == before


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_error_making_the_joins_reaches_the_caller(tmp_path, monkeypatch, jobs):
    root = _store(tmp_path)
    monkeypatch.setenv(parallel.CHUNK_ENV, "3000")

    def broken(*a, **k):
        raise CorruptDataError("index file unreadable here", "index/x", 0)

    monkeypatch.setattr(verify_mod, "_IndexJoin", broken)
    with Store.open(str(root)) as st, pytest.raises(CorruptDataError, match="index file unreadable here"):
        verify_mod.verify(st, jobs=jobs)


@pytest.mark.parametrize("jobs", [1, 2])
def test_windows_wait_for_joins_still_being_made_and_give_the_same_report(tmp_path, monkeypatch, jobs):
    """Full windows wait (up to ``_WINDOWS_WAITING``, then the walk waits) while the joins are still being made,
    and are joined in order once they are: with a window per run and joins slowed down, the report is the one
    made with the joins ready first."""
    import threading

    root = _store(tmp_path)
    monkeypatch.setenv(parallel.CHUNK_ENV, "3000")
    monkeypatch.setattr(verify_mod, "_WINDOW_BYTES", 1)
    made_here = verify_mod._joins_beside
    waited = []

    def joins_first(stack, make, then):
        joins, started = made_here(stack, make, then)
        joins.result()
        return joins, started

    with monkeypatch.context() as m:
        m.setattr(verify_mod, "_joins_beside", joins_first)
        with Store.open(str(root)) as st:
            rep = verify_mod.verify(st, jobs=jobs)
            first = (rep.to_dict(), [p.to_dict() for p in rep.problems])
    release = threading.Event()
    real_join_full = verify_mod._Windows._join_full

    def join_full(self):
        waited.append(len(self.full))
        release.set()  # the joins may be made once windows have waited
        return real_join_full(self)

    def slow_joins(stack, make, then):
        return made_here(stack, lambda maps: (release.wait(30), make(maps))[1], then)

    monkeypatch.setattr(verify_mod, "_joins_beside", slow_joins)
    monkeypatch.setattr(verify_mod._Windows, "_join_full", join_full)
    with Store.open(str(root)) as st:
        rep = verify_mod.verify(st, jobs=jobs)
        slowed = (rep.to_dict(), [p.to_dict() for p in rep.problems])
    assert slowed == first
    assert max(waited) == verify_mod._WINDOWS_WAITING + 1  # windows waited, then the walk did


def test_a_walk_without_cq_or_index_checks_starts_no_joins_thread(tmp_path, monkeypatch):
    """``verify --checks crc,structure`` (the commit log alone) starts no thread for joins it does not make."""
    import threading

    root = _store(tmp_path)
    names = []
    real_start = threading.Thread.start

    def start(self):
        names.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with Store.open(str(root)) as st:
        rep = verify_mod.verify(st, ("crc", "structure"), jobs=1)
    assert rep.problems and "verify-joins" not in names
    names.clear()
    with Store.open(str(root)) as st:
        verify_mod.verify(st, jobs=1)
    assert names == ["verify-joins"]
