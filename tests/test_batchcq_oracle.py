"""BatchConsumeQueue against RocketMQ 5.3.3's own (oracle scenario 5.3.3/batchcq): every unit, the queue
bounds, ``BatchConsumeQueue.get`` at every offset and every recorded ``getMessage`` answer (maxMsgNums 1 and
32: whole batches from the base, next offset = base + batch size, never past the start unit's file,
OFFSET_OVERFLOW_ONE / _BADLY at and past the end)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import load_expected, require_oracle, tree_hashes
from rmqinspect.analyses.get_message import GetMessageOptions, batch_get_message, batch_unit_at
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.batch import BatchConsumeQueue, list_batch_queues

NAME = "rocketmq-all-5.3.3/batchcq"


def _queues():
    root = require_oracle(NAME) / "store"
    e = load_expected(NAME)
    qs = {(t, q): BatchConsumeQueue(t, q, d) for t, q, d in list_batch_queues(str(root))}
    return root, e, qs


def test_every_unit_and_bound_equals_the_broker():
    root, e, qs = _queues()
    want = e["batchConsumeQueues"]
    assert sorted(qs) == sorted((t, int(q)) for t in want for q in want[t])
    for (t, q), bcq in qs.items():
        w = want[t][str(q)]
        lo, hi, n = bcq.bounds()
        assert (lo, hi, n) == (w["minOffset"], w["maxOffset"], len(w["units"]))
        assert [f.name for f in bcq.files] == [name for name, *_ in w["files"]]
        for got, u in zip(bcq.entries(), w["units"], strict=True):
            assert (got["entry_index"], got["physical_offset"], got["size"], got["tags_code"], got["store_timestamp"],
                    got["msg_base_offset"], got["batch_size"], got["compacted_offset"]) == (
                u["unitIndex"], u["offset"], u["size"], u["tagsCode"], u["storeTime"], u["msgBaseOffset"],
                u["batchSize"], u["compactedOffset"])


def test_get_at_every_offset_equals_the_broker():
    root, e, qs = _queues()
    for (t, q), bcq in qs.items():
        for off, *rest in e["batchConsumeQueues"][t][str(q)]["getByOffset"]:
            u = batch_unit_at(bcq, off)
            if rest == [None]:
                assert u is None, off
            else:
                assert [u["queue_offset"], u["physical_offset"], u["batch_size"]] == rest, off


@pytest.mark.parametrize("calls", ["getMessageCallsMax1", "getMessageCallsMax32"])
def test_every_recorded_get_message_equals_the_broker(calls):
    root, e, qs = _queues()
    st = Store.open(root)
    opts = GetMessageOptions(slave=True)  # the oracle observed the copy as a SLAVE (see its README)
    checked = 0
    for (t, q), bcq in qs.items():
        for c in e["batchConsumeQueues"][t][str(q)][calls]:
            r = batch_get_message(bcq, c["offset"], c["maxMsgNums"], st.commitlog, opts)
            assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count,
                    r.msg_count4commercial, r.message_queue_offsets, r.physical_offsets) == (
                c["status"], c["nextBeginOffset"], c["minOffset"], c["maxOffset"], c["messageCount"],
                c["msgCount4Commercial"], c["messageQueueOffset"], c["physicalOffsets"]), c
            checked += 1
    assert checked == sum(len(e["batchConsumeQueues"][t][q][calls]) for t in e["batchConsumeQueues"]
                          for q in e["batchConsumeQueues"][t])


def test_reference_pull_chain_equals_the_broker():
    """The reference-format pass: pull from minOffset, continue at nextBeginOffset (maxMsgNums 32)."""
    root, e, qs = _queues()
    opts = GetMessageOptions(slave=True)
    for (t, q), bcq in qs.items():
        w = e["batchConsumeQueues"][t][str(q)]
        calls, phys, off = [], [], w["minOffset"]
        while off < w["maxOffset"]:
            r = batch_get_message(bcq, off, 32, options=opts)
            calls.append(f"{off}:{r.status}->{r.next_begin_offset}")
            phys += r.physical_offsets
            off = r.next_begin_offset
        assert calls == w["getMessageCalls"] and phys == w["getMessagePhysicalOffsets"]


def test_cli_get_inside_a_batch():
    root, e, qs = _queues()
    before = tree_hashes(root)
    r = CliRunner().invoke(cli, ["batch-cq", str(root), "--topic", "BatchTopic", "--queue", "0", "--get", "104",
                                 "--max", "32", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    want = next(c for c in e["batchConsumeQueues"]["BatchTopic"]["0"]["getMessageCallsMax32"] if c["offset"] == 104)
    assert (doc["status"], doc["next_begin_offset"], doc["message_queue_offsets"]) == (
        want["status"], want["nextBeginOffset"], want["messageQueueOffset"])
    assert tree_hashes(root) == before
