"""A full disk, a quota or a file-size limit on --out, for every command that writes: one line naming the output
file and what was being written, exit 5, and nothing left behind (outputs are written under a temporary name and
renamed at the end, sinks.staging). The limit is RLIMIT_FSIZE (SIGXFSZ is ignored, so the write fails with EFBIG)
and, where this user may mount one, a small tmpfs (ENOSPC)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import uuid

import pytest

from support import tree_hashes
from support.recover_fixtures import build_store
from support.world import error_lines, make_store, run_cli


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("full")
    big = make_store(base / "store", messages=4000, file_size=1 << 18)
    # salvage needs messages to write: a bad body CRC in the second file, an abnormal start before it
    fx = build_store(base / "damaged")
    second = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[1]]
    fx.patch(second[3].offset + 91, b"\xff\xfe")
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts + 3000)
    from rmqinspect.fixtures.tiered_index import TieredIndexWriter

    tiered = base / "tiered"
    (tiered / "commitlog").mkdir(parents=True)
    for k, begin in enumerate((1_700_000_000_000, 1_700_000_100_000)):
        with TieredIndexWriter(str(tiered / "tiered_index_file"), begin, 64, 2000) as w:
            for i in range(1500):
                w.put_key("TopicTest", 1, i % 4, {f"k{k}-{i}"}, i * 100, 100, begin + i)
    return {"store": big, "damaged": fx.root, "tiered": tiered}


# (name, argv with {store} and {out}, the output is a directory)
WRITERS = [
    ("rebuild-j1", ["rebuild", "{store}", "--out", "{out}", "--jobs", "1"]),
    ("rebuild-j2", ["rebuild", "{store}", "--out", "{out}", "--jobs", "2", "--what", "cq"]),
    ("export-j1", ["export", "{store}", "--out", "{out}", "--jobs", "1"]),
    ("export-j2", ["export", "{store}", "--out", "{out}", "--jobs", "2"]),
    ("salvage", ["salvage", "{damaged}", "--out", "{out}", "--broker-version", "4.9.8"]),
    ("report", ["report", "{store}", "--out", "{out}"]),
    ("compact-index", ["compact-index", "{tiered}", "--out", "{out}"]),
]


def _argv(argv, stores, out):
    return [a.format(out=out, **{k: str(v) for k, v in stores.items()}) for a in argv]


def _limit(nbytes):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return pre


def _check(r, out: str, parent, why: str) -> None:
    assert r.returncode == 5, (r.returncode, r.stderr[-800:])
    lines = error_lines(r.stderr)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(f"rmqinspect: error: {out}"), line  # the output file, named as it would have been
    assert why in line and " while writing " in line and line.endswith(f"nothing was left at {out}"), line
    assert not os.path.lexists(out)
    assert os.listdir(parent) == [], os.listdir(parent)  # no temporary name left either


@pytest.mark.parametrize("name,argv", WRITERS, ids=[w[0] for w in WRITERS])
def test_file_size_limit_on_out_is_one_line_exit_5_and_nothing_left(stores, tmp_path, name, argv):
    if name == "report":
        pytest.importorskip("plotly")
    before = {k: tree_hashes(v) for k, v in stores.items()}
    parent = tmp_path / "outs"
    parent.mkdir()
    out = str(parent / ("o.out" if name in ("salvage", "report") else "o"))
    r = run_cli(_argv(argv, stores, out), preexec_fn=_limit(4096))
    _check(r, out, parent, "file too large (file-size limit)")
    # without the limit the same command writes its output whole, under its own name only
    ok = run_cli(_argv(argv, stores, out))
    assert ok.returncode in (0, 1), ok.stderr[-800:]
    assert os.listdir(parent) == [os.path.basename(out)]
    assert {k: tree_hashes(v) for k, v in stores.items()} == before


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the file-size limit tests cover the same path")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", f"rmqinspect-{uuid.uuid4().hex[:8]}", str(mnt)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("name,argv", [w for w in WRITERS if w[0] in ("rebuild-j1", "export-j2", "salvage",
                                                                     "compact-index")],
                         ids=["rebuild-j1", "export-j2", "salvage", "compact-index"])
def test_a_full_file_system_on_out_is_one_line_exit_5_and_nothing_left(stores, small_tmpfs, name, argv):
    out = str(small_tmpfs / ("o.out" if name == "salvage" else "o"))
    r = run_cli(_argv(argv, stores, out))
    _check(r, out, small_tmpfs, "no space left on device")


def test_workers_that_cannot_start_under_a_tiny_size_limit_leave_the_work_to_one_process(stores, tmp_path):
    """Found by fuzz/world_fuzz.py (29:14): under a 1-byte file-size limit the pool's semaphores cannot be made
    (OSError errno 0, "rmqinspect: error: Error"). The work now runs in this process, said in one warning."""
    one = run_cli(["verify", str(stores["store"]), "--jobs", "1", "--format", "json"])
    r = run_cli(["verify", str(stores["store"]), "--jobs", "2", "--format", "json"], preexec_fn=_limit(1))
    assert r.returncode == 0 and r.stdout == one.stdout, r.stderr[-600:]
    assert b"cannot start worker processes" in r.stderr and error_lines(r.stderr) == []
    parent = tmp_path / "outs"
    parent.mkdir()
    out = str(parent / "o")
    w = run_cli(["rebuild", str(stores["store"]), "--out", out, "--what", "index", "--jobs", "2"],
                preexec_fn=_limit(1))
    _check(w, out, parent, "file too large (file-size limit)")


def test_a_full_disk_under_stdout_is_one_line_exit_5_and_claims_nothing_about_the_cut_output(stores, tmp_path):
    target = tmp_path / "answer.ndjson"
    with open(target, "wb") as f:
        r = subprocess.run([sys.executable, "-m", "rmqinspect", "decode-commitlog", str(stores["store"]), "--format",
                            "ndjson"], stdout=f, stderr=subprocess.PIPE, preexec_fn=_limit(4096), timeout=120)
    assert r.returncode == 5
    assert error_lines(r.stderr) == ["rmqinspect: error: standard output: file too large (file-size limit) while "
                                     "writing the answer"], r.stderr[-600:]
    assert target.stat().st_size == 4096
