"""Permissions and odd file systems: a store on a read-only mount, a file the user may not read, a store reached
through a symlinked root, a path with spaces and non-UTF-8 bytes. Each gives the right answer or one clear line."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support import tree_hashes
from support.world import error_lines, make_store, run_cli

NOBODY = 65534


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("odd") / "store", messages=3000, file_size=1 << 17)


def _answer(args):
    r = run_cli(args)
    assert r.returncode == 0, r.stderr[-600:]
    doc = json.loads(r.stdout.decode("utf-8"))  # strict UTF-8: what any JSON reader needs
    return doc


def _without(doc, *keys):
    return {k: v for k, v in doc.items() if k not in keys}


def test_a_store_reached_through_a_symlinked_root_answers_as_the_store(store, tmp_path):
    link = tmp_path / "link-to-store"
    link.symlink_to(store, target_is_directory=True)
    a = _answer(["summary", str(store), "--format", "json"])
    b = _answer(["summary", str(link), "--format", "json"])
    assert b["root"] == str(link)  # named as the user typed it
    assert _without(a, "root") == _without(b, "root")
    assert _answer(["verify", str(link), "--format", "json"])["ok"] is True


def test_spaces_and_non_utf8_bytes_in_the_path_give_valid_utf8_json_and_the_same_answer(store, tmp_path):
    odd = os.path.join(os.fsencode(tmp_path), b"odd dir \xff\xfe", b"my store")
    shutil.copytree(store, os.fsdecode(odd))
    a = _answer(["summary", str(store), "--format", "json"])
    b = _answer(["summary", os.fsdecode(odd), "--format", "json"])
    assert os.fsencode(b["root"]) == odd  # escaped in the JSON (\udcff), the bytes come back whole
    assert _without(a, "root") == _without(b, "root")
    v = run_cli(["verify", os.fsdecode(odd), "--format", "ndjson"])
    assert v.returncode == 0
    for line in v.stdout.decode("utf-8").splitlines():
        json.loads(line)
    out = os.path.join(os.fsencode(tmp_path), b"out \xfe put")
    r = run_cli(["rebuild", os.fsdecode(odd), "--out", os.fsdecode(out), "--format", "json"])
    assert r.returncode == 0, r.stderr[-600:]
    assert os.fsencode(json.loads(r.stdout.decode("utf-8"))["out"]) == out
    assert sorted(os.listdir(os.path.join(out, b"consumequeue"))) == sorted(map(os.fsencode,
                                                                               os.listdir(store / "consumequeue")))
    x = run_cli(["export", os.fsdecode(odd), "--out", str(tmp_path / "parquet out"), "--format", "json"])
    assert x.returncode == 0, x.stderr[-600:]
    assert json.loads(x.stdout.decode("utf-8"))["rows"] == 3000
    # pyarrow cannot write under a name that is not UTF-8: said in one sentence, a usage error
    y = run_cli(["export", os.fsdecode(odd), "--out", os.fsdecode(out + b"-x")])
    assert y.returncode == 2 and b"needs a path of UTF-8 characters" in y.stderr, y.stderr[-600:]
    assert not os.path.lexists(out + b"-x")
    if importlib.util.find_spec("plotly"):
        h = run_cli(["report", os.fsdecode(odd), "--out", os.fsdecode(out + b".html")])
        assert h.returncode == 0, h.stderr[-600:]
        with open(out + b".html", "rb") as f:
            assert "odd dir \\udcff\\udcfe" in f.read().decode("utf-8")  # valid UTF-8, the bytes escaped


def _as_nobody() -> list[str]:
    """The prefix that runs a command as an unprivileged user (root reads every file whatever its mode)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: root would read a file without read permission")
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # the unprivileged user must reach the checkout itself: a clone under a private directory (mktemp -d, /root)
    # cannot be imported by it, and every run would fail for that reason instead of the one under test
    probe = subprocess.run([*prefix, sys.executable, "-c", "import rmqinspect"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"user {NOBODY} cannot import rmqinspect from this checkout (a parent directory is private): "
                    + probe.stderr.decode(errors="replace").strip()[-200:])
    return prefix


@pytest.fixture
def shared_copy(store):
    """A copy an unprivileged user can reach (pytest's tmp directories are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="rmqinspect-perm-"))
    base.chmod(0o755)
    s = base / "store"
    shutil.copytree(store, s)
    for d, _, files in os.walk(s):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    try:
        yield s
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("argv", [["summary"], ["verify", "--jobs", "2"], ["decode-commitlog", "--format", "ndjson"],
                                  ["rebuild", "--dry-run"]])
def test_a_file_without_read_permission_is_one_line_naming_it_exit_5(shared_copy, argv):
    prefix = _as_nobody()
    victim = sorted((shared_copy / "commitlog").iterdir())[2]
    victim.chmod(0)
    r = subprocess.run([*prefix, sys.executable, "-m", "rmqinspect", argv[0], str(shared_copy), *argv[1:]],
                       capture_output=True, timeout=120)
    assert r.returncode == 5, r.stderr[-600:]
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"rmqinspect: error: {victim}: ") and \
        "Permission denied" in lines[0], lines
    assert b"Traceback" not in r.stderr
    if "ndjson" in argv:
        for line in r.stdout.decode("utf-8").splitlines():
            json.loads(line)


def test_a_directory_without_permission_is_one_line_naming_it_exit_5(shared_copy):
    prefix = _as_nobody()
    (shared_copy / "commitlog").chmod(0)
    r = subprocess.run([*prefix, sys.executable, "-m", "rmqinspect", "summary", str(shared_copy)],
                       capture_output=True, timeout=120)
    assert r.returncode == 5, r.stderr[-600:]
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and str(shared_copy / "commitlog") in lines[0] and "Permission denied" in lines[0], lines


@pytest.fixture
def read_only_store(store, tmp_path):
    """The store on a read-only bind mount (root), else a copy with every write permission removed."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "--bind", "-o", "ro", str(store), str(mnt)], capture_output=True)
        if r.returncode == 0:
            try:
                yield mnt
            finally:
                subprocess.run(["umount", str(mnt)], check=True)
            return
    if os.geteuid() == 0:
        pytest.skip("cannot bind-mount read-only here, and root ignores write permissions")
    shutil.copytree(store, mnt, dirs_exist_ok=True)
    for d, _, files in os.walk(mnt):
        for f in files:
            os.chmod(os.path.join(d, f), 0o444)
        os.chmod(d, 0o555)
    yield mnt


def test_a_store_on_a_read_only_mount_answers_as_the_copy(store, read_only_store, tmp_path):
    before = tree_hashes(store)
    for argv in (["summary"], ["verify", "--jobs", "2"], ["rebuild", "--dry-run"]):
        a = _answer([argv[0], str(store), *argv[1:], "--format", "json"])
        b = _answer([argv[0], str(read_only_store), *argv[1:], "--format", "json"])
        assert json.loads(json.dumps(b).replace(str(read_only_store), str(store))) == a, argv
    r = run_cli(["export", str(read_only_store), "--out", str(tmp_path / "x"), "--format", "json"])
    assert r.returncode == 0, r.stderr[-600:]
    # an --out on the read-only mount: one line, exit 5 (the store is not the output, so not refused as inside)
    w = run_cli(["salvage", str(store), "--out", str(read_only_store / "config-x.ndjson")])
    assert w.returncode in (5, 6), w.stderr[-600:]
    assert len(error_lines(w.stderr)) == 1 and b"Traceback" not in w.stderr
    assert tree_hashes(store) == before
