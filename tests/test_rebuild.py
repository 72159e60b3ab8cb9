"""`rmqinspect rebuild`: ConsumeQueue and IndexFile from the CommitLog, byte for byte the broker's."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from rmqinspect.analyses.rebuild import rebuild
from rmqinspect.cli.main import cli
from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.consumequeue import CQ_DTYPE, CQ_ENTRY, PRE_BLANK_SIZE
from rmqinspect.formats.indexfile import INDEX_HEADER, INDEX_ITEM
from rmqinspect.sinks.indexfile import index_file_name
from rmqinspect.store import Store
from support import require_oracle, tree_hashes
from support.rebuild import GEOMETRY, assert_same_cq, assert_same_index
from support.rebuild import files_by_relpath as _files
from support.rebuild import read_bytes as _read

VERSIONS = ["rocketmq-all-4.9.8", "rocketmq-all-5.3.3"]


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_rebuild_equals_the_brokers_rebuild(version, tmp_path):
    sc = require_oracle(f"{version}/rebuild")
    before = tree_hashes(sc)
    out = tmp_path / "out"
    r = run("rebuild", sc / "store", "--out", out, *GEOMETRY, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["geometry"]["source"] == {"cq_file_size": "option", "index": "option"}
    assert_same_cq(sc / "expected" / "consumequeue", out / "consumequeue")
    assert_same_index(sc / "expected" / "index", out / "index")
    # names follow the documented rule: each file's beginTimestamp in UTC
    for name in os.listdir(out / "index"):
        begin = INDEX_HEADER.unpack(_read(out / "index" / name)[:40])[0]
        assert name == index_file_name(begin)
    assert json.loads((out / "rebuild.json").read_text())["messages"] == doc["messages"]
    assert tree_hashes(sc) == before


@pytest.mark.parametrize("version", VERSIONS)
def test_rebuild_of_clean_store_equals_its_cq_and_index(version, tmp_path):
    """Geometry taken from the store's own files; every CQ file and index file reproduced."""
    sc = require_oracle(f"{version}/clean")
    before = tree_hashes(sc)
    out = tmp_path / "out"
    r = run("rebuild", sc / "store", "--out", out, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["geometry"]["source"] == {"cq_file_size": "store's consume queue files", "index": "store's index files"}
    assert_same_cq(sc / "store" / "consumequeue", out / "consumequeue")
    assert_same_index(sc / "store" / "index", out / "index")
    assert tree_hashes(sc) == before


@pytest.mark.parametrize("version", VERSIONS)
def test_dry_run_clean_store_matches(version):
    sc = require_oracle(f"{version}/clean")
    before = tree_hashes(sc)
    r = run("rebuild", sc / "store", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)["reconciliation"]
    assert rec["ok"] and rec["differences_total"] == 0
    exp = json.loads((sc / "expected.json").read_text())["consumeQueues"]
    assert {(q["topic"], str(q["queue_id"])) for q in rec["queues"]} == {(t, q) for t in exp for q in exp[t]
                                                                         if exp[t][q]["entries"]}
    assert rec["index_files"] and all(i["status"] == "ok" for i in rec["index_files"])
    assert tree_hashes(sc) == before


@pytest.mark.parametrize("version", VERSIONS)
def test_dry_run_finds_the_torn_tail_entry(version):
    """crash-torn-tail: the CQ still points at the torn record, which the dispatcher (reput) skips as a record
    whose lengths disagree with TOTALSIZE: the reconciliation reports exactly those entries as extra."""
    sc = require_oracle(f"{version}/crash-torn-tail")
    r = run("rebuild", sc / "store", "--dry-run", "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    rec = doc["reconciliation"]
    extras = [d for d in rec["differences"] if d["kind"] == "extra"]
    torn = {h["offset"] for h in doc["half_records"]}
    assert extras and torn and {d["store"][0] for d in extras} <= torn
    # the index file still holds the torn record's keys: reported as extra items pointing at it
    items = [d for d in rec["differences"] if d["kind"] == "extra item"]
    assert items and {d["store"][1] for d in items} <= torn
    assert not [d for d in rec["differences"] if d["kind"] in ("missing", "wrong")]


def test_dry_run_reports_doctored_copy_queue_by_queue(tmp_path):
    sc = require_oracle("rocketmq-all-4.9.8/clean")
    copy = tmp_path / "store"
    shutil.copytree(sc / "store", copy)
    os.chmod(copy, 0o755)
    for dirpath, dirs, names in os.walk(copy):
        for d in dirs:
            os.chmod(os.path.join(dirpath, d), 0o755)
        for n in names:
            os.chmod(os.path.join(dirpath, n), 0o644)
    q0 = copy / "consumequeue" / "PayTopic" / "0" / "00000000000000000000"
    data = bytearray(_read(q0))
    ents = np.frombuffer(bytes(data), dtype=CQ_DTYPE)
    # wrong tagsCode at queue offset 3
    phys3, size3, tags3 = (int(x) for x in ents[3].tolist())
    data[3 * 20:4 * 20] = CQ_ENTRY.pack(phys3, size3, tags3 + 1)
    q0.write_bytes(bytes(data))
    # PayTopic/1: the last entry zeroed -> missing
    q1files = sorted((copy / "consumequeue" / "PayTopic" / "1").iterdir())
    last = q1files[-1]
    d1 = bytearray(_read(last))
    arr = np.frombuffer(bytes(d1), dtype=CQ_DTYPE)
    n_valid = int(np.flatnonzero(arr["size"] > 0)[-1]) + 1
    d1[(n_valid - 1) * 20:n_valid * 20] = bytes(20)
    last.write_bytes(bytes(d1))
    missing_qoff = int(last.name) // 20 + n_valid - 1
    # PayTopic/2: an entry appended past the end -> extra
    q2files = sorted((copy / "consumequeue" / "PayTopic" / "2").iterdir())
    last2 = q2files[-1]
    d2 = bytearray(_read(last2))
    arr2 = np.frombuffer(bytes(d2), dtype=CQ_DTYPE)
    n2 = int(np.flatnonzero(arr2["size"] > 0)[-1]) + 1
    d2[n2 * 20:(n2 + 1) * 20] = CQ_ENTRY.pack(123, 45, 6)
    last2.write_bytes(bytes(d2))
    # an index item's phyOffset changed
    ix = sorted((copy / "index").iterdir())[0]
    di = bytearray(_read(ix))
    pos = 40 + 64 * 4 + 5 * 20
    h, phy, td, prev = INDEX_ITEM.unpack_from(di, pos)
    di[pos:pos + 20] = INDEX_ITEM.pack(h, phy + 1, td, prev)
    ix.write_bytes(bytes(di))
    before = tree_hashes(copy)

    r = run("rebuild", copy, "--dry-run", "--format", "json")
    assert r.exit_code == 1
    rec = json.loads(r.stdout)["reconciliation"]
    diffs = {(d.get("topic"), d.get("queue_id"), d.get("queue_offset"), d["kind"]) for d in rec["differences"]}
    assert diffs == {("PayTopic", 0, 3, "wrong"), ("PayTopic", 1, missing_qoff, "missing"),
                     ("PayTopic", 2, int(last2.name) // 20 + n2, "extra"), (None, None, None, "item")}
    wrong = next(d for d in rec["differences"] if d["kind"] == "wrong")
    assert wrong["fields"] == ["tags_code"] and wrong["rebuilt"] == [phys3, size3, tags3]
    extra = next(d for d in rec["differences"] if d["kind"] == "extra")
    assert extra["store"] == [123, 45, 6]
    item = next(d for d in rec["differences"] if d["kind"] == "item")
    assert (item["index_file"], item["item"]) == (0, 5) and item["store"][1] == item["rebuilt"][1] + 1
    bad = {(q["topic"], q["queue_id"]): q for q in rec["queues"] if q["status"] != "ok"}
    assert set(bad) == {("PayTopic", 0), ("PayTopic", 1), ("PayTopic", 2)}
    assert (bad[("PayTopic", 0)]["wrong"], bad[("PayTopic", 1)]["missing"], bad[("PayTopic", 2)]["extra"]) == (1, 1, 1)
    # the table output names the queues too
    t = run("rebuild", copy, "--dry-run")
    assert t.exit_code == 1 and "DIFFERS" in t.output and "PayTopic" in t.output
    assert tree_hashes(copy) == before


def _small_store(root, topics=("T1",), hostile=()):
    props = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AC11000100002A9F0000000000000001"})
    with StoreWriter(str(root), commitlog_file_size=4096, cq_file_size=100, index_slots=8, index_max=6) as w:
        for i in range(12):
            w.append(MessageSpec(topics[i % len(topics)], i % 2, body=b"x" * 50, properties=props,
                                 store_timestamp=1_700_000_000_000 + i * 700))
        for t in hostile:
            w.append(MessageSpec(t, 0, body=b"evil", properties=props, store_timestamp=1_700_000_010_000))
    return w


def test_out_inside_store_is_refused(tmp_path):
    store = tmp_path / "store"
    _small_store(store)
    before = tree_hashes(store)
    for out in (store / "rebuilt", store / "commitlog" / "x", store):
        r = run("rebuild", store, "--out", out)
        assert r.exit_code == 6, r.output
        assert "inside the store" in r.output
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    r = run("rebuild", store, "--out", tmp_path / "busy")
    assert r.exit_code == 6 and "not empty" in r.output
    assert tree_hashes(store) == before


def test_hostile_topics_are_reported_and_skipped(tmp_path):
    store = tmp_path / "store"
    hostile = ("../../escape", "a/b", "x\\y", "..", "nul\0byte")
    w = _small_store(store, hostile=hostile)
    assert set(w.report.skipped_topics) == set(hostile)  # the writer goes through the same path
    before = tree_hashes(store)
    out = tmp_path / "out"
    r = run("rebuild", store, "--out", out, "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["skipped_topics"] == {t: 1 for t in hostile}
    assert "not a valid RocketMQ topic name" in r.stderr
    assert sorted(os.listdir(out / "consumequeue")) == ["T1"]
    assert sorted(os.listdir(tmp_path)) == ["out", "store"]
    # the index still holds their keys (no path is derived from them)
    assert doc["index_puts"] == 3 * (12 + len(hostile))
    assert tree_hashes(store) == before


def test_partial_rebuild_from_offset_fills_pre_blank(tmp_path):
    store = tmp_path / "store"
    _small_store(store)
    full, part = tmp_path / "full", tmp_path / "part"
    assert run("rebuild", store, "--out", full).exit_code == 0
    with Store.open(store) as st:
        offsets = [m.physical_offset for m in st.commitlog.messages()]
    start = offsets[5]
    r = run("rebuild", store, "--out", part, "--from", start, "--what", "cq", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["start_offset"] == start and doc["index_files"] == [] and not (part / "index").exists()
    for q in ("0", "1"):
        got = b"".join(_read(p) for _, p in sorted(_files(part / "consumequeue" / "T1" / q).items()))
        want = b"".join(_read(p) for _, p in sorted(_files(full / "consumequeue" / "T1" / q).items()))
        g = np.frombuffer(got, dtype=CQ_DTYPE)
        wnt = np.frombuffer(want, dtype=CQ_DTYPE)
        first = int(np.flatnonzero(g["size"] != PRE_BLANK_SIZE)[0])
        assert first > 0 and (g["size"][:first] == PRE_BLANK_SIZE).all() and (g["physical_offset"][:first] == 0).all()
        assert (wnt["physical_offset"][first - 1] < start <= wnt["physical_offset"][first])
        assert g[first:].tobytes() == wnt[first:len(g)].tobytes()


def test_broker_version_44_counts_every_put(tmp_path):
    store = tmp_path / "store"
    _small_store(store)
    a, b = tmp_path / "a", tmp_path / "b"
    assert run("rebuild", store, "--out", a, "--what", "index").exit_code == 0
    assert run("rebuild", store, "--out", b, "--what", "index", "--broker-version", "4.4").exit_code == 0
    for name in sorted(os.listdir(a / "index")):
        ha = INDEX_HEADER.unpack(_read(a / "index" / name)[:40])
        hb = INDEX_HEADER.unpack(_read(b / "index" / name)[:40])
        assert hb[4] == hb[5] - 1  # 4.4.0: hashSlotCount == puts
        assert ha[4] <= hb[4] and ha[:4] == hb[:4]


def test_index_rules_on_a_written_store(tmp_path):
    """Item-level rules (the quirks too) recomputed independently from the records."""
    store = tmp_path / "store"
    _small_store(store)
    out = tmp_path / "out"
    assert run("rebuild", store, "--out", out, "--format", "ndjson").exit_code == 0
    names = sorted(os.listdir(out / "index"))
    with Store.open(store) as st:
        msgs = list(st.commitlog.messages())
    puts = [(m.physical_offset, m.store_timestamp) for m in msgs for _ in range(3)]
    assert len(names) == -(-len(puts) // 5)  # maxIndexNum 6 -> 5 items per file
    prev_end_ts = 0
    for i, name in enumerate(names):
        raw = _read(out / "index" / name)
        begin, end, bphy, ephy, slots_used, count = INDEX_HEADER.unpack(raw[:40])
        mine = puts[i * 5:(i + 1) * 5]
        assert count == len(mine) + 1 and (bphy, begin) == mine[0] and (ephy, end) == mine[-1]
        for n, (phy, ts) in enumerate(mine, start=1):
            h, iphy, td, prev = INDEX_ITEM.unpack_from(raw, 40 + 8 * 4 + n * 20)
            assert iphy == phy
            ref = prev_end_ts if n == 1 else begin  # first item: against the previous file's end (quirk)
            assert td == (max((ts - ref) // 1000, 0) if ref > 0 else 0)
        prev_end_ts = end


def test_rebuild_stops_at_damage_and_reports(tmp_path):
    store = tmp_path / "store"
    _small_store(store)
    with Store.open(store) as st:
        offsets = [m.physical_offset for m in st.commitlog.messages()]
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(_read(path))
    data[offsets[3] + 4:offsets[3] + 8] = b"\xde\xad\xbe\xef"  # bad magic in the 4th record
    path.write_bytes(bytes(data))
    r = run("rebuild", store, "--out", tmp_path / "o", "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["stop_kind"] == "illegal" and doc["end_offset"] == offsets[3] and doc["messages"] == 3
    assert str(path) in r.stderr and "illegal magic" in r.stderr


def test_missing_store_exit_code(tmp_path):
    r = run("rebuild", tmp_path / "nope", "--out", tmp_path / "o")
    assert r.exit_code == 3
    assert "Traceback" not in r.output



@pytest.mark.parametrize("trailing_keyless", [False, True])
def test_full_index_file_then_keyless_record_creates_empty_file(tmp_path, trailing_keyless):
    """buildIndex calls retryGetAndCreateIndexFile before looking at keys: a record arriving while the last
    file is full creates a new, empty file whose header carries the previous file's end values."""
    store = tmp_path / "store"
    with StoreWriter(str(store), commitlog_file_size=8192, cq_file_size=100, index_slots=8, index_max=6) as w:
        for i in range(5):  # 5 puts fill a file (maxIndexNum - 1)
            w.append(MessageSpec("T", 0, body=b"b", properties=encode_properties({"KEYS": f"k{i}"}),
                                 store_timestamp=1_700_000_000_000 + i * 1000))
        if trailing_keyless:
            w.append(MessageSpec("T", 0, body=b"b", properties=encode_properties({"TAGS": "x"}),
                                 store_timestamp=1_700_000_009_000))
    names = sorted(os.listdir(store / "index"))
    assert len(names) == (2 if trailing_keyless else 1)
    h0 = INDEX_HEADER.unpack(_read(store / "index" / names[0])[:40])
    assert h0[5] == 6
    if trailing_keyless:
        h1 = INDEX_HEADER.unpack(_read(store / "index" / names[1])[:40])
        assert h1 == (h0[1], h0[1], h0[3], h0[3], 0, 1)
        assert names[1] > names[0]


def test_missing_commitlog_file_stops_at_the_gap(tmp_path):
    store = tmp_path / "store"
    props = encode_properties({"TAGS": "t", "KEYS": "k"})
    with StoreWriter(str(store), commitlog_file_size=1024, cq_file_size=100, index_slots=8, index_max=40) as w:
        for i in range(20):
            w.append(MessageSpec("T", 0, body=b"y" * 100, properties=props, store_timestamp=1_700_000_000_000 + i))
    files = sorted((store / "commitlog").iterdir())
    assert len(files) >= 3
    files[1].unlink()
    r = run("rebuild", store, "--out", tmp_path / "o", "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["stop_kind"] == "gap" and doc["end_offset"] == 1024
    assert "missing commitlog file" in r.stderr
    # everything before the gap was dispatched
    with Store.open(store) as st:
        before_gap = sum(1 for m in st.commitlog.messages(end=1024))
    assert doc["messages"] == doc["cq_entries"] == before_gap


def test_rebuild_library_call_is_what_the_command_writes(tmp_path):
    """``rebuild()`` is the command without click: same files, the same document as --format json and in
    rebuild.json, and a dry run over the store it was written from finds nothing to report."""
    from rmqinspect.analyses.rebuild import INDEX_FILE_NAMING, RebuildRun, rebuild

    store = tmp_path / "store"
    _small_store(store)
    with Store.open(store) as st:
        run_ = rebuild(st, str(tmp_path / "lib"))
        dry = rebuild(st, dry_run=True)
    assert isinstance(run_, RebuildRun) and run_.report.messages == run_.report.cq_entries == 12
    assert not run_.problems and dry.reconciliation.ok and not dry.problems and dry.out is None
    assert run_.geometry.to_dict() == {"cq_file_size": 100, "index_slots": 8, "index_max": 6,
                                       "source": {"cq_file_size": "store's consume queue files",
                                                  "index": "store's index files"}}
    manifest = json.loads((tmp_path / "lib" / "rebuild.json").read_text())
    assert manifest == {**run_.to_dict(), "index_file_naming": INDEX_FILE_NAMING}
    r = run("rebuild", store, "--out", tmp_path / "cli", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {**run_.to_dict(), "out": str(tmp_path / "cli")}
    lib, cli_ = _files(tmp_path / "lib"), _files(tmp_path / "cli")
    assert sorted(lib) == sorted(cli_) and len(lib) > 3
    for name in lib:
        if name != "rebuild.json":
            assert _read(lib[name]) == _read(cli_[name]), name
    r = run("rebuild", store, "--dry-run", "--format", "json")
    assert json.loads(r.stdout) == dry.to_dict()


def test_one_output_rule_for_every_writer(tmp_path):
    """ensure_output_outside: inside the root, inside a commitlog directory that is a symlink to elsewhere, a
    file path inside the store, a directory holding the store - all refused with exit code 6; a sibling is fine."""
    from rmqinspect.errors import EXIT_UNSAFE_OUTPUT, UnsafeOutputError
    from rmqinspect.store.layout import ensure_new_directory, ensure_output_outside

    store = tmp_path / "broker" / "store"
    _small_store(store)
    elsewhere = tmp_path / "disk2" / "commitlog"
    elsewhere.parent.mkdir()
    shutil.move(str(store / "commitlog"), str(elsewhere))
    os.symlink(elsewhere, store / "commitlog")
    with Store.open(store) as st:
        for out, why in ((store / "o", "inside the store"), (elsewhere / "o", "inside the store"),
                         (store / "index" / "x.ndjson", "inside the store"),
                         (tmp_path / "broker", "lies inside the output directory"),
                         (tmp_path / "link-to-store" / "o", "inside the store")):
            if out.parent.name == "link-to-store":
                os.symlink(store, out.parent)
            with pytest.raises(UnsafeOutputError, match=why) as e:
                ensure_output_outside(st, out)
            assert e.value.exit_code == EXIT_UNSAFE_OUTPUT == 6
        ensure_output_outside(st, tmp_path / "broker" / "rebuilt")
        ensure_output_outside(str(store), tmp_path / "disk2" / "x")
        with pytest.raises(UnsafeOutputError, match="inside the store"):
            ensure_output_outside(st, tmp_path / "disk2" / "commitlog")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    (tmp_path / "file").write_text("x")
    ensure_new_directory(tmp_path / "new")
    for out, why in ((tmp_path / "full", "not empty"), (tmp_path / "file", "not a directory")):
        with pytest.raises(UnsafeOutputError, match=why):
            ensure_new_directory(out)


def test_per_file_cq_blocks_land_like_the_sequential_walk(tmp_path):
    """What `rebuild --engine spark` does on the driver, without Spark: each commitlog file's consume-queue
    entries arrive as packed blocks and go through put_packed. The files equal the sequential dispatch's, and
    the dry-run comparison (which takes the blocks entry by entry) lists the same differences in the same order."""
    from rmqinspect.analyses.compare.rebuild_vs_store import CompareConsumeQueueSet, Reconciliation
    from rmqinspect.analyses.dispatch_rules import DEFAULT_DELAY_TABLE
    from rmqinspect.sinks.consumequeue import ConsumeQueueSet
    from rmqinspect.spark.rebuild import dispatch_file

    store = tmp_path / "store"
    props = encode_properties({"TAGS": "t", "KEYS": "k"})
    with StoreWriter(str(store), commitlog_file_size=2048, cq_file_size=100, index_slots=8, index_max=40) as w:
        for i in range(60):
            w.append(MessageSpec(f"T{i % 3}", i % 2, body=b"y" * (40 + i), properties=props,
                                 store_timestamp=1_700_000_000_000 + i))
    cq_file = sorted((store / "consumequeue" / "T1" / "0").iterdir())[1]
    data = bytearray(cq_file.read_bytes())
    data[20:40] = CQ_ENTRY.pack(7, 8, 9)  # one wrong entry in the store's files
    cq_file.write_bytes(bytes(data))
    with Store.open(store) as st:
        files = [(f.path, f.start, st.commitlog.file_size) for f in st.commitlog.files]
        assert len(files) >= 3
        sequential = rebuild(st, str(tmp_path / "seq"), build_index=False)
        dry = rebuild(st, dry_run=True, build_index=False)
    blocks = [dispatch_file((p, s, size, True, False, DEFAULT_DELAY_TABLE))["cq"] for p, s, size in files]
    out = ConsumeQueueSet(str(tmp_path / "blocks" / "consumequeue"), 100)
    recon = Reconciliation()
    compare = CompareConsumeQueueSet(str(store / "consumequeue"), 100, recon)
    for per_file in blocks:
        for topic, qid, qoff, packed in per_file:
            out.queue(topic, qid).put_packed(qoff, packed)
            compare.queue(topic, qid).put_packed(qoff, packed)
    out.close()
    compare.close()
    seq, got = _files(tmp_path / "seq" / "consumequeue"), _files(tmp_path / "blocks" / "consumequeue")
    assert sorted(seq) == sorted(got) and len(seq) > 6
    assert all(_read(seq[n]) == _read(got[n]) for n in seq)
    assert sequential.report.cq_entries == 60
    assert recon.differences_total == 1 and recon.differences[0]["kind"] == "wrong"
    assert [q.to_dict() for q in recon.queues] == [q.to_dict() for q in dry.reconciliation.queues]
    assert recon.differences == dry.reconciliation.differences
