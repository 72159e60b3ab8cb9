"""The fuzz harnesses in CI, bounded: every parser target of fuzz/targets.py runs over its seed
corpus (sample store, writer-made structures), every saved crash input (fuzz/regressions/TARGET/*: each was a
crash once and is a regression test now) and a few hundred deterministic mutations. A typed RmqInspectError is
the contract; any other exception fails. Long runs: python fuzz/run.py (atheris)."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz.mutate import mutate  # noqa: E402
from fuzz.targets import TARGETS, run_one, seed_corpus  # noqa: E402

MUTATIONS = {"walk": 60, "index": 150, "cq": 200}  # the slower targets get fewer cases (each under ~2 s)


def regressions(name: str) -> list[Path]:
    d = ROOT / "fuzz" / "regressions" / name
    return sorted(d.iterdir()) if d.is_dir() else []


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_harness_survives_seeds_regressions_and_mutations(name):
    seeds = seed_corpus(name)
    assert seeds, f"no seed for {name}"
    t0 = time.monotonic()
    for s in seeds:
        run_one(name, s)
    for p in regressions(name):
        run_one(name, p.read_bytes())
    rng = random.Random(f"smoke:{name}")
    for i in range(MUTATIONS.get(name, 300)):
        data = mutate(rng, rng.choice(seeds), seeds)
        try:
            run_one(name, data)
        except Exception as e:  # name the input that failed, so it can be saved under fuzz/regressions/
            raise AssertionError(f"{name} mutation {i} ({len(data)} bytes, first 64: {data[:64].hex()}) raised "
                                 f"{type(e).__name__}: {e}") from e
    assert time.monotonic() - t0 < 20


def test_saved_crash_inputs_exist_for_fixed_crashes():
    # the crash atheris found on the record target (SYSFLAG compression code 5 made Message.to_dict raise)
    assert regressions("record"), "fuzz/regressions/record/ is empty"


def test_cli_fuzzer_checks_and_a_short_run(tmp_path):
    """fuzz/cli_fuzz.py's own checks catch what they must (bare NaN, cut JSON, a torn NDJSON line), and a few
    cases over copies of the sample store run end to end: the store copy is never changed and nothing is
    written outside --out (the invariants every case checks; tracebacks are reported, see H-findings.md)."""
    from fuzz import cli_fuzz

    assert cli_fuzz.check_json("json", '{"a": NaN}') and cli_fuzz.check_json("json", '[{"a": 1}')
    assert cli_fuzz.check_json("ndjson", '{"a": 1}\n{"b"') and cli_fuzz.check_json("ndjson", '{"a": Infinity}\n')
    assert cli_fuzz.check_json("json", '{"a": [1, 2]}\n') is None
    assert cli_fuzz.check_json("ndjson", '{"a": 1}\n{"b": 2}\n') is None
    stores = [cli_fuzz.SAMPLE]
    for case in range(6):
        res = cli_fuzz.run_case(7, case, stores, tmp_path, timeout=60)
        assert res["mutations"] and res["argv"]
        kinds = {f[0] for f in res["findings"]}
        assert not kinds & {"store changed", "wrote outside --out"}, res
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # every case directory was removed
