"""No match: every command that filters by topic, queue, key or offset answers an empty result the
same way: one sentence on stderr (with the nearest topic names when the topic is not in the store) and exit 3.
The commands here were the stragglers; decode-commitlog, cq, index-lookup and fate are in test_cli_contracts.py
and test_fate_oracle.py."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.tiered_index import TieredIndexWriter
from support import require_oracle, tree_hashes

SAMPLE = "tests/fixtures/sample-store"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_sentence(r) -> str:
    """The not-found answer: exit 3, exactly one error line on stderr, no traceback."""
    assert r.exit_code == 3, (r.exit_code, r.output)
    lines = [x for x in r.stderr.splitlines() if x.startswith("rmqinspect: error:")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.stderr
    return lines[0]


def test_timers_no_match():
    store = require_oracle("rocketmq-all-5.3.3/timer-clean") / "store"
    # --topic names where the timer is delivered (REAL_TOPIC); a misspelt one gets the nearest names
    r = run("timers", store, "--topic", "TimerTopcA", "--format", "json")
    assert json.loads(r.stdout) == []
    assert "nearest: TimerTopicA, TimerTopicB" in one_sentence(r)
    r = run("timers", store, "--topic", "TimerTopicB", "--format", "json")
    assert r.exit_code == 0 and {t["real_topic"] for t in json.loads(r.stdout)} == {"TimerTopicB"}
    # a time filter that keeps nothing: the wheel's counts are printed, then the sentence
    r = run("timers", store, "--due-before", "1000")
    assert "the wheel after load" in r.stdout
    assert "no timer in the timerlog matches --due-before 1970-01-01 00:00:01.000Z" in one_sentence(r)


def test_rocksdb_cq_no_match():
    store = require_oracle("rocketmq-all-5.3.3/rocksdb-cq-small") / "store"
    before = tree_hashes(store)
    # the topics live inside the database: the nearest names come from its rows, not its file names
    assert "nearest: CartTopic" in one_sentence(run("rocksdb-cq", store, "--topic", "CartTopc"))
    assert "nearest: CartTopic" in one_sentence(run("cq", store, "--topic", "CartTopc", "--queue", "0"))
    line = one_sentence(run("rocksdb-cq", store, "--topic", "CartTopic", "--queue", "9"))
    assert "no rows for topic 'CartTopic' queue 9" in line and "nearest" not in line
    r = run("rocksdb-cq", store, "--topic", "CartTopic", "--queue", "0", "--from", "100000", "--format", "json")
    assert json.loads(r.stdout) == []
    assert "CartTopic/0: no RocksDB consume-queue entry at or after queue offset 100000" in one_sentence(r)
    # the RocksDB files of consumequeue/ (CURRENT, *.sst, ...) are never counted or offered as topics by the
    # commands that list queue directories
    # ... but every command's nearest names include the database's topics (read through a private snapshot)
    line = one_sentence(run("decode-commitlog", store, "--topic", "CartTopc"))
    assert "no record in" in line and "nearest: CartTopic" in line and ".sst" not in line and "CURRENT" not in line
    assert tree_hashes(store) == before


def test_batch_cq_no_match():
    store = require_oracle("rocketmq-all-5.3.3/batchcq") / "store"
    assert "nearest: BatchTopic" in one_sentence(run("batch-cq", store, "--topic", "BatchTopc"))
    assert "nearest: BatchTopic" in one_sentence(run("batch-cq", store, "--topic", "BatchTopc", "--queue", "0",
                                                     "--get", "3"))
    assert "for topic 'BatchTopic' queue 5" in one_sentence(run("batch-cq", store, "--topic", "BatchTopic",
                                                                "--queue", "5"))
    # a topic with a plain consume queue is in the store, only not here: say where it is
    assert "'PlainTopic' has a ConsumeQueue: `cq`" in one_sentence(run("batch-cq", store, "--topic", "PlainTopic"))


def test_tiered_index_lookup_no_match(tmp_path):
    uniq = "c0a80a0b3e8f1b6d3586f1f8665c0005"
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    (store / "consumequeue" / "OrderTopic" / "0").mkdir(parents=True)
    # maxItems = 4 x slots, the ratio the reader proves from the file size (fewer items make other guesses fit)
    with TieredIndexWriter(str(store / "tiered_index_file"), 1_795_000_000_000, 16, 64) as w:
        assert w.put_key("OrderTopic", 3, 0, ["order-1"], 0, 100, 1_795_000_000_000) == "SUCCESS"
        assert w.put_key("OrderTopic", 3, 0, [uniq.upper()], 700, 100, 1_795_000_000_000) == "SUCCESS"
    r = run("tiered-index-lookup", store, "--topic", "OrderTopic", "--key", "order-1", "--format", "json")
    assert r.exit_code == 0 and [x["offset"] for x in json.loads(r.stdout)] == [0]
    r = run("tiered-index-lookup", store, "--topic", "OrderTopic", "--key", uniq, "--format", "json")
    assert r.exit_code == 0 and [x["offset"] for x in json.loads(r.stdout)] == [700]
    assert f"{uniq.upper()!r}, the UNIQ_KEY" in r.stderr  # ids in any case, said so
    line = one_sentence(run("tiered-index-lookup", store, "--topic", "OrderTopc", "--key", "order-1"))
    assert "no item for the key 'order-1' of topic 'OrderTopc' in 1 tiered index file(s)" in line
    assert "nearest: OrderTopic" in line


def test_msgid_and_explain_missing_no_match():
    uniq = "c0a80a0b3e8f1b6d3586f1f8665c0005"  # ord-14's UNIQ_KEY in the sample store
    assert run("msgid", uniq, "--store", SAMPLE, "--topic", "OrderTopic").exit_code == 0
    line = one_sentence(run("msgid", uniq, "--store", SAMPLE, "--topic", "OrderTopc"))
    assert f"matches the id {uniq.upper()}" in line and "nearest: OrderTopic" in line
    line = one_sentence(run("explain-missing", SAMPLE, "--topic", "OrderTopc", "--key", "no-such-key"))
    assert "neither found by the broker's look-up nor on disk" in line and "nearest: OrderTopic" in line


def test_export_no_match(tmp_path):
    r = run("export", SAMPLE, "--topic", "OrderTopc", "--out", tmp_path / "a", "--format", "json")
    assert json.loads(r.stdout)["rows"] == 0
    assert "nearest: OrderTopic" in one_sentence(r)
    r = run("export", SAMPLE, "--since", "2030-01-01", "--out", tmp_path / "b")
    assert "no message matches --since 2030-01-01 00:00:00.000Z" in one_sentence(r)
    assert run("export", SAMPLE, "--topic", "OrderTopic", "--out", tmp_path / "c").exit_code == 0


def test_export_names_a_misspelt_topic_among_good_ones(tmp_path):
    # rows came from OrderTopic; the misspelt second --topic is named with its nearest topic, not passed over
    before = tree_hashes(SAMPLE)
    r = run("export", SAMPLE, "--topic", "OrderTopic", "--topic", "PayTopc", "--out", tmp_path / "a",
            "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["rows"] > 0
    notes = [x for x in r.stderr.splitlines() if "PayTopc" in x]
    assert notes == ["rmqinspect: note: --topic PayTopc: the store has no topic 'PayTopc'; nearest: PayTopic; "
                     "it contributed no rows"], r.stderr
    r = run("export", SAMPLE, "--topic", "OrderTopic", "--topic", "PayTopic", "--out", tmp_path / "b")
    assert r.exit_code == 0 and "no topic" not in r.stderr
    assert tree_hashes(SAMPLE) == before


def test_nearest_topics_come_from_topics_json_too(tmp_path):
    # a copied store without consume-queue directories still knows its topics from config/topics.json
    import shutil

    store = tmp_path / "store"
    shutil.copytree(SAMPLE, store)
    shutil.rmtree(store / "consumequeue")
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "topics.json").write_text(
        '{"topicConfigTable":{"OrderTopic":{"topicName":"OrderTopic","readQueueNums":4,"writeQueueNums":4,'
        '"perm":6}},"dataVersion":{"counter":1,"timestamp":1}}')
    line = one_sentence(run("decode-commitlog", store, "--topic", "OrderTopc"))
    assert "nearest: OrderTopic" in line


def test_index_lookup_reads_a_lower_case_uniq_key():
    # ids are case-insensitive: a pasted UNIQ_KEY in lower case finds what the broker indexed in upper case,
    # with a note saying so; a KEYS token is asked as typed first (KEYS are case-sensitive)
    uniq = "c0a80a0b3e8f1b6d3586f1f8665c0005"
    r = run("index-lookup", SAMPLE, "--topic", "OrderTopic", "--key", uniq, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["verified_offsets"] == [1964] and f"{uniq.upper()!r}, the UNIQ_KEY" in r.stderr
    assert "carries the key 'ORD-14'" in one_sentence(run("index-lookup", SAMPLE, "--topic", "OrderTopic", "--key",
                                                          "ORD-14"))


def test_fate_takes_the_one_broker_version_type_and_names_the_recovery_it_used():
    # "after restart" follows a version's recovery rules: fate takes --broker-version like recover, in every
    # spelling (what summary prints too), and says which version answered when it was not given
    store = require_oracle("rocketmq-all-4.9.8/crash-torn-tail") / "store"
    r = run("fate", store, "--offset", 1197830, "--format", "json")
    assert r.exit_code == 0 and "'after restart' follows the recovery of RocketMQ 4.9.8 (assumed;" in r.stderr
    for v in ("4.4.0", "4.x (detected)", "5.3.3"):
        r = run("fate", store, "--offset", 1197830, "--broker-version", v, "--format", "json")
        assert r.exit_code == 0, r.stderr
        assert f"follows the recovery of RocketMQ {v.split(' ')[0]} (--broker-version)" in r.stderr
        assert json.loads(r.stdout)[0]["after_restart"].startswith("cut")


def test_missing_consumer_offsets_is_a_no_match_naming_offsets_file():
    # what was seen (8): copied stores often lack config/consumerOffset.json; an answer made of nothing says so
    # and names --offsets FILE, with the not-found exit code
    store = require_oracle("rocketmq-all-4.9.8/crash-torn-tail") / "store"
    r = run("consumer-lag", store, "--format", "json")
    assert json.loads(r.stdout)["groups"] == []
    assert "config/consumerOffset.json not found (--offsets FILE" in one_sentence(r)
    line = one_sentence(run("config", store, "--only", "consumerOffsets"))
    assert "no consumerOffset.json (nor its .bak)" in line and "--offsets FILE" in line
    r = run("config", store, "--only", "delayOffsets", "--format", "json")
    # a file that is there (with an empty offsetTable, as this broker wrote it) is an answer, not a miss
    assert r.exit_code == 0 and json.loads(r.stdout)["files"]["delayOffsets"]["source"] == "main"
    r = run("consumer-lag", SAMPLE, "--format", "json")
    assert r.exit_code == 0
    assert {g["group"] for g in json.loads(r.stdout)["groups"]} == {"order-consumer", "pay-consumer"}


def test_fate_columns_give_a_table():
    # --columns works in every command: fate's key/value blocks become one row per record with those columns
    r = run("fate", SAMPLE, "--key", "ord-14", "--topic", "OrderTopic", "--columns", "physical_offset,uniq_key")
    assert r.exit_code == 0 and "no table had" not in r.stderr
    assert r.stdout.splitlines()[2].split() == ["1964", "C0A80A0B3E8F1B6D3586F1F8665C0005"]
