"""The CLI contracts a new user met: one test per behaviour (exit codes, messages, formats), each failing
before its fix."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rmqinspect.cli import main as cli_main
from rmqinspect.cli.main import COMMANDS, cli
from support import require_oracle

SAMPLE = "tests/fixtures/sample-store"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# a path inside a store, or just above it, means that store
def test_a_path_inside_or_above_a_store_means_that_store():
    root = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    inside = root / "store" / "consumequeue" / "LogTopic" / "1" / "00000000000000000000"
    r = run("summary", inside, "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["abort_present"] is True and doc["messages"] > 1000
    assert "lies inside the store" in r.stderr
    r = run("summary", root, "--format", "json")  # the scenario directory just above ./store
    assert r.exit_code == 0 and json.loads(r.stdout)["abort_present"] is True
    assert f"reading the store inside it, {root / 'store'}" in r.stderr
    r = run("summary", root.parent)  # one directory per scenario, each holding ./store: refused, naming them
    assert r.exit_code == 3 and f"it holds the stores {root.parent / 'clean' / 'store'}, " in r.stderr


# identifiers are never cut piped (rendering on a terminal: tests/test_rendering.py); notes after the table
def test_piped_tables_never_cut_identifiers():
    r = run("summary", SAMPLE)
    long_topic = next(t for t in json.loads(run("summary", SAMPLE, "--format", "json").stdout)["topics"]
                      if t.startswith("V2Topic"))
    assert len(long_topic) > 60 and long_topic in r.stdout and "…" not in r.stdout
    r = run("rebuild", SAMPLE, "--dry-run")
    assert r.output.rstrip().splitlines()[-1].startswith("rmqinspect: note:")  # after the table, not in it


# damaged bytes: a negative offset is a usage error
def test_negative_offset_is_a_usage_error():
    r = run("decode-commitlog", SAMPLE, "--offset", "-5")
    assert r.exit_code == 2 and "outside the range" in r.stderr


# times: epoch seconds refused with the spellings that work; "s" suffix and relative times accepted
def test_epoch_seconds_are_refused_and_relative_times_accepted():
    r = run("index-lookup", SAMPLE, "--topic", "OrderTopic", "--key", "ord-14", "--begin", "1795296980")
    assert r.exit_code == 2 and "looks like epoch seconds" in r.stderr and "1795296980000" in r.stderr
    assert "1795296980s" in r.stderr and "2026-11-21T" in r.stderr
    r = run("index-lookup", SAMPLE, "--topic", "OrderTopic", "--key", "ord-14", "--begin", "1795296980s",
            "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["query"]["begin"] == 1795296980000
    r = run("decode-commitlog", SAMPLE, "--since", "100000d", "--count", "1", "--format", "json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 1
    assert "UTC unless it carries an offset" in " ".join(run("decode-commitlog", "--help").stdout.split())


# empty answers: one sentence, nearest topics, exit 3, everywhere; ids case-insensitive
def test_empty_answers_name_the_nearest_and_ids_ignore_case():
    r = run("decode-commitlog", SAMPLE, "--topic", "OrderTopc")
    assert r.exit_code == 3 and "nearest: OrderTopic" in r.stderr
    r = run("cq", SAMPLE, "--topic", "OrderTopc", "--queue", "0")
    assert r.exit_code == 3 and "nearest: OrderTopic" in r.stderr
    r = run("cq", SAMPLE, "--topic", "OrderTopic", "--queue", "0", "--from", "100000")
    assert r.exit_code == 3 and "no consume-queue entry at or after queue offset 100000" in r.stderr
    r = run("index-lookup", SAMPLE, "--topic", "OrderTopic", "--key", "no-such-key")
    assert r.exit_code == 3 and "carries the key 'no-such-key'" in r.stderr
    r = run("decode-commitlog", SAMPLE, "--uniq-key", "c0a80a0b3e8f1b6d3586f1f8665c0005", "--format", "json")
    assert r.exit_code == 0 and [m["physical_offset"] for m in json.loads(r.stdout)] == [1964]


# one broker-version type; rebuild detects; summary's queue bounds as cq --all's
@pytest.mark.parametrize("v", ["4.4", "4.4.0", "4.9.8", "5", "5.x", "5.3.3", "5.x (detected)"])
def test_every_broker_version_spelling_is_accepted_by_rebuild(v):
    r = run("rebuild", SAMPLE, "--dry-run", "--what", "cq", "--broker-version", v, "--format", "json")
    assert r.exit_code == 0, r.output


def test_detected_version_reads_v2_records_and_bounds_agree():
    # the sample store has V2 records: what summary prints must read them as the detected 5.x broker does
    v2 = next(t for t in json.loads(run("summary", SAMPLE, "--format", "json").stdout)["topics"]
              if t.startswith("V2Topic"))
    r = run("decode-commitlog", SAMPLE, "--topic", v2, "--broker-version", "5.x (detected)", "--count", "1",
            "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert run("decode-commitlog", SAMPLE, "--topic", v2, "--broker-version", "5.0", "--count", "1").exit_code == 4
    r = run("rebuild", SAMPLE, "--dry-run", "--what", "index")
    assert "--broker-version 4.9 from the index headers" in r.stderr
    summ = run("summary", SAMPLE).stdout
    cq_all = {(q["topic"], q["queue_id"]): q["max_offset"]
              for q in json.loads(run("cq", SAMPLE, "--all", "--format", "json").stdout)}
    queues = summ.split("\nQueues (")[1].splitlines()[3:]
    header = summ.split("\nQueues (")[1].splitlines()[1].split()
    col = header.index("max_offset")
    shown = {(r.split()[0], int(r.split()[1])): int(r.split()[col]) for r in queues
             if len(r.split()) == len(header) and r.split()[1].isdigit()}
    assert shown[("OrderTopic", 0)] == cq_all[("OrderTopic", 0)] == 42
    assert all(shown[k] == v for k, v in cq_all.items() if k in shown and not k[0].startswith("SCHEDULE"))


# start-up: no numpy, pyarrow or rocksdict for --help / --version; the table and the modules agree
def test_help_and_version_import_no_heavy_module_and_the_table_matches():
    code = ("import sys; from rmqinspect.cli.main import cli\n"
            "for a in (['--help'], ['--version']):\n"
            "    try: cli(a)\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in ('numpy', 'pyarrow', 'rocksdict', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    cmds = cli.commands  # imports every module
    assert set(cmds) == set(COMMANDS)
    for name, (module, short) in COMMANDS.items():
        assert cmds[name].__module__ == f"rmqinspect.cli.{module}" or cmds[name].callback is not None
        assert cmds[name].help and cmds[name].help.split()[0] == short.split()[0], name
    assert cli_main.LazyGroup


# consumer offsets from a file elsewhere
def test_offsets_file_from_elsewhere_for_consumer_lag(tmp_path):
    root = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    f = tmp_path / "consumerOffset.json"
    f.write_text(json.dumps({"offsetTable": {"LogTopic@g": {"1": 126}}}))
    r = run("consumer-lag", root / "store", "--offsets", f, "--format", "json")
    assert r.exit_code == 0, r.output
    [row] = json.loads(r.stdout)["groups"]
    # the broker keeps LogTopic/1 up to 125 after recovery (expected.json): the group consumed one that is cut
    assert (row["group"], row["max_offset_after"], row["consumed_then_cut"], row["status"]) == ("g", 125, 1,
                                                                                                 "overflow")


def test_offsets_file_from_elsewhere_for_gc(tmp_path):
    root = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    f = tmp_path / "consumerOffset.json"
    f.write_text(json.dumps({"offsetTable": {"LogTopic@g": {"1": 3}}}))
    r = run("gc", root / "store", "--dry-run", "--offsets", f, "--now", "2099-01-01", "--disk-ratio", "0.99",
            "--format", "json")
    assert r.exit_code == 1, r.output  # losses found
    [loss] = json.loads(r.stdout)["losses"]
    assert (loss["group"], loss["consumer_offset"], loss["old_min_offset"]) == ("g", 3, 0)
    assert run("gc", root / "store", "--dry-run", "--offsets", tmp_path / "none.json").exit_code == 2


def test_cq_join_flags_a_queue_behind_and_rebuild_refuses_a_boundary_inside_a_record(tmp_path):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(SAMPLE, store)
    last = store / "consumequeue" / "OrderTopic" / "0" / "00000000000000000600"
    data = last.read_bytes()
    used = max(i + 1 for i in range(len(data) // 20) if data[i * 20:i * 20 + 20] != bytes(20))
    last.write_bytes(data[:(used - 8) * 20] + bytes(len(data) - (used - 8) * 20))  # 8 entries not dispatched
    r = run("cq", store, "--topic", "OrderTopic", "--queue", "0", "--join")
    assert r.exit_code == 1 and "8 more record(s) of this queue" in r.stderr
    assert run("cq", SAMPLE, "--topic", "OrderTopic", "--queue", "0", "--join").exit_code == 0
    r = run("rebuild", SAMPLE, "--dry-run", "--to", "600")
    assert r.exit_code == 2 and "lies inside the message record at 579" in r.stderr


def test_dump_snaps_to_the_enclosing_record():
    r = run("dump", SAMPLE, "--offset", "580", "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["enclosing_record"] == {"start": 579, "size": 405, "kind": "message", "reason": ""}
    assert "lies inside the message record at 579" in r.stderr
    r = run("dump", SAMPLE, "--offset", "580", "--snap", "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["physical_offset"] == 579 and doc["length"] == 405
    assert [f["name"] for f in doc["fields"]][-2:] == ["properties_length", "properties"]
    r = run("decode-commitlog", SAMPLE, "--offset", "580")
    assert r.exit_code == 4 and "lies inside the message record at 579" in r.stderr
    r = run("decode-commitlog", SAMPLE, "--offset", "580", "--snap", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["physical_offset"] == 579


def test_torn_record_bytes_are_shown():
    root = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    r = run("decode-commitlog", root / "store", "--offset", "1197830", "--format", "hex")
    assert r.exit_code == 4 and "00124706  00 00 00 f9 da a3 20 a7" in r.stdout
    r = run("dump", root / "store", "--offset", "1197830", "--format", "json")
    fields = {f["name"]: f for f in json.loads(r.stdout)["fields"]}
    assert fields["total_size"]["value"] == "249" and "stop adding up" in fields["properties_length"]["note"]


def test_reader_closing_the_pipe_early_is_no_error():
    # `rmqinspect ... | head -1`: notes are flushed after the output, which must survive a closed stdout
    p = subprocess.Popen([sys.executable, "-m", "rmqinspect", "decode-commitlog", SAMPLE], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and "Traceback" not in err, err
