"""Rebuild output compared file by file with what the broker wrote (or with another engine's output)."""

from __future__ import annotations

import os

# small consume-queue / index geometry the oracle's rebuild scenarios were written with
GEOMETRY = ["--cq-file-size", "1200", "--index-slots", "64", "--index-max", "2000"]


def files_by_relpath(root) -> dict[str, str]:
    """relative path -> path of every file under root."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            out[os.path.relpath(os.path.join(dirpath, n), root)] = os.path.join(dirpath, n)
    return out


def read_bytes(p) -> bytes:
    with open(p, "rb") as f:
        return f.read()


def assert_same_cq(expected_dir, got_dir):
    exp, got = files_by_relpath(expected_dir), files_by_relpath(got_dir)
    assert sorted(got) == sorted(exp)
    for rel, p in exp.items():
        assert read_bytes(got[rel]) == read_bytes(p), rel


def assert_same_index(expected_dir, got_dir):
    """Same number of index files, each byte-identical (names are creation times, so compared in order)."""
    exp = sorted(os.listdir(expected_dir))
    got = sorted(os.listdir(got_dir))
    assert len(got) == len(exp)
    for a, b in zip(exp, got):
        assert read_bytes(os.path.join(got_dir, b)) == read_bytes(os.path.join(expected_dir, a)), (a, b)
