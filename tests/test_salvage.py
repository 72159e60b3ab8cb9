"""`salvage`: intact messages past the truncation point, exported for replay; never writes into STORE."""

import base64
import json
import os

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.walk.resync import find_next_valid, walk_with_resync
from support import require_oracle, tree_hashes
from support.recover_fixtures import build_store


def _crc_damaged(tmp_path):
    """Abnormal start from file 0 (checkpoint = first store time) and a bad body CRC in the second file:
    everything after that record is what the broker would discard."""
    fx = build_store(tmp_path / "s")
    second = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[1]]
    bad = second[3]
    pos = bad.offset + 91  # inside the body (V1, IPv4 header is 91 bytes)
    fx.patch(pos, b"\xff\xfe")
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts + 3000)
    return fx, bad


def test_salvage_exports_intact_messages_with_bodies(tmp_path):
    fx, bad = _crc_damaged(tmp_path)
    out = tmp_path / "salvaged.ndjson"
    before = tree_hashes(fx.root)
    r = CliRunner().invoke(cli, ["salvage", fx.root, "--out", str(out), "--broker-version", "4.9.8",
                                 "--format", "json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    after = [x for x in fx.records if x.offset > bad.offset]
    assert doc["truncate_offset"] == bad.offset
    assert doc["messages_lost"]["intact"] == len(after)
    assert [(g["kind"], g["start"], g["end"]) for g in doc["regions"]] == [("crc_mismatch", bad.offset, bad.end)]
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [x["physical_offset"] for x in rows] == [x.offset for x in after]
    for row, rec in zip(rows, after):
        assert base64.b64decode(row["body"]) == rec.body
        assert row["topic"] == rec.topic and row["queue_offset"] == rec.queue_offset
    assert tree_hashes(fx.root) == before


def test_salvage_refuses_output_inside_store(tmp_path):
    fx, _ = _crc_damaged(tmp_path)
    r = CliRunner().invoke(cli, ["salvage", fx.root, "--out", os.path.join(fx.root, "config", "x.ndjson")])
    assert r.exit_code == 6 and "inside the inspected store" in r.output
    assert not os.path.exists(os.path.join(fx.root, "config", "x.ndjson"))


def test_salvage_stale_record_is_rejected(tmp_path):
    """A structurally perfect record copied to another place (its PHYSICALOFFSET no longer matches) is stale
    data, not a candidate: the resync skips it."""
    fx = build_store(tmp_path / "s")
    a = fx.records[10]
    b = next(r for r in fx.records[12:] if r.size == a.size and fx.file_of(r.offset) == fx.file_of(a.offset))
    raw = open(os.path.join(fx.commitlog, fx.file_of(a.offset)), "rb").read()
    rec_a = raw[a.offset % fx.file_size:a.end % fx.file_size or fx.file_size]
    fx.patch(b.offset, rec_a)  # a's bytes (valid CRC, PHYSICALOFFSET = a.offset) where b was
    st = Store.open(fx.root)
    f = st.commitlog.files[0]
    g = find_next_valid(f, b.offset % fx.file_size - 1, True, True)
    assert g is not None and g.offset > b.offset
    kinds = [x.kind for x in walk_with_resync(st) if not hasattr(x, "header")]
    assert "stale_data" in kinds


def test_salvage_table_and_ndjson_on_oracle_torn_tail():
    p = require_oracle("rocketmq-all-4.9.8/crash-torn-tail")
    before = tree_hashes(p / "store")
    r = CliRunner().invoke(cli, ["salvage", str(p / "store")])
    assert r.exit_code == 1 and "torn_tail" in r.stdout
    r = CliRunner().invoke(cli, ["salvage", str(p / "store"), "--format", "ndjson"])
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert lines[0]["region"]["kind"] == "torn_tail" and "summary" in lines[-1]
    assert tree_hashes(p / "store") == before


def test_salvage_clean_oracle_exit_0():
    p = require_oracle("rocketmq-all-5.3.3/clean")
    r = CliRunner().invoke(cli, ["salvage", str(p / "store"), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["messages_lost"]["count"] == 0
