"""recover --dry-run in DLedger mode: the version warning says DLedger's recovery decides where the walk starts,
not the commit-log start-file rules of the version (which still show for a commitlog store)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.dledger import DLedgerWriter
from support.msgstores import common_specs, write_store

COMMITLOG_RULE = "normal recovery starts at the third-last commit-log file"


def test_dledger_recover_warning_names_dledgers_recovery(tmp_path):
    w = DLedgerWriter(str(tmp_path / "s" / "dledger-n0"), 4096, 32 * 64)
    for i in range(30):
        w.append(MessageSpec(topic="T", queue_id=i % 3, body=b"m%d-" % i * 4, born_timestamp=1000 + i,
                             store_timestamp=2000 + i), 1)
    w.write_checkpoint(29)
    w.write_currterm(1, "n0")
    r = CliRunner().invoke(cli, ["recover", str(tmp_path / "s"), "--dry-run", "--format", "json"])
    assert r.exit_code == 0, r.output
    warning = [line for line in r.stderr.splitlines() if line.startswith("rmqinspect: warning: RocketMQ")]
    assert len(warning) == 1 and COMMITLOG_RULE not in warning[0]
    assert "in DLedger mode the commit-log start-file rules of normal and abnormal recovery do not apply; " \
           "DLedger's recovery walks from the third-last data file" in warning[0]
    doc = json.loads(r.stdout)
    assert doc["broker_version"]["normal_start_rule"] == "dledger" and doc["start_reason"].startswith("DLedger: ")


def test_commitlog_store_keeps_the_version_rules(tmp_path):
    write_store(str(tmp_path / "s"), common_specs(20))
    r = CliRunner().invoke(cli, ["recover", str(tmp_path / "s"), "--dry-run", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert COMMITLOG_RULE in r.stderr and "DLedger" not in r.stderr
    assert json.loads(r.stdout)["broker_version"]["normal_start_rule"] == "third-last"
