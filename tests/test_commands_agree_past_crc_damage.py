"""Commands agree with each other past damage, each pinned: decode-commitlog's crc_ok for an empty
body, summary counting what decode-commitlog / verify count past a CRC-damaged record."""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from support import require_oracle

T0 = 1_763_700_000_000


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("scenario", ["rocketmq-all-4.9.8/clean", "rocketmq-all-5.3.3/clean"])
def test_empty_body_crc_ok_on_the_oracle(scenario):
    """The broker's check passes an empty body (crc32 of nothing is 0, which is what it stores)."""
    sc = require_oracle(scenario)
    r = run("decode-commitlog", sc / "store", "--format", "ndjson")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    empty = [x for x in rows if x["body_size"] == 0]
    assert empty and all(x["body_crc"] == 0 and x["crc_ok"] is True for x in empty)


def _store(root, n=40, damaged=(11,)):
    with CommitLogWriter(os.path.join(root, "commitlog"), 1 << 16) as w:
        res = [w.append(MessageSpec(topic="T", queue_id=0, body=(b"" if i % 9 == 0 else b"body %d" % i),
                                    properties=b"", store_timestamp=T0 + i)) for i in range(n)]
    for i in damaged:  # the stored BODYCRC changed: the record is whole, only its CRC check fails
        path = os.path.join(root, "commitlog", f"{0:020d}")
        with open(path, "r+b") as f:
            f.seek(res[i].physical_offset + 8)  # BODYCRC
            crc = int.from_bytes(f.read(4), "big")
            f.seek(res[i].physical_offset + 8)
            f.write(((crc ^ 0x55) & 0x7FFFFFFF).to_bytes(4, "big"))
    return res


def test_empty_body_with_crc_0_is_ok_and_a_wrong_crc_is_not(tmp_path):
    res = _store(str(tmp_path), damaged=(9,))  # record 9: empty body, stored CRC no longer 0
    r = run("decode-commitlog", tmp_path, "--format", "ndjson")
    rows = {json.loads(x)["physical_offset"]: json.loads(x) for x in r.stdout.splitlines()}
    assert rows[res[0].physical_offset]["crc_ok"] is True and rows[res[0].physical_offset]["body_size"] == 0
    assert rows[res[9].physical_offset]["crc_ok"] is False


