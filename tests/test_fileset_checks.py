"""Store file sets that are not what they seem and broker.conf store paths: a commit-log
file symlinked out of the store, a directory or a dangling link in a file's place, storePathRootDir /
storePathCommitLog naming another place than the copy, mapperFileSizeBatchConsumeQueue against the files.
Each is said in one stderr line naming the file; nothing outside the copy is read unless a link in it says so."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.store.batch import BatchConsumeQueue
from rmqinspect.store.broker_conf import read_broker_conf
from support import require_oracle

CLEAN = "rocketmq-all-4.9.8/clean"
BATCH = "rocketmq-all-5.3.3/batchcq"


def _copy(tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(require_oracle(CLEAN) / "store", dst, symlinks=True)
    return dst


def _warnings(r) -> list[str]:
    return [x for x in r.stderr.splitlines() if x.startswith("rmqinspect: warning:")]


def _records(store) -> int:
    r = CliRunner().invoke(cli, ["decode-commitlog", str(store), "--format", "ndjson", "--body", "none"])
    return len(r.stdout.splitlines())


def test_symlink_leaving_the_store_is_read_and_said(tmp_path):
    s = _copy(tmp_path)
    n = _records(s)
    target = tmp_path / "elsewhere.bin"
    f = s / "commitlog" / "00000000000000786432"
    shutil.move(f, target)
    os.symlink(target, f)
    r = CliRunner().invoke(cli, ["decode-commitlog", str(s), "--format", "ndjson", "--body", "none"])
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == n  # read, as a copy that links files intends
    w = [x for x in _warnings(r) if "symbolic link leaving the store" in x]
    assert len(w) == 1 and str(f) in w[0] and str(target) in w[0]
    # a link that stays inside the store is not worth a line
    os.unlink(f)
    shutil.move(target, s / "moved.bin")
    os.symlink(os.path.join("..", "moved.bin"), f)
    r = CliRunner().invoke(cli, ["decode-commitlog", str(s), "--count", "1"])
    assert not [x for x in _warnings(r) if "symbolic link" in x]


@pytest.mark.parametrize("kind", ["directory", "dangling link"])
def test_directory_or_dangling_link_in_a_files_place_is_damage(tmp_path, kind):
    s = _copy(tmp_path)
    f = s / "commitlog" / "00000000000001048576"
    os.unlink(f)
    if kind == "directory":
        os.mkdir(f)
    else:
        os.symlink(tmp_path / "gone", f)
    r = CliRunner().invoke(cli, ["verify", str(s), "--format", "json"])
    w = [x for x in _warnings(r) if str(f) in x]
    assert len(w) == 1 and "[1048576, 1310720) are unreadable" in w[0], r.stderr
    assert "not a commitlog offset" not in r.stderr  # the old, wrong reason
    doc = json.loads(r.stdout)
    assert any(d["kind"] == "missing_file" and d["start"] == 1048576 for d in doc["problem_ranges"])
    assert w[0][len("rmqinspect: warning: "):] in doc["notes"]


def test_broker_conf_store_paths_are_said_never_followed(tmp_path):
    s = _copy(tmp_path)
    run = CliRunner().invoke
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={s}\nstorePathCommitLog={s}/commitlog\n")
    r = run(cli, ["decode-commitlog", str(s), "--count", "1", "--broker-config", str(conf)])
    assert r.exit_code == 0 and not _warnings(r)  # the paths are the store's own
    elsewhere = tmp_path / "data" / "store"
    conf.write_text(f"storePathRootDir={elsewhere}\nstorePathCommitLog={elsewhere}/commitlog\n")
    r = run(cli, ["decode-commitlog", str(s), "--count", "1", "--broker-config", str(conf)])
    assert r.exit_code == 0 and len(_warnings(r)) == 1
    assert f"{conf}:1 (storePathRootDir)" in r.stderr and f"nothing under {elsewhere}" in r.stderr
    conf.write_text(f"storePathRootDir={elsewhere}\nstorePathCommitLog=/mnt/fast/commitlog\n")
    r = run(cli, ["decode-commitlog", str(s), "--count", "1", "--broker-config", str(conf)])
    assert r.exit_code == 0 and len(_warnings(r)) == 2
    assert "storePathCommitLog is /mnt/fast/commitlog" in r.stderr and "it is not read" in r.stderr
    conf.write_text(f"storePathRootDir={elsewhere}\nstorePathCommitLog={elsewhere}/cl2\n")
    os.rename(s / "commitlog", s / "cl2")
    os.mkdir(s / "commitlog")  # an empty commitlog/ beside the real one
    shutil.copy(s / "cl2" / "00000000000000000000", s / "commitlog")
    r = run(cli, ["decode-commitlog", str(s), "--count", "1", "--broker-config", str(conf)])
    assert f"give {s / 'cl2'} as STORE" in r.stderr


def test_batch_consume_queue_file_size(tmp_path):
    d = require_oracle(BATCH) / "store" / "batchconsumequeue" / "BatchTopic" / "0"
    q = BatchConsumeQueue("BatchTopic", 0, str(d))
    assert (q.file_size.value, q.file_size.source) == (920, "inferred") and q.file_notes() == []
    conf = tmp_path / "broker.conf"
    for value, source, bad in ((920, "config", 0), (46000, "config", 5)):
        conf.write_text(f"mapperFileSizeBatchConsumeQueue={value}\n")
        qc = BatchConsumeQueue("BatchTopic", 0, str(d), read_broker_conf(conf))
        assert (qc.file_size.value, qc.file_size.source) == (value, source)
        assert len(qc.file_notes()) == bad
    r = CliRunner().invoke(cli, ["batch-cq", str(d.parent.parent.parent), "--topic", "BatchTopic", "--queue", "0",
                                 "--broker-config", str(conf)])
    assert r.exit_code == 0 and sum("mapperFileSizeBatchConsumeQueue 46000 (config)" in x for x in _warnings(r)) == 5
