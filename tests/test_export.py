"""`export` (local engine): the per-file rows against the oracle's expected.json, the Parquet dataset, hostile
topics, output-directory safety."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from rmqinspect.analyses.export import chunk_tasks, file_tasks, join_chunk_results
from rmqinspect.analyses.rows import COLUMNS, FileResult, RowFilter, columns_markdown, topic_partition
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from rmqinspect.store.walk.kinds import MESSAGE
from rmqinspect.store.walk.parallel import CHUNK_ENV
from support import rows_reference, tree_hashes
from support.export_rows import assert_rows_equal_expected, sorted_rows
from support.msgstores import common_specs, spec, write_store

pa = pytest.importorskip("pyarrow")

from rmqinspect.analyses.export import export_local, read_dataset  # noqa: E402
from rmqinspect.analyses.rows import arrow_schema, file_batches  # noqa: E402


def test_file_rows_equal_expected_and_whole_store_scan(scenario):
    """Per-file scans (the unit of both engines) == CommitLog.messages over the whole store == expected.json."""
    path, exp = scenario
    if not exp.get("messages"):
        pytest.skip("scenario has no messages (rebuild)")
    store = str(path / "store")
    rows = []
    for t in file_tasks([store]):
        for b in file_batches(t, with_body=True, batch_rows=100):
            assert b.num_rows <= 100
            rows.extend(b.to_pylist())
    assert_rows_equal_expected(rows, exp)
    with Store.open(store) as st:
        whole = [s.offset for s in st.commitlog.scan(check_crc=False, stop_at_end=False) if s.kind == MESSAGE]
    assert [r["physical_offset"] for r in rows] == whole


def test_export_local_dataset_equals_expected(scenario, tmp_path):
    path, exp = scenario
    if not exp.get("messages"):
        pytest.skip("scenario has no messages (rebuild)")
    store = str(path / "store")
    before = tree_hashes(store)
    res = export_local([store], str(tmp_path / "out"), with_body=True)
    assert res.rows == len(exp["messages"])
    rows = sorted_rows(read_dataset(str(tmp_path / "out")))
    assert_rows_equal_expected(rows, exp)
    assert tree_hashes(store) == before
    # the damaged record of the torn-tail scenarios is reported, not exported
    if "torn" in str(path):
        assert res.damage and res.damage[0].kind == "half"


def test_schema_is_documented():
    """docs/spark.md holds the column table derived from COLUMNS, verbatim; the Arrow schema and the Spark DDL
    are derived from the same declaration."""
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "spark.md"), encoding="utf-8").read()
    assert columns_markdown() in doc
    assert len(COLUMNS) == 37 and len({c.name for c in COLUMNS}) == 37
    assert arrow_schema(with_body=True).names == [c.name for c in COLUMNS]
    from rmqinspect.analyses.rows import spark_ddl

    assert [f.split(" ")[0].strip("`") for f in spark_ddl(True).split(", ")] == [c.name for c in COLUMNS]
    assert "body" not in arrow_schema().names and "`body`" not in spark_ddl()


def test_hostile_topic_stays_inside_out(tmp_path):
    store = tmp_path / "store"
    hostile = ["../../evil", "/abs/evil", "..", "a/b\\c", "topic=x", "x" * 300, "%2e%2e%2fevil", "ñ名"]
    write_store(str(store), [spec(i, topic=t) for i, t in enumerate(hostile)] + common_specs(4))
    out = tmp_path / "sub" / "out"
    res = export_local([str(store)], str(out))
    assert res.rows == len(hostile) + 4
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        for n in dirnames + filenames:
            p = os.path.realpath(os.path.join(dirpath, n))
            assert p.startswith(str(store)) or p.startswith(str(out)) or p == str(tmp_path / "sub"), p
    parts = sorted(os.listdir(out))
    assert all(p.startswith("topic_partition=") and "/" not in p and ".." not in p for p in parts)
    assert len(parts) == len(set(topic_partition(t) for t in hostile)) + 2
    topics = set(read_dataset(str(out)).column("topic").to_pylist())
    assert set(hostile) <= topics  # the real names survive in the topic column


def test_filters_and_cli(tmp_path):
    store = tmp_path / "store"
    results = write_store(str(store), common_specs(30))
    before = tree_hashes(store)
    specs = common_specs(30)
    since, until = specs[5].store_timestamp, specs[20].store_timestamp
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(out), "--topic", "PayTopic", "--since",
                                 str(since), "--until", str(until), "--label", "broker-a", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    want = [res.physical_offset for s, res in zip(specs, results)
            if s.topic == "PayTopic" and since <= s.store_timestamp <= until]
    assert doc["rows"] == len(want) and doc["files"] == len(os.listdir(store / "commitlog"))
    t = sorted_rows(read_dataset(str(out)))
    assert [x["physical_offset"] for x in t] == want
    assert {x["source"] for x in t} == {"broker-a"}
    assert tree_hashes(store) == before
    # the filter applied in the scan gives the same rows as filtering afterwards
    flt = RowFilter(frozenset(["PayTopic"]), since, until)
    tasks = file_tasks([str(store)])
    n = sum(b.num_rows for t_ in tasks for b in file_batches(t_, flt=flt, result=FileResult(t_)))
    assert n == len(want)


def test_output_inside_store_refused(tmp_path):
    store = tmp_path / "store"
    write_store(str(store), common_specs(3))
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(store / "commitlog" / "x")])
    assert r.exit_code == 6 and "inside the store" in r.output
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(tmp_path)])
    assert r.exit_code == 6
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    r = CliRunner().invoke(cli, ["export", str(store), "--out", str(tmp_path / "full")])
    assert r.exit_code == 6 and "not empty" in r.output
    r = CliRunner().invoke(cli, ["export", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 3
    assert tree_hashes(store) == before


# --- fast path == reference per-record path ----------------------------------------------------------


def _both_paths(store: str, with_body: bool, flt=None, batch_rows: int = 4096):
    """(table, rows per file, damage) from the row decoder and from the per-record reference."""
    schema = arrow_schema(with_body)
    out = []
    for builder in (file_batches, rows_reference.file_batches):
        tasks = file_tasks([store])
        results = [FileResult(t) for t in tasks]
        batches = [b for t, r in zip(tasks, results)
                   for b in builder(t, with_body=with_body, flt=flt, result=r, batch_rows=batch_rows)]
        assert all(b.num_rows <= batch_rows for b in batches)
        out.append((pa.Table.from_batches(batches, schema=schema), [r.rows for r in results],
                    [d.to_dict() for r in results for d in r.damage]))
    return out


def assert_paths_equal(store: str, with_body: bool = True, flt=None, batch_rows: int = 4096) -> int:
    """The row decoder equals the per-record reference, with the compiled scanner (when built) and with the
    pure-Python one."""
    from rmqinspect.store import scanner

    n = None
    for compiled in [True, False] if scanner.compiled_built() else [False]:
        with scanner.selected(compiled):
            (fast, fast_rows, fast_damage), (ref, ref_rows, ref_damage) = _both_paths(store, with_body, flt,
                                                                                    batch_rows)
        assert fast.num_rows == ref.num_rows
        for name in ref.column_names:
            assert fast.column(name).equals(ref.column(name)), (compiled, name, fast.column(name).to_pylist()[:5],
                                                                ref.column(name).to_pylist()[:5])
        assert fast.equals(ref)
        assert fast_rows == ref_rows and fast_damage == ref_damage
        n = ref.num_rows
    return n


def test_fast_path_equals_reference_on_oracle(scenario):
    path, exp = scenario
    n = assert_paths_equal(str(path / "store"), with_body=True, batch_rows=333)
    assert n == len(exp.get("messages") or []) or not exp.get("messages")
    assert_paths_equal(str(path / "store"), with_body=False)


def _hostile_specs() -> list:
    from rmqinspect.fixtures.commitlog import MessageSpec
    from rmqinspect.formats.commitlog import encode_properties

    v6a, v6b = bytes(range(16)), b"\xfe\x80" + b"\0" * 13 + b"\x01"
    out = [spec(i, topic=t) for i, t in enumerate(["../../evil", "a/b\\c", "ñ名", "x" * 200, "%2e%2e"])]
    raw_props = [
        b"TAGS\x01a\x02junk\x02KEYS\x01k1  k2 \x02",  # malformed piece, empty KEYS tokens
        b"TAGS\x01\xff\xfe\x02UNIQ_KEY\x01\xc3\x02",  # not UTF-8
        b"TAGS\x01a\x02KEYS\x01x\x02TAGS\x01b\x02",  # duplicate name: the later one wins, first position
        b"\x01v\x02k\x01\x02\x02\x02",  # empty names / values
        b"",
    ]
    for i, props in enumerate(raw_props):
        out.append(MessageSpec(topic="RawTopic", queue_id=i % 2, body=b"" if i == 4 else b"b%d" % i,
                               properties=props, born_timestamp=1_763_700_000_000 + i,
                               store_timestamp=1_763_700_000_000 + i))
    for i, delay in enumerate(["3", "abc", "-1", "99", " 2"]):
        out.append(MessageSpec(topic="SCHEDULE_TOPIC_XXXX", queue_id=2,
                               body=b"delayed", born_timestamp=1_763_700_000_000, store_timestamp=1_763_700_001_000 + i,
                               properties=encode_properties({"TAGS": "d", "DELAY": delay, "REAL_TOPIC": "T"})))
    for i, sf in enumerate([0x10, 0x20, 0x30, 0x4, 0x8, 0xC, 0x34]):
        out.append(MessageSpec(topic="HostTopic", queue_id=0, body=b"h" * (i + 1), sys_flag=sf,
                               born_ip=v6a if sf & 0x10 else b"\x0a\x00\x00\x01", born_port=-5 if i == 0 else 1234,
                               store_ip=v6b if sf & 0x20 else b"\xc0\xa8\x00\x02", store_port=10911 + i,
                               born_timestamp=1_763_700_000_000, store_timestamp=1_763_700_000_000 + i,
                               properties=encode_properties({"UNIQ_KEY": f"U{i}", "KEYS": "a b"})))
    out.append(MessageSpec(topic="TimeTopic", queue_id=0, body=b"t", born_timestamp=-(1 << 62),
                           store_timestamp=1 << 62, properties=encode_properties({"TAGS": "x"})))
    out.append(MessageSpec(topic="TimeTopic", queue_id=0, body=b"t", born_timestamp=-62135596800001,
                           store_timestamp=253402300799999, properties=encode_properties({"TAGS": "x"})))
    out.append(MessageSpec(topic="CrcTopic", queue_id=0, body=b"bad crc body", body_crc=12345,
                           properties=encode_properties({"TAGS": "c"}), store_timestamp=1_763_700_000_000))
    for i in range(3):
        out.append(MessageSpec(topic="PropCrcTopic", queue_id=0, body=b"p%d" % i, append_property_crc=True,
                               properties=encode_properties({"TAGS": "p"}), store_timestamp=1_763_700_000_000))
    return out


def _damaged_hostile_store(tmp_path):
    """(store, specs, results, half index): hostile topics and properties in 4 KiB files, a tampered __CRC32#, a
    HALF record in the middle of a file and a torn last record."""
    store = str(tmp_path / "store")
    specs = _hostile_specs() + common_specs(20)
    results = write_store(store, specs, file_size=4096)
    by = {s.topic: r for s, r in zip(specs, results)}
    fs = 4096

    def patch(off: int, data: bytes) -> None:
        with open(os.path.join(store, "commitlog", "%020d" % (off - off % fs)), "r+b") as f:
            f.seek(off % fs)
            f.write(data)

    # __CRC32# no longer matches: change FLAG of the last PropCrcTopic record (structure intact)
    patch(by["PropCrcTopic"].physical_offset + 16, b"\0\0\0\x07")
    # a record whose PROPLEN disagrees with TOTALSIZE (HALF): the scan goes on after it
    k = len(_hostile_specs()) + 3
    half, plen = results[k], len(specs[k].properties)
    patch(half.physical_offset + half.total_size - plen - 2, (plen - 1).to_bytes(2, "big"))
    # the last record torn as after a crash mid-write (second half zeroed)
    torn = results[-1]
    patch(torn.physical_offset + torn.total_size // 2, b"\0" * (torn.total_size - torn.total_size // 2))
    return store, specs, results, k


def test_fast_path_equals_reference_on_damaged_hostile_store(tmp_path):
    """Hostile topics, odd properties, IPv6 hosts, delay levels, out-of-range timestamps, a body CRC mismatch,
    __CRC32# trailers (one tampered) and a torn (HALF) record in the middle of a file: same rows, same damage."""
    store, specs, results, k = _damaged_hostile_store(tmp_path)
    half = results[k]
    before = tree_hashes(store)
    n = assert_paths_equal(store, with_body=True, batch_rows=5)
    assert n > len(specs) - 3
    (fast, _, damage), _ = _both_paths(store, False)
    rows = fast.to_pylist()
    assert False in [r["crc_ok"] for r in rows]  # the CRC-mismatch row went through the reference decode
    assert None in [r["tags_code"] for r in rows]  # DELAY "abc" on SCHEDULE_TOPIC_XXXX
    assert any(r["problems"] for r in rows if r["topic"] == "PropCrcTopic")
    assert any(r["born_host"].startswith("[") for r in rows) and any(r["store_host"].startswith("[") for r in rows)
    assert any(r["store_timestamp"] is None for r in rows)
    assert "half" in [d["kind"] for d in damage]
    assert half.physical_offset not in [r["physical_offset"] for r in rows]
    assert results[k + 1].physical_offset in [r["physical_offset"] for r in rows]
    # filters inside the scan
    flt = RowFilter(frozenset(["HostTopic", "RawTopic", "SCHEDULE_TOPIC_XXXX"]), 1_763_700_000_001, 1_763_700_001_002)
    assert 0 < assert_paths_equal(store, with_body=False, flt=flt, batch_rows=3) < n
    assert assert_paths_equal(store, with_body=False, flt=RowFilter(None, 1_763_700_000_004, None)) > 0
    assert tree_hashes(store) == before


