"""Start-up guards: what the cheap command paths must not import, checked on sys.modules of a fresh
interpreter that ran the command (not a timing test: benchmarks/bench_startup.py measures the time).

- ``--help``, ``--version`` and decoding a msgId import neither numpy nor construct nor the recovery model, nor
  does any command's ``--help``;
- a key look-up through the index files (IndexService on the sample store, geometry proven from the data, then
  IndexService.queryOffset) imports no numpy: the index files are small, so their geometry proof runs in plain
  Python (store.indexfile SMALL_INDEX_FILE_BYTES);
- ``index-lookup`` (table and JSON) never imports construct, and of the recovery only what its scan needs:
  not the salvage, the DLedger or the report modules; on a small store (the sample) its fate column comes from
  the small recovery scan (analyses.recovery.small), so it imports no numpy and not the recovery plan;
- no table imports importlib.metadata (tables are drawn by cli.output itself, measured with rich.cells);
- ``verify --checks crc,structure`` (the commit log alone) imports none of the consume-queue, index, DLedger or
  recovery modules, nor the decoded-message module: the checks that need them import them when they run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support import REPO, SAMPLE_STORE

CLI = """
import json, sys
from rmqinspect.cli.main import cli
try:
    cli(prog_name="rmqinspect", args={args!r}, standalone_mode=False)
except SystemExit:
    pass
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""

INDEX_ONLY = """
import json, sys
from rmqinspect.analyses.lookup.query import IndexService, query_offset
svc = IndexService({index_dir!r})
res = query_offset(svc, "OrderTopic", "ord-14", 64, 0, (1 << 63) - 1)
assert res.offsets == [1964], res.offsets
assert [i.geometry["source"] for i in svc.infos] == ["inferred"] * len(svc.infos)
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""

# what explain-missing and a look-up in RIP-82's index run: not for decoding an id, nor at --help
LOOK_UP_RUNS = ("rmqinspect.analyses.lookup.explain", "rmqinspect.store.rip82")

# the recovery's report side, which a look-up's fate (truncation offset, re-dispatch range) does not need
REPORT_MODULES = ("rmqinspect.analyses.salvage", "rmqinspect.store.walk.resync", "rmqinspect.analyses.recovery.dledger",
                  "rmqinspect.analyses.verify", "rmqinspect.report", "rmqinspect.analyses.report_data")


def _modules(code: str) -> tuple[set[str], str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    head, _, mods = out.stdout.rpartition("\nMODULES ")
    return set(json.loads(mods)), head


def _loaded(mods: set[str], name: str) -> bool:
    return name in mods or any(m.startswith(name + ".") for m in mods)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["msgid", "C0A80A0B3E8F1B6D3586F1F8665C0005"],
                                  ["msgid", "C0A80A0B3E8F1B6D3586F1F8665C0005", "--format", "json"]])
def test_cheap_commands_import_no_numpy_construct_or_recovery(args):
    mods, out = _modules(CLI.format(args=args))
    assert out.strip()  # the command did run and print
    for heavy in ("numpy", "construct", "rmqinspect.analyses.recovery", "pyarrow", "rocksdict") + LOOK_UP_RUNS:
        assert not _loaded(mods, heavy), (args, heavy)


def _command_names() -> list[str]:
    from rmqinspect.cli.main import COMMANDS

    return sorted(COMMANDS)


@pytest.mark.parametrize("command", _command_names())
def test_every_commands_help_imports_no_numpy_construct_or_recovery(command):
    """What a person types first: ``rmqinspect CMD --help`` reads the command's options and text, none of the
    readers or analyses the command runs (numpy alone was ~70 ms of 0.16-0.2 s for nine commands)."""
    mods, out = _modules(CLI.format(args=[command, "--help"]))
    assert f"Usage: rmqinspect {command}" in out  # the help was printed, by this command
    for heavy in ("numpy", "construct", "rmqinspect.analyses.recovery", "rmqinspect.store.walk.resync",
                  "pyarrow", "rmqinspect.analyses.lookup.fates") + LOOK_UP_RUNS:
        assert not _loaded(mods, heavy), (command, heavy)


def test_index_lookup_through_the_index_files_imports_no_numpy():
    mods, _ = _modules(INDEX_ONLY.format(index_dir=str(SAMPLE_STORE / "index")))
    assert "rmqinspect.store.indexfile" in mods  # the index was read here, not somewhere else
    assert not _loaded(mods, "numpy") and not _loaded(mods, "construct")


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_index_lookup_imports_no_construct_nor_the_recovery_reports(fmt):
    mods, out = _modules(CLI.format(args=["index-lookup", str(SAMPLE_STORE), "--topic", "OrderTopic", "--key",
                                          "ord-14", "--format", fmt]))
    assert "1964" in out and "survives" in out  # the hit, with its fate after restart: the recovery scan ran
    assert "rmqinspect.analyses.recovery.small" in mods
    for heavy in ("numpy", "construct", "rmqinspect.analyses.recovery.plan", "importlib.metadata") + REPORT_MODULES:
        assert not _loaded(mods, heavy), heavy


def test_index_lookup_without_fates_imports_no_recovery_module():
    mods, out = _modules(CLI.format(args=["index-lookup", str(SAMPLE_STORE), "--topic", "OrderTopic", "--key",
                                          "ord-14", "--no-fate", "--format", "json"]))
    assert '"fate": null' in out and "1964" in out
    for heavy in ("numpy", "construct", "rmqinspect.analyses.recovery"):
        assert not _loaded(mods, heavy), heavy


def test_the_command_starts_no_blas_threads():
    """numpy's OpenBLAS would start a spinning thread per core at import; the command asks for none (it never calls
    BLAS). Counted in a fresh interpreter that imported numpy after the command's module, as every command does."""
    code = ("import os; from rmqinspect.cli.main import cli; import numpy; "
            "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])")
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc to count threads")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert out.stdout.split() == ["1", "1"], out.stdout + out.stderr
    bare = subprocess.run([sys.executable, "-c", "import os, numpy; print(len(os.listdir('/proc/self/task')))"],
                          capture_output=True, text=True, env=env, timeout=60)
    if (os.cpu_count() or 1) > 1:  # what the setting prevents: without it numpy's OpenBLAS starts its threads here
        assert int(bare.stdout) > 1, bare.stdout


