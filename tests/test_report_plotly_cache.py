"""The per-user cache of plotly.js compressed (rmqinspect/report/plotly_cache.py): it gives exactly the string a
fresh ``gzip.compress(js, 6, mtime=0)`` + base64 gives, a second run reads it instead of compressing, a file that
does not prove itself is ignored and replaced, a cache that cannot be written costs nothing but the compression,
``RMQINSPECT_CACHE_DIR=`` writes nothing, and a whole report is the same bytes with an empty and a filled cache.
Every test keeps its cache in tmp_path (conftest.py points the rest of the suite at a session temp dir)."""

from __future__ import annotations

import base64
import errno
import gzip
import hashlib
import os
import pkgutil
import re
import stat
import time
import zlib

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.report import plotly_cache as pc
from rmqinspect.report import plotly_json as pj
from support import require_oracle

pytest.importorskip("plotly")
JS = pkgutil.get_data("plotly", "package_data/plotly.min.js")
FRESH = base64.b64encode(gzip.compress(JS, 6, mtime=0)).decode("ascii")


def cached_files(cache) -> list[str]:
    return sorted(os.listdir(cache)) if os.path.isdir(cache) else []


def no_compression(monkeypatch):
    """From here on, any gzip compression (by gzip or by zlib) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("compressed although the cache holds the bundle")

    monkeypatch.setattr(gzip, "compress", refuse)
    monkeypatch.setattr(zlib, "compress", refuse)


def test_the_cached_string_is_the_fresh_compression_and_its_name_carries_the_key(tmp_path):
    cache = tmp_path / "cache"
    assert pj.plotly_js_gzip_base64(str(cache)) == FRESH
    [name] = cached_files(cache)
    assert hashlib.sha256(JS).hexdigest() in name and f"zlib{zlib.ZLIB_RUNTIME_VERSION}" in name
    assert "gzip6" in name and "mtime0" in name
    assert (cache / name).read_text("ascii") == FRESH
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_a_second_call_reads_the_cache_and_compresses_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    pc.gzip_base64(JS, str(cache))
    [name] = cached_files(cache)
    before = os.stat(cache / name)
    no_compression(monkeypatch)
    assert pc.gzip_base64(JS, str(cache)) == FRESH
    after = os.stat(cache / name)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    assert cached_files(cache) == [name]


def test_another_bundle_zlib_or_python_gets_another_file(monkeypatch):
    name = pc.cache_file_name(JS)
    assert pc.cache_file_name(JS + b"\n") != name  # a plotly upgrade
    monkeypatch.setattr(zlib, "ZLIB_RUNTIME_VERSION", "9.9.9")
    assert pc.cache_file_name(JS) != name


def _corruptions():
    good = FRESH.encode("ascii")
    blob = base64.b64decode(good)
    mid = len(good) // 2
    flipped = good[:mid] + (b"A" if good[mid:mid + 1] != b"A" else b"B") + good[mid + 1:]
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "truncated by one base64 quantum": good[:-4],
        "garbage": os.urandom(4096),
        "one base64 character changed": flipped,
        "a newline at the end": good + b"\n",
        "a second gzip member after it": base64.b64encode(blob + gzip.compress(b"x", 6, mtime=0)),
        "another bundle": base64.b64encode(gzip.compress(JS[:-1], 6, mtime=0)),
        "another header (mtime set)": base64.b64encode(gzip.compress(JS, 6, mtime=1)),
        "not ascii": b"\xff\xfe" + good[2:],
    }


@pytest.mark.parametrize("kind", list(_corruptions()))
def test_a_cache_file_that_does_not_prove_itself_is_ignored_and_replaced(tmp_path, kind):
    cache = tmp_path / "cache"
    cache.mkdir()
    path = cache / pc.cache_file_name(JS)
    path.write_bytes(_corruptions()[kind])
    assert pc.gzip_base64(JS, str(cache)) == FRESH
    assert path.read_text("ascii") == FRESH
    assert cached_files(cache) == [path.name]  # no temp file left


def test_a_directory_in_the_cache_files_place_gives_the_fresh_string_and_no_temp_file(tmp_path):
    cache = tmp_path / "cache"
    (cache / pc.cache_file_name(JS)).mkdir(parents=True)
    assert pc.gzip_base64(JS, str(cache)) == FRESH
    assert cached_files(cache) == [pc.cache_file_name(JS)] and (cache / pc.cache_file_name(JS)).is_dir()


def test_a_cache_dir_that_cannot_be_made_gives_the_fresh_string(tmp_path):
    (tmp_path / "file").write_bytes(b"")
    assert pc.gzip_base64(JS, str(tmp_path / "file" / "cache")) == FRESH
    assert cached_files(tmp_path) == ["file"]


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failed_write_gives_the_fresh_string_and_leaves_no_temp_file(tmp_path, monkeypatch, err):
    """The rename failing (a full disk, a read-only or forbidden directory: root writes through chmod, so the
    failure is made) is swallowed and the temp file it would have renamed is removed."""
    cache = tmp_path / "cache"

    def fail(src, dst):
        assert os.path.exists(src)  # the temp file was written beside the cache file
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "replace", fail)
    assert pc.gzip_base64(JS, str(cache)) == FRESH
    assert cached_files(cache) == []


def test_temp_files_of_a_killed_writer_are_removed_once_an_hour_old(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    old = cache / (pc.cache_file_name(JS) + ".123.abcd.tmp")
    young = cache / (pc.cache_file_name(JS) + ".124.abcd.tmp")
    other = cache / "not-ours.tmp"
    for p in (old, young, other):
        p.write_bytes(b"partial")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    os.utime(other, (two_hours_ago, two_hours_ago))
    assert pc.gzip_base64(JS, str(cache)) == FRESH
    assert cached_files(cache) == sorted([pc.cache_file_name(JS), young.name, other.name])


def test_the_cache_dir_comes_from_the_environment_in_order():
    home = {"HOME": "/home/u"}
    assert pc.cache_dir_from_environ({**home, "RMQINSPECT_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == "/c"
    assert pc.cache_dir_from_environ({**home, "RMQINSPECT_CACHE_DIR": "", "XDG_CACHE_HOME": "/x"}) is None
    assert pc.cache_dir_from_environ({**home, "XDG_CACHE_HOME": "/x"}) == "/x/rmqinspect"
    assert pc.cache_dir_from_environ({**home, "XDG_CACHE_HOME": "relative"}) == "/home/u/.cache/rmqinspect"
    assert pc.cache_dir_from_environ(home) == "/home/u/.cache/rmqinspect"


def test_no_cache_dir_compresses_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert pc.gzip_base64(JS, None) == FRESH == pc.gzip_base64(JS, "")
    assert os.listdir(tmp_path) == []


STORE = "rocketmq-all-4.9.8/crash-torn-tail"


def report_page(tmp_path, store) -> bytes:
    """One ``rmqinspect report`` run's page (the same --out path each run: the command line is in the page)."""
    out = tmp_path / "r.html"
    res = CliRunner().invoke(cli, ["report", store, "--out", str(out), "--as-of", "2026-11-21T21:40:00Z",
                                   "--jobs", "1"])
    assert res.exit_code == 0, res.output
    page = out.read_bytes()
    out.unlink()
    return page