# --- a file split into chunks (export_local with jobs > 1) ------------------------------------------------


def _joined(tasks) -> tuple[list[dict], list[dict], int]:
    """(rows, damage, chunks not kept) of ``tasks`` walked one by one and joined as ``export_local`` joins them."""
    walked = []
    for t in tasks:
        r = FileResult(t)
        walked.append((t, r, [row for b in file_batches(t, with_body=True, result=r) for row in b.to_pylist()]))
    rows_of = {id(r): rows for _, r, rows in walked}
    rows, damage, dropped = [], [], 0
    for _, r, kept in join_chunk_results((t, r) for t, r, _ in walked):
        if kept:
            rows += rows_of[id(r)]
            damage += [d.to_dict() for d in r.damage]
        else:
            dropped += 1
    return rows, damage, dropped


def _assert_chunks_equal_files(store: str, chunk: int, monkeypatch) -> tuple[int, int]:
    """The chunks' rows and damage, joined, == the whole files' (same order); (chunks made, chunks not kept)."""
    files = file_tasks([store], txn_states=True)
    whole = _joined(files)
    assert whole[2] == 0
    monkeypatch.setenv(CHUNK_ENV, str(chunk))
    chunks = chunk_tasks(files, 2)
    rows, damage, dropped = _joined(chunks)
    assert rows == whole[0]
    assert damage == whole[1]
    return len(chunks), dropped


