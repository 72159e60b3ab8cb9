"""4.x vs 5.x detection on every oracle scenario and on project-written fixtures; `store-info`."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.sinks.rocksdb_cq import write_rocksdb_consume_queue
from rmqinspect.store import Store
from rmqinspect.store.detect import detect_store
from rmqinspect.store.version import BrokerVersion
from support import tree_hashes


def test_every_oracle_scenario(scenario):
    path, exp = scenario
    before = tree_hashes(path / "store")
    d = detect_store(Store.open(path / "store"))
    release = BrokerVersion.parse(exp["rocketmqVersion"])  # e.g. "develop-8fc57f1 (5.3.4-SNAPSHOT)" is 5.3.4
    want = f"{release.major}.x"
    combined = bool(exp.get("storeConfig", {}).get("rocksdbCQDoubleWriteEnable"))
    assert d.version_guess == want, [(e.signal, e.found) for e in d.evidence]
    found = {e.signal for e in d.found()}
    if want == "5.x":
        # the V2 signal is evidence only where the broker wrote V2 records (timer/batch stores hold V1 only)
        assert "abort.bak" in found
        if "messages" in exp:  # the rebuild scenario records no per-message ground truth
            assert ("V2 records" in found) == any(m["messageVersion"] == "V2" for m in exp["messages"])
        assert ("RocksDB files in consumequeue/" in found) == (exp["scenario"] == "rocksdb-cq-small" or combined)
        assert d.consume_queue_kind == ("rocksdb" if exp["scenario"] == "rocksdb-cq-small" else
                                        "file+rocksdb" if combined else
                                        "none" if exp["scenario"] == "rebuild" else "file")
        # the CombineConsumeQueueStore exists from 5.3.4: its layout proves the release band
        assert ("file CQ and RocksDB CQ side by side" in found) == combined
        assert (d.min_release is not None and d.min_release.parts == release.parts) == combined
        assert ("abort holds a pid" in found) == exp["abortFilePresentBeforeLoad"]
    else:
        assert not any(e.implies.startswith("5") for e in d.found())
    r = CliRunner().invoke(cli, ["store-info", str(path / "store"), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["version_guess"] == want
    r = CliRunner().invoke(cli, ["store-info", str(path / "store"), "--broker-version", "5.3.3", "--format", "json"])
    assert json.loads(r.stdout)["version"] == "5.3.3"
    assert tree_hashes(path / "store") == before


def _store(root, crc=False, topic="T"):
    os.makedirs(root / "commitlog")
    with CommitLogWriter(str(root / "commitlog"), file_size=1 << 16) as w:
        w.append(MessageSpec(topic, 0, b"x", encode_properties({"TAGS": "a"}), append_property_crc=crc))
    return root


def test_fixture_4x_vs_5x_signals(tmp_path):
    s4 = _store(tmp_path / "a")
    (s4 / "abort").write_bytes(b"")
    d = detect_store(Store.open(s4))
    assert d.version_guess == "4.x" and {e.signal for e in d.found()} == {"empty abort"}
    s5 = _store(tmp_path / "b", crc=True, topic="t" * 200)
    (s5 / "abort").write_text("12345")
    for d_ in ("timerlog", "batchconsumequeue/T/0", "tiered_index_file"):
        os.makedirs(s5 / d_)
    (s5 / "timerlog" / ("0" * 20)).write_bytes(b"")
    (s5 / "batchconsumequeue/T/0" / ("0" * 20)).write_bytes(b"")
    (s5 / "timerwheel").write_bytes(b"")
    write_rocksdb_consume_queue(str(s5 / "consumequeue"), [("T", 0, 0, 0, 10, 0, 0)])
    d = detect_store(Store.open(s5))
    found = {e.signal for e in d.found()}
    assert d.version_guess == "5.x" and d.consume_queue_kind == "rocksdb"
    assert {"abort holds a pid", "V2 records", "__CRC32# properties", "RocksDB files in consumequeue/",
            "timerlog/", "timerwheel", "batchconsumequeue/", "tiered_index_file/"} <= found
