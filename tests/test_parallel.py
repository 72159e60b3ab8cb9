"""The local parallel engine (store/walk/parallel.py): every command that walks the commit log gives, with worker
processes (jobs 2), byte for byte what it gives with jobs 1 (one file after another in this process), on every
oracle store the product reads and on writer-made stores damaged in the first, a middle and the last file, and
with a middle file missing; and again with the files split into many chunks (RMQINSPECT_CHUNK_BYTES forced
small: verify, summary, salvage, rebuild balance by bytes), with damage inside a chunk and at a chunk start, and
with chunk starts the walk passes over."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqinspect.analyses import rebuild as rebuild_mod
from rmqinspect.analyses.dispatcher import RebuildOptions
from rmqinspect.analyses.export import export_local, read_dataset
from rmqinspect.analyses.rebuild import rebuild
from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery import scan as recovery_scan
from rmqinspect.analyses.salvage import salvage
from rmqinspect.analyses.summary import summarize
from rmqinspect.analyses.verify import ALL_CHECKS, verify
from rmqinspect.cli.main import cli
from rmqinspect.errors import CorruptDataError
from rmqinspect.store import Store
from rmqinspect.store.walk import parallel
from rmqinspect.store.walk import resync as salvage_mod
from rmqinspect.store.walk.resync import chunk_tasks, record_chunks, walk_tasks
from support import ALL_SCENARIOS, ORACLE, ORACLE_MISSING, require_oracle, tree_bytes, tree_hashes
from support.export_rows import sorted_rows
from support.recover_fixtures import build_store


def _commitlog_files(name: str) -> int:
    d = ORACLE / name / "store" / "commitlog"
    return len(os.listdir(d)) if d.is_dir() else 0


# The scenarios the product reads today with more than one commitlog file (one file starts no worker: the
# comparison would be jobs 1 against itself). DLedger stores keep their log in dledger-*/data, which is not read
# yet.
SCENARIOS = [s for s in ALL_SCENARIOS if s == ORACLE_MISSING or _commitlog_files(s) > 1]
# Split inside the files, a store of one file goes to workers too.
CHUNKED_SCENARIOS = [s for s in ALL_SCENARIOS if s == ORACLE_MISSING or _commitlog_files(s) > 0]


def _everything(root: str, tmp, jobs: int) -> dict:
    """Every command's full result on ``root`` with ``jobs`` workers, as JSON text, messages and file bytes."""
    out: dict = {}
    rep = verify(Store.open(root), ALL_CHECKS, jobs=jobs)
    out["verify"] = json.dumps([rep.to_dict(), [p.to_dict() for p in rep.problems]], default=str)
    rep = verify(Store.open(root), ("structure", "crc"), jobs=jobs, max_errors=2)
    out["verify max_errors=2"] = json.dumps([rep.to_dict(), [p.to_dict() for p in rep.problems]], default=str)
    out["summary"] = json.dumps(dataclasses.asdict(summarize(Store.open(root), jobs=jobs)), default=str)
    for mode in ("normal", "abnormal"):
        plan = plan_recovery(Store.open(root), RecoveryOptions(force_mode=mode, jobs=jobs))
        d = plan.to_dict(with_redispatch=True)
        d["salvage"] = plan.salvage.to_dict() if plan.salvage else None
        out[f"recover {mode}"] = json.dumps(d, default=str)
        # Message == compares every field
        out[f"recover {mode} salvaged messages"] = plan.salvage.messages if plan.salvage else None
    st = Store.open(root)
    s = salvage(st, st.commitlog.min_offset, jobs=jobs)
    out["salvage from the first offset"] = json.dumps(s.to_dict(), default=str)
    out["salvage messages"] = s.messages
    rb = tmp / f"rebuild-{jobs}"
    # small files: consume queues and index files roll many times, across commitlog file boundaries
    run = rebuild(Store.open(root), str(rb), jobs=jobs, cq_file_size=2000, index_slots=64, index_max=400)
    d = run.to_dict()
    d.pop("out")
    out["rebuild"] = json.dumps(d, default=str)
    files = tree_bytes(rb)
    files.pop("rebuild.json")
    out["rebuild files"] = files
    ex = tmp / f"export-{jobs}"
    res = export_local([root], str(ex), jobs=jobs)
    out["export"] = json.dumps({k: v for k, v in res.to_dict().items() if k != "out"})
    out["export files"] = tree_bytes(ex)
    # what a split file changes nothing of: the rows, and the partition directories (none left empty)
    out["export rows"] = sorted_rows(read_dataset(str(ex)))
    out["export directories"] = sorted(os.path.relpath(d, ex) for d, _, names in os.walk(ex) if d != str(ex)
                                       and (names or os.listdir(d)))
    out["export empty directories"] = [d for d, sub, names in os.walk(ex) if not sub and not names]
    return out


