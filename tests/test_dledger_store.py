"""DLedger-mode stores against the oracle: every entry header and index unit as DLedger's API read
them, every message's entry fields, DLedger's recovery (ledger end, committed index/pos, max offset after load
and after start, the lost-checkpoint comparison), layout detection and store-info, and the store unchanged."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.recovery import RecoveryOptions, plan_recovery
from rmqinspect.analyses.recovery.dledger import dledger_recover
from rmqinspect.cli.main import cli
from rmqinspect.errors import StoreNotFoundError
from rmqinspect.formats.dledger import BODY_OFFSET, ENTRY_HEADER_TABLE, INDEX_UNIT_TABLE
from rmqinspect.store import Store
from rmqinspect.store.broker_conf import read_broker_conf
from support import load_expected, require_oracle, tree_hashes

SCENARIOS = ["rocketmq-all-4.9.8/dledger-clean", "rocketmq-all-4.9.8/dledger-crash-intact"]


@pytest.fixture(params=SCENARIOS)
def dl(request):
    p = require_oracle(request.param)
    return p, load_expected(request.param)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def test_layout_tables_match_the_verified_layout(dl):
    """formats.dledger's tables, field for field (name, offset, size), equal the layout the oracle verified."""
    _, exp = dl
    for table, key in ((ENTRY_HEADER_TABLE, "entryHeader"), (INDEX_UNIT_TABLE, "indexUnit")):
        want = [(_snake(f["name"]), f["offset"], f["size"]) for f in exp["dledger"][key]["fields"]
                if f["name"] != "body"]
        assert [(n, table.position(n), table.dtype[n].itemsize) for n in table.names] == want, key
    assert BODY_OFFSET == exp["dledger"]["entryHeader"]["bodyOffset"]


def test_every_entry_and_index_unit_equal_dledger_api(dl):
    path, exp = dl
    want = exp["dledger"]["entries"]
    with Store.open(path / "store") as st:
        log = st.dledger
        assert log is not None and log.self_id == exp["dledger"]["selfId"]
        got = list(log.entries())
        assert len(got) == len(want) > 0
        for e, w in zip(got, want):
            u = log.index.unit(e.index)
            assert [e.index, e.term, e.pos, e.size, e.magic, e.channel, e.chain_crc, e.body_crc, e.body_size,
                    [u.magic, u.pos, u.size, u.index, u.term]] == w
        assert log.index.file_size == exp["dledger"]["indexFileSize"]
        blanks = [(ev.offset, ev.size) for ev in log.events() if ev.kind == "blank"]
        assert blanks == [(r["dledgerPos"], r["declaredTotalSize"]) for r in exp["records"] if r["kind"] == "blank"]


def test_every_message_carries_its_entry(dl):
    path, exp = dl
    with Store.open(path / "store") as st:
        msgs = {m.physical_offset: m for m in st.commitlog.messages()}
        for w in exp["messages"]:
            m = msgs[w["physicalOffset"]]
            d = m.dledger
            assert (d["index"], d["term"], d["pos"], d["size"], d["magic"], d["channel"], d["chain_crc"],
                    d["body_crc"]) == (w["dledgerIndex"], w["dledgerTerm"], w["dledgerPos"], w["dledgerEntrySize"],
                                       w["dledgerMagic"], w["dledgerChannel"], w["dledgerChainCrc"],
                                       w["dledgerBodyCrc"])
            f, pos = st.commitlog.locate(d["pos"])
            assert hashlib.sha256(f.buffer[pos:pos + d["size"]]).hexdigest() == w["entrySha256"]
        # get-message by physical offset: the record, with its entry
        last = exp["messages"][-1]
        assert st.commitlog.read_message(last["physicalOffset"]).dledger["index"] == last["dledgerIndex"]


def test_dledger_recovery_equals_broker_state(dl):
    path, exp = dl
    with Store.open(path / "store") as st:
        r = dledger_recover(st)
        plan = plan_recovery(st, RecoveryOptions())
    s = exp["stateAfterLoad"]["dledger"]
    assert (r.ledger_begin_index, r.ledger_end_index, r.ledger_end_term, r.committed_index, r.committed_pos,
            r.data_end) == (s["ledgerBeginIndex"], s["ledgerEndIndex"], s["ledgerEndTerm"], s["committedIndex"],
                            s["committedPos"], s["dataMaxWrotePosition"])
    assert r.max_offset_after_load == exp["stateAfterLoad"]["commitLogMaxOffset"] == plan.max_offset_after_load
    assert r.max_offset_after_start == exp["stateAfterStart"]["commitLogMaxOffset"] == plan.max_offset_after_start
    # where DLedger cuts the data: its data end (a crash that cuts nothing has it at the last entry's end)
    assert plan.truncate_offset == r.data_end == s["dataMaxWrotePosition"]
    assert plan.reput_from_offset == exp["stateAfterStart"]["reputFromOffset"] or \
        plan.reput_from_offset == max(v["maxPhysicOffset"] for qs in exp["stateAfterLoad"]["consumeQueues"].values()
                                      for v in qs.values())
    assert plan.redispatch == [] and plan.messages_lost["count"] == 0


