"""`recover --dry-run` on stores whose consume queue is a RocksDB database (FORMATS.md §10.1, 5.x
storeType=defaultRocksDB), built with the project's writers: the commit log by CommitLogWriter, the RocksDB
consume queue by sinks.rocksdb_cq from the fixture's own records (the oracle store is checked in
test_recover_oracle.py). Expectations come from the fixture records: the per-queue max offset is the
RocksDB offset table's max (last entry + 1); a 5.x normal recovery re-dispatches every record ending after
the CHECKPOINT_TOPIC offset (maxPhyOffsetOfConsumeQueue), which moves each queue's max to its last
dispatched entry + 1."""

import json
import os
import shutil

from click.testing import CliRunner

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery
from rmqinspect.cli.main import cli
from rmqinspect.formats.javahash import tags_code
from rmqinspect.sinks.rocksdb_cq import write_rocksdb_consume_queue
from rmqinspect.store import Store
from support import tree_hashes
from support.recover_fixtures import build_store


def _rocksdb_store(tmp_path, upto: int | None = None):
    fx = build_store(tmp_path / "s")
    cq = os.path.join(fx.root, "consumequeue")
    shutil.rmtree(cq)
    recs = fx.records if upto is None else fx.records[:upto]
    write_rocksdb_consume_queue(cq, [(r.topic, r.queue_id, r.queue_offset, r.offset, r.size, tags_code(r.tags),
                                      r.store_ts) for r in recs])
    return fx


def test_rocksdb_queue_behind_commitlog_is_redispatched(tmp_path):
    fx = _rocksdb_store(tmp_path, upto=150)
    cut = fx.records[150]
    plan = plan_recovery(Store.open(fx.root))
    assert plan.version.version.text == "5.3.3"  # the RocksDB consume queue is a 5.x marker
    assert plan.max_phy_offset_of_consume_queue == fx.records[149].end
    assert plan.consume_queue_max_offsets_before == fx.queue_counts(before=cut.offset)
    assert plan.truncate_offset == fx.records[-1].end
    # recoverNormally dispatches records whose offset is > maxPhyOffsetOfConsumeQueue: the record starting
    # exactly at the CHECKPOINT_TOPIC offset (the end of what the queue holds) is skipped, and start()'s
    # reput continues after the recovery's dispatch, so it stays without an entry
    assert plan.redispatch_count == len(fx.records) - 151
    assert plan.redispatch_first == fx.records[151].offset and plan.redispatch_last == fx.records[-1].offset
    per_queue = {q.key: q.redispatched for q in plan.queues}
    cut_key = f"{cut.topic}/{cut.queue_id}"
    for key, n in fx.queue_counts().items():
        assert per_queue[key] == n - fx.queue_counts(before=cut.offset)[key] - (key == cut_key)
    assert plan.reput_from_offset == fx.records[-1].end


def test_rocksdb_queue_without_recovery_dispatch_is_built_by_start(tmp_path):
    """With 4.x recovery rules (forced; a normal 4.x recovery dispatches nothing) the queues keep the RocksDB
    max offsets after load, and start()'s reput from the CHECKPOINT_TOPIC offset adds the rest."""
    fx = _rocksdb_store(tmp_path, upto=100)
    cut = fx.records[100]
    plan = plan_recovery(Store.open(fx.root), RecoveryOptions(version=BrokerVersion.parse("4.9.8")))
    assert plan.redispatch_count == 0
    assert plan.consume_queue_max_offsets == fx.queue_counts(before=cut.offset)
    assert plan.reput_from_offset == fx.records[99].end
    assert plan.consume_queue_max_offsets_after_start == fx.queue_counts()


def test_rocksdb_torn_tail_truncates_queue(tmp_path):
    """The last record is torn after RocksDB got its entry: T = its offset <= CHECKPOINT_TOPIC, so
    truncateDirtyLogicFiles(T) takes that entry off its queue."""
    fx = _rocksdb_store(tmp_path)
    last = fx.records[-1]
    fx.zero(last.offset + last.size // 2, last.end)
    plan = plan_recovery(Store.open(fx.root))
    assert plan.truncate_offset == last.offset and plan.consume_queue_truncated
    assert plan.consume_queue_max_offsets == fx.queue_counts(before=last.offset)
    cut = {q.key: q.entries_cut for q in plan.queues if q.entries_cut}
    assert cut == {f"{last.topic}/{last.queue_id}": 1}
    assert plan.consume_queue_max_offsets_after_start == fx.queue_counts(before=last.offset)


def test_cli_recover_rocksdb_never_writes(tmp_path):
    fx = _rocksdb_store(tmp_path, upto=150)
    before = tree_hashes(fx.root)
    r = CliRunner().invoke(cli, ["recover", fx.root, "--dry-run", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["consume_queue_max_offsets"] == fx.queue_counts()
    assert doc["consume_queue_max_offsets_after_start"] == fx.queue_counts()
    assert tree_hashes(fx.root) == before
