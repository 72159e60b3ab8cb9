"""Recovery on hostile stores (fuzzer findings 1:1634, 1:3606, 1:1528): a consume-queue file the
model rolls into but never writes made truncate_dirty raise KeyError; a queue whose only file is 7 bytes long
became a 7-byte file geometry and dispatch raised IndexError."""

from __future__ import annotations

import json
import os
import shutil

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import require_oracle, tree_hashes


def _runner():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def test_truncate_dirty_on_a_rolled_unwritten_file(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(require_oracle("rocketmq-all-4.9.8/crash-torn-tail") / "store", store)
    cq = store / "consumequeue"
    a, b = cq / "OrderTopic/1/00000000000000001200", cq / "LogTopic/2/00000000000000002400"
    os.rename(a, str(a) + ".x")
    os.rename(b, a)
    os.rename(str(a) + ".x", b)
    with open(cq / "PayTopic/0/00000000000000001200", "ab") as f:
        f.write(bytes(range(256)) * 256)
    with open(store / "commitlog/00000000000000000000", "r+b") as f:
        f.seek(26082 + 48)
        f.write(b"\xff\xff\xff\xff")
    before = tree_hashes(store)
    for argv in (["recover", str(store), "--dry-run"], ["consumer-lag", str(store), "--mode", "abnormal"]):
        r = _runner().invoke(cli, [*argv, "--format", "json"])
        # (3: consumer-lag on a store without consumerOffset.json, the no-match rule)
        assert r.exit_code in (0, 1) or (r.exit_code == 3 and "no consumer offsets" in r.stderr), r.stderr
        json.loads(r.stdout)
    assert tree_hashes(store) == before


def test_queue_whose_only_file_is_7_bytes(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(require_oracle("rocketmq-all-5.3.3/batchcq") / "store", store)
    f = store / "consumequeue/PlainTopic/0/00000000000000000000"
    os.truncate(f, 7)
    for argv in (["consumer-lag", str(store), "--mode", "abnormal"], ["consumer-lag", str(store)],
                 ["recover", str(store), "--dry-run", "--mode", "abnormal"], ["recover", str(store), "--dry-run"],
                 ["salvage", str(store), "--out", str(tmp_path / "s.ndjson")]):
        r = _runner().invoke(cli, [*argv, "--format", "json"])
        assert r.exit_code in (0, 1) or (r.exit_code == 3 and "no consumer offsets" in r.stderr), (argv, r.stderr)
        json.loads(r.stdout)
