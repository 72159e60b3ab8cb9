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
from rmqinspect.errors import EXIT_CORRUPT, EXIT_IO, CorruptDataError
from support import require_oracle

# a reader as the library writes them: damage it meets is said with its file and offset, a header cut short
# through the one chokepoint (errors.unpack_at); anything else escaping it is a value no check caught
_READER = """
import struct

from rmqinspect.errors import unpack_at


def rows(exc, after):
    path = "/store/commitlog/00000000000000000000"
    for i in range(after):
        offset = i * 100
        yield {"i": i}
    offset = 4242
    if exc is None:
        unpack_at(struct.Struct(">iq"), bytes(4250), offset, path, "record header")
    raise exc
"""
FILE = "/store/commitlog/00000000000000000000"


def _failing_rows(exc: BaseException | None, after: int = 2):
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
    (None, EXIT_CORRUPT),  # a header cut by the end of the file, read through unpack_at
    (CorruptDataError("bad magic", FILE, 4242), EXIT_CORRUPT),
    (ValueError("7 is not a valid CompressionType"), EXIT_CORRUPT),
    (OverflowError("date value out of range"), EXIT_CORRUPT),
    (ZeroDivisionError("integer modulo by zero"), EXIT_CORRUPT),
    (KeyError("x"), EXIT_CORRUPT),
    (RecursionError("maximum recursion depth exceeded"), EXIT_CORRUPT),
    (MemoryError(), EXIT_CORRUPT),
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
    if exc is None or isinstance(exc, CorruptDataError):
        assert f"{FILE} @ 4242: " in err[0]  # the reader named them
        if exc is None:
            assert "record header needs 12 bytes, 8 left" in err[0]
    elif not isinstance(exc, OSError):
        # a value no check caught: said with the place in the code, never a file guessed from its variables
        assert FILE not in err[0] and "[in rmqinspect.store.fake_reader.rows:" in err[0]
    if isinstance(exc, MemoryError):
        assert "too large" in err[0]
    if fmt == "json":
        assert json.loads(r.stdout) == [{"i": 0}, {"i": 1}]
    elif fmt == "ndjson":
        assert r.stdout.endswith("\n")
        assert [json.loads(x) for x in r.stdout.splitlines()] == [{"i": 0}, {"i": 1}]


def test_unpack_at_names_file_and_offset_instead_of_a_struct_error():
    import struct

    from rmqinspect.errors import unpack_at

    layout = struct.Struct(">iq")
    assert unpack_at(layout, bytes(20), 8, FILE) == (0, 0)
    for buf, at, left in ((bytes(20), 10, 10), (b"", 0, 0), (bytes(4), 100, 0)):
        with pytest.raises(CorruptDataError) as ei:
            unpack_at(layout, buf, at, FILE, "entry header", base=1000)
        e = ei.value
        assert (e.path, e.offset, e.exit_code) == (FILE, 1000 + at, EXIT_CORRUPT)
        assert str(e) == f"{FILE} @ {1000 + at}: entry header needs 12 bytes, {left} left"


def test_every_error_is_an_rmqinspect_error_with_its_exit_code():
    """One tree at the bottom (rmqinspect.errors): what formats/ raises for undecodable bytes is still a
    ValueError for the callers that test for one, and each class says its exit code once."""
    from rmqinspect import errors
    from rmqinspect.formats.compression import CompressionType, decompress_body

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, BaseException)]
    assert all(issubclass(c, errors.RmqInspectError) for c in classes), classes
    with pytest.raises(errors.DecodeError) as ei:
        decompress_body(CompressionType.ZLIB, b"not zlib")
    assert isinstance(ei.value, ValueError) and ei.value.exit_code == EXIT_CORRUPT
    assert {c.__name__: c.exit_code for c in classes if c.__name__ in (
        "StoreNotFoundError", "BrokerConfigError", "StoreIOError", "UnsafeOutputError", "EngineUnavailableError")} \
        == {"StoreNotFoundError": 3, "BrokerConfigError": 2, "StoreIOError": 5, "UnsafeOutputError": 6,
            "EngineUnavailableError": 5}


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
    """cq --all --format json exited 5 with stdout ending mid-array."""
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
    """a batch-cq file named ...0007 made `batch-cq --format json` print `[` and exit 4."""
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
