"""Numbers from disk are never trusted: commitlog/CQ file names must be exactly 20 ASCII digits
within a Java long; a store time outside the calendar (one flipped bit) is data, never a loop bound or an
OverflowError."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import struct
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.sinks.indexfile import index_file_name
from rmqinspect.store.layout import is_offset_file_name
from support import require_oracle, tree_hashes

ARABIC_INDIC = "".join(chr(0x0660 + int(c)) for c in "00000000000000786432")


@pytest.mark.parametrize("name,ok", [
    ("00000000000000786432", True),
    ("09223372036854775807", True),
    ("09223372036854775808", False),  # Long.MAX_VALUE + 1
    ("99999999999999999999", False),
    (ARABIC_INDIC, False),  # int() accepts these; RocketMQ never writes them
    ("0000000000000078643２", False),  # a fullwidth digit
    ("00000000000000786432\n", False),
    ("0000000000000078643", False),
])
def test_offset_file_names(name, ok):
    assert is_offset_file_name(name) is ok


@pytest.mark.parametrize("name,ok", [("0", True), ("15", True), ("-1", True), ("2147483647", True),
                                     ("2147483648", False), ("٣", False), ("99999999999999999999", False)])
def test_queue_dir_names(name, ok):
    from rmqinspect.store.layout import is_queue_dir_name

    assert is_queue_dir_name(name) is ok


@pytest.fixture
def clean_store(tmp_path):
    src = require_oracle("rocketmq-all-4.9.8/clean") / "store"
    dst = tmp_path / "store"
    shutil.copytree(src, dst)
    return dst


def _runner():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.mark.parametrize("bad", ["99999999999999999999", "09223372036854775808", ARABIC_INDIC])
@pytest.mark.parametrize("argv", [["verify", "{s}"], ["salvage", "{s}", "--out", "{t}/salvaged.ndjson"],
                                  ["recover", "{s}", "--dry-run"],
                                  ["recover", "{s}", "--dry-run", "--mode", "abnormal"],
                                  ["consumer-lag", "{s}", "--mode", "abnormal"], ["export", "{s}", "--out", "{t}/exp"],
                                  ["summary", "{s}"]])
def test_commitlog_file_named_past_long_max(clean_store, tmp_path, bad, argv):
    """OverflowError in verify / salvage.walk_batches / recover.plan_recovery / export."""
    cl = clean_store / "commitlog"
    victim = sorted(cl.iterdir())[3]
    victim.rename(cl / bad)
    before = tree_hashes(clean_store)
    args = [a.format(s=clean_store, t=tmp_path) for a in argv] + ["--format", "json"]
    r = _runner().invoke(cli, args)
    assert r.exit_code in (0, 1, 3, 4), (r.exit_code, r.stderr, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.stderr
    if r.stdout.strip():
        json.loads(r.stdout)
    assert tree_hashes(clean_store) == before


def test_index_file_name_matches_the_calendar_and_is_total():
    for ts in (0, 999, 86_400_000, 1_795_296_986_332, 253_402_300_799_999):
        d = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ts)
        assert index_file_name(ts) == d.strftime("%Y%m%d%H%M%S") + "%03d" % (d.microsecond // 1000)
    assert index_file_name(1_795_296_986_332 ^ (1 << 50)).startswith("37705")  # year ~37700: no OverflowError
    assert index_file_name((1 << 63) - 1)
    assert index_file_name(-5) == index_file_name(0)


def _flip_store_time(store, bit: int) -> None:
    """Flip one bit of the FIRST record's STORETIMESTAMP (IPv4 record: byte 56): the first index file then
    begins far in the future and every later file name must still come after it."""
    f = store / "commitlog" / "00000000000000000000"
    with open(f, "r+b") as fh:
        fh.seek(56)
        v = struct.unpack(">q", fh.read(8))[0]
        assert 1_500_000_000_000 < v < 2_000_000_000_000  # a real store time: the layout is as assumed
        fh.seek(56)
        fh.write(struct.pack(">q", v ^ (1 << bit)))


@pytest.mark.parametrize("bit", [44, 50, 62])
def test_rebuild_dry_run_with_a_store_time_far_in_the_future(clean_store, tmp_path, bit):
    """bit 44 (year ~2584) ran rebuild --dry-run for > 10 minutes (the next index file name was
    searched 1 ms at a time); bit 50 (year ~37700) raised OverflowError in index_file_name. Small index files
    (--index-max 50) so the index rolls many times."""
    _flip_store_time(clean_store, bit)
    before = tree_hashes(clean_store)
    p = subprocess.run([sys.executable, "-m", "rmqinspect", "rebuild", str(clean_store), "--dry-run", "--out",
                        str(tmp_path / "rb"), "--index-max", "50", "--format", "json"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert doc["messages"] > 0
    assert tree_hashes(clean_store) == before
