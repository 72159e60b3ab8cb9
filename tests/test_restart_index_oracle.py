"""The index after a restart (recovery.index): IndexService.load drops the index files newer than the checkpoint's
indexMsgTimestamp on an abnormal start, and IndexService.buildIndex indexes every record the restart dispatches
from the surviving index's endPhyOffset on. Checked against every key query the oracle broker answered after it
had recovered (and, for the rebuild scenarios, re-dispatched) the store: `index-lookup --as-recovered` run on the
store as it was before the broker loaded it must return the broker's queryMessage offsets, in order."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.lookup.fates import query_as_recovered, recovery_view
from rmqinspect.analyses.lookup.query import IndexService
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_as_recovered_lookup_equals_broker_query_after_recovery(scenario):
    path = require_oracle(scenario)
    exp = load_expected(scenario)
    if not exp.get("queries"):
        pytest.skip("no recorded queries")
    with Store.open(path / "store") as st:
        svc = IndexService.for_store(st)
        view = recovery_view(st, cache=False)
        got = []
        for rec in exp["queries"]:
            q = rec["query"]
            r = query_as_recovered(svc, st, view, q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
            got.append(r.phy_offsets)
        svc.close()
    assert got == [rec["phyOffsets"] for rec in exp["queries"]]
    # what the broker's client check says of each returned offset: the record carries the key or not
    assert all(len(rec["returnedMessageActuallyHasKey"]) == len(rec["phyOffsets"]) for rec in exp["queries"])


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_cli_index_lookup_as_recovered_keeps_collisions_out_and_never_writes(scenario):
    """The command: its verified offsets are the broker's offsets whose record carries the key (the broker's own
    client check, returnedMessageActuallyHasKey), for every query of the scenario."""
    path = require_oracle(scenario)
    exp = load_expected(scenario)
    if not exp.get("queries"):
        pytest.skip("no recorded queries")
    before = tree_hashes(path / "store")
    for rec in exp["queries"]:
        q = rec["query"]
        args = ["index-lookup", str(path / "store"), "--topic", q["topic"], "--key", q["key"], "--max",
                str(q["maxNum"]), "--begin", str(q["begin"]), "--end", str(q["end"]), "--as-recovered",
                "--format", "json"]
        r = CliRunner().invoke(cli, args)
        want = [o for o, has in zip(rec["phyOffsets"], rec["returnedMessageActuallyHasKey"], strict=True) if has]
        assert r.exit_code == (0 if want else 3), (q, r.output)
        if r.exit_code == 0:
            doc = json.loads(r.stdout)
            assert doc["phy_offsets"] == rec["phyOffsets"], q
            assert doc["verified_offsets"] == want, q
    assert tree_hashes(path / "store") == before


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_lookup_view_is_the_plans(scenario):
    """A key look-up's view of the restart (recovery.small's scan for a small store) is the plan's: same cut, same
    dispatched ranges, same surviving endPhyOffset, whether the plan dispatches into its queue models or not."""
    from rmqinspect.analyses.lookup.fates import view_of_plan
    from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery

    path = require_oracle(scenario)
    with Store.open(path / "store") as st:
        quick = recovery_view(st, cache=False)
        lean = view_of_plan(plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False,
                                                              model_start=False, dispatch=False)))
        full = view_of_plan(plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False)))
    assert quick == lean == full
