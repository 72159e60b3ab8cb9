"""decode-commitlog and summary through the CLI: formats, filters, bad input, and the evidence rule."""

import json
import os
import struct

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.store.message import CONTRACT_KEYS
from support import SAMPLE_STORE, load_expected, require_oracle, tree_hashes


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return r


def test_ndjson_contract_and_filters_against_oracle():
    name = "rocketmq-all-4.9.8/clean"
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    before = tree_hashes(store)
    r = run("decode-commitlog", store, "--format", "ndjson")
    assert r.exit_code == 0
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert len(rows) == len(exp["messages"])
    for row, e in zip(rows, exp["messages"]):
        assert set(CONTRACT_KEYS) <= set(row)
        assert (row["physical_offset"], row["topic"], row["uniq_key"], row["offset_msg_id"]) == \
            (e["physicalOffset"], e["topic"], e["uniqKey"], e["offsetMsgId"])
        assert isinstance(row["born_timestamp"], int) and row["store_host"] == e["storeHost"]
    # filters: topic + key equal a brute-force selection over expected.json
    q = exp["queries"][0]["query"]
    r = run("decode-commitlog", store, "--topic", q["topic"], "--key", q["key"], "--format", "ndjson")
    got = [json.loads(line)["physical_offset"] for line in r.output.splitlines()]
    want = [e["physicalOffset"] for e in exp["messages"] if e["topic"] == q["topic"] and e["keys"]
            and q["key"] in e["keys"].split(" ")]
    assert got == want and got
    tag = next(e["tags"] for e in exp["messages"] if e["tags"])
    r = run("decode-commitlog", store, "--tag", tag, "--queue", 1, "--format", "ndjson")
    got = [json.loads(line)["physical_offset"] for line in r.output.splitlines()]
    assert got == [e["physicalOffset"] for e in exp["messages"] if e["tags"] == tag and e["queueId"] == 1]
    ts = sorted(e["storeTimestamp"] for e in exp["messages"])
    lo, hi = ts[len(ts) // 3], ts[2 * len(ts) // 3]
    r = run("decode-commitlog", store, "--since", lo, "--until", hi, "--format", "ndjson")
    got = [json.loads(line)["physical_offset"] for line in r.output.splitlines()]
    assert got == [e["physicalOffset"] for e in exp["messages"] if lo <= e["storeTimestamp"] <= hi]
    uk = exp["messages"][7]["uniqKey"]
    r = run("decode-commitlog", store, "--uniq-key", uk, "--format", "json")
    assert [d["physical_offset"] for d in json.loads(r.output)] == \
        [e["physicalOffset"] for e in exp["messages"] if e["uniqKey"] == uk]
    # --from/--to and --count
    e0, e5 = exp["messages"][10], exp["messages"][15]
    r = run("decode-commitlog", store, "--from", e0["physicalOffset"], "--to", e5["physicalOffset"], "--format",
            "ndjson")
    assert [json.loads(x)["physical_offset"] for x in r.output.splitlines()] == \
        [e["physicalOffset"] for e in exp["messages"][10:15]]
    r = run("decode-commitlog", store, "--offset", e0["physicalOffset"], "--count", 3, "--format", "ndjson")
    assert len(r.output.splitlines()) == 3
    assert tree_hashes(store) == before


def test_single_offset_bodies_and_hex():
    name = "rocketmq-all-5.3.3/clean"
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    comp = next(e for e in exp["messages"] if e.get("compressionType"))
    r = run("decode-commitlog", store, "--offset", comp["physicalOffset"], "--format", "json", "--body", "base64")
    d = json.loads(r.output)[0]
    import base64
    import hashlib

    assert hashlib.sha256(base64.b64decode(d["body"])).hexdigest() == comp["bodyDecompressedSha256"]
    assert d["compression"] == comp["compressionType"] and d["body_sha256"] == comp["bodySha256"]
    r = run("decode-commitlog", store, "--offset", comp["physicalOffset"], "--format", "hex")
    assert r.exit_code == 0 and "total_size %d" % comp["storeSize"] in r.output
    assert r.output.count("\n") >= comp["storeSize"] // 16
    r = run("decode-commitlog", store, "--offset", hex(comp["physicalOffset"]))
    assert r.exit_code == 0 and comp["uniqKey"] in r.output


def test_summary_against_oracle():
    name = "rocketmq-all-4.9.8/clean"
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    r = run("summary", store, "--format", "json")
    s = json.loads(r.output)
    assert s["messages"] == len(exp["messages"])
    assert s["max_physical_offset"] == exp["stateAfterLoad"]["commitLogMaxOffset"]
    assert s["mapped_file_size"] == exp["storeConfig"]["mappedFileSizeCommitLog"]
    assert sum(1 for f in s["files"] if f["blank_at"] is not None) == \
        sum(1 for x in exp["records"] if x["kind"] == "blank")
    cp = exp["checkpointBeforeLoad"]
    assert (s["checkpoint"]["physic_msg_timestamp"], s["checkpoint"]["min_timestamp"]) == \
        (cp["physicMsgTimestamp"], cp["minTimestamp"])
    for f, st in zip(s["files"], exp["stateAfterLoad"]["commitLogFiles"]):
        assert f["name"] == st["name"]
    per_topic = {}
    for e in exp["messages"]:
        per_topic[e["topic"]] = per_topic.get(e["topic"], 0) + 1
    assert {t: v["messages"] for t, v in s["topics"].items()} == per_topic
    r = run("summary", store)
    assert r.exit_code == 0 and "CommitLog files" in r.output


def test_sample_store_readme_commands():
    before = tree_hashes(SAMPLE_STORE)
    assert run("summary", SAMPLE_STORE).exit_code == 0
    r = run("decode-commitlog", SAMPLE_STORE, "--topic", "OrderTopic", "--format", "ndjson")
    assert r.exit_code == 0 and len(r.output.splitlines()) > 50
    assert tree_hashes(SAMPLE_STORE) == before


# --- bad input -----------------------------------------------------------------------------------------

def _store(tmp_path, n=30):
    with CommitLogWriter(str(tmp_path / "commitlog"), 16384) as w:
        res = [w.append(MessageSpec(topic="T", queue_id=0, body=b"x" * 200, properties=b"KEYS\x01k%d\x02" % i,
                                    store_timestamp=1000 + i)) for i in range(n)]
    return res


def _patch(tmp_path, offset, data, file_size=16384):
    p = tmp_path / "commitlog" / ("%020d" % (offset // file_size * file_size))
    b = bytearray(p.read_bytes())
    b[offset % file_size:offset % file_size + len(data)] = data
    p.write_bytes(bytes(b))
    return p


def _one_line_error(r, path_part, offset):
    err = r.stderr if hasattr(r, "stderr") else r.output
    lines = [x for x in err.splitlines() if x.startswith("rmqinspect: error")]
    assert len(lines) == 1, err
    assert path_part in lines[0] and f"@ {offset}" in lines[0]
    assert "Traceback" not in err


def test_truncated_file(tmp_path):
    res = _store(tmp_path)
    victim = res[5]
    p = tmp_path / "commitlog" / "00000000000000000000"
    p.write_bytes(p.read_bytes()[: victim.physical_offset + 50])
    r = run("decode-commitlog", tmp_path, "--format", "ndjson")
    assert r.exit_code == 4
    assert len(r.stdout.splitlines()) == 5
    _one_line_error(r, "00000000000000000000", victim.physical_offset)
    r = run("decode-commitlog", tmp_path, "--offset", victim.physical_offset)
    assert r.exit_code == 4
    _one_line_error(r, "00000000000000000000", victim.physical_offset)


def test_absurd_total_size_bounded(tmp_path):
    import resource

    res = _store(tmp_path)
    victim = res[3]
    _patch(tmp_path, victim.physical_offset, struct.pack(">i", 0x7FFFFFF0))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = run("decode-commitlog", tmp_path, "--offset", victim.physical_offset)
    assert r.exit_code == 4 and "TOTALSIZE" in r.stderr
    _one_line_error(r, "00000000000000000000", victim.physical_offset)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 100_000  # KiB: nothing near 2 GiB
    r = run("decode-commitlog", tmp_path, "--format", "ndjson", "--keep-going")
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == 3


def test_wrong_magic(tmp_path):
    res = _store(tmp_path)
    victim = res[7]
    _patch(tmp_path, victim.physical_offset + 4, b"\x12\x34\x56\x78")
    r = run("decode-commitlog", tmp_path, "--offset", victim.physical_offset)
    assert r.exit_code == 4 and "illegal magic code 0x12345678" in r.stderr
    _one_line_error(r, "00000000000000000000", victim.physical_offset)
    r = run("decode-commitlog", tmp_path, "--offset", victim.physical_offset + 3)
    assert r.exit_code == 4
    r = run("summary", tmp_path, "--format", "json")
    assert r.exit_code == 0
    s = json.loads(r.stdout)
    # the count resynchronises past the damage (as verify and export do) and says where
    assert s["files"][0]["damage_at"] == victim.physical_offset and s["messages"] == len(res) - 1
    assert [(d["start"], d["end"]) for d in s["damage"]] == [(victim.physical_offset, res[8].physical_offset)]


def test_properties_without_separators(tmp_path):
    with CommitLogWriter(str(tmp_path / "commitlog"), 16384) as w:
        w.append(MessageSpec(topic="T", queue_id=0, body=b"ok", properties=b"KEYS\x01a\x02"))
        bad = w.append(MessageSpec(topic="T", queue_id=0, body=b"ok", properties=b"no separators at all"))
    r = run("decode-commitlog", tmp_path, "--offset", bad.physical_offset, "--format", "ndjson")
    assert r.exit_code == 4
    row = json.loads(r.stdout)
    assert row["properties"] == {} and "separator" in row["problems"][0]
    assert "Traceback" not in r.stderr and "@ %d" % bad.physical_offset in r.stderr


def test_not_found_exit_codes(tmp_path):
    _store(tmp_path)
    r = run("decode-commitlog", tmp_path, "--offset", 10**9)
    assert r.exit_code == 3 and "not covered" in r.stderr
    r = run("summary", tmp_path / "nope")
    assert r.exit_code == 3 and "no such file" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("summary", empty).exit_code == 3
    assert "Exit codes" in run("--help").output


def test_single_file_and_gap(tmp_path):
    res = _store(tmp_path, n=200)
    files = sorted(os.listdir(tmp_path / "commitlog"))
    assert len(files) >= 4
    one = tmp_path / "commitlog" / files[1]
    r = run("decode-commitlog", one, "--format", "ndjson")
    first = json.loads(r.stdout.splitlines()[0])
    assert first["physical_offset"] == int(files[1])
    os.remove(tmp_path / "commitlog" / files[2])
    r = run("decode-commitlog", tmp_path, "--format", "ndjson", "--keep-going")
    assert "have no commitlog file" in r.stderr
    offs = [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()]
    assert offs == [x.physical_offset for x in res if not int(files[2]) <= x.physical_offset < int(files[3])]
    r = run("summary", tmp_path, "--format", "json")
    assert json.loads(r.stdout)["gaps"] == [{"start": int(files[2]), "end": int(files[3]), "size": 16384}]


def test_broker_version_4x_rejects_v2_records():
    """A 4.x broker reads a V2 record (5.1.0+) as an illegal magic code; --broker-version reproduces that."""
    name = "rocketmq-all-5.3.3/clean"
    store = require_oracle(name) / "store"
    exp = load_expected(name)
    first_v2 = next(e for e in exp["messages"] if e["magicCode"] == "0xDAA320AB")
    r = run("decode-commitlog", store, "--broker-version", "4.9.8", "--format", "ndjson")
    assert r.exit_code == 4 and "illegal magic code 0xDAA320AB" in r.stderr
    assert [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()] == \
        [e["physicalOffset"] for e in exp["messages"] if e["physicalOffset"] < first_v2["physicalOffset"]]
    r = run("decode-commitlog", store, "--offset", first_v2["physicalOffset"], "--broker-version", "5.3.3")
    assert r.exit_code == 0
    assert run("decode-commitlog", store, "--broker-version", "banana").exit_code == 2
