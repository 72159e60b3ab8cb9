"""``CommitLog.walk`` is the one implementation of the broker's walk across commitlog files; ``CommitLog.scan``
and ``store.record_runs.scan_record_runs`` are derived from it. These tests prove both yield exactly what
the two former, separate implementations yielded (kept below, verbatim apart from ``self`` -> ``cl``, as
the reference) on every oracle store and on damaged writer-made stores, with the compiled scanner and
with the pure-Python one."""

from __future__ import annotations

import os

import numpy as np
import pytest

from support import ALL_SCENARIOS, require_oracle
from support.recover_fixtures import build_store
from rmqinspect.store import Store
from rmqinspect.store import commitlog as clmod
from rmqinspect.store.commitlog import (
    BLANK, CRC_MISMATCH, END, FILE_END, GAP, HALF, ILLEGAL, MESSAGE, PageReleaser, Slot, _topic_and_properties,
    _tuple_to_row, scan_buffer, scan_buffer_fast, scan_records_array, unpack_header,
)
from rmqinspect.store.record_runs import scan_record_runs


# --- the reference: the two walks as they were before CommitLog.walk ------------------------------------
def old_scan(cl, start=None, end=None, *, check_crc=True, accept_v2=True, stop_at_end=True, follow_blank=True):
    if start is None:
        start = cl.min_offset
    idx = None
    for i, f in enumerate(cl.files):
        if f.start <= start < f.start + max(f.size, 1) or start < f.start:
            idx = i
            break
    if idx is None:
        return
    f = cl.files[idx]
    if start < f.start:
        yield Slot(GAP, start, f.start - start, None, 0, reason="no commitlog file covers this range")
        start = f.start
    pos = start - f.start
    while True:
        stop_here = False
        base = f.start
        limit = f.size
        if end is not None and end - base < limit:
            limit = max(end - base, 0)
        if pos < limit:
            buf = f.buffer
            rel = PageReleaser(buf, pos)
            for kind, p, size, hdr, bpos, crc_ok, reason in scan_buffer_fast(buf, pos, limit, check_crc,
                                                                              accept_v2):
                if kind == FILE_END and limit < f.size:
                    return  # reached the caller's end offset
                if p >= rel.next:
                    rel.advance(p)
                yield Slot(kind, base + p, size, f, p, hdr, bpos, crc_ok, reason)
                if kind in (END, ILLEGAL, CRC_MISMATCH, BLANK, FILE_END):
                    rel.finish(f.size)
                if kind in (END, ILLEGAL, CRC_MISMATCH):
                    stop_here = True
                elif kind == BLANK and not follow_blank:
                    return
        elif end is not None and base + pos >= end:
            return
        if stop_here and stop_at_end:
            return
        idx += 1
        if idx >= len(cl.files):
            return
        nxt = cl.files[idx]
        if end is not None and nxt.start >= end:
            return
        expected = f.start + cl.file_size
        if nxt.start > expected:
            yield Slot(GAP, expected, nxt.start - expected, None, 0, reason="missing commitlog file(s)")
        f = nxt
        pos = 0


def old_scan_record_runs(cl, start=None, end=None, *, check_crc=True, accept_v2=True, stop_at_end=True):
    if start is None:
        start = cl.min_offset
    files = cl.files
    idx = None
    for i, f in enumerate(files):
        if f.start <= start < f.start + max(f.size, 1) or start < f.start:
            idx = i
            break
    if idx is None:
        return
    f = files[idx]
    if start < f.start:
        start = f.start
    pos = start - f.start
    while True:
        stop_here = False
        base = f.start
        limit = f.size
        if end is not None and end - base < limit:
            limit = max(end - base, 0)
        if pos < limit:
            buf = f.buffer
            for rows, one in scan_records_array(buf, pos, limit, check_crc, accept_v2):
                if rows is not None:
                    yield f, rows, None
                    continue
                kind = one[0]
                if kind == MESSAGE:
                    yield f, _tuple_to_row(buf, one), None
                    continue
                if kind == FILE_END and limit < f.size:
                    return  # reached the caller's end offset
                yield f, None, one
                if kind in (END, ILLEGAL, CRC_MISMATCH):
                    stop_here = True
                if kind in (END, ILLEGAL, CRC_MISMATCH, BLANK, FILE_END):
                    break
        elif end is not None and base + pos >= end:
            return
        if stop_here and stop_at_end:
            return
        idx += 1
        if idx >= len(files):
            return
        nxt = files[idx]
        if end is not None and nxt.start >= end:
            return
        f = nxt
        pos = 0


# --- comparison ------------------------------------------------------------------------------------------
def _slots(it):
    return [(s.kind, s.offset, s.size, s.position, s.file.name if s.file else None, s.crc_ok, s.reason,
             s.header, s.body_pos, s.end) for s in it]


