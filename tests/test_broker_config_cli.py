"""--broker-config FILE (and RMQINSPECT_BROKER_CONFIG) on every command: flag > broker.conf >
proof from the data > default, on stores the project's writer built with non-default settings and on the
oracle's rebuild scenario."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.store import StoreWriter
from support import load_expected, require_oracle, tree_hashes
from support.msgstores import spec
from support.rebuild import assert_same_cq, assert_same_index

N = 120


def run(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def _store(root, slots=16, items=400, cq_file_size=1200):
    with StoreWriter(str(root), commitlog_file_size=1 << 20, cq_file_size=cq_file_size, index_slots=slots,
                     index_max=items) as w:
        res = [w.append(spec(i, topic=("OrderTopic", "PayTopic")[i % 2], queue=i % 3)) for i in range(N)]
    return res


def _conf(path, **kv):
    path.write_text("# broker.conf\nbrokerName=broker-a\nunknownKey=whatever\n"
                    + "".join(f"{k}={v}\n" for k, v in kv.items()))
    return path


def _hits(r):
    assert r.exit_code in (0, 3), r.output
    return json.loads(r.stdout)


def test_every_command_takes_broker_config():
    import click

    def leaves(group):
        for name, cmd in group.commands.items():
            yield from (leaves(cmd) if isinstance(cmd, click.Group) else [(name, cmd)])

    names = [name for name, _ in leaves(cli)]
    assert len(names) > 20 and "index-lookup" in names and "verify" in names
    for name, cmd in leaves(cli):
        assert "--broker-config" in [o for p in cmd.params for o in getattr(p, "opts", ())], name


def test_lookups_on_a_16_slot_store_are_exact_without_flags(tmp_path):
    """The issue's store (16 slots / 400 items, 8,104-byte files): every key found, with no flag."""
    res = _store(tmp_path / "s")
    before = tree_hashes(tmp_path / "s")
    for i in (0, 1, 57, 119):
        topic = ("OrderTopic", "PayTopic")[i % 2]
        doc = _hits(run("index-lookup", tmp_path / "s", "--topic", topic, "--key", f"m-key-{i}", "--format", "json"))
        assert doc["verified_offsets"] == [res[i].physical_offset], i
        assert doc["geometry"]["source"] == "inferred"
        assert doc["geometry"]["value"] == {"slots": 16, "max_items": 400}
    r = run("verify", tmp_path / "s", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["ok"] and all(g["source"] == "inferred" for g in doc["index_geometry"].values())
    r = run("rebuild", tmp_path / "s", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["geometry"]["index_slots"] == 16
    assert tree_hashes(tmp_path / "s") == before


def test_flag_beats_config_beats_inference(tmp_path):
    res = _store(tmp_path / "s")
    key = ["--topic", "PayTopic", "--key", "m-key-57", "--format", "json"]
    # a broker.conf that contradicts the files wins over the proof (it is what the user says the broker used)
    wrong = _conf(tmp_path / "wrong.conf", maxHashSlotNum=1, maxIndexNum=403)
    doc = _hits(run("index-lookup", tmp_path / "s", *key, "--broker-config", wrong))
    assert doc["geometry"]["source"] == "config" and doc["geometry"]["value"] == {"slots": 1, "max_items": 403}
    assert "wrong.conf:4" in doc["geometry"]["detail"]
    assert doc["verified_offsets"] != [res[57].physical_offset]
    # ... and the flags win over it
    doc = _hits(run("index-lookup", tmp_path / "s", *key, "--broker-config", wrong, "--index-slots", 16,
                    "--index-max", 400))
    assert doc["geometry"]["source"] == "flag" and doc["verified_offsets"] == [res[57].physical_offset]
    # the environment variable is the same option
    right = _conf(tmp_path / "right.conf", maxHashSlotNum=16, maxIndexNum=400)
    doc = _hits(run("index-lookup", tmp_path / "s", *key, env={"RMQINSPECT_BROKER_CONFIG": str(right)}))
    assert doc["geometry"]["source"] == "config" and doc["verified_offsets"] == [res[57].physical_offset]


def test_malformed_config_is_a_usage_error_naming_the_line(tmp_path):
    _store(tmp_path / "s")
    bad = tmp_path / "bad.conf"
    bad.write_text("brokerName=a\nmaxHashSlotNum=sixteen\n")
    for cmd in (["index-lookup", tmp_path / "s", "--topic", "T", "--key", "k"], ["summary", tmp_path / "s"],
                ["verify", tmp_path / "s"]):
        r = run(*cmd, "--broker-config", bad)
        assert r.exit_code == 2, r.output
        assert "bad.conf:2" in r.output and "Traceback" not in r.output
    r = run("summary", tmp_path / "s", "--broker-config", tmp_path / "missing.conf")
    assert r.exit_code == 2 and "missing.conf" in r.output


def test_rebuild_without_cq_and_index_takes_the_geometry_from_broker_conf(tmp_path):
    """The issue: consumequeue/ and index/ gone, a 1,200-byte-CQ broker. Without a config the default size is
    used and said; with the broker.conf the output is the broker's byte for byte."""
    _store(tmp_path / "s")
    gone = tmp_path / "gone"
    os.makedirs(gone)
    os.rename(tmp_path / "s" / "commitlog", gone / "commitlog")
    for f in ("checkpoint",):
        if (tmp_path / "s" / f).exists():
            os.rename(tmp_path / "s" / f, gone / f)
    r = run("rebuild", gone, "--out", tmp_path / "o1", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["geometry"]["cq_file_size"] == 6_000_000
    assert doc["geometry_settings"]["cq_file_size"]["source"] == "default"
    assert "mappedFileSizeConsumeQueue" in r.stderr and "maxHashSlotNum" in r.stderr
    conf = _conf(tmp_path / "broker.conf", mappedFileSizeConsumeQueue=1200, maxHashSlotNum=16, maxIndexNum=400)
    r = run("rebuild", gone, "--out", tmp_path / "o2", "--format", "json", "--broker-config", conf)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["geometry_settings"]["cq_file_size"]["source"] == "config"
    assert_same_cq(tmp_path / "s" / "consumequeue", tmp_path / "o2" / "consumequeue")
    assert_same_index(tmp_path / "s" / "index", tmp_path / "o2" / "index")


@pytest.mark.parametrize("version", ["rocketmq-all-4.9.8", "rocketmq-all-5.3.3"])
def test_oracle_rebuild_with_broker_conf_equals_the_brokers(version, tmp_path):
    sc = require_oracle(f"{version}/rebuild")
    conf = _conf(tmp_path / "broker.conf", **{k: v for k, v in load_expected(f"{version}/rebuild")["storeConfig"]
                                              .items() if isinstance(v, (int, str)) and not isinstance(v, bool)})
    before = tree_hashes(sc)
    r = run("rebuild", sc / "store", "--out", tmp_path / "out", "--format", "json", "--broker-config", conf)
    assert r.exit_code == 0, r.output
    assert_same_cq(sc / "expected" / "consumequeue", tmp_path / "out" / "consumequeue")
    assert_same_index(sc / "expected" / "index", tmp_path / "out" / "index")
    assert tree_hashes(sc) == before


def test_config_replaces_broker_defaults_not_flags(tmp_path):
    """Options whose default is the broker's default (recover's checkCRCOnRecover, messageIndexSafe ...) take
    the broker.conf's value when their flag is not given; a given flag still wins."""
    _store(tmp_path / "s")
    conf = _conf(tmp_path / "broker.conf", checkCRCOnRecover="false", messageIndexSafe="true")

    def rec(*extra):
        r = run("recover", tmp_path / "s", "--dry-run", "--format", "json", *extra)
        assert r.exit_code in (0, 1), r.output
        return json.loads(r.stdout)

    assert rec()["check_crc"] is True
    assert rec("--broker-config", conf)["check_crc"] is False
    assert rec("--broker-config", conf, "--check-crc")["check_crc"] is True


def test_message_delay_level_from_config(tmp_path):
    bad = _conf(tmp_path / "bad.conf", messageDelayLevel="1s 5x")
    _store(tmp_path / "s")
    r = run("rebuild", tmp_path / "s", "--dry-run", "--broker-config", bad)
    assert r.exit_code == 2 and "bad.conf:4" in r.output and "messageDelayLevel" in r.output, r.output


def test_every_restart_answer_takes_check_crc_on_recover_from_broker_config(tmp_path):
    """One restart model: with checkCRCOnRecover=false in the broker.conf, the plan every command asks (recover,
    report, and the commands that build RecoveryOptions without the switch: salvage, consumer-lag, txn, fate,
    peers) scans past a body-CRC mismatch; without a broker.conf it stops there, for every one of them alike."""
    from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
    from rmqinspect.analyses.report_data import collect_store_report
    from rmqinspect.store import Store
    from rmqinspect.store.broker_conf import read_broker_conf
    from support.recover_fixtures import build_store

    fx = build_store(tmp_path / "s", n=400)
    fx.set_abort()
    fx.write_checkpoint(fx.records[150].store_ts)  # abnormal recovery from an older file: the scan meets the flip
    flipped = fx.records[300].offset
    fx.patch(flipped + 95, b"\xff")
    conf_path = _conf(tmp_path / "broker.conf", checkCRCOnRecover="false")
    before = tree_hashes(fx.root)

    def recover(*extra):
        r = run("recover", fx.root, "--dry-run", "--format", "json", *extra)
        assert r.exit_code in (0, 1), r.output
        return json.loads(r.stdout)["truncate_offset"]

    for conf, want_stop_at_flip in ((None, True), (read_broker_conf(conf_path), False)):
        expected = recover(*(("--broker-config", conf_path) if conf else ()))
        assert (expected == flipped) is want_stop_at_flip
        with Store.open(fx.root, conf=conf) as st:
            assert plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False)).truncate_offset \
                == expected
        with Store.open(fx.root, conf=conf) as st:
            assert collect_store_report(st).plan.truncate_offset == expected
    assert tree_hashes(fx.root) == before
