"""``CommitLog.walk`` / ``walk_file`` is the one walk of the commitlog. These tests prove it against the
oracle's ``expected.json`` (what RocketMQ's ReputMessageService found) and prove the compiled scanner
(``store/_fastscan.c``) and the pure-Python scanner give identical events, on every oracle file and on
corrupted files, so the switch (``store.scanner``) never changes a result."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest

from support import require_oracle
from support.dledger_ref import expected_walk, reference_entries
from support.recover_fixtures import build_store
from rmqinspect.store import Store, scanner
from rmqinspect.store.walk.file import walk_file
from rmqinspect.store.walk.kinds import BLANK, CRC_MISMATCH, END, FILE_END, GAP, HALF, MESSAGE, Kind
from rmqinspect.store.walk.records import (
    RECORD_DTYPE,
    RECORD_FIELDS,
    Gap,
    Record,
    RecordHeader,
    RecordRun,
    _topic_and_properties,
    scan_buffer,
    unpack_header,
)
from rmqinspect.store.mapped import MappedFile

needs_compiled = pytest.mark.skipif(not scanner.compiled_built(), reason="compiled scanner not built (no C compiler "
                                    "/ zlib headers): nothing to compare the pure-Python scanner with")


def _events(it) -> list:
    """Events as comparable tuples; records of runs one by one (run lengths are a batching detail)."""
    out = []
    for ev in it:
        if type(ev) is RecordRun:
            assert ev.records.dtype == RECORD_DTYPE and len(ev) > 0
            assert np.shares_memory(ev.rows, ev.records) and ev.rows.shape == (len(ev), len(RECORD_FIELDS))
            out.extend((MESSAGE, ev.file.name, *r) for r in ev.records.tolist())
        elif type(ev) is Gap:
            out.append((GAP, ev.start, ev.end, ev.reason))
        else:
            assert type(ev) is Record and ev.kind != MESSAGE
            h = ev.header
            out.append((ev.kind, ev.file.name, ev.offset, ev.size, ev.position, ev.crc_ok, ev.reason,
                        None if h is None else tuple(h), ev.body_pos))
    return out


def _both(fn, *args, **kw):
    """fn(*args, **kw) with the compiled scanner and with the pure-Python one: must be equal."""
    with scanner.selected(True):
        fast = fn(*args, **kw)
    with scanner.selected(False):
        slow = fn(*args, **kw)
    assert fast == slow
    return fast


def _file_events(f, **kw) -> list:
    return _events(walk_file(f, **kw))


def _walk_events(cl, start, end, **kw) -> list:
    return _events(cl.walk(start, end, **kw))


def _scan_tuples(cl, start, end, **kw) -> list:
    return [(s.kind, s.offset, s.size, s.crc_ok, s.reason, s.header) for s in cl.scan(start, end, **kw)]


def _reference(buf, start, limit, check_crc, accept_v2=True) -> list:
    """What the pure-Python scan_buffer says, as (kind, position, size)."""
    return [(k, p, s) for k, p, s, *_ in scan_buffer(buf, start, limit, check_crc, accept_v2)]


def _flat(events) -> list:
    """(kind, position, size) of _events() of one file."""
    return [(e[0], e[2], e[3]) if e[0] == MESSAGE else (e[0], e[4], e[3]) for e in events]


# --- against the oracle ------------------------------------------------------------------------------------
@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_walk_finds_the_brokers_records_and_fields(scenario, pure):
    """Messages and blank records at the offsets ReputMessageService found, and every named field of the
    record runs equal to what RocketMQ's API read back."""
    path, exp = scenario
    if "records" not in exp:
        pytest.skip("this scenario's expected.json lists no records (rebuild scenarios: same as clean)")
    if not pure and not scanner.compiled_built():
        pytest.skip("compiled scanner not built")
    found, runs = [], {}
    with scanner.selected(not pure), Store.open(path / "store") as st:
        for ev in st.commitlog.walk(check_crc=False):
            if type(ev) is RecordRun:
                r = ev.records
                for rec in r.tolist():
                    d = dict(zip(RECORD_FIELDS, rec))
                    d["topic"] = bytes(ev.file.buffer[d["topic_pos"]:d["topic_pos"] + d["topic_len"]]).decode()
                    runs[ev.base + d["position"]] = d
                    found.append(("message", ev.base + d["position"], d["total_size"]))
            elif type(ev) is Record and ev.kind == BLANK:
                found.append(("blank", ev.offset, ev.size))
    max_off = exp["stateAfterStart"]["commitLogMaxOffset"]
    assert [w for w in found if w[1] < max_off] == expected_walk(exp)
    fields = {"storeSize": "total_size", "queueId": "queue_id", "queueOffset": "queue_offset", "sysFlag": "sys_flag",
              "physicalOffsetField": "physical_offset_field", "storeTimestamp": "store_timestamp",
              "bornTimestamp": "born_timestamp", "topic": "topic", "bodyLength": "body_len"}
    checked = 0
    for m in exp.get("messages", []):
        d = runs.get(m["physicalOffset"])
        if d is None:
            continue  # beyond the broker's max offset (torn tail) or not reached
        for ek, name in fields.items():
            assert d[name] == m[ek], (m["physicalOffset"], ek)
        assert d["magic_version"] == (2 if m.get("magicCode") == "0xDAA320AB" else 1)
        checked += 1
    assert checked > 0


