"""Helpers shared by the test modules (imported as ``from support import ...``); pytest fixtures and hooks stay in
conftest.py. Oracle stores are read in place, never copied."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ORACLE = Path(os.environ.get("RMQINSPECT_ORACLE", REPO.parent / "shared" / "oracle"))
FIXTURES = REPO / "tests" / "fixtures"
SAMPLE_STORE = FIXTURES / "sample-store"
ORACLE_MISSING = "<oracle missing>"


def oracle_scenarios() -> list[str]:
    """'<version>/<scenario>' for every oracle scenario present (empty when ../shared is absent)."""
    if not ORACLE.is_dir():
        return []
    return sorted(f"{v.name}/{s.name}" for v in ORACLE.iterdir() if v.is_dir() for s in v.iterdir()
                  if (s / "expected.json").is_file())


# one parameter that skips (with the reason) when there is no oracle, so the case shows up instead of vanishing
ALL_SCENARIOS = oracle_scenarios() or [ORACLE_MISSING]


def require_oracle(name: str) -> Path:
    if not ORACLE.is_dir() or name == ORACLE_MISSING:
        pytest.skip(f"oracle stores not found at {ORACLE} (../shared absent); set RMQINSPECT_ORACLE")
    p = ORACLE / name
    if not (p / "expected.json").is_file():
        pytest.skip(f"oracle scenario {name} not present")
    return p


@functools.cache
def load_expected(name: str) -> dict:
    with open(ORACLE / name / "expected.json", encoding="utf-8") as f:
        return json.load(f)


def tree_bytes(root: str | Path) -> dict[str, bytes]:
    """Every file under root (relative path -> its bytes): what two runs wrote, compared byte for byte."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def tree_hashes(root: str | Path) -> dict[str, str]:
    """sha256 of every file (and the name of every directory) under root: proves a command wrote nothing there."""
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


# Replica sets (several stores of one broker group, written by RocketMQ's HA code): ../shared/replicas/<version>/<set>
REPLICAS = Path(os.environ.get("RMQINSPECT_REPLICAS", REPO.parent / "shared" / "replicas"))


def require_replicas(name: str) -> Path:
    """The replica set ``<version>/<set>``; skips with the reason when ../shared/replicas is absent."""
    p = REPLICAS / name
    if not (p / "expected.json").is_file():
        pytest.skip(f"replica set {name} not found under {REPLICAS} (../shared absent); set RMQINSPECT_REPLICAS")
    return p


@functools.cache
def load_replica_expected(name: str) -> dict:
    with open(REPLICAS / name / "expected.json", encoding="utf-8") as f:
        return json.load(f)