def test_chunked_files_give_the_rows_and_damage_of_whole_files_on_oracle(scenario, monkeypatch):
    path, exp = scenario
    store = str(path / "store")
    files = file_tasks([store])
    made, _ = _assert_chunks_equal_files(store, 4096, monkeypatch)
    if any(t.size > 2 * 4096 and not t.dledger for t in files) and exp.get("messages"):
        assert made > len(files)  # really split inside the files


def test_chunked_files_give_the_rows_and_damage_of_whole_files_on_damaged_store(tmp_path, monkeypatch):
    """A HALF record, a CRC mismatch and a torn tail inside chunks of ~600 bytes, then a bad magic code (ILLEGAL:
    the file's walk ends there, so the file's later chunks are not kept)."""
    store, _, results, k = _damaged_hostile_store(tmp_path)
    made, dropped = _assert_chunks_equal_files(store, 600, monkeypatch)
    assert made > len(file_tasks([store])) and dropped == 0
    fs = 4096
    bad = next(r for r in results[k + 1:] if r.physical_offset % fs > 600 and r.physical_offset % fs < 1500)
    with open(os.path.join(store, "commitlog", "%020d" % (bad.physical_offset - bad.physical_offset % fs)),
              "r+b") as f:
        f.seek(bad.physical_offset % fs + 4)
        f.write(b"\x12\x34\x56\x78")
    monkeypatch.delenv(CHUNK_ENV)
    made, dropped = _assert_chunks_equal_files(store, 600, monkeypatch)
    assert dropped > 0
    assert "illegal" in [d["kind"] for d in _joined(file_tasks([store]))[1]]