def test_lost_checkpoint_comparison(tmp_path):
    """README (dledger-crash-intact, comparison): with the DLedger checkpoint and .bak deleted, committedIndex
    stays -1, max offset after load is 0 (the data's min offset), after leadership the data end."""
    name = "rocketmq-all-4.9.8/dledger-crash-intact"
    p = require_oracle(name)
    exp = load_expected(name)
    copy = tmp_path / "store"
    shutil.copytree(p / "store", copy)
    for n in ("checkpoint", "checkpoint.bak"):
        (copy / "dledger-n0" / n).chmod(0o644)
        (copy / "dledger-n0" / n).unlink()
    cmp = exp["comparison"]
    with Store.open(copy) as st:
        r = dledger_recover(st)
        plan = plan_recovery(st, RecoveryOptions())
    assert (r.committed_index, r.committed_pos) == (cmp["stateAfterLoad"]["dledger"]["committedIndex"],
                                                    cmp["stateAfterLoad"]["dledger"]["committedPos"])
    assert r.max_offset_after_load == cmp["stateAfterLoad"]["commitLogMaxOffset"] == 0 == plan.max_offset_after_load
    assert r.max_offset_after_start == cmp["stateAfterStart"]["commitLogMaxOffset"] == plan.max_offset_after_start
    # nothing is cut: truncate_offset is the data end, not the after-load 0 that read as total loss
    assert plan.truncate_offset == r.data_end == cmp["stateAfterStart"]["commitLogMaxOffset"] > 0
    assert any("no DLedger checkpoint" in n for n in plan.notes)


def test_store_info_and_recover_cli_never_write(dl, tmp_path):
    path, exp = dl
    store = path / "store"
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["store-info", str(store), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    d = doc["dledger"]
    cp = exp["dledger"]["filesBeforeLoad"]
    assert doc["commitlog_mode"] == "dledger" and d["self_id"] == "n0"
    assert d["committed_index"] == exp["dledger"]["stateAfterLoad"]["committedIndex"]
    assert d["last_entry_index"] == exp["dledger"]["stateAfterLoad"]["ledgerEndIndex"]
    assert d["data_end"] == exp["dledger"]["stateAfterLoad"]["dataMaxWrotePosition"]
    assert cp  # recorded raw files before load
    r = CliRunner().invoke(cli, ["recover", str(store), "--dry-run", "--format", "json"])
    doc = json.loads(r.stdout)
    assert doc["dledger"]["max_offset_after_start"] == exp["stateAfterStart"]["commitLogMaxOffset"]
    r = CliRunner().invoke(cli, ["decode-commitlog", str(store), "--count", "2"])
    assert r.exit_code == 0 and "dledger_index" in r.stdout
    assert tree_hashes(store) == before


def test_broker_config_chooses_and_checks_the_member(tmp_path):
    p = require_oracle(SCENARIOS[0]) / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text("enableDLegerCommitLog=true\ndLegerGroup=broker-a\ndLegerSelfId=n1\ndLegerPeers=n0-h:1;n1-h:2\n")
    with pytest.raises(StoreNotFoundError, match="dledger-n1"):
        Store.open(p, conf=read_broker_conf(conf))
    conf.write_text("enableDLegerCommitLog=true\ndLegerGroup=broker-a\ndLegerSelfId=n0\n")
    st = Store.open(p, conf=read_broker_conf(conf))
    from rmqinspect.store.detect import detect_store

    d = detect_store(st).dledger
    assert d is not None and d["group"] == "broker-a" and "dLegerSelfId" in d["chosen_by"]
    st.close()
    r = CliRunner().invoke(cli, ["store-info", str(p / "dledger-n0" / "data")])
    assert r.exit_code == 0 and "DLedger" in r.stdout


def test_rebuild_from_entries_is_byte_identical(dl, tmp_path):
    """rebuild from the DLedger entries: every consume-queue file and every index file equal to the broker's
    (index file names come from the data: compared in order)."""
    import os

    path, _ = dl
    store = path / "store"
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["rebuild", str(store), "--out", str(out)])
    assert r.exit_code == 0, r.output
    n = 0
    for dirpath, _dirs, files in os.walk(store / "consumequeue"):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), store)
            assert (out / rel).read_bytes() == (store / rel).read_bytes(), rel
            n += 1
    mine = sorted(os.listdir(out / "index"))
    theirs = sorted(os.listdir(store / "index"))
    assert len(mine) == len(theirs) and n > 0
    for a, b in zip(mine, theirs):
        assert (out / "index" / a).read_bytes() == (store / "index" / b).read_bytes()


def test_walk_from_a_message_offset_and_single_file_layout(dl):
    """Callers start walks at RocketMQ physical offsets (rebuild --from, decode-commitlog --from): in DLedger
    mode a message's offset is 48 bytes into its entry, and the walk starts with that message. A data file
    given alone opens the same member."""
    path, exp = dl
    msgs = exp["messages"]
    k = len(msgs) // 2
    with Store.open(path / "store") as st:
        got = [s.offset for s in st.commitlog.scan(msgs[k]["physicalOffset"], check_crc=False)
               if s.kind == "message"]
        assert got[:3] == [m["physicalOffset"] for m in msgs[k:k + 3]]
    last = sorted((path / "store" / "dledger-n0" / "data").iterdir())[-1]
    with Store.open(last) as st:
        assert st.layout.dledger is not None and st.layout.single_file == str(last)
        assert st.commitlog.dledger and len(st.commitlog.files) == 1
        first = next(m for m in st.commitlog.messages())
        assert first.dledger["pos"] == int(last.name) and first.physical_offset == int(last.name) + 48
