"""The error contract (cli/output.handle_errors + emit): every exception escaping a command is ONE stderr line
naming the file and offset with a documented exit code; --debug adds the traceback; a failure after output
started leaves JSON valid and NDJSON on complete lines, and the error line says where the output stopped."""

from __future__ import annotations

import json
import os
import shutil

import click
import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.cli.output import emit, format_option, handle_errors
from rmqinspect.store.errors import EXIT_CORRUPT, EXIT_IO, CorruptDataError
from support import require_oracle

# a reader as the library writes them: it holds the file and offset it is at in locals named path / offset
_READER = """
def rows(exc, after):
    path = "/store/commitlog/00000000000000000000"
    for i in range(after):
        offset = i * 100
        yield {"i": i}
    offset = 4242
    raise exc
"""


def _failing_rows(exc: BaseException, after: int = 2):
    ns: dict = {"__name__": "rmqinspect.store.fake_reader"}
    exec(compile(_READER, "fake_reader.py", "exec"), ns)
    return ns["rows"](exc, after)


def _command(exc):
    @click.command()
    @format_option
    @handle_errors
    def cmd(fmt):
        emit(_failing_rows(exc), fmt)
    return cmd


def _runner():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates them
        return CliRunner()


@pytest.mark.parametrize("exc,code", [
    (ValueError("7 is not a valid CompressionType"), EXIT_CORRUPT),
    (OverflowError("date value out of range"), EXIT_CORRUPT),
    (ZeroDivisionError("integer modulo by zero"), EXIT_CORRUPT),
    (KeyError("x"), EXIT_CORRUPT),
    (RecursionError("maximum recursion depth exceeded"), EXIT_CORRUPT),
    (MemoryError(), EXIT_CORRUPT),
    (CorruptDataError("bad magic", "/store/commitlog/00000000000000000000", 4242), EXIT_CORRUPT),
    (OSError(5, "Input/output error", "/store/x"), EXIT_IO),
])
@pytest.mark.parametrize("fmt", ["json", "ndjson", "table"])
def test_failure_mid_stream_keeps_output_valid_and_says_where(exc, code, fmt):
    r = _runner().invoke(_command(exc), ["--format", fmt])
    assert r.exit_code == code, (r.exit_code, r.stderr, r.exception)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    assert err[0].startswith("rmqinspect: error: ")
    assert "output stopped after 2 rows" in err[0]
    if not isinstance(exc, OSError):
        assert "/store/commitlog/00000000000000000000" in err[0]
        assert "4242" in err[0]
    if isinstance(exc, MemoryError):
        assert "too large" in err[0]
    if fmt == "json":
        assert json.loads(r.stdout) == [{"i": 0}, {"i": 1}]
    elif fmt == "ndjson":
        assert r.stdout.endswith("\n")
        assert [json.loads(x) for x in r.stdout.splitlines()] == [{"i": 0}, {"i": 1}]


def test_debug_shows_the_traceback(monkeypatch):
    r = _runner().invoke(_command(ValueError("boom")), ["--format", "json"], env={"RMQINSPECT_DEBUG": "1"})
    assert r.exit_code == EXIT_CORRUPT
    assert "Traceback" in r.stderr and "boom" in r.stderr


def test_global_debug_option_is_accepted():
    r = _runner().invoke(cli, ["--debug", "store-info", "/nonexistent/store"])
    assert r.exit_code == 3
    from rmqinspect.cli.output import set_debug

    set_debug(False)


def test_cq_all_json_stays_valid_when_a_queue_file_is_a_dangling_symlink(tmp_path):
    """issue 12: cq --all --format json exited 5 with stdout ending mid-array."""
    src = require_oracle("rocketmq-all-4.9.8/clean") / "store"
    store = tmp_path / "store"
    shutil.copytree(src, store, symlinks=True)
    qdir = store / "consumequeue" / "LogTopic" / "0"
    victim = sorted(qdir.iterdir())[0]
    victim.unlink()
    os.symlink(tmp_path / "nowhere", victim)
    r = _runner().invoke(cli, ["cq", str(store), "--all", "--format", "json"])
    assert r.exit_code == EXIT_IO, r.stderr
    json.loads(r.stdout)
    assert str(victim) in r.stderr and "output stopped" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_batch_cq_json_stays_valid_when_a_file_name_is_bad(tmp_path):
    """issue 12: a batch-cq file named ...0007 made `batch-cq --format json` print `[` and exit 4."""
    src = require_oracle("rocketmq-all-5.3.3/batchcq") / "store"
    store = tmp_path / "store"
    shutil.copytree(src, store, symlinks=True)
    f = sorted(p for p in (store / "batchconsumequeue").rglob("*") if p.is_file())[0]
    f.rename(f.with_name("00000000000000000007"))
    r = _runner().invoke(cli, ["batch-cq", str(store), "--format", "json"])
    assert r.exit_code == EXIT_CORRUPT
    json.loads(r.stdout)
    assert "00000000000000000007" in r.stderr and "output stopped" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