@needs_compiled
def test_compiled_scanner_equals_python_scanner_on_oracle(scenario):
    path, _ = scenario
    n = 0
    with Store.open(path / "store") as st:
        cl = st.commitlog
        for f in cl.files:
            for crc in (True, False):
                for crc_continue in (False, True):
                    ev = _both(_file_events, f, check_crc=crc, crc_continue=crc_continue)
                    if not crc_continue:
                        ref = reference_entries if f.dledger else lambda b, n, c: _reference(b, 0, n, c)
                        assert _flat(ev) == ref(f.buffer, f.size, crc)
                    n += sum(1 for e in ev if e[0] == MESSAGE)
                for v2 in (True, False):
                    _both(_file_events, f, check_crc=crc, accept_v2=v2, run_records=7)
        ends = [None] + [f.start + f.size // 3 for f in cl.files]
        for start in [None] + [f.start for f in cl.files]:
            for end in ends:
                for stop_at_end in (True, False):
                    _both(_walk_events, cl, start, end, stop_at_end=stop_at_end)
                    _both(_scan_tuples, cl, start, end, check_crc=False, stop_at_end=stop_at_end)
    assert n > 0


def _corrupt(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(buf) - 64)
        what = rng.random()
        if what < 0.4:
            buf[at] ^= 1 << rng.randrange(8)
        elif what < 0.7:
            n = rng.randint(1, 600)
            buf[at:at + n] = b"\0" * len(buf[at:at + n])
        else:
            buf[at:at + 4] = rng.getrandbits(32).to_bytes(4, "big")
    return bytes(buf)


@needs_compiled
@pytest.mark.parametrize("scenario_name", ["rocketmq-all-5.3.3/clean", "rocketmq-all-4.9.8/clean"])
def test_compiled_equals_python_on_randomly_corrupted_files(scenario_name):
    """Bit flips, zeroed ranges, garbage lengths in a real commitlog file: both scanners give the same events,
    which are what scan_buffer (the reference for every unusual position) reports."""
    p = require_oracle(scenario_name)
    data = (p / "store" / "commitlog" / "00000000000000000000").read_bytes()
    rng = random.Random(42)
    kinds = set()
    for _ in range(50):
        buf = _corrupt(rng, data)
        f = MappedFile.of_buffer(buf)
        for crc in (True, False):
            ev = _both(_file_events, f, check_crc=crc)
            assert _flat(ev) == _reference(buf, 0, len(buf), crc)
            kinds.update(e[0] for e in ev)
            _both(_file_events, f, check_crc=crc, crc_continue=True, run_records=5)
    assert {MESSAGE, CRC_MISMATCH} <= kinds and kinds & {HALF, END, Kind.ILLEGAL}, kinds


def test_crc_continue_reports_the_record_and_goes_on():
    p = require_oracle("rocketmq-all-4.9.8/clean")
    data = bytearray((p / "store" / "commitlog" / "00000000000000000000").read_bytes())
    recs = [(pos, size) for k, pos, size, *_ in scan_buffer(bytes(data), 0, len(data), False) if k == MESSAGE]
    pos, size = recs[5]
    hdr = unpack_header(data, pos)
    bpos = next(t[4] for t in scan_buffer(bytes(data), pos, len(data), False))
    data[bpos] ^= 0xFF
    f = MappedFile.of_buffer(bytes(data))
    for compiled in ([True, False] if scanner.compiled_built() else [False]):
        with scanner.selected(compiled):
            stopped = _events(walk_file(f, check_crc=True))
            going = _events(walk_file(f, check_crc=True, crc_continue=True))
        assert [e[0] for e in stopped][-1] == CRC_MISMATCH and len([e for e in stopped if e[0] == MESSAGE]) == 5
        crc = [e for e in going if e[0] == CRC_MISMATCH]
        assert len(crc) == 1 and crc[0][4] == pos and crc[0][5] is False and crc[0][7] == tuple(hdr)
        assert len([e for e in going if e[0] == MESSAGE]) == len(recs) - 1


# --- the switch and the extension --------------------------------------------------------------------------
def test_environment_variable_selects_pure_python():
    env = dict(os.environ, RMQINSPECT_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", "from rmqinspect.store import scanner; print(scanner.describe(), "
                          "scanner.compiled())"], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "pure-python" and out.stdout.split()[-1] == "None"


@needs_compiled
def test_spark_package_zip_ships_and_loads_the_compiled_scanner(tmp_path):
    from rmqinspect.spark.session import _zip_package

    z = _zip_package()
    try:
        env = dict(os.environ, PYTHONPATH=z)
        env.pop(scanner.PURE_PYTHON_ENV, None)
        out = subprocess.run([sys.executable, "-c", "import rmqinspect; from rmqinspect.store import scanner; "
                              "print(rmqinspect.__file__); print(scanner.describe())"], env=env, capture_output=True,
                             text=True, check=True, cwd=tmp_path)
    finally:
        os.remove(z)
    where, which = out.stdout.split()
    assert ".zip" in where and which == "compiled", out


@needs_compiled
def test_extension_row_layout_and_bounds():
    ext = scanner.compiled()
    assert ext.NFIELDS == len(RECORD_FIELDS) == len(RECORD_DTYPE.names)
    # an absurd max_records is capped by what fits in the buffer, not multiplied into an overflow
    raw, n, pos = ext.scan_messages(b"\0" * 100, 0, 100, True, True, 2**62, 2**31)
    assert (raw, n, pos) == (b"", 0, 0)
    row = np.zeros((1, len(RECORD_FIELDS)), dtype=np.int64)
    row[0, RECORD_FIELDS.index("topic_pos")] = 5
    row[0, RECORD_FIELDS.index("topic_len")] = 2**63 - 3  # tp + tl would overflow
    with pytest.raises(ValueError):
        ext.dispatch_fields(b"x" * 10, row, True)


# --- damaged writer-made stores ----------------------------------------------------------------------------
def _parsed(fx, rec):
    """(header, body position, properties, PROPLEN position) of ``rec``, positions physical."""
    with open(os.path.join(fx.commitlog, fx.file_of(rec.offset)), "rb") as f:
        data = f.read()
    pos = rec.offset % fx.file_size
    kind, _, _, hdr, bpos, _, _ = next(scan_buffer(data, pos, len(data), False))
    assert kind == MESSAGE and hdr == unpack_header(data, pos)
    _, props, ppos = _topic_and_properties(data, RecordHeader._make(hdr), bpos)
    base = rec.offset - pos
    return hdr, base + bpos, props, base + ppos


def _half(fx, rec):
    """Make the lengths inside ``rec`` disagree with its TOTALSIZE (PROPLEN one short): a HALF record."""
    _, _, props, ppos = _parsed(fx, rec)
    fx.patch(ppos, (len(props) - 1).to_bytes(2, "big"))


def _torn_tail(fx):
    last = fx.records[-2]
    fx.zero(last.offset + last.size // 2, last.end)


def _bad_crc_middle(fx, file_index=2):
    mid = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[file_index]][3]
    _, bpos, _, _ = _parsed(fx, mid)
    fx.patch(bpos + 3, b"\xff\xff")  # inside the body: body CRC mismatch


def _zero_page(fx):
    f1 = fx.file_size * 1
    fx.zero(f1 + 4096, f1 + 8192)


def _missing_middle(fx):
    os.remove(os.path.join(fx.commitlog, fx.file_names()[2]))


def _half_record(fx):
    recs = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[1]]
    _half(fx, recs[4])


def _file_end(fx):
    """First file cut right after its last record (no blank record): the walk meets FILE_END there."""
    recs = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[0]]
    with open(os.path.join(fx.commitlog, fx.file_names()[0]), "r+b") as f:
        f.truncate(recs[-1].end)