def test_summary_counts_past_a_crc_damaged_record_and_says_where(tmp_path):
    res = _store(str(tmp_path))
    r = run("summary", tmp_path, "--format", "json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    decoded = run("decode-commitlog", tmp_path, "--format", "ndjson").stdout.splitlines()
    verify = json.loads(run("verify", tmp_path, "--format", "json", "--checks", "structure,crc").stdout)
    assert s["messages"] == len(decoded) == len(res)
    # verify counts the sound records and reports the damaged one: together, the same records
    assert verify["checked"]["records"] + verify["problems"] == len(res)
    assert [(d["kind"], d["start"]) for d in s["damage"]] == [("crc_mismatch", res[11].physical_offset)]
    assert s["files"][0]["damage_at"] == res[11].physical_offset
    assert any(f"counting resumed at {res[12].physical_offset}" in n for n in s["notes"])


def test_index_lookup_marks_hits_beyond_the_recovery_truncation(tmp_path):
    """A crashed store with CRC damage in its last file: the broker's recovery truncates there, so a hit past
    it is gone after restart even though its index file is not one the broker deletes."""
    from rmqinspect.fixtures.store import StoreWriter
    from support.msgstores import spec

    root = tmp_path / "s"
    # 40 items a file: full files the checkpoint covers (kept at restart) and a newest one the broker deletes
    with StoreWriter(str(root), commitlog_file_size=1 << 16, index_slots=16, index_max=40, abort=True) as w:
        res = [w.append(spec(i, topic="OrderTopic")) for i in range(60)]
    victim = res[5]
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(victim.physical_offset + 8)
        crc = int.from_bytes(f.read(4), "big")
        f.seek(victim.physical_offset + 8)
        f.write(((crc ^ 0x55) & 0x7FFFFFFF).to_bytes(4, "big"))

    def look(i):
        r = run("index-lookup", root, "--topic", "OrderTopic", "--key", f"m-key-{i}", "--format", "json")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    before = look(2)
    assert before["recovery_truncate_offset"] == victim.physical_offset
    assert [h["fate"] for h in before["hits"]] == ["survives"]
    after = look(12)
    assert [h["physical_offset"] for h in after["hits"]] == [res[12].physical_offset]
    assert after["hits"][0]["verified"] is True and after["hits"][0]["fate"] == "beyond_truncation"
    assert after["hits"][0]["from_dropped_index_file"] is False  # the old mark misses it
    newest = look(58)["hits"][0]
    assert newest["from_dropped_index_file"] is True and newest["fate"] == "beyond_truncation"


@pytest.mark.parametrize("scenario", ["rocketmq-all-4.9.8/crash-torn-tail", "rocketmq-all-5.3.3/crash-torn-tail"])
def test_recover_headline_numbers_are_sums_of_their_details(scenario):
    sc = require_oracle(scenario)
    r = run("recover", sc / "store", "--dry-run", "--format", "json")
    doc = json.loads(r.stdout)
    t, queues, lost = doc["totals"], doc["consume_queues"], doc["messages_lost"]
    assert t["cq_entries_cut"] == sum(q["entries_cut"] for q in queues) > 0
    assert t["cq_entries_redispatched"] == sum(q["redispatched"] for q in queues)
    assert t["records_past_truncation"] == lost["count"] == (t["records_past_truncation_intact"]
                                                            + t["records_past_truncation_damaged"])
    table = run("recover", sc / "store", "--dry-run").stdout
    assert re.search(rf"\ncq entries cut +{t['cq_entries_cut']} \(sum of", table)
    assert "records dispatched again" in table and "records re-dispatched" not in table


def test_index_lookup_as_recovered_drops_what_the_broker_will_not_return(tmp_path):
    from rmqinspect.fixtures.store import StoreWriter
    from support.msgstores import spec

    root = tmp_path / "s"
    with StoreWriter(str(root), commitlog_file_size=1 << 16, index_slots=16, index_max=40, abort=True) as w:
        res = [w.append(spec(i, topic="OrderTopic")) for i in range(60)]
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(res[5].physical_offset + 8)
        crc = int.from_bytes(f.read(4), "big")
        f.seek(res[5].physical_offset + 8)
        f.write(((crc ^ 0x55) & 0x7FFFFFFF).to_bytes(4, "big"))
    base = ["index-lookup", root, "--topic", "OrderTopic", "--format", "json"]
    on_disk = json.loads(run(*base, "--key", "m-key-12").stdout)
    assert on_disk["verified_offsets"] == [res[12].physical_offset]
    r = run(*base, "--key", "m-key-12", "--as-recovered")
    assert r.exit_code == 3 and json.loads(r.stdout)["phy_offsets"] == []
    kept = json.loads(run(*base, "--key", "m-key-2", "--as-recovered").stdout)
    assert kept["verified_offsets"] == [res[2].physical_offset]


def test_index_lookup_without_the_recovery_model_gives_no_fate(tmp_path, monkeypatch):
    """--no-fate skips the recovery model: the hit is listed, its fate and truncation mark are unknown (null), not
    "survives". The same when the model cannot run (a warning says so); --as-recovered needs the model."""
    from rmqinspect.analyses.lookup import fates
    from rmqinspect.analyses.lookup.fates import RecoveryView
    from rmqinspect.errors import CorruptDataError
    from rmqinspect.fixtures.store import StoreWriter
    from support.msgstores import spec

    root = tmp_path / "s"
    with StoreWriter(str(root), commitlog_file_size=1 << 16, index_slots=16, index_max=40, abort=True) as w:
        res = [w.append(spec(i, topic="OrderTopic")) for i in range(60)]
    base = ["index-lookup", root, "--topic", "OrderTopic", "--key", "m-key-2", "--format", "json"]
    modelled = json.loads(run(*base).stdout)
    assert modelled["hits"][0]["fate"] == "survives"
    assert modelled["recovery_truncate_offset"] == res[-1].physical_offset + res[-1].total_size
    off = json.loads(run(*base, "--no-fate").stdout)
    assert off["verified_offsets"] == modelled["verified_offsets"] == [res[2].physical_offset]
    assert off["recovery_truncate_offset"] is None
    assert (off["hits"][0]["fate"], off["hits"][0]["beyond_truncation"]) == (None, None)
    assert run(*base, "--no-fate", "--as-recovered").exit_code == 2

    def broken(store, cache=True) -> RecoveryView:
        raise CorruptDataError("checkpoint unreadable", "checkpoint")

    monkeypatch.setattr(fates, "recovery_view", broken)  # what the command asks when it runs
    r = run(*base)
    assert r.exit_code == 0 and "recovery not modelled" in r.stderr
    assert json.loads(r.stdout)["hits"][0]["fate"] is None
