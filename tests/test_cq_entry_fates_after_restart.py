"""Consume-queue entries after restart: each on-disk entry's fate (survives / replaced /
beyond_truncation / dropped) agrees with expected.json's consumeQueues (the broker's queues after it recovered
the directory) on every scenario, and `cq --as-recovered` on the RocksDB consume queue equals the broker's
queues entry for entry, with no flags and with the scenario's broker.conf."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery.queues import entry_fates
from rmqinspect.analyses.recovery.rocksdb import queue_entries_after_recovery
from rmqinspect.cli.main import cli
from rmqinspect.errors import RmqInspectError
from rmqinspect.store import Store
from rmqinspect.store.consumequeue import ConsumeQueue
from rmqinspect.store.rocksdb_cq import ConsumeQueues
from support import ALL_SCENARIOS, load_expected, require_oracle, tree_hashes

FILE_SCENARIOS = [n for n in ALL_SCENARIOS if "dledger" not in n and "rocksdb" not in n]
ROCKSDB = [n for n in ALL_SCENARIOS if "rocksdb" in n] or ALL_SCENARIOS[:1]


def _conf(tmp_path, exp) -> str:
    p = tmp_path / "broker.conf"
    flat = {k: v for k, v in exp["storeConfig"].items() if v is not None and not isinstance(v, (dict, list))}
    p.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in flat.items()))
    return str(p)


def _on_disk(st, topic, qid):
    d = st.layout.consumequeue_dir
    with ConsumeQueues(d) as queues:
        try:
            q = ConsumeQueue.open(d, topic, qid) if queues.kind == "file" else queues.get(topic, qid)
            return list(q.entries())
        except RmqInspectError:
            return None


@pytest.mark.parametrize("name", FILE_SCENARIOS + [n for n in ROCKSDB if n not in FILE_SCENARIOS])
def test_on_disk_fates_agree_with_the_broker(name):
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    st = Store.open(str(store))
    if not (store / "consumequeue").is_dir():
        pytest.skip("no consume queue on disk (the broker rebuilds them): no on-disk entry has a fate")
    plan = plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False))
    batch = set(exp.get("batchConsumeQueues") or {})
    seen = 0
    counts: dict[str, int] = {}
    for topic, queues in exp["consumeQueues"].items():
        if topic in batch:
            continue
        for qid, want in queues.items():
            on_disk = _on_disk(st, topic, int(qid))
            if on_disk is None:
                continue  # the broker keeps empty in-memory queues without files
            after = queue_entries_after_recovery(st, plan, f"{topic}/{qid}")
            fates = entry_fates(on_disk, after or [], plan.truncate_offset)
            wanted = {tuple(e) for e in want["entries"]}
            for e, f in zip(on_disk, fates, strict=True):
                counts[f] = counts.get(f, 0) + 1
                assert (tuple(e) in wanted) == (f == "survives"), (topic, qid, e, f)
            seen += 1
    assert seen > 0
    if "crash-torn-tail" in name:  # the torn message's entry is cut by truncateDirtyLogicFiles
        assert counts.get("beyond_truncation") == 1, counts


@pytest.mark.parametrize("with_conf", [False, True], ids=["inferred", "broker.conf"])
@pytest.mark.parametrize("name", ROCKSDB)
def test_rocksdb_cq_as_recovered_equals_the_broker(name, with_conf, tmp_path):
    if "rocksdb" not in name:
        pytest.skip("no RocksDB scenario")
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    before = tree_hashes(store)
    conf = ["--broker-config", _conf(tmp_path, exp)] if with_conf else []
    compared = 0
    for topic, queues in exp["consumeQueues"].items():
        for qid, want in queues.items():
            r = CliRunner().invoke(cli, ["cq", str(store), "--topic", topic, "--queue", qid, "--as-recovered",
                                         "--format", "json", *conf])
            assert r.exit_code == 0, r.output
            got = [[e["queue_offset"], e["physical_offset"], e["size"], e["tags_code"]] for e in json.loads(r.stdout)]
            assert got == want["entries"], (topic, qid)
            compared += len(got)
    assert compared == sum(len(q["entries"]) for t in exp["consumeQueues"].values() for q in t.values()) > 0
    # on disk, every entry survives this normal shutdown: the fate column says so
    r = CliRunner().invoke(cli, ["cq", str(store), "--topic", "CartTopic", "--queue", "1", "--format", "json", *conf])
    assert {e["fate"] for e in json.loads(r.stdout)} == {"survives"}
    assert tree_hashes(store) == before


CRASHED = [n for n in FILE_SCENARIOS if "crash" in n] or FILE_SCENARIOS[:1]


@pytest.mark.parametrize("name", CRASHED)
def test_cq_command_streams_the_same_fates(name):
    """`cq` gives each entry its fate as it streams the queue (no list of the shown entries): on the crashed
    stores every entry's fate column agrees with the broker's queues after recovery, and the torn record's entry
    is the one cut by the truncation."""
    store = require_oracle(name) / "store"
    if not (store / "consumequeue").is_dir():
        pytest.skip("no consume queue on disk")
    exp = load_expected(name)
    batch = set(exp.get("batchConsumeQueues") or {})
    counts: dict[str, int] = {}
    for topic, queues in exp["consumeQueues"].items():
        if topic in batch:
            continue
        for qid, want in queues.items():
            if not (store / "consumequeue" / topic / qid).is_dir():
                continue
            r = CliRunner().invoke(cli, ["cq", str(store), "--topic", topic, "--queue", qid, "--format", "ndjson"])
            assert r.exit_code in (0, 3), r.output
            wanted = {tuple(e) for e in want["entries"]}
            for line in r.stdout.splitlines():
                e = json.loads(line)
                entry = (e["queue_offset"], e["physical_offset"], e["size"], e["tags_code"])
                counts[e["fate"]] = counts.get(e["fate"], 0) + 1
                assert (entry in wanted) == (e["fate"] == "survives"), (topic, qid, entry, e["fate"])
    assert counts.get("survives", 0) > 0
    if "crash-torn-tail" in name:
        assert counts.get("beyond_truncation") == 1, counts
