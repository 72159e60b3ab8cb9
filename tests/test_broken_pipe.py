"""A reader that stops early (`rmqinspect decode-commitlog STORE | head -3`): every command stays quiet (nothing on
stderr, exit 0) with --jobs 1 and --jobs 2, and leaves no worker process behind."""

from __future__ import annotations

import pytest

from support.world import cli_process, error_lines, group_gone, make_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("pipe") / "store", messages=8000, file_size=1 << 18)


COMMANDS = [
    ["decode-commitlog", "{store}"],
    ["decode-commitlog", "{store}", "--format", "ndjson"],
    ["decode-commitlog", "{store}", "--format", "json"],
    ["cq", "{store}", "--all", "--format", "ndjson"],
    ["dump", "{store}", "--offset", "0", "--length", "200000"],
    ["summary", "{store}", "--jobs", "1"],
    ["summary", "{store}", "--jobs", "2", "--format", "json"],
    ["verify", "{store}", "--jobs", "1", "--format", "json"],
    ["verify", "{store}", "--jobs", "2"],
    ["salvage", "{store}", "--jobs", "2", "--format", "ndjson"],
    ["rebuild", "{store}", "--dry-run", "--jobs", "2", "--format", "json"],
    ["export", "{store}", "--out", "{out}", "--jobs", "2", "--format", "json"],
    ["recover", "{store}", "--dry-run", "--jobs", "1"],
    ["index-lookup", "{store}", "--topic", "OrderTopic", "--key", "ord-1"],
    ["fate", "{store}", "--offset", "0", "--format", "json"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:1] + a[2:]) for a in COMMANDS])
def test_a_reader_that_stops_early_gets_a_quiet_exit(store, tmp_path, argv):
    p = cli_process([a.format(store=store, out=tmp_path / "out") for a in argv])
    assert p.stdout is not None and p.stderr is not None
    head = p.stdout.read(3)  # `| head -c 3`: the reader goes away
    p.stdout.close()
    err = p.stderr.read()
    p.wait(120)
    assert head, "the command wrote nothing at all"
    assert error_lines(err) == [], err[-600:]  # notes and warnings on the data may be said, nothing else
    assert p.returncode == 0, (p.returncode, err[-600:])
    assert group_gone(p.pid)
