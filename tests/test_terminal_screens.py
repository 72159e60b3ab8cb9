"""The CLI on a real pseudo-terminal at 80 and 200 columns (tests/support/pty_screen.py): no line is wider than the
terminal unless it is one identifier alone; every offset, topic and key of the JSON answer is on the screen whole;
line counts stay bounded (a 200-character topic over 100 queues does not turn tables into pages of blocks)."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
from click.testing import CliRunner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from rmqinspect.cli.main import cli  # noqa: E402
from rmqinspect.fixtures.sample import LONG_TOPIC  # noqa: E402
from support import tree_hashes  # noqa: E402
from support.pty_screen import run_on_terminal  # noqa: E402
from support.wide_store import CJK_KEY, CJK_TAG, KEY, KEY_HITS, build_wide_store  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "tests", "fixtures", "sample-store")


def as_json(*args: str) -> dict | list:
    r = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    root = build_wide_store(str(tmp_path_factory.mktemp("wide") / "store"))
    before = tree_hashes(root)
    yield root
    assert tree_hashes(root) == before  # no command wrote into the store it inspected


@pytest.mark.parametrize("columns", [80, 200])
def test_summary_of_the_sample_store_fits_the_terminal(columns):
    s = run_on_terminal(["summary", SAMPLE], columns)
    assert s.exit_code == 0, s.stderr
    assert s.overlong() == [], s.text
    if columns == 80:
        assert len(s.lines) <= 60, s.text
    assert "-[ RECORD" not in s.text  # the long topic goes above its rows, the tables stay tables
    doc = as_json("summary", SAMPLE)
    tokens = s.tokens()
    for topic in doc["topics"]:
        assert topic in tokens, topic
    for f in doc["files"]:
        assert f["name"] in tokens and str(f["start_offset"]) in tokens
    assert {str(doc["min_physical_offset"]), str(doc["max_physical_offset"])} <= tokens
    assert "last shutdown    clean" in s.text
    # the Queues table explains why messages can exceed max_offset
    assert "prepared and rolled-back transaction records get no consume-queue entry" in " ".join(s.text.split())


def test_summary_says_the_crash_and_the_queues_behind(wide):
    s = run_on_terminal(["summary", wide], 80)
    assert s.exit_code == 0 and s.overlong() == [], s.text
    doc = as_json("summary", wide)
    assert doc["abort_present"]
    flat = " ".join(s.text.split())
    assert "last shutdown abnormal: the abort file is present" in flat
    assert "queues end before the commit log's last entry for them" in flat
    # 76 queues: one line each, the 200-character topic printed once above the 75 rows it names
    assert sum(1 for line in s.lines if line == LONG_TOPIC) == 2  # Topics and Queues tables
    assert len(s.lines) <= len(doc["queues"]) + 45


def test_verify_lists_one_line_per_range_at_80_columns(wide):
    s = run_on_terminal(["verify", wide], 80)
    assert s.exit_code == 1 and s.overlong() == [], s.text
    problems = as_json("verify", wide)["problem_ranges"]
    listing = s.lines[:s.lines.index("Verify summary")]  # the Problems table, before the summary and the counts
    ranges = [line for line in listing if re.match(r"[a-z_]+ +\d+ +\d+ +\d+ ", line)]
    assert len(ranges) == len(problems)
    for p in problems:
        assert any(line.split()[:3] == [p["kind"], str(p["start"]), str(p["end"])] for line in ranges), p
    assert len(s.lines) <= len(problems) + 25
    verbose = run_on_terminal(["verify", wide, "--verbose"], 80)
    assert verbose.overlong() == [] and len(verbose.lines) > 5 * len(problems)  # a block per range, reasons


@pytest.mark.parametrize("columns", [80, 200])
def test_index_lookup_prints_every_offset_whole(wide, columns):
    s = run_on_terminal(["index-lookup", wide, "--topic", LONG_TOPIC, "--key", KEY], columns)
    assert s.exit_code == 0, s.stderr
    assert s.overlong() == [], s.text
    doc = as_json("index-lookup", wide, "--topic", LONG_TOPIC, "--key", KEY)
    assert len(doc["verified_offsets"]) >= KEY_HITS * 3 // 4 - 1 and doc["collisions"]
    tokens = s.tokens()
    for off in doc["phy_offsets"] + doc["raw"] + doc["collisions"]:
        assert str(off) in tokens, off  # never cut inside the number
    assert LONG_TOPIC in tokens


def test_east_asian_wide_characters_keep_columns_in_line(wide):
    s = run_on_terminal(["decode-commitlog", wide, "--topic", "OrderTopic", "--count", "12",
                         "--columns", "physical_offset,tags,keys,queue_offset"], 80)
    from rich.cells import cell_len

    assert s.exit_code == 0 and CJK_TAG in s.text and CJK_KEY in s.text
    header, rule, *rows = s.lines
    starts = [cell_len(header[:header.index(c)]) for c in ("tags", "keys", "queue_offset")]
    for row in rows:  # each column starts at the same terminal cell on every row
        at = [cell_len(row[:m.start()]) for m in re.finditer(r"\S+", row)]
        assert at[1:4] == starts, (row, starts)
    assert all(cell_len(line) <= 80 for line in s.lines)


def test_recover_says_the_broker_version_once():
    s = run_on_terminal(["recover", SAMPLE, "--dry-run"], 80)
    assert s.exit_code == 0 and s.overlong() == [], s.text
    said = (s.text + s.stderr).replace("\n", " ")
    assert " ".join(said.split()).count("records use magic 0xDAA320AB") == 1, (s.text, s.stderr)