def _same(root: str, tmp, chunk: int | None = None, monkeypatch=None) -> dict:
    """Every command with jobs 1 and jobs 2; with ``chunk``, jobs 2 splits the files into chunks of about
    ``chunk`` bytes."""
    before = tree_hashes(root)
    one = _everything(root, tmp, 1)
    if chunk is not None:
        monkeypatch.setenv(parallel.CHUNK_ENV, str(chunk))
        (tmp / "chunked").mkdir()
        tmp = tmp / "chunked"
    two = _everything(root, tmp, 2)
    assert tree_hashes(root) == before  # evidence untouched by every worker
    for k in one:
        if k == "export files" and chunk is not None:
            continue  # a file split into chunks is written as more part files: its rows are compared
        assert one[k] == two[k], f"{k}: jobs 2 differs from jobs 1" + (f" (chunks of {chunk} bytes)" if chunk else "")
    return one


def _chunks(root: str) -> list:
    """The chunk tasks the parallel walk makes of ``root`` (with the chunk size in effect)."""
    st = Store.open(root)
    try:
        return chunk_tasks(st.commitlog, walk_tasks(st.commitlog, convert=_pid))
    finally:
        st.close()


@pytest.mark.parametrize("name", SCENARIOS)
def test_jobs_2_equals_jobs_1_on_oracle(name, tmp_path):
    root = str(require_oracle(name) / "store")
    one = _same(root, tmp_path)
    assert json.loads(one["summary"])["messages"] > 0


@pytest.mark.parametrize("name", CHUNKED_SCENARIOS)
def test_chunked_jobs_2_equals_jobs_1_on_oracle(name, tmp_path, monkeypatch):
    root = str(require_oracle(name) / "store")
    monkeypatch.setenv(parallel.CHUNK_ENV, "32768")  # the oracle's 256 KiB files: up to 8 chunks each
    files = len(Store.open(root).commitlog.files)
    assert len(_chunks(root)) > files + 1  # really split inside the files
    one = _same(root, tmp_path, 32768, monkeypatch)
    assert json.loads(one["summary"])["messages"] > 0


