"""The compiled dispatch (store/_fastscan.c ``dispatch_fields``) and the bulk dispatcher equal the reference
implementations: ``parse_properties``, ``formats.javahash`` and ``analyses.dispatch_rules`` on every oracle record,
on randomized / hostile properties, and end to end (rebuild output byte for byte, compiled vs pure Python)."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from rmqinspect.analyses import dispatcher as rb
from rmqinspect.analyses.dispatch_rules import index_keys
from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.formats.javahash import build_index_key, index_key_hash, java_string_hash, tags_code
from rmqinspect.formats.properties import dispatch_properties, encode_properties, parse_properties
from rmqinspect.sinks.consumequeue import ConsumeQueueSet
from rmqinspect.sinks.indexfile import IndexFileSet
from rmqinspect.store import Store, scanner
from rmqinspect.store import commitlog as clmod
from rmqinspect.store.commitlog import MESSAGE, RecordRun, walk_file
from support import ALL_SCENARIOS, require_oracle
from support.dispatch import RecordingSink, reference_dispatch_rows

compiled = pytest.mark.skipif(not scanner.compiled_built(),
                              reason="compiled extension not built (no C compiler / zlib headers)")


def _strict(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _reference(topic_b: bytes, raw: bytes) -> tuple:
    """tagsCode, index key hashes, DELAY, multi-dispatch from the reference code (decoded strings)."""
    props = parse_properties(raw)
    topic = topic_b.decode("utf-8", "replace")
    hashes = [index_key_hash(build_index_key(topic, k)) for k in index_keys(props)]
    return tags_code(props.get("TAGS")), hashes, props.get("DELAY"), b"INNER_MULTI_DISPATCH\x01" in raw


def _check_batch(buf, rows, want_keys=True):
    """compiled (with its fallbacks) == pure Python == reference, record by record."""
    fc, kc, tc = rb.dispatch_fields(buf, rows, want_keys)
    fp, kp, tp = rb.dispatch_fields(buf, rows, want_keys, use_compiled=False)
    assert [tc[i] for i in fc[:, 0]] == [tp[i] for i in fp[:, 0]]
    assert np.array_equal(fc[:, 1:], fp[:, 1:])
    assert kc.tolist() == kp.tolist()
    koff = 0
    for i, row in enumerate(rows):
        tb = tc[fc[i, 0]]
        assert tb == bytes(buf[row[11]:row[11] + row[12]])
        raw = bytes(buf[row[13]:row[13] + row[14]])
        code, hashes, delay, multi = _reference(tb, raw)
        assert fc[i, 1] == code, (i, raw)
        n = int(fc[i, 2])
        if want_keys:
            assert kc[koff:koff + n].tolist() == hashes, (i, raw)
        koff += n
        if delay is None:
            assert fc[i, 3] == -1
        else:
            assert bytes(buf[fc[i, 3]:fc[i, 3] + fc[i, 4]]).decode("utf-8", "replace") == delay
        assert bool(fc[i, 5] & rb.DF_MULTI_DISPATCH) == multi
    return fc, kc


@compiled
@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_dispatch_fields_equal_reference_on_every_oracle_record(name):
    p = require_oracle(name)
    n = 0
    with Store.open(p / "store") as st:
        for f in st.commitlog.files:
            for ev in walk_file(f, check_crc=False):
                if type(ev) is RecordRun:
                    _check_batch(f.buffer, ev.rows)
                    _check_batch(f.buffer, ev.rows, want_keys=False)
                    n += len(ev)
        # and the same records through the full decode path
        m = sum(1 for s in st.commitlog.scan(check_crc=False) if s.kind == MESSAGE)
    assert n == m > 0


_NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TAG", "KEYSX", "", "INNER_MULTI_DISPATCH", "WAIT"]
_TEXT = ["a", "b", "k1", " ", "  ", "中文", "键", "😀", "𝄞", "é", "x" * 40, "\x01", "", "0", "3", "-2", "+7",
         "abc", "Tag1"]
_BAD = [b"\xff", b"\xfe\xff", b"\xe4\xb8", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98",
        b"\x80", b"\xe0\x80\x80", b"\xc3"]


def _random_props(rng: random.Random) -> bytes:
    out = b""
    for _ in range(rng.randint(0, 7)):
        name = rng.choice(_NAMES).encode()
        val = "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 4))).encode()
        if rng.random() < 0.15:
            val = val + rng.choice(_BAD) + val
        sep = b"\x01" if rng.random() < 0.9 else b""
        out += name + sep + val + (b"\x02" if rng.random() < 0.9 else b"")
    if rng.random() < 0.05:
        out = rng.randbytes(rng.randint(0, 40))
    return out


def _random_buffer(rng: random.Random, n: int):
    topics = [b"TopicTest", b"SCHEDULE_TOPIC_XXXX", "中文Topic".encode(), b"T\xff", b"", b"%RETRY%g", b"x" * 127]
    buf = bytearray()
    rows = np.zeros((n, 16), dtype=np.int64)
    for i in range(n):
        t = rng.choice(topics)
        p = _random_props(rng)
        rows[i, 11] = len(buf)
        rows[i, 12] = len(t)
        buf += t
        rows[i, 13] = len(buf)
        rows[i, 14] = len(p)
        buf += p
    return bytes(buf), rows


@compiled
def test_dispatch_fields_equal_reference_on_random_and_hostile_properties():
    rng = random.Random(5)
    flagged = 0
    for _ in range(40):
        buf, rows = _random_buffer(rng, 200)
        _check_batch(buf, rows)
        # the compiled code falls back exactly when a string it hashes is not strict UTF-8
        raw_f, _, _ = scanner.compiled().dispatch_fields(buf, rows, True)
        f = np.frombuffer(raw_f, dtype=np.int64).reshape(len(rows), 6)
        for i, row in enumerate(rows):
            raw = buf[row[13]:row[13] + row[14]]
            tags, keys, uniq, _ = dispatch_properties(raw)
            strings = [s for s in (tags, keys, uniq) if s is not None]
            if keys is not None or uniq is not None:
                strings.append(buf[row[11]:row[11] + row[12]])
            bad = not all(_strict(s) for s in strings)
            assert bool(f[i, 5] & rb.DF_FALLBACK) == bad, raw
            flagged += bad
    assert flagged > 0


@compiled
@pytest.mark.parametrize("s", ["", "a", "TopicTest#OrderID001", "polygenelubricants", "中文", "😀", "a😀b𝄞",
                               "\U0010FFFF", "\uFFFF", "é" * 50, "\x00\x7f"])
def test_compiled_java_hash_equals_java_string_hash(s):
    assert scanner.compiled().java_hash_utf8(s.encode()) == java_string_hash(s)


@compiled
@pytest.mark.parametrize("b", _BAD)
def test_compiled_java_hash_refuses_what_python_refuses(b):
    assert scanner.compiled().java_hash_utf8(b) is None and not _strict(b)


# --- end to end -----------------------------------------------------------------------------------------

def _edge_store(root, delay_bad_at=None, build=False):
    """A store exercising every dispatch rule the bulk path handles: several queues and topics, CJK / emoji /
    non-UTF-8 keys and tags, duplicate and empty properties, SCHEDULE_TOPIC_XXXX, PREPARED / ROLLBACK /
    COMMIT records, keyless records, an unsafe topic, INNER_MULTI_DISPATCH; small files so CQ and index files
    roll."""
    rng = random.Random(7)
    with StoreWriter(str(root), commitlog_file_size=64 << 10, cq_file_size=400, index_slots=16, index_max=97,
                     build_cq=build, build_index=build) as w:
        for i in range(1500):
            kind = i % 11
            topic = ["TopicA", "TopicB", "%RETRY%g"][i % 3]
            props = [("UNIQ_KEY", "7F0000010000%012X" % i), ("TAGS", f"Tag{i % 5}"),
                     ("KEYS", f"order-{i} user-{i % 7}")]
            sys_flag = 0
            if kind == 1:
                props = [("KEYS", "中文键 😀 𝄞"), ("TAGS", "标签")]
            elif kind == 2:
                props = [("TAGS", "a"), ("TAGS", "b"), ("KEYS", ""), ("KEYS", "  k1  k2 ")]
            elif kind == 3:
                topic = "SCHEDULE_TOPIC_XXXX"
                props = [("DELAY", str(i % 20)), ("TAGS", "d"), ("KEYS", "dk")]
            elif kind == 4:
                sys_flag = 4  # PREPARED
            elif kind == 5:
                sys_flag = 0xC  # ROLLBACK
            elif kind == 6:
                sys_flag = 8  # COMMIT
                props = [("TAGS", "")]
            elif kind == 7:
                props = []
            elif kind == 8 and i % 3 == 0:
                topic = "../evil"
            elif kind == 9:
                props = [("INNER_MULTI_DISPATCH", "%LMQ%a"), ("KEYS", "m")]
            raw = encode_properties(props)
            if kind == 10:
                raw = b"TAGS\x01\xff\xfe\x02KEYS\x01ok \xe4\xb8 \xed\xa0\x80\x02UNIQ_KEY\x01u\x02"
            if delay_bad_at is not None and i == delay_bad_at:
                topic, raw = "SCHEDULE_TOPIC_XXXX", encode_properties([("DELAY", "x3")])
            w.append(MessageSpec(topic, rng.randrange(4), body=b"b" * rng.randrange(0, 300), properties=raw,
                                 sys_flag=sys_flag, store_timestamp=1_700_000_000_000 + i * 10))


def _rebuild(store, out, pure: bool, monkeypatch, index_batch=None):
    with monkeypatch.context() as m, scanner.selected(not pure):
        if index_batch:
            m.setattr(rb, "_INDEX_BATCH", index_batch)
        with Store.open(store) as st:
            cq = ConsumeQueueSet(os.path.join(out, "consumequeue"), 400)
            ix = IndexFileSet(os.path.join(out, "index"), 16, 97)
            rep = rb.dispatch_commitlog(st.commitlog, cq, ix)
            rb.close_sinks(cq, ix, rep)
    files = {}
    for d, _, names in os.walk(out):
        for n in names:
            with open(os.path.join(d, n), "rb") as fh:
                files[os.path.relpath(os.path.join(d, n), out)] = fh.read()
    return rep.to_dict(), files


@compiled
@pytest.mark.parametrize("delay_bad_at", [None, 1234])
def test_compiled_rebuild_equals_pure_python_rebuild(tmp_path, monkeypatch, delay_bad_at):
    store = tmp_path / "store"
    _edge_store(store, delay_bad_at)
    rep_c, files_c = _rebuild(store, tmp_path / "c", False, monkeypatch)
    rep_p, files_p = _rebuild(store, tmp_path / "p", True, monkeypatch)
    rep_s, files_s = _rebuild(store, tmp_path / "s", False, monkeypatch, index_batch=7)
    assert rep_c == rep_p == rep_s
    assert files_c == files_p == files_s
    assert len([n for n in files_c if n.startswith("index")]) > 3
    assert rep_c["skipped_topics"] == {"../evil": rep_c["skipped_topics"]["../evil"]}
    assert rep_c["multi_dispatch_records"] > 0 and rep_c["not_in_cq"] > 0 and rep_c["rollback_not_indexed"] > 0
    if delay_bad_at is None:
        assert rep_c["messages"] == 1500 and rep_c["stop_kind"] == "end"
    else:
        with Store.open(store) as st:
            offs = [s.offset for s in st.commitlog.scan(check_crc=False) if s.kind == MESSAGE]
        assert rep_c["messages"] == delay_bad_at and rep_c["stop_kind"] == "illegal"
        assert rep_c["end_offset"] == offs[delay_bad_at] and "DELAY" in rep_c["stop_reason"]


def test_per_record_sink_sees_the_reference_puts_in_order(tmp_path):
    """Independent path: full Message decode + analyses.dispatch_rules rules, record by record."""
    store = tmp_path / "store"
    _edge_store(store)
    with Store.open(store) as st:
        rec = RecordingSink()
        rep = rb.dispatch_commitlog(st.commitlog, rec, None)
        want = [r for r in reference_dispatch_rows(st.commitlog)[0] if rb.topic_is_safe(r[0])]
    assert rec.rows == want
    assert rep.cq_entries == len(want)


def test_cq_put_many_equals_put(tmp_path):
    """Bulk append equals entry-by-entry put, including repeats, misplaced and pre-blank entries."""
    from rmqinspect.sinks.consumequeue import ConsumeQueueWriter

    rng = random.Random(3)
    a = ConsumeQueueWriter(str(tmp_path / "a"), 200)
    b = ConsumeQueueWriter(str(tmp_path / "b"), 200)
    qoff, phys = 5, 1000
    for _ in range(30):
        n = rng.randint(1, 12)
        qo = np.arange(qoff, qoff + n, dtype=np.int64)
        if rng.random() < 0.3:
            qo[rng.randrange(n)] += rng.choice([-3, 2])  # repeat / misplaced
        ph = phys + np.arange(n, dtype=np.int64) * 100
        if rng.random() < 0.2:
            ph[0] = 0  # already built
        sz = np.full(n, 90, dtype=np.int64)
        code = np.array([rng.randrange(-2**40, 2**40) for _ in range(n)], dtype=np.int64)
        a.put_many(qo, ph, sz, code)
        for x in zip(qo.tolist(), ph.tolist(), sz.tolist(), code.tolist()):
            b.put(*x)
        qoff += n
        phys += n * 100
    a.close()
    b.close()
    assert (a.entries, a.repeats, a.misplaced, a.write_pos) == (b.entries, b.repeats, b.misplaced, b.write_pos)
    names = sorted(os.listdir(tmp_path / "b"))
    assert sorted(os.listdir(tmp_path / "a")) == names and len(names) > 1
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes()


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_scan_with_page_release_is_unchanged(name, monkeypatch):
    """CommitLog.scan drops walked pages every RELEASE_EVERY bytes; released ranges read back the same."""
    p = require_oracle(name)

    def slots():
        with Store.open(p / "store") as st:
            out = []
            for s in st.commitlog.scan(check_crc=True, stop_at_end=False):
                body = bytes(s.file.buffer[s.position:s.position + s.size]) if s.file is not None else b""
                out.append((s.kind, s.offset, s.size, s.header, s.body_pos, s.crc_ok, s.reason, body))
            # everything walked is still readable after release (faulted back in from the file)
            again = [bytes(s_.file.buffer[s_.position:s_.position + s_.size])
                     for s_ in st.commitlog.scan(check_crc=False) if s_.file is not None][:50]
            return out, again

    ref = slots()
    monkeypatch.setattr(clmod, "RELEASE_EVERY", 4096)
    assert slots() == ref


def test_dry_run_document_does_not_depend_on_batching(tmp_path, monkeypatch):
    """--dry-run lists differences in write order: the same document whatever the index batch size, and with
    the compiled or the pure-Python dispatcher."""
    import json

    from click.testing import CliRunner

    from rmqinspect.cli.main import cli

    store = tmp_path / "store"
    _edge_store(store, build=True)
    cq_file = sorted((store / "consumequeue" / "TopicA" / "1").iterdir())[0]
    data = bytearray(cq_file.read_bytes())
    data[20 * 3 + 2] ^= 0x40  # physical offset of the 4th entry
    cq_file.write_bytes(bytes(data))
    ix_file = sorted((store / "index").iterdir())[1]
    data = bytearray(ix_file.read_bytes())
    data[40 + 16 * 4 + 20 * 5 + 1] ^= 0x10  # the 5th item's key hash
    ix_file.write_bytes(bytes(data))

    def run():
        r = CliRunner().invoke(cli, ["rebuild", str(store), "--dry-run", "--format", "json", "--details", "50"],
                               catch_exceptions=False)
        assert r.exit_code == 1
        return json.loads(r.stdout)

    ref = run()
    assert len(ref["reconciliation"]["differences"]) >= 2
    with monkeypatch.context() as m:
        m.setattr(rb, "_INDEX_BATCH", 5)
        assert run() == ref
    with scanner.selected(False):
        assert run() == ref
