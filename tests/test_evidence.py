"""The evidence rule, for every command at once: nothing any command does changes a byte (or adds a file)
in the store it inspects. Each oracle store is hashed before and after running every registered command
on it; outputs go to tmp_path. A new command must be added to INVOCATIONS (the test fails otherwise)."""

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from support import load_expected, require_oracle, tree_hashes


def invocations(store, exp, out):
    m = next(e for e in exp["messages"] if e.get("keys") and e.get("uniqKey"))
    key = m["keys"].split(" ")[0]
    topic = m["topic"]
    qid = str(m["queueId"])
    return {
        "summary": [["summary", store, "--format", "json"]],
        "decode-commitlog": [["decode-commitlog", store, "--format", "ndjson", "--body", "base64"],
                             ["decode-commitlog", store, "--offset", str(m["physicalOffset"]), "--format", "hex"]],
        "cq": [["cq", store, "--all"], ["cq", store, "--topic", topic, "--queue", qid, "--join"]],
        "index-lookup": [["index-lookup", store, "--topic", topic, "--key", key, "--explain"]],
        "msgid": [["msgid", m["offsetMsgId"], "--store", store], ["msgid", m["uniqKey"], "--store", store,
                                                                  "--topic", topic]],
        "explain-missing": [["explain-missing", store, "--topic", topic, "--key", "no-such-key"]],
        "verify": [["verify", store, "--format", "ndjson"]],
        "recover": [["recover", store, "--dry-run", "--format", "json"]],
        "salvage": [["salvage", store, "--out", str(out / "salvage.ndjson")]],
        "consumer-lag": [["consumer-lag", store]],
        "rebuild": [["rebuild", store, "--dry-run"], ["rebuild", store, "--out", str(out / "rebuilt")]],
        "store-info": [["store-info", store]],
        "fate": [["fate", store, "--key", key, "--topic", topic], ["fate", store, "--msgid", m["uniqKey"]]],
        "dump": [["dump", store, "--offset", str(m["physicalOffset"] + 3), "--snap"]],
        # a store compared with itself: no divergence (on a store that is not in DLedger mode: exit 3)
        "dledger-peers": [["dledger-peers", store, store]],
        # a store compared with itself: identical, nothing lost, nothing to truncate
        "peers": [["peers", store, store]],
        "config": [["config", store]],
        "rocksdb-cq": [["rocksdb-cq", store, "--list"]],
        "batch-cq": [["batch-cq", store]],
        "timers": [["timers", store]],
        "txn": [["txn", store, "--format", "ndjson"], ["txn", store, "--summary"]],
        "gc": [["gc", store, "--dry-run", "--now", str(exp["messages"][-1]["storeTimestamp"] + 10**9)]],
        "tiered-index-lookup": [["tiered-index-lookup", store, "--topic", topic, "--key", key]],
        "compact-index": [["compact-index", store, "--out", str(out / "compacted")]],
        "export": [["export", store, "--out", str(out / "parquet"), "--with-body"]],
        "report": [["report", store, "--out", str(out / "report.html")]],
        # every `spark` subcommand is run (local[2]) with store hashes checked in tests/test_spark.py;
        # starting a JVM here as well would double the suite's Spark time
        "spark": [["spark", "--help"]],
    }


@pytest.mark.parametrize("name", ["rocketmq-all-4.9.8/crash-torn-tail", "rocketmq-all-5.3.3/rocksdb-cq-small",
                                  "rocketmq-all-5.3.3/clean"])
def test_no_command_writes_into_the_store(name, tmp_path):
    store = str(require_oracle(name) / "store")
    exp = load_expected(name)
    plan = invocations(store, exp, tmp_path)
    assert set(plan) == set(cli.commands), "every command must be exercised here"
    before = tree_hashes(store)
    for cmd, runs in plan.items():
        for args in runs:
            r = CliRunner().invoke(cli, [str(a) for a in args])
            assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.output)
            assert "Traceback" not in r.output, args
            assert r.exit_code in (0, 1, 3, 4), (args, r.exit_code, r.output[-500:])
            assert tree_hashes(store) == before, f"{cmd} changed the store"
