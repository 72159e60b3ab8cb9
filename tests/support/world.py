"""The world around the bytes, for tests of world events (a broker holding the store, a full disk, a signal, a
broken pipe): stores made by the project's writer, the CLI run as a real process, a lock held the JVM's way."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

HOLD_LOCK = r"""
import fcntl, os, struct, sys, time
# as the broker does (DefaultMessageStore.start: lockFile.getChannel().tryLock(0, 1, false)): the JVM's
# FileChannel lock is fcntl(F_SETLK) with F_WRLCK on a read-write descriptor of the lock file
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
print("locked", flush=True)
sys.stdin.read()  # held until the test closes our stdin
"""


def make_store(root: Path, messages: int = 30000, file_size: int = 1 << 20) -> Path:
    """A store of ``messages`` mixed messages over commitlog files of ``file_size`` bytes (consume queues, index
    files, checkpoint), written by the project's writer."""
    from rmqinspect.fixtures.sample import mixed_messages
    from rmqinspect.fixtures.store import StoreWriter

    with StoreWriter(str(root), commitlog_file_size=file_size, cq_file_size=20 * 2000) as w:
        for s in mixed_messages(messages):
            w.append(s)
    return root


class LockHolder:
    """A separate process holding the store's lock the way a running broker does (F_GETLK never reports the
    asking process's own locks, so the holder must be another process)."""

    def __init__(self, store: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store / "lock")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(10)

    def __enter__(self) -> LockHolder:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_owner(path: Path) -> int | None:
    """Who holds a POSIX lock on ``path``, asked independently of rmqinspect."""
    fd = os.open(path, os.O_RDONLY)
    try:
        got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
        t, _, _, _, pid = struct.unpack("hhqqi", got[:struct.calcsize("hhqqi")])
        return None if t == fcntl.F_UNLCK else pid
    finally:
        os.close(fd)


def cli_process(args: list[str], **kw) -> subprocess.Popen:
    """``rmqinspect ARGS`` as its own process in its own session (its process group is its pid: a worker left
    behind is found with killpg(pid, 0))."""
    env = dict(os.environ, RMQINSPECT_DEBUG="")
    pre = kw.pop("preexec_fn", None)

    def preexec() -> None:
        # a job started in the background by a shell has SIGINT ignored, and a child inherits that (rmqinspect keeps
        # an ignored SIGINT ignored, as nohup wants): give it the default, as a terminal's foreground job has
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if pre is not None:
            pre()

    return subprocess.Popen([sys.executable, "-m", "rmqinspect", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=env, preexec_fn=preexec, **kw)


def run_cli(args: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    p = cli_process(args, **kw)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def group_gone(pgid: int, wait: float = 5.0) -> bool:
    """Whether no process of the group ``pgid`` is left (workers included), waiting up to ``wait`` seconds."""
    end = time.monotonic() + wait
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


def json_problem(fmt: str, text: bytes) -> str | None:
    """Why ``text`` is not valid output of ``--format fmt`` (empty output is valid: nothing was written)."""
    try:
        s = text.decode("utf-8")
        if fmt == "json":
            if s.strip():
                json.loads(s)
        elif fmt == "ndjson":
            if s and not s.endswith("\n"):
                return "NDJSON does not end on a complete line"
            for line in s.splitlines():
                json.loads(line)
    except (ValueError, UnicodeDecodeError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def error_lines(stderr: bytes) -> list[str]:
    """The stderr lines that are not notes or warnings."""
    return [ln for ln in stderr.decode("utf-8", "replace").splitlines()
            if ln and not ln.startswith(("rmqinspect: note:", "rmqinspect: warning:"))]
