"""Every numeric option has a range: a value outside it is a usage error (exit 2) naming the option and the
allowed range, never a ZeroDivisionError / OverflowError / 16 GiB allocation inside an analysis."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import SAMPLE_STORE

S = str(SAMPLE_STORE)
L63 = str(1 << 63)

CASES = [
    # option values nobody checked
    (["index-lookup", S, "--key", "k", "--topic", "T", "--index-slots", "0"], "--index-slots"),
    (["cq", S, "--topic", "T", "--queue", "2147483648", "--join"], "--queue"),
    (["timers", S, "--precision-ms", "0"], "--precision-ms"),
    (["gc", S, "--dry-run", "--file-reserved-hours", "1e308"], "--file-reserved-hours"),
    (["gc", S, "--dry-run", "--file-reserved-hours", "nan"], "--file-reserved-hours"),
    (["gc", S, "--dry-run", "--now", "-99999999999999999"], "--now"),
    (["gc", S, "--dry-run", "--now", "9999-12-31T23:59:59", "--tz", "Asia/Shanghai"], "--now"),
    (["gc", S, "--dry-run", "--disk-ratio", "nan", "--format", "json"], "--disk-ratio"),
    # sizes and counts from options, bounded
    (["gc", S, "--dry-run", "--now", "0001-01-01"], "--now"),
    (["gc", S, "--dry-run", "--now", L63], "--now"),
    (["gc", S, "--dry-run", "--disk-ratio", "inf", "--format", "json"], "--disk-ratio"),
    (["gc", S, "--dry-run", "--disk-ratio", "-inf", "--format", "ndjson"], "--disk-ratio"),
    (["rebuild", S, "--dry-run", "--cq-file-size", "-9223372036854775808"], "--cq-file-size"),
    (["rebuild", S, "--dry-run", "--cq-file-size", "0"], "--cq-file-size"),
    (["rebuild", S, "--dry-run", "--cq-file-size", str(1 << 63)], "--cq-file-size"),
    (["rebuild", S, "--dry-run", "--index-slots", "2147483648"], "--index-slots"),
    (["rebuild", S, "--dry-run", "--index-slots", "1e30"], "--index-slots"),
    (["rebuild", S, "--dry-run", "--index-max", "1e30"], "--index-max"),
    (["rebuild", S, "--dry-run", "--index-max", "9223372036854775807"], "--index-max"),
    (["rebuild", S, "--dry-run", "--index-max", "0"], "--index-max"),
    (["index-lookup", S, "--key", "k", "--topic", "T", "--index-slots", "9223372036854775807"], "--index-slots"),
    (["rocksdb-cq", S, "--from", "1e30"], "--from"),
    (["rocksdb-cq", S, "--from", str(10 ** 30)], "--from"),  # the integer the fuzzer meant by 1e30
    (["rebuild", S, "--dry-run", "--index-slots", str(10 ** 30)], "--index-slots"),
    (["rebuild", S, "--dry-run", "--index-max", str(10 ** 30)], "--index-max"),
    (["cq", S, "--topic", "T", "--queue", "0", "--from", "-1"], "--from"),
    (["cq", S, "--topic", "T", "--queue", "0", "--count", L63], "--count"),
    (["recover", S, "--dry-run", "--cq-file-size", "9223372036854775807"], "--cq-file-size"),
    (["salvage", S, "--out", "/nonexistent/x", "--broker-version", ""], "--broker-version"),
    (["salvage", S, "--out", "/nonexistent/x", "--broker-version", "-1"], "--broker-version"),
    (["salvage", S, "--out", "/nonexistent/x", "--broker-version", "garbage"], "--broker-version"),
    (["decode-commitlog", S, "--offset", "-1"], "--offset"),
    (["decode-commitlog", S, "--offset", L63], "--offset"),
    (["decode-commitlog", S, "--queue", "-5"], "--queue"),
    (["verify", S, "--max-errors", L63], "--max-errors"),
]


@pytest.mark.parametrize("argv,option", CASES, ids=[" ".join(a[:1] + a[2:]) for a, _ in CASES])
def test_out_of_range_option_is_a_usage_error(argv, option):
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert option in r.output
    assert "Traceback" not in r.output


def test_the_usage_error_says_the_allowed_range():
    r = CliRunner().invoke(cli, ["timers", S, "--precision-ms", "0"])
    assert r.exit_code == 2 and re.search(r"1<=x<=2147483647|1\s*<=\s*x", r.output), r.output
    r = CliRunner().invoke(cli, ["rebuild", S, "--dry-run", "--index-slots", "1000", "--index-max", "200000000"])
    assert r.exit_code == 2 and "Java int" in r.output, r.output


def test_index_geometry_too_large_for_a_java_int_file_is_refused():
    """slots and items each within a Java int, but 40 + slots*4 + items*20 is not: no broker wrote that file."""
    r = CliRunner().invoke(cli, ["index-lookup", S, "--key", "k", "--topic", "T", "--index-slots", "600000000",
                                 "--index-max", "10"])
    assert r.exit_code == 2 and "--index-slots" in r.output, r.output


def test_cq_file_size_is_rounded_up_to_a_unit_like_the_broker(tmp_path):
    """--cq-file-size 21 made recover --dry-run fail with an IndexError; the broker rounds it up to 40."""
    r = CliRunner().invoke(cli, ["recover", S, "--dry-run", "--cq-file-size", "21", "--format", "json"])
    assert r.exit_code in (0, 1), (r.exit_code, r.output, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_in_range_values_still_work():
    r = CliRunner().invoke(cli, ["gc", S, "--dry-run", "--disk-ratio", "0.5", "--now", "2026-01-01",
                                 "--format", "json"])
    assert r.exit_code in (0, 1), r.output
