"""Shared test fixtures: the oracle stores (read in place, never copied), hashing for the evidence rule."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORACLE = Path(os.environ.get("RMQINSPECT_ORACLE", REPO.parent / "shared" / "oracle"))
FIXTURES = REPO / "tests" / "fixtures"
SAMPLE_STORE = FIXTURES / "sample-store"


def oracle_scenarios() -> list[str]:
    """'<version>/<scenario>' for every oracle scenario present (empty when ../shared is absent)."""
    if not ORACLE.is_dir():
        return []
    return sorted(f"{v.name}/{s.name}" for v in ORACLE.iterdir() if v.is_dir() for s in v.iterdir()
                  if (s / "expected.json").is_file())


ALL_SCENARIOS = oracle_scenarios() or ["<oracle missing>"]


def require_oracle(name: str) -> Path:
    if not ORACLE.is_dir() or name == "<oracle missing>":
        pytest.skip(f"oracle stores not found at {ORACLE} (../shared absent); set RMQINSPECT_ORACLE")
    p = ORACLE / name
    if not (p / "expected.json").is_file():
        pytest.skip(f"oracle scenario {name} not present")
    return p


@functools.lru_cache(maxsize=None)
def load_expected(name: str) -> dict:
    with open(ORACLE / name / "expected.json", encoding="utf-8") as f:
        return json.load(f)


def tree_hashes(root: str | Path) -> dict[str, str]:
    """sha256 + mtime of every file under root: proves a command wrote nothing there."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[os.path.relpath(p, root)] = h.hexdigest()
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
    return out


@pytest.fixture(params=ALL_SCENARIOS)
def scenario(request):
    """(path, expected) for every oracle scenario."""
    p = require_oracle(request.param)
    return p, load_expected(request.param)


# Oracle cases that fail today because the product does not yet read that part of the format. Each is an
# xfail(strict=True) naming the issue that teaches the product; when that issue lands its case passes, the
# strict mark turns it red, and the change removes the entry. Never a skip: the case must keep running.
_DLEDGER = "issue 14: DLedger-mode stores (dledger-n0/data, no commitlog/) are not read yet"
_BATCHCQ = "issue 16: the BatchConsumeQueue lives in batchconsumequeue/, which the generic readers ignore"
_DLEDGER_TESTS = {
    "test_every_message_matches_expected", "test_walk_matches_broker_records",
    "test_walk_finds_the_brokers_records_and_fields", "test_join_clean_scenarios_have_no_problems",
    "test_queue_bounds_and_cli_all", "test_every_oracle_scenario", "test_file_rows_equal_expected_and_whole_store_scan",
    "test_export_local_dataset_equals_expected", "test_fast_path_equals_reference_on_oracle",
    "test_struct_fast_path_equals_construct_schema", "test_compiled_scanner_equals_python_scanner_on_oracle",
    "test_every_recorded_query_matches", "test_dispatch_fields_equal_reference_on_every_oracle_record",
    "test_scan_with_page_release_is_unchanged", "test_properties_and_key_hashes_equal_reference_on_every_oracle_record",
    "test_inline_walk_equals_record_scan_on_every_oracle_store", "test_truncation_point_and_commitlog_files",
    "test_consume_queue_max_offsets_after_load", "test_redispatch_equals_broker_load_phase",
    "test_version_detection_matches_oracle", "test_cli_recover_dry_run_json_never_writes",
    "test_consume_queue_max_offsets_after_start", "test_spark_export_equals_local_and_expected",
    "test_verify_oracle", "test_cli_verify_exit_codes_and_ndjson", "test_max_phy_offset_of_consume_queue_matches_broker_log",
}
PENDING_ORACLE_CASES: dict[str, tuple[str, set[str]]] = {
    "rocketmq-all-4.9.8/dledger-clean": (_DLEDGER, _DLEDGER_TESTS),
    "rocketmq-all-4.9.8/dledger-crash-intact": (
        _DLEDGER, _DLEDGER_TESTS | {"test_every_consume_queue_entry_matches_oracle"}),
    "rocketmq-all-5.3.3/batchcq": (_BATCHCQ, {
        "test_queue_bounds_and_cli_all", "test_consume_queue_max_offsets_after_load",
        "test_redispatch_equals_broker_load_phase", "test_consume_queue_max_offsets_after_start",
        "test_verify_oracle", "test_cli_verify_exit_codes_and_ndjson"}),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        for name, (reason, tests) in PENDING_ORACLE_CASES.items():
            if item.originalname in tests and name in callspec.params.values():
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
