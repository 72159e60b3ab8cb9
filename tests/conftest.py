"""pytest fixtures and hooks only; the helpers the test modules share live in the ``support`` package."""

from __future__ import annotations

import pytest

from support import ALL_SCENARIOS, load_expected, require_oracle


@pytest.fixture(params=ALL_SCENARIOS)
def scenario(request):
    """(path, expected) for every oracle scenario."""
    p = require_oracle(request.param)
    return p, load_expected(request.param)


# Oracle cases that fail today because the product does not yet read that part of the format. Each is an
# xfail(strict=True) naming the issue that teaches the product; when that issue lands its case passes, the
# strict mark turns it red, and the change removes the entry. Never a skip: the case must keep running.
_DLEDGER = "issue 14: DLedger-mode stores (dledger-n0/data, no commitlog/) are not read yet"
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
    "test_verify_oracle", "test_cli_verify_exit_codes_and_ndjson",
    "test_max_phy_offset_of_consume_queue_matches_broker_log",
}
PENDING_ORACLE_CASES: dict[str, tuple[str, set[str]]] = {
    "rocketmq-all-4.9.8/dledger-clean": (_DLEDGER, _DLEDGER_TESTS),
    "rocketmq-all-4.9.8/dledger-crash-intact": (
        _DLEDGER, _DLEDGER_TESTS | {"test_every_consume_queue_entry_matches_oracle"}),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        for name, (reason, tests) in PENDING_ORACLE_CASES.items():
            if item.originalname in tests and name in callspec.params.values():
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
