"""A store a running broker holds: its lock is seen without being taken (F_GETLK on a read-only descriptor), the
store is refused in one sentence (exit 6) unless --live, and under --live every file is read with pread up to its
size at the start, so a writer appending to and truncating files during the walk never kills it (SIGBUS)."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.store import live
from rmqinspect.store.mapped import MappedFile
from support import tree_hashes
from support.world import LockHolder, error_lines, json_problem, lock_owner, make_store, run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("live") / "store", messages=6000, file_size=1 << 18)


def _copy(store, tmp_path):
    dst = tmp_path / "store"
    shutil.copytree(store, dst)
    return dst


@pytest.mark.parametrize("argv", [["summary"], ["verify", "--jobs", "2"], ["decode-commitlog", "--format", "ndjson"],
                                  ["cq", "--all"]])
def test_a_store_a_broker_locks_is_refused_in_one_sentence_with_exit_6(store, tmp_path, argv):
    s = _copy(store, tmp_path)
    (s / "lock").touch()
    before = tree_hashes(s)
    with LockHolder(s) as holder:
        r = CliRunner().invoke(cli, [argv[0], str(s), *argv[1:]])
        assert r.exit_code == 6, r.output
        assert r.stdout == ""
        lines = error_lines(r.stderr.encode())
        assert lines == [f"rmqinspect: error: {s / 'lock'}: a running broker holds this store; copy it first, "
                         f"or pass --live (process {holder.proc.pid} holds lock)"]
        # looking took no lock and did not disturb the broker's: it still holds it
        assert lock_owner(s / "lock") == holder.proc.pid
    assert tree_hashes(s) == before


def test_live_answers_as_the_unlocked_copy_does(store, tmp_path):
    s = _copy(store, tmp_path)
    (s / "lock").touch()
    plain = CliRunner().invoke(cli, ["summary", str(s), "--format", "json"])
    assert plain.exit_code == 0, plain.output
    with LockHolder(s):
        r = CliRunner().invoke(cli, ["summary", str(s), "--format", "json", "--live"])
        v = CliRunner().invoke(cli, ["verify", str(s), "--format", "json", "--live", "--jobs", "2"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == json.loads(plain.stdout)
    assert v.exit_code == 0 and json.loads(v.stdout)["ok"] is True, v.output


def test_an_unlocked_lock_file_or_none_is_no_broker(store, tmp_path):
    s = _copy(store, tmp_path)
    assert live.lock_holder(s) is None  # no lock file (a copy)
    (s / "lock").touch()
    assert live.lock_holder(s) is None  # a lock file nobody holds (the broker stopped)
    with LockHolder(s) as holder:
        assert live.lock_holder(s) == holder.proc.pid
    assert live.lock_holder(s) is None


def test_live_reader_reads_the_size_at_start_and_survives_truncation(store, tmp_path):
    """The file shrinks under the reader (a copy being replaced): pread gives the bytes still there and zeros
    past them, never SIGBUS; the size stays the one seen first."""
    s = _copy(store, tmp_path)
    path = sorted((s / "commitlog").iterdir())[0]
    data = path.read_bytes()
    live.set_live(True)
    try:
        mf = MappedFile(str(path))
        assert mf.size == len(data)
        with open(path, "r+b") as f:
            f.truncate(len(data) // 3)
        with open(path, "ab") as f:  # the writer starts writing it again
            f.write(b"\x01" * 100)
        again = MappedFile(str(path))
        assert again.size == len(data)  # the size at the start, not the one now
        buf = mf.buffer
        assert not isinstance(buf, __import__("mmap").mmap)
        assert len(buf) == len(data)
        assert bytes(buf[:len(data) // 3]) == data[:len(data) // 3]
        assert bytes(buf[len(data) // 3 + 100:]) == bytes(len(data) - len(data) // 3 - 100)
    finally:
        live.set_live(False)


def _race(s, stop: threading.Event) -> int:
    """Append to the newest commitlog file and truncate/rewrite an older one until ``stop``: a broker appending
    and a copy being replaced. Returns how many rounds ran."""
    files = sorted((s / "commitlog").iterdir())
    old, newest = files[1], files[-1]
    content = old.read_bytes()
    rounds = 0
    while not stop.is_set():
        with open(old, "r+b") as f:
            f.truncate(rounds * 4096 % len(content))
        with open(newest, "ab") as f:
            f.write(os.urandom(4096))
        with open(old, "r+b") as f:
            f.seek(0)
            f.write(content)
        rounds += 1
    return rounds


@pytest.mark.parametrize("argv", [["verify", "--jobs", "1", "--format", "json"],
                                  ["verify", "--jobs", "2", "--format", "json"],
                                  ["decode-commitlog", "--format", "ndjson"],
                                  ["summary", "--jobs", "2", "--format", "json"]])
def test_live_walk_while_a_writer_appends_and_truncates_never_dies(store, tmp_path, argv):
    s = _copy(store, tmp_path)
    (s / "lock").touch()
    with LockHolder(s):
        stop = threading.Event()
        rounds = []
        t = threading.Thread(target=lambda: rounds.append(_race(s, stop)))
        t.start()
        try:
            results = [run_cli([argv[0], str(s), "--live", *argv[1:]]) for _ in range(3)]
        finally:
            stop.set()
            t.join()
    assert rounds[0] > 0
    for r in results:
        assert 0 <= r.returncode <= 6, (r.returncode, r.stderr[-500:])  # a signal death is negative
        assert json_problem(argv[-1], r.stdout) is None
        assert b"Traceback" not in r.stderr
