"""One broker-version model: ``store.version.BrokerVersion`` parses every ``--broker-version``, store detection
returns it, and the recovery steps are functions that can be run one at a time."""

import json
import os

import click
import pytest
from click.testing import CliRunner

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery.plan import (
    choose_start_file,
    index_files_loaded,
    load_consume_queues,
    scan_commitlog,
    truncate_commitlog,
)
from rmqinspect.cli._params import BROKER_VERSION
from rmqinspect.cli.main import cli
from rmqinspect.formats.indexfile import INDEX_HEADER
from rmqinspect.store import Store
from rmqinspect.store.detect import detect_store
from support import require_oracle
from support.recover_fixtures import build_store


@pytest.mark.parametrize("text, parts, shown", [
    ("4.9.8", (4, 9, 8), "4.9.8"), ("5.3", (5, 3, 0), "5.3"), ("rocketmq-all-5.3.1", (5, 3, 1), "rocketmq-all-5.3.1"),
    ("v5.1.0", (5, 1, 0), "v5.1.0"), ("4.x", (4, 9, 8), "4.x"),
    ("5.x (detected)", (5, 3, 3), "5.x"), ("5.1.0-SNAPSHOT", (5, 1, 0), "5.1.0-SNAPSHOT"),
    (" HEAD ", (5, 3, 4), "HEAD"), ("master", (5, 3, 4), "HEAD"),
])
def test_parse(text, parts, shown):
    v = BrokerVersion.parse(text)
    assert (v.parts, v.text, str(v)) == (parts, shown, shown)


@pytest.mark.parametrize("text", ["", "-1", "garbage", "x.1", " "])
def test_parse_rejects(text):
    with pytest.raises(ValueError, match="not a RocketMQ version"):
        BrokerVersion.parse(text)


def test_rules_follow_the_release_that_changed_them():
    v = BrokerVersion.parse
    assert [v(x).accepts_v2 for x in ("4.9.8", "5.0.0", "5.1.0", "HEAD")] == [False, False, True, True]
    assert [v(x).index_counts_every_put for x in ("4.4", "4.7.0", "4.7.1", "4.9", "5")] == [
        True, True, False, False, False]
    assert [v(x).normal_rule for x in ("4.9.8", "5.3.1", "5.3.2", "5.3.3", "5.3.4", "HEAD")] == [
        "third-last", "third-last", "cq-max", "cq-max", "head", "head"]
    assert [v(x).store_ts_fixed_56 for x in ("4.5.2", "4.6.0")] == [True, False]
    assert [v(x).cq_max_phys_is_start for x in ("4.4.0", "4.5.0")] == [True, False]
    assert [v(x).writes_crc32_property for x in ("5.1.4", "5.2.0")] == [False, True]
    assert [v(x).delay_levels_at_recovery for x in ("4.9.8", "5.0.0")] == [False, True]
    assert v("5.3.1").at_least(5, 3) and not v("5.2.9").at_least(5, 3) and v("5.3.1").major == 5


def _version_commands():
    for name, cmd in sorted(cli.commands.items()):
        for p in cmd.params:
            if p.name == "broker_version":
                yield name, cmd, p


def test_every_broker_version_option_is_the_one_type():
    found = list(_version_commands())
    assert {n for n, _, _ in found} >= {"recover", "salvage", "consumer-lag", "verify", "decode-commitlog",
                                         "summary", "rebuild", "store-info", "gc"}
    for name, _, p in found:
        assert p.type is BROKER_VERSION and p.opts == ["--broker-version"], name


@pytest.mark.parametrize("value", ["", "-1", "garbage"])
def test_invalid_broker_version_is_a_usage_error_everywhere(value):
    for name, cmd, _ in _version_commands():
        n_args = sum(isinstance(p, click.Argument) for p in cmd.params)
        r = CliRunner().invoke(cli, [name, "--broker-version", value] + ["no-such-store"] * n_args)
        assert r.exit_code == 2, (name, r.output)
        assert isinstance(r.exception, SystemExit), (name, r.exception)
        assert "--broker-version" in r.output and "4.9.8" in r.output, (name, r.output)


def test_detection_returns_the_version_type():
    st = Store.open(require_oracle("rocketmq-all-4.9.8/clean") / "store")
    d = detect_store(st)
    assert d.version_guess == "4.x" and d.broker_version == BrokerVersion.parse("4.x") and d.major == 4
    d = detect_store(st, BrokerVersion.parse("5.3.3"))
    assert d.broker_version == BrokerVersion.parse("5.3.3") and d.major == 5
    assert d.to_dict()["override"] == "5.3.3" and d.to_dict()["version"] == "5.3.3"
    r = CliRunner().invoke(cli, ["rebuild", str(st.root), "--dry-run", "--what", "index", "--broker-version", "4.4",
                                 "--format", "json"])
    assert json.loads(r.stdout)["broker_version"] == "4.4", r.output


def test_steps_run_one_at_a_time(tmp_path):
    fx = build_store(tmp_path / "s")
    last = fx.records[-2]
    fx.zero(last.offset + last.size // 2, last.end)  # torn tail: the scan stops at record -2
    fx.set_abort()
    ts = fx.records[0].store_ts + 3000
    fx.write_checkpoint(ts, index=ts)
    os.makedirs(os.path.join(fx.root, "index"))
    for name, end_ts in (("20260101000000000", ts), ("20260101000001000", ts + 1)):
        with open(os.path.join(fx.root, "index", name), "wb") as fh:
            fh.write(INDEX_HEADER.pack(ts - 10, end_ts, 0, 0, 0, 1))
    with open(os.path.join(fx.root, "index", "20260101000002000"), "wb") as fh:
        fh.write(b"\0" * 12)
    st = Store.open(fx.root)
    rec = load_consume_queues(st, RecoveryOptions(BrokerVersion.parse("4.9.8")))
    assert not rec.normal and rec.max_phy_cq > 0
    idx, why = choose_start_file(rec)
    assert why.startswith("abnormal recovery") and 0 <= idx < len(st.commitlog.files)
    scan = scan_commitlog(rec, idx)
    assert (scan.truncate_offset, scan.stop_kind) == (last.offset, "crc")  # the zeroed half fails the body CRC
    cut = truncate_commitlog(st.commitlog.files, st.commitlog.file_size, scan.truncate_offset)
    assert cut.truncated["position"] == last.offset - st.commitlog.files[len(cut.after) - 1].start
    assert [f["name"] for f in cut.after] + cut.deleted == [f.name for f in st.commitlog.files]
    dropped, kept = index_files_loaded(rec)
    assert (dropped, kept) == (["20260101000001000"], ["20260101000000000", "20260101000002000"])
    assert "index/20260101000002000 is shorter than its header" in rec.notes
    plan = plan_recovery(st, RecoveryOptions(BrokerVersion.parse("4.9.8")))
    assert (plan.truncate_offset, plan.start_file, plan.index_files_dropped) == (
        scan.truncate_offset, st.commitlog.files[idx].name, dropped)
    assert plan.consume_queue_keys() == sorted(plan.consume_queue_max_offsets)