def _runs(it):
    """Records merged across run boundaries (run lengths are a batching detail), other slots in order."""
    out, rows = [], []
    for f, r, one in it:
        if r is not None:
            assert r.dtype == np.int64 and r.ndim == 2 and r.shape[1] == 16 and len(r)
            rows.extend((f.name, tuple(x)) for x in r.tolist())
            continue
        assert one is not None and one[0] != MESSAGE
        if rows:
            out.append(("rows", rows))
            rows = []
        out.append((f.name, one))
    if rows:
        out.append(("rows", rows))
    return out


def _offsets(cl):
    """Start/end offsets that exercise every branch of the walk: file starts and ends, record starts
    inside files, positions inside records, before the first file, inside missing files, past the end."""
    recs = [s for s in old_scan(cl, check_crc=False, stop_at_end=False) if s.kind == MESSAGE]
    pts = {None, cl.min_offset, cl.end_offset, cl.end_offset + 7, max(cl.min_offset - 100, 0)}
    for f in cl.files:
        pts.update((f.start, f.start + f.size, f.start + f.size // 3))
    for g in cl.gaps:
        pts.update((g.start, g.start + g.size // 2, g.end))
    if recs:
        for i in sorted({0, 1, len(recs) // 3, len(recs) // 2, len(recs) - 2, len(recs) - 1}):
            if 0 <= i < len(recs):
                pts.update((recs[i].offset, recs[i].end, recs[i].offset + 5))
    starts = sorted(pts - {None}) + [None]
    ends = [None] + sorted(p for p in pts if p is not None)
    return starts, ends


def _compare(cl, pairs, accept_v2=True):
    n_msg = 0
    for start, end in pairs:
        for check_crc in (True, False):
            for stop_at_end in (True, False):
                kw = dict(check_crc=check_crc, accept_v2=accept_v2, stop_at_end=stop_at_end)
                want = _slots(old_scan(cl, start, end, **kw))
                got = _slots(cl.scan(start, end, **kw))
                assert got == want, (start, end, kw)
                n_msg += sum(1 for s in want if s[0] == MESSAGE)
                runs = _runs(scan_record_runs(cl, start, end, **kw))
                assert runs == _runs(old_scan_record_runs(cl, start, end, **kw)), (start, end, kw)
        for follow_blank in (True, False):
            assert (_slots(cl.scan(start, end, follow_blank=follow_blank))
                    == _slots(old_scan(cl, start, end, follow_blank=follow_blank)))
    return n_msg


def _pairs(cl, dense: bool):
    starts, ends = _offsets(cl)
    mids = [s for s in starts if s is not None]
    pairs = [(None, None)] + [(a, b) for a, b in zip(mids, mids[3:])]
    if dense:  # every start with the full range, every end from the beginning
        pairs += [(s, None) for s in mids] + [(None, e) for e in ends if e is not None]
    else:
        pairs += [(s, None) for s in mids[::4]] + [(None, e) for e in mids[1::4]]
    return pairs


@pytest.fixture(params=["compiled", "python"])
def scanner(request, monkeypatch):
    if request.param == "compiled":
        if not clmod.fast_available():
            pytest.skip("compiled scanner not built (no C compiler / zlib headers)")
    else:
        monkeypatch.setattr(clmod, "_fastscan", None)
    return request.param


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_walk_equals_former_walks_on_oracle(name, scanner):
    cl = Store.open(require_oracle(name) / "store").commitlog
    n = _compare(cl, _pairs(cl, dense=False))
    assert n > 0
    if "5.3.3" in name:  # a 4.x reader: V2 records are illegal magic codes
        _compare(cl, [(None, None)], accept_v2=False)


# --- damaged writer-made stores ----------------------------------------------------------------------------
def _parsed(fx, rec):
    """(header, body position, properties, PROPLEN position) of ``rec``, positions physical."""
    with open(os.path.join(fx.commitlog, fx.file_of(rec.offset)), "rb") as f:
        data = f.read()
    pos = rec.offset % fx.file_size
    kind, _, _, hdr, bpos, _, _ = next(scan_buffer(data, pos, len(data), False))
    assert kind == MESSAGE and hdr == unpack_header(data, pos)
    _, props, ppos = _topic_and_properties(data, hdr, bpos)
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


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_walk_equals_former_walks_on_damaged_stores(tmp_path, damage, scanner):
    fx = build_store(tmp_path / "s", preallocate=damage == "clean")
    assert len(fx.file_names()) >= 5
    if DAMAGE[damage]:
        DAMAGE[damage](fx)
    cl = Store.open(fx.root).commitlog
    _compare(cl, _pairs(cl, dense=True))
    kinds = {s.kind for s in cl.scan(check_crc=True, stop_at_end=False)}
    # the damage is really there, so the comparison covered it
    want = {"torn-tail": CRC_MISMATCH, "bad-crc-middle-file": CRC_MISMATCH, "zero-page": END,
            "missing-middle-file": GAP, "half-record": HALF, "file-end": FILE_END, "clean": BLANK}.get(damage)
    if want:
        assert want in kinds, kinds
    if damage == "everything":
        assert {GAP, HALF, CRC_MISMATCH} <= kinds, kinds