# what only verify's consume-queue / index checks, a DLedger store, a broker.conf or a decoded record need
COMMIT_LOG_ONLY_SKIPS = ("rmqinspect.store.consumequeue", "rmqinspect.store.batch", "rmqinspect.store.indexfile",
                         "rmqinspect.store.rocksdb_cq", "rmqinspect.analyses.dispatcher", "rmqinspect.analyses.rows",
                         "rmqinspect.analyses.dispatch_rules", "rmqinspect.store.dledger", "rmqinspect.store.message",
                         "rmqinspect.analyses.recovery")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_verify_of_the_commit_log_alone_imports_no_queue_index_or_recovery_module(jobs):
    mods, out = _modules(CLI.format(args=["verify", str(SAMPLE_STORE), "--checks", "crc,structure", "--jobs", jobs,
                                          "--format", "json"]))
    assert json.loads(out)["checked"]["records"] > 0  # the walk did run
    for heavy in COMMIT_LOG_ONLY_SKIPS:
        assert not _loaded(mods, heavy), heavy


def test_verify_cq_and_index_checks_still_load_their_readers():
    mods, out = _modules(CLI.format(args=["verify", str(SAMPLE_STORE), "--checks", "cq,index", "--jobs", "1",
                                          "--format", "json"]))  # one process: the walk's imports are seen here
    assert json.loads(out)["checked"]
    for needed in ("rmqinspect.store.consumequeue", "rmqinspect.store.indexfile", "rmqinspect.analyses.dispatcher"):
        assert needed in mods, needed
