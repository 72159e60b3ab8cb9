"""Issue 13 item 1 on DLedger stores: the directory just above a DLedger-mode store resolves to it (with a note),
and a directory of several stores names the DLedger ones too. Before, only a ``commitlog/`` made a store root, so
``summary <scenario>`` on a DLedger copy said "not a RocketMQ store"."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import require_oracle, tree_hashes


def test_directory_above_a_dledger_store_resolves_to_it():
    scenario = require_oracle("rocketmq-all-4.9.8/dledger-clean")
    before = tree_hashes(scenario)
    r = CliRunner().invoke(cli, ["summary", str(scenario), "--format", "json"])
    assert r.exit_code == 0, r.output
    store = os.path.join(str(scenario), "store")
    assert f"{scenario} is not a store; reading the store inside it, {store}" in r.stderr
    direct = CliRunner().invoke(cli, ["summary", store, "--format", "json"])
    assert json.loads(r.stdout) == json.loads(direct.stdout)
    assert tree_hashes(scenario) == before


def test_directory_of_stores_names_the_dledger_ones():
    scenario = require_oracle("rocketmq-all-4.9.8/dledger-clean")
    parent = scenario.parent
    r = CliRunner().invoke(cli, ["summary", str(parent)])
    assert r.exit_code == 3, r.output
    assert os.path.join(str(scenario), "store") in r.stderr and "name one" in r.stderr