def _everything(fx):
    _half_record(fx)
    _bad_crc_middle(fx, 3)
    _missing_middle(fx)
    _torn_tail(fx)


DAMAGE = {"clean": None, "torn-tail": _torn_tail, "bad-crc-middle-file": _bad_crc_middle, "zero-page": _zero_page,
          "missing-middle-file": _missing_middle, "half-record": _half_record, "file-end": _file_end,
          "everything": _everything}


@needs_compiled
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_compiled_equals_python_on_damaged_stores(tmp_path, damage):
    fx = build_store(tmp_path / "s", preallocate=damage == "clean")
    assert len(fx.file_names()) >= 5
    if DAMAGE[damage]:
        DAMAGE[damage](fx)
    cl = Store.open(fx.root).commitlog
    points = sorted({cl.min_offset, cl.end_offset} | {f.start + f.size // 2 for f in cl.files}
                    | {r.offset for r in fx.records[::37]})
    for start in [None] + points[::3]:
        for end in [None] + points[1::3]:
            for check_crc in (True, False):
                for stop_at_end in (True, False):
                    _both(_walk_events, cl, start, end, check_crc=check_crc, stop_at_end=stop_at_end)
    for f in cl.files:
        for check_crc in (True, False):
            ev = _both(_file_events, f, check_crc=check_crc)
            assert _flat(ev) == _reference(f.buffer, 0, f.size, check_crc)
    kinds = {e[0] for e in _both(_walk_events, cl, None, None, check_crc=True, stop_at_end=False)}
    # the damage is really there, so the comparison covered it
    want = {"torn-tail": CRC_MISMATCH, "bad-crc-middle-file": CRC_MISMATCH, "zero-page": END,
            "missing-middle-file": GAP, "half-record": HALF, "file-end": FILE_END, "clean": BLANK}.get(damage)
    assert (want or CRC_MISMATCH) in kinds, kinds
    if damage == "everything":
        assert {GAP, HALF, CRC_MISMATCH} <= kinds, kinds


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("scenario", ["rocketmq-all-4.9.8/crash-torn-tail", "rocketmq-all-5.3.3/clean",
                                      "rocketmq-all-4.9.8/dledger-clean"])
def test_a_runs_rows_without_numpy_are_its_array(compiled, scenario):
    """RecordRun.row_tuples / column read the scanner's rows without numpy (the compiled scanner's bytes, the
    pure-Python scanner's lists, a DLedger entry walk's arrays): the same values as the numpy array, every field."""
    from rmqinspect.store.walk.records import RECORD_FIELDS, RecordRun

    st = Store.open(str(require_oracle(scenario) / "store"))
    runs = 0
    with scanner.selected(compiled):
        for ev in st.commitlog.walk(check_crc=False, stop_at_end=False):
            if type(ev) is not RecordRun:
                continue
            tuples, cols = ev.row_tuples(), {n: ev.column(n) for n in RECORD_FIELDS}
            arr = ev.records  # made after the lists were read, from the same rows
            assert tuples == arr.tolist() and len(tuples) == len(ev) > 0
            assert all(cols[n] == arr[n].tolist() for n in RECORD_FIELDS)
            assert ev.end == int(arr["position"][-1] + arr["total_size"][-1])
            runs += 1
    assert runs