def test_a_report_is_the_same_bytes_with_an_empty_a_filled_and_no_cache(tmp_path, monkeypatch):
    store = str(require_oracle(STORE) / "store")
    cache = tmp_path / "cache"
    monkeypatch.setenv("RMQINSPECT_CACHE_DIR", str(cache))
    empty = report_page(tmp_path, store)
    [name] = cached_files(cache)
    before = os.stat(cache / name)
    filled = report_page(tmp_path, store)
    after = os.stat(cache / name)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # read, not rewritten
    monkeypatch.setenv("RMQINSPECT_CACHE_DIR", "")
    none = report_page(tmp_path, store)
    assert empty == filled == none
    blob = re.search(rb"<script type='application/octet-stream' id='plotly-js-gzip'>(.*?)</script>", empty).group(1)
    assert blob.decode("ascii") == FRESH


def test_an_empty_cache_setting_makes_the_report_write_no_cache(tmp_path, monkeypatch):
    """RMQINSPECT_CACHE_DIR="" wins over XDG_CACHE_HOME and HOME, both pointed where a write would show."""
    store = str(require_oracle(STORE) / "store")
    (tmp_path / "home").mkdir()
    (tmp_path / "xdg").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("RMQINSPECT_CACHE_DIR", "")
    report_page(tmp_path, store)
    assert os.listdir(tmp_path / "home") == [] and os.listdir(tmp_path / "xdg") == []
    monkeypatch.delenv("RMQINSPECT_CACHE_DIR")
    report_page(tmp_path, store)  # the same run without the setting does write there: the check above can fail
    assert cached_files(tmp_path / "xdg" / "rmqinspect") == [pc.cache_file_name(JS)]
