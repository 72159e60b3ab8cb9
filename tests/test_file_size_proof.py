"""mappedFileSizeCommitLog and mappedFileSizeConsumeQueue proven from the files, or said to be ambiguous: stores
written by the project's writer, then cut or renamed."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.store.commitlog import prove_file_size
from rmqinspect.store.mapped import MappedFile
from support.msgstores import spec


def _store(root, cl_size=4096, cq_size=200):
    with StoreWriter(str(root), commitlog_file_size=cl_size, cq_file_size=cq_size, index_slots=16,
                     index_max=400) as w:
        for i in range(80):
            w.append(spec(i, topic="OrderTopic", queue=0))


def _files(root):
    d = os.path.join(root, "commitlog")
    return [MappedFile(os.path.join(d, n), int(n)) for n in sorted(os.listdir(d))]


def test_commitlog_size_proven_by_lengths_and_names(tmp_path):
    _store(tmp_path / "s")
    files = _files(tmp_path / "s")
    assert len(files) > 2
    got = prove_file_size(files)
    assert (got.value, got.source) == (4096, "inferred")


def test_commitlog_size_from_names_when_a_copy_is_cut_short(tmp_path):
    _store(tmp_path / "s")
    d = tmp_path / "s" / "commitlog"
    first = sorted(os.listdir(d))[0]
    with open(d / first, "r+b") as f:
        f.truncate(1000)
    got = prove_file_size(_files(tmp_path / "s"))
    assert (got.value, got.source) == (4096, "inferred")


def test_commitlog_size_ambiguous_when_names_and_lengths_disagree(tmp_path):
    _store(tmp_path / "s")
    d = tmp_path / "s" / "commitlog"
    names = sorted(os.listdir(d))
    # a name that no longer steps by the file length (a file renamed by hand)
    os.rename(d / names[-1], d / f"{int(names[-1]) + 4096 * 3:020d}")
    got = prove_file_size(_files(tmp_path / "s"))
    assert got.source == "ambiguous" and "mappedFileSizeCommitLog" in got.detail
    assert 4096 in got.candidates and 4096 * 4 in got.candidates


def test_cq_size_proven_or_defaulted_and_said(tmp_path):
    _store(tmp_path / "s")
    r = CliRunner().invoke(cli, ["rebuild", str(tmp_path / "s"), "--dry-run", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["geometry"]["cq_file_size"] == 200
    assert doc["geometry_settings"]["cq_file_size"]["source"] == "inferred"
    assert doc["geometry_settings"]["index"]["value"] == {"slots": 16, "max_items": 400}