def test_chunk_starts_the_row_walk_passes_over(tmp_path, monkeypatch):
    """Chunk starts inside records (the file's walk never lands there): each chunk walks on to a later start or the
    file's end, and the chunks it passed over are not kept; the rows are still the file's."""
    from rmqinspect.store.walk import resync

    store, _, _, _ = _damaged_hostile_store(tmp_path)
    real = resync.record_chunks

    def skewed(f, start, *, accept_v2=True, step=None):
        return [p + 7 if k % 2 else p for k, p in enumerate(real(f, start, accept_v2=accept_v2, step=step))]

    monkeypatch.setattr(resync, "record_chunks", skewed)
    made, dropped = _assert_chunks_equal_files(store, 600, monkeypatch)
    assert made > dropped > 0


def test_export_of_chunked_files_reads_back_as_the_whole_files_export(tmp_path, monkeypatch):
    """export_local with jobs 2 and files split into chunks (some not kept): the same JSON (files counted as
    commitlog files), the same rows read back, no part file of a chunk not kept and no empty partition directory."""
    store, _, _, _ = _damaged_hostile_store(tmp_path)
    one = export_local([store], str(tmp_path / "one"), jobs=1, with_body=True)
    from rmqinspect.store.walk import resync

    real = resync.record_chunks
    monkeypatch.setattr(resync, "record_chunks", lambda f, start, *, accept_v2=True, step=None: [
        p + 7 if k % 3 == 2 else p for k, p in enumerate(real(f, start, accept_v2=accept_v2, step=step))])
    monkeypatch.setenv(CHUNK_ENV, "600")
    two = export_local([store], str(tmp_path / "two"), jobs=2, with_body=True)
    d1, d2 = one.to_dict(), two.to_dict()
    d1.pop("out"), d2.pop("out")
    assert d1 == d2 and d1["rows"] > 40
    assert sorted_rows(read_dataset(str(tmp_path / "one"))) == sorted_rows(read_dataset(str(tmp_path / "two")))
    dirs = [d for d, sub, names in os.walk(tmp_path / "two")]
    assert all(os.listdir(d) for d in dirs)
    parts = {n for _, _, names in os.walk(tmp_path / "two") for n in names}
    assert len(parts) > len({n for _, _, names in os.walk(tmp_path / "one") for n in names})