def _damaged(tmp, kind: str) -> str:
    f = build_store(tmp / kind, n=240, file_size=8192, preallocate=True)
    names = f.file_names()
    assert len(names) >= 5, names
    in_file = {n: [r for r in f.records if f.file_of(r.offset) == n] for n in names}
    if kind == "missing_middle":
        os.remove(os.path.join(f.commitlog, names[len(names) // 2]))
        f.set_abort()
        return f.root
    victim = {"first": names[0], "middle": names[len(names) // 2], "last": names[-2]}[kind]
    recs = in_file[victim]
    # a body CRC flip, a torn (zeroed) stretch spanning a record boundary, and a bad magic code
    a, b = recs[1], recs[len(recs) // 2]
    f.patch(a.offset + a.size - 30, b"\xff\xee")
    f.zero(b.offset + b.size // 2, b.end + 10)
    c = recs[-2]
    f.patch(c.offset + 4, b"\x12\x34\x56\x78")
    if kind == "last":  # and the newest file's tail torn
        t = in_file[names[-1]] or in_file[names[-2]]
        f.zero(t[-1].offset + 8, t[-1].end)
    f.set_abort()
    return f.root


@pytest.mark.parametrize("chunk", [None, 1500])
@pytest.mark.parametrize("kind", ["first", "middle", "last", "missing_middle"])
def test_jobs_2_equals_jobs_1_on_damaged_store(kind, chunk, tmp_path, monkeypatch):
    root = _damaged(tmp_path, kind)
    one = _same(root, tmp_path, chunk, monkeypatch)
    rep = json.loads(one["verify"])
    assert not rep[0]["ok"]  # the damage is seen (the comparison is not between two empty reports)
    kinds = {p["kind"] for p in rep[1]}
    if kind == "missing_middle":
        assert "missing_file" in kinds
    else:
        assert kinds & {"crc_mismatch", "zero_page", "illegal", "half", "torn_tail"}, kinds


def test_workers_are_other_processes_and_errors_come_back_whole():
    pids = list(parallel.map_files(os.getpid, [None] * 0, 2))
    assert pids == []
    own = os.getpid()
    assert set(parallel.map_files(_pid, range(4), 1)) == {own}
    got = list(parallel.map_files(_pid, range(4), 2))
    assert len(got) == 4 and own not in got
    assert list(parallel.map_files(_square, range(7), 2)) == [i * i for i in range(7)]  # file order
    with pytest.raises(CorruptDataError) as e:
        list(parallel.map_files(_fail, range(3), 2))
    assert (e.value.path, e.value.offset, e.value.kind, e.value.exit_code) == ("commitlog/00000000000000000001",
                                                                             1, "illegal", 4)
    assert str(e.value) == "commitlog/00000000000000000001 @ 1: bad magic"


def _pid(_):
    return os.getpid()


def _square(i):
    return i * i


def _fail(i):
    if i == 1:
        raise CorruptDataError("bad magic", "commitlog/%020d" % i, i, kind="illegal")
    return i


def test_default_jobs(monkeypatch):
    monkeypatch.delenv(parallel.JOBS_ENV, raising=False)
    assert parallel.resolve_jobs(None) == 1  # a library call starts no process unless asked
    assert parallel.default_jobs() == parallel.cores()  # a command uses every core
    monkeypatch.setenv(parallel.JOBS_ENV, "3")
    assert parallel.resolve_jobs(None) == 3 and parallel.default_jobs() == 3 and parallel.resolve_jobs(1) == 1


def test_cli_jobs_option_same_output(tmp_path):
    root = _damaged(tmp_path, "middle")
    runner = CliRunner()
    for cmd in (["verify"], ["summary"], ["recover", "--dry-run"], ["salvage"], ["rebuild", "--dry-run"]):
        outs = [runner.invoke(cli, [*cmd, root, "--format", "json", "--jobs", j]) for j in ("1", "2")]
        assert outs[0].exit_code == outs[1].exit_code, cmd
        assert outs[0].exit_code in (0, 1), outs[0].output
        assert outs[0].stdout == outs[1].stdout, cmd
    docs, files = [], []
    for j in ("1", "2"):
        out = tmp_path / f"export-cli-{j}"
        r = runner.invoke(cli, ["export", root, "--out", str(out), "--format", "json", "--jobs", j])
        assert r.exit_code == 1, r.output  # damaged records are named and skipped
        d = json.loads(r.stdout)
        d.pop("out")
        docs.append(d)
        files.append(tree_bytes(out))
    assert docs[0] == docs[1] and files[0] == files[1] and docs[0]["rows"] > 200
    r = runner.invoke(cli, ["verify", root, "--jobs", "0"])
    assert r.exit_code == 2 and "--jobs" in r.output


def _boundary_damaged(tmp) -> tuple[str, list[int]]:
    """A store whose middle file is split into chunks of ~1500 bytes (planned on the intact file), then damaged:
    the record at a chunk start gets a bad body CRC, a zeroed stretch runs across the next chunk start, and a
    record inside a later chunk gets a bad magic code."""
    f = build_store(tmp / "boundary", n=240, file_size=8192, preallocate=True)
    names = f.file_names()
    name = names[len(names) // 2]
    st = Store.open(f.root)
    mf = next(m for m in st.commitlog.files if m.name == name)
    starts = record_chunks(mf, 0, step=1500)
    st.close()
    assert len(starts) >= 5, starts
    recs = [r for r in f.records if f.file_of(r.offset) == name]
    at = {r.offset - mf.start: r for r in recs}
    a = at[starts[1]]  # the record starting chunk 1: two bytes of its body flipped
    with open(os.path.join(f.commitlog, name), "rb") as fh:
        data = fh.read()
    body_at = data.index(a.body, a.offset - mf.start)
    f.patch(mf.start + body_at + 5, bytes(x ^ 0xFF for x in a.body[5:7]))
    b = at[starts[2]]  # zeros from inside the record before chunk 2 into chunk 2's first record
    f.zero(b.offset - 40, b.offset + 40)
    c = next(r for r in recs if starts[3] < r.offset - mf.start < starts[4])  # inside chunk 3
    f.patch(c.offset + 4, b"\x12\x34\x56\x78")
    f.set_abort()
    return f.root, starts


def test_chunked_damage_inside_a_chunk_and_at_its_start(tmp_path, monkeypatch):
    root, _ = _boundary_damaged(tmp_path)
    monkeypatch.setenv(parallel.CHUNK_ENV, "1500")
    assert len(_chunks(root)) > 2 * len(Store.open(root).commitlog.files)
    one = _same(root, tmp_path, 1500, monkeypatch)
    kinds = {p["kind"] for p in json.loads(one["verify"])[1]}
    assert {"crc_mismatch", "illegal"} <= kinds | {p.get("cause") for p in json.loads(one["verify"])[1]}, kinds


def test_chunk_starts_the_walk_passes_over(tmp_path, monkeypatch):
    """Chunk starts that are not record starts (inside a record: the file's walk never lands there) make each
    chunk's walk go on to a later start or the file's end, and the chunks it covered are dropped (salvage's
    join_chunks; rebuild re-dispatches the rest of the file): the result is still the file walk's."""
    root, _ = _boundary_damaged(tmp_path)
    real = record_chunks

    def skewed(f, start, *, accept_v2=True, step=None):
        out = real(f, start, accept_v2=accept_v2, step=1500)
        # every second start moved 7 bytes into its record
        return [p + 7 if k % 2 else p for k, p in enumerate(out)]

    monkeypatch.setattr(salvage_mod, "record_chunks", skewed)
    monkeypatch.setattr(rebuild_mod, "record_chunks", skewed)
    monkeypatch.setattr(recovery_scan, "record_chunks", skewed)
    counts = {"made": 0, "kept": 0}
    real_join = salvage_mod.join_chunks

    def counting(results):
        def made():
            for r in results:
                counts["made"] += 1
                yield r

        for events in real_join(made()):
            counts["kept"] += 1
            yield events

    monkeypatch.setattr(salvage_mod, "join_chunks", counting)
    one = _same(root, tmp_path, 1500, monkeypatch)
    assert json.loads(one["summary"])["messages"] > 200
    # chunks were made and some of them were dropped (their start was passed over)
    assert counts["made"] > counts["kept"] > 0
    # rebuild: chunk dispatches that did not stop exactly at the next chunk's start (the join dispatched the rest
    # of those files again)
    st = Store.open(root)
    args = rebuild_mod.chunk_dispatch_args(st.commitlog, True, True, RebuildOptions())
    st.close()
    missed = []
    for a in args:
        if a[7] is not None:
            rep = rebuild_mod.dispatch_file(a)["report"]
            missed += [a] if not (rep.stop_kind == "to" and rep.end_offset == a[1] + a[7]) else []
    assert len(args) > len(st.commitlog.files) and missed
    # recover's scan: chunk walks that went past their end (walked again from their start in the parent)
    st = Store.open(root)
    landed = []
    for f in st.commitlog.files:
        starts = recovery_scan.record_chunks(f, 0)
        for k in range(len(starts) - 1):
            landed.append(recovery_scan.scan_file((f.path, f.start, True, True, starts[k], starts[k + 1]))[2])
    st.close()
    assert recovery_scan.WALKED_PAST in landed



@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_read_relocated_dledger_files_as_the_parent_does(method, tmp_path, monkeypatch):
    """A DLedger member whose data files the broker.conf relocates (storePathDLedgerCommitLog, not a
    dledger-<selfId>/data directory): only the parent's layout, opened with that broker.conf, knows they hold
    entries. The workers get that with each task, whatever the start method (no process state carries it), and
    dispatch the same messages as the parent."""
    import shutil

    from rmqinspect.fixtures.commitlog import MessageSpec
    from rmqinspect.fixtures.dledger import DLedgerWriter
    from rmqinspect.store.broker_conf import read_broker_conf

    monkeypatch.setenv(parallel.START_METHOD_ENV, method)
    w = DLedgerWriter(str(tmp_path / "dledger-n0"), 4096, 32 * 64)
    for i in range(30):
        w.append(MessageSpec(topic="T", queue_id=i % 3, body=b"m%d-" % i * (1 + i % 5), born_timestamp=1000 + i,
                             store_timestamp=2000 + i), 1)
    w.write_checkpoint(w.entries[-1].index)
    w.write_currterm(1, "n0")
    shutil.move(str(tmp_path / "dledger-n0" / "data"), str(tmp_path / "dledger-data"))
    conf = tmp_path / "broker.conf"
    conf.write_text("enableDLegerCommitLog=true\ndLegerSelfId=n0\nstorePathRootDir=/data/rmq/store\n"
                    "storePathDLedgerCommitLog=/data/rmq/store/dledger-data\n")
    st = Store.open(str(tmp_path), conf=read_broker_conf(conf))
    try:
        assert st.commitlog.dledger and len(st.commitlog.files) > 1
        args = rebuild_mod.chunk_dispatch_args(st.commitlog, True, True, RebuildOptions())
        here = [rebuild_mod.dispatch_file(a)["report"].messages for a in args]
        there = [r["report"].messages for r in parallel.map_files(rebuild_mod.dispatch_file, args, 2)]
    finally:
        st.close()
    assert there == here and sum(here) == 30


def _private_shm(tmp_path, monkeypatch) -> str:
    """A handover directory of this test's own (inherited by the forked workers): other rmqinspect processes on the
    machine write theirs to /dev/shm at the same time, so counting files there is not this test's answer."""
    d = tmp_path / "shm"
    d.mkdir()
    monkeypatch.setattr(parallel, "_SHM_DIR", str(d))
    return str(d)


def _three_chunk_dispatches(root: str) -> tuple[list, list]:
    """The rebuild dispatch of the first three chunks of ``root``: by two workers, and in this process."""
    st = Store.open(root)
    try:
        args = rebuild_mod.chunk_dispatch_args(st.commitlog, True, True, RebuildOptions())[:3]
    finally:
        st.close()
    return list(parallel.map_files(rebuild_mod.dispatch_file, args, 2)), [rebuild_mod.dispatch_file(a) for a in args]


def _count_unpacks(monkeypatch) -> dict:
    """How many results the command read from a result slot and from a file of their own."""
    n = {"slot": 0, "file": 0}
    slot_unpack, file_unpack = parallel._ResultSlots.unpack, parallel._Handover.unpack

    def from_slot(self, res):
        n["slot"] += 1
        return slot_unpack(self, res)

    def from_file(self):
        n["file"] += 1
        return file_unpack(self)

    monkeypatch.setattr(parallel._ResultSlots, "unpack", from_slot)
    monkeypatch.setattr(parallel._Handover, "unpack", from_file)
    return n


def _same_dispatch(a: dict, b: dict) -> None:
    for k in ("h", "p", "t"):
        assert (a["index"][k] == b["index"][k]).all()
    assert [(t, q, o.tolist(), p.tobytes()) for t, q, o, p in a["cq"]] == \
        [(t, q, o.tolist(), p.tobytes()) for t, q, o, p in b["cq"]]


@pytest.mark.parametrize("via", ["slots", "files"])
@pytest.mark.parametrize("kind", ["middle", "last"])
def test_results_handed_over_through_shared_memory_are_the_same(kind, via, tmp_path, monkeypatch):
    """Large results go from the workers to the command through shared memory (their arrays mapped, not copied
    through the result pipe): result slots used again task after task, or a file per result when there is no free
    slot big enough. Forced for every result, each way, every command still gives jobs 1's bytes, and no file is
    left behind - also when the walk stops early at damage and results nobody reads are dropped."""
    monkeypatch.setattr(parallel, "_HANDOVER_BYTES", 0)  # inherited by the forked workers
    if via == "files":
        monkeypatch.setattr(parallel, "_SLOT_BYTES", 0)
    shm = _private_shm(tmp_path, monkeypatch)
    n = _count_unpacks(monkeypatch)
    root = _damaged(tmp_path, kind)
    _same(root, tmp_path, 1500, monkeypatch)
    assert os.listdir(shm) == []
    assert n["slot"] > 0 if via == "slots" else n["slot"] == 0
    assert n["file"] > 0  # verify keeps its record columns, so its slots stay taken: later results use files
    # the handover really ran: a worker's result arrives as arrays over the shared pages, read-only
    res, seq = _three_chunk_dispatches(root)
    assert all(not r["index"]["h"].flags.writeable for r in res)
    for a, b in zip(res, seq):
        _same_dispatch(a, b)
    assert os.listdir(shm) == []


def test_a_result_slot_is_used_again_only_when_nothing_refers_to_its_arrays(tmp_path, monkeypatch):
    """Every result of a walk kept at once (more results than slots): none is overwritten by a later task's, each
    equals the one made in this process; results dropped as they come: the slots carry all of them, used again."""
    monkeypatch.setattr(parallel, "_HANDOVER_BYTES", 0)
    monkeypatch.setenv(parallel.CHUNK_ENV, "1500")
    shm = _private_shm(tmp_path, monkeypatch)
    n = _count_unpacks(monkeypatch)
    root = _damaged(tmp_path, "middle")
    st = Store.open(root)
    try:
        args = rebuild_mod.chunk_dispatch_args(st.commitlog, True, True, RebuildOptions())
    finally:
        st.close()
    slots = 2 + 1 + 2  # map_files' slot count for two workers
    assert len(args) > 3 * slots
    kept = list(parallel.map_files(rebuild_mod.dispatch_file, args, 2))
    assert n["slot"] == slots and n["file"] == len(args) - slots
    for a, b in zip(kept, (rebuild_mod.dispatch_file(x) for x in args)):
        _same_dispatch(a, b)
    del kept
    n["slot"] = n["file"] = 0
    seq = iter([rebuild_mod.dispatch_file(x) for x in args])
    for a in parallel.map_files(rebuild_mod.dispatch_file, args, 2):
        _same_dispatch(a, next(seq))
    assert n == {"slot": len(args), "file": 0}
    assert os.listdir(shm) == []


def test_results_come_back_through_the_pipe_when_shared_memory_cannot_be_written(tmp_path, monkeypatch):
    """No writable shared memory (no slot big enough, and the files cannot be written: full, read-only, absent):
    the workers fall back to the result pipe, same bytes."""
    import tempfile

    def no_space(*a, **k):
        raise OSError(28, "No space left on device")

    root = _damaged(tmp_path, "middle")
    monkeypatch.setattr(parallel, "_HANDOVER_BYTES", 0)
    monkeypatch.setattr(parallel, "_SLOT_BYTES", 0)
    monkeypatch.setattr(tempfile, "mkstemp", no_space)  # inherited by the forked workers
    res, seq = _three_chunk_dispatches(root)
    assert all(r["index"]["h"].flags.writeable for r in res)  # unpickled copies: the pipe carried them
    for a, b in zip(res, seq):
        _same_dispatch(a, b)


def _arrays_of(item):
    """A result of ``item`` = (seed, length): arrays whose every value says which item and place made it."""
    import numpy as np

    seed, n = item
    return {"seed": seed, "a": np.arange(n, dtype=np.int64) * 1000 + seed, "b": np.full(n // 3 + 1, seed, np.int32)}


def _is_result_of(r, item) -> bool:
    import numpy as np

    seed, n = item
    return (r["seed"] == seed and r["a"].tolist() == (np.arange(n, dtype=np.int64) * 1000 + seed).tolist()
            and r["b"].tolist() == [seed] * (n // 3 + 1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 3000), min_size=2, max_size=14),
       keep=st.lists(st.booleans(), min_size=14, max_size=14), slot_bytes=st.sampled_from([4096, 20_000, 1 << 20]))
def test_result_slots_never_overwrite_a_result_still_referred_to(sizes, keep, slot_bytes, tmp_path_factory,
                                                                monkeypatch):
    """Whatever the consumer keeps (any subset of the results, in any pattern) and whatever the sizes (results
    larger than a slot go through files), every result read is its own item's, when read and at the end."""
    shm = tmp_path_factory.mktemp("shm")
    with monkeypatch.context() as m:
        m.setattr(parallel, "_HANDOVER_BYTES", 0)
        m.setattr(parallel, "_SLOT_BYTES", slot_bytes)
        m.setattr(parallel, "_SHM_DIR", str(shm))
        items = [(i + 1, n) for i, n in enumerate(sizes)]
        kept = []
        for item, r, k in zip(items, parallel.map_files(_arrays_of, items, 2), keep):
            assert _is_result_of(r, item)
            if k:
                kept.append((item, r))
            del r
        for item, r in kept:
            assert _is_result_of(r, item)
    assert os.listdir(shm) == []
