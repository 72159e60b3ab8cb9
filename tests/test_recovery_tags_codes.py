"""``RecoveryOptions(tags_codes=False)`` (what the report plans with) numbers the re-dispatched records' topics
without parsing their properties: the plan is the default plan in every answer (its JSON), and its queue models
hold the same entries but for a tagsCode of 0 in the re-dispatched ones. Where entries are compared with another
store's (RocksDB queues, a combine store's two sides) the tagsCode is computed all the same."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery.queues import ConsumeQueueModel
from rmqinspect.store import Store
from support import ALL_SCENARIOS, require_oracle, tree_hashes
from support.recover_fixtures import build_store


def _entries(plan) -> dict:
    return {k: m.files() for k, m in plan.queue_models.items() if isinstance(m, ConsumeQueueModel)}


def _tags_zeroed(default: dict, lean: dict) -> int:
    """Compares the models' files entry by entry: equal but for tagsCode, which is 0 or equal. Returns how many
    entries differ in tagsCode."""
    from rmqinspect.formats.consumequeue import CQ_DTYPE

    assert default.keys() == lean.keys()
    differ = 0
    for key in default:
        assert default[key].keys() == lean[key].keys(), key
        for name in default[key]:
            a = np.frombuffer(default[key][name], dtype=CQ_DTYPE)
            b = np.frombuffer(lean[key][name], dtype=CQ_DTYPE)
            assert len(a) == len(b)
            assert (a["physical_offset"] == b["physical_offset"]).all() and (a["size"] == b["size"]).all()
            same = a["tags_code"] == b["tags_code"]
            assert (same | (b["tags_code"] == 0)).all(), (key, name)
            differ += int((~same).sum())
    return differ


def _both(root):
    with Store.open(str(root)) as st:
        default = plan_recovery(st, RecoveryOptions(keep_redispatch=False))
    with Store.open(str(root)) as st:
        lean = plan_recovery(st, RecoveryOptions(keep_redispatch=False, tags_codes=False))
    assert json.dumps(default.to_dict(), sort_keys=True) == json.dumps(lean.to_dict(), sort_keys=True)
    return default, lean


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_plans_without_tags_codes_answer_the_same(scenario):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    default, lean = _both(root)
    differ = _tags_zeroed(_entries(default), _entries(lean))
    if default.combine is not None or any(not isinstance(m, ConsumeQueueModel) for m in default.queue_models.values()):
        assert differ == 0  # RocksDB and combine stores keep their tagsCode
    assert tree_hashes(root) == before


def test_crashed_store_re_dispatches_without_tags_codes(tmp_path):
    """An abnormal restart from files back re-dispatches hundreds of records, a hundred of them past where the
    consume queues end (entries written anew): only those entries' tagsCode differs."""
    fx = build_store(tmp_path / "s", n=400)
    fx.write_consume_queues(fx.records[:200])  # the queues are behind the commit log
    fx.set_abort()
    fx.write_checkpoint(fx.records[150].store_ts)
    fx.patch(fx.records[300].offset + 95, b"\xff")
    default, lean = _both(fx.root)
    assert default.redispatch_count > 100
    assert _tags_zeroed(_entries(default), _entries(lean)) > 0  # the fixture's records carry TAGS
