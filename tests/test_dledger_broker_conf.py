"""storePathDLedgerCommitLog from --broker-config (DLedgerConfig.dataStorePath): a configured data directory inside
the broker's storePathRootDir is read at the same place inside the copy and said; one outside it (another disk) is
never read - said, and the copy's dledger-<selfId>/data read instead, or a clear exit 3 when the copy has none."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.dledger import DLedgerWriter
from support import tree_hashes


def _member(root) -> None:
    w = DLedgerWriter(str(root / "dledger-n0"), 4096, 32 * 64)
    for i in range(30):
        w.append(MessageSpec(topic="T", queue_id=i % 3, body=b"m%d-" % i * (1 + i % 5), born_timestamp=1000 + i,
                             store_timestamp=2000 + i), 1 + i // 20)
    w.write_checkpoint(w.entries[-1].index)
    w.write_currterm(2, "n0")


def _conf(path, data: str) -> str:
    path.write_text("enableDLegerCommitLog=true\ndLegerSelfId=n0\nstorePathRootDir=/data/rmq/store\n"
                    f"storePathDLedgerCommitLog={data}\n")
    return str(path)


def _decode(store, conf=None):
    args = ["decode-commitlog", str(store), "--format", "json"] + (["--broker-config", conf] if conf else [])
    r = CliRunner().invoke(cli, args)
    return r, (json.loads(r.stdout) if r.exit_code == 0 else None)


def _summary(store, conf):
    r = CliRunner().invoke(cli, ["summary", str(store), "--format", "json", "--broker-config", conf])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _key(rows):
    return [(m["physical_offset"], m["topic"], m["queue_id"], m["queue_offset"], m["body_crc"]) for m in rows]


def test_data_dir_inside_the_store_root_is_read_in_the_copy(tmp_path):
    _member(tmp_path / "plain")
    _, want = _decode(tmp_path / "plain")
    assert len(want) == 30
    copy = tmp_path / "copy"
    _member(copy)
    shutil.move(str(copy / "dledger-n0" / "data"), str(copy / "dledger-data"))  # only index/ stays in the member
    before = tree_hashes(copy)
    conf = _conf(tmp_path / "broker.conf", "/data/rmq/store/dledger-data")
    r, got = _decode(copy, conf)
    assert r.exit_code == 0, r.output
    assert _key(got) == _key(want)
    s = _summary(copy, conf)
    assert s["messages"] == 30 and not s["damage"]
    assert [n for n in s["notes"] if "storePathDLedgerCommitLog" in n] == [
        f"{tmp_path}/broker.conf:4 (storePathDLedgerCommitLog): member n0's DLedger data files are kept in "
        f"/data/rmq/store/dledger-data: the copy's {copy}/dledger-data is read, not {copy}/dledger-n0/data"]
    # the per-file tasks (verify, export) open the data files by path: still read as DLedger entries
    r = CliRunner().invoke(cli, ["verify", str(copy), "--format", "json", "--broker-config", conf])
    assert r.exit_code == 0 and json.loads(r.stdout)["ok"], r.output
    # without the config the copy is not a store at all: dledger-n0 has no data/
    r, _ = _decode(copy)
    assert r.exit_code == 3
    assert tree_hashes(copy) == before


def test_data_dir_outside_the_store_root_is_never_read(tmp_path):
    _member(tmp_path / "s")
    other = tmp_path / "disk2"
    _member(other)  # a different member's files where the config points: must not be read
    conf = _conf(tmp_path / "broker.conf", f"{other}/dledger-n0/data")
    r, got = _decode(tmp_path / "s", conf)
    assert r.exit_code == 0, r.output
    assert len(got) == 30 and all(m["file"].startswith(f"{tmp_path}/s/dledger-n0/data/") for m in got)
    notes = " | ".join(_summary(tmp_path / "s", conf)["notes"])
    assert f"kept in {other}/dledger-n0/data, outside storePathRootDir /data/rmq/store: not read" in notes
    assert f"{tmp_path}/s/dledger-n0/data is read instead" in notes
    shutil.rmtree(tmp_path / "s" / "dledger-n0" / "data")
    r, _ = _decode(tmp_path / "s", conf)
    assert r.exit_code == 3 and "no DLedger data files in the copy" in r.stderr and r.stderr.count("\n") == 1


def test_default_place_and_data_dir_given_say_nothing(tmp_path):
    _member(tmp_path / "s")
    conf = _conf(tmp_path / "broker.conf", "/data/rmq/store/dledger-n0/data")
    r, got = _decode(tmp_path / "s", conf)
    assert r.exit_code == 0 and len(got) == 30
    assert not [n for n in _summary(tmp_path / "s", conf)["notes"] if "storePathDLedgerCommitLog" in n]
    conf = _conf(tmp_path / "broker2.conf", "/data/rmq/store/elsewhere")
    r, got = _decode(tmp_path / "s" / "dledger-n0" / "data", conf)  # the user named the data directory
    assert r.exit_code == 0 and len(got) == 30
    assert not [n for n in _summary(tmp_path / "s" / "dledger-n0" / "data", conf)["notes"]
                if "storePathDLedgerCommitLog" in n]
