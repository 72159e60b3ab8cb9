"""The index geometry proof has two engines (store.indexfile): plain Python for files up to
SMALL_INDEX_FILE_BYTES (a one-key look-up pays no numpy start-up) and numpy above. Both run here on the same
files - the oracle's index files (DLedger stores' too), writer-made files of several geometries and damaged
copies of them - and must give the same IndexGeometry, field by field, with and without the whole-table rule."""

from __future__ import annotations

import glob
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqinspect.fixtures.indexfile import write_chained_index
from rmqinspect.formats.indexfile import INDEX_HEADER, INDEX_HEADER_SIZE, item_position, slot_position
from rmqinspect.store.indexfile import SMALL_INDEX_FILE_BYTES, index_words, prove_geometry_of, prove_index_geometry
from support import ORACLE, SAMPLE_STORE
from support.msgstores import writer_index_files

GEOMETRIES = [(16, 400), (1, 400), (64, 2000), (7, 33), (1000, 50), (3, 5)]


def _both(buf, size: int, ic: int) -> None:
    """Both engines, sampled and whole-table: identical verdicts (the dataclass compares every field)."""
    for whole in (False, True):
        py = prove_index_geometry(buf, size, ic, whole, engine="python")
        npy = prove_index_geometry(buf, size, ic, whole, engine="numpy")
        assert py == npy, (whole, py, npy)


def _index_count(data: bytes) -> int:
    return INDEX_HEADER.unpack_from(data, 0)[-1] if len(data) >= INDEX_HEADER_SIZE else 0


def test_oracle_index_files_same_verdict():
    paths = sorted(p for p in glob.glob(str(ORACLE / "*" / "*" / "**" / "index" / "*"), recursive=True)
                   if os.path.isfile(p))
    if not paths:
        pytest.skip(f"no oracle index files under {ORACLE}")
    assert any("dledger" in p for p in paths)  # the DLedger stores' index files are among them
    for p in paths:
        both = [prove_geometry_of(p, whole, engine) for whole in (False, True) for engine in ("python", "numpy")]
        assert both[0] == both[1] and both[2] == both[3], (p, both)
        if os.path.basename(os.path.dirname(os.path.dirname(p))) in ("store", "expected"):
            # a broker's IndexFile (not a DLedger member's index units): the proof answers, so the agreement
            # above is not a vacuous one between two "ambiguous"
            assert both[0].source == "inferred", (p, both[0])


def test_sample_store_and_default_engine_choice():
    for p in sorted(glob.glob(str(SAMPLE_STORE / "index" / "*"))):
        assert os.path.getsize(p) <= SMALL_INDEX_FILE_BYTES
        g = prove_geometry_of(p)
        assert g == prove_geometry_of(p, engine="numpy") and g.source == "inferred"


@pytest.mark.parametrize("slots,items", GEOMETRIES)
def test_writer_files_same_verdict(tmp_path, slots, items):
    paths = writer_index_files(str(tmp_path / "s"), slots, items)
    assert paths
    for p in paths:
        data = open(p, "rb").read()
        _both(data, len(data), _index_count(data))
        assert prove_index_geometry(data, len(data), _index_count(data), engine="python").slots == slots


@pytest.fixture(scope="module")
def damaged_base(tmp_path_factory) -> list[bytes]:
    root = tmp_path_factory.mktemp("geom")
    return [open(p, "rb").read() for s, m in ((16, 400), (7, 33), (64, 2000))
            for p in writer_index_files(str(root / f"s{s}"), s, m, n=90)[:1]]


def _used_end(data: bytes) -> int:
    """End of the file's non-zero part: where the slot table and the used items lie."""
    return max(len(data.rstrip(b"\0")), INDEX_HEADER_SIZE + 4)


def test_every_word_of_a_small_file_damaged_alone(damaged_base):
    """Each word of the used part of a 7-slot file set to -1, 0, its value +1 and a large value in turn: every
    rule (slot words, item 0, heads, prev links backwards / same slot / once, negative hash or timeDiff, the
    whole-table count) fails somewhere in here, and both engines must say the same each time."""
    data = damaged_base[1]
    ic = _index_count(data)
    verdicts = set()
    for pos in range(INDEX_HEADER_SIZE, _used_end(data) + 8, 4):
        word = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        for value in (-1, 0, word + 1, 1 << 30):
            d = bytearray(data)
            d[pos:pos + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
            d = bytes(d)
            for whole in (False, True):
                py = prove_index_geometry(d, len(d), ic, whole, engine="python")
                assert py == prove_index_geometry(d, len(d), ic, whole, engine="numpy"), (pos, value, whole)
                verdicts.add((py.source, py.slots))
    assert ("inferred", 7) in verdicts and ("ambiguous", None) in verdicts  # the edits do change the verdict


def test_every_backward_prev_link_of_a_small_file(damaged_base):
    """Each used item's prevIndex pointed at every earlier item in turn: links into another slot, and two items
    naming the same prev (a chain that forks), are what the chain rules exist for."""
    data = damaged_base[1]
    ic = _index_count(data)
    slots = prove_index_geometry(data, len(data), ic).slots
    assert slots == 7
    dropped = 0
    for k in range(2, ic):
        pos = item_position(slots, k) + 16
        for p in range(1, k):
            d = bytearray(data)
            d[pos:pos + 4] = p.to_bytes(4, "big")
            d = bytes(d)
            py = prove_index_geometry(d, len(d), ic, engine="python")
            assert py == prove_index_geometry(d, len(d), ic, engine="numpy"), (k, p)
            dropped += py.slots is None
    assert dropped  # some links were ruled out, so the rules did run


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 2),
       edits=st.lists(st.tuples(st.sampled_from(["flip", "word", "zeros"]), st.booleans(), st.floats(0, 1),
                                st.integers(-(1 << 31), (1 << 31) - 1), st.integers(1, 400)), max_size=4),
       cut=st.one_of(st.none(), st.floats(0, 1)), index_count=st.one_of(st.none(), st.integers(-2, 2100)))
def test_damaged_files_same_verdict(damaged_base, which, edits, cut, index_count):
    """Flipped bits, arbitrary words (slot values, prev links, hashes), zeroed runs - mostly in the used part of
    the file, where the rules look -, truncation and a wrong indexCount: whatever the verdict (often
    "ambiguous"), both engines reach the same one."""
    data = bytearray(damaged_base[which])
    used_end = _used_end(bytes(data))
    for kind, in_used, where, value, length in edits:
        span = (used_end if in_used else len(data)) - INDEX_HEADER_SIZE - 4
        pos = INDEX_HEADER_SIZE + int(where * span) // 4 * 4
        if kind == "flip":
            data[pos] ^= 1 << (value & 7)
        elif kind == "word":
            data[pos:pos + 4] = value.to_bytes(4, "big", signed=True)
        else:
            data[pos:pos + 4 * length] = bytes(len(data[pos:pos + 4 * length]))
    if cut is not None:
        data = data[:int(cut * len(data))]
    ic = _index_count(bytes(data)) if index_count is None else index_count
    _both(bytes(data), len(data), ic)


def test_larger_files_use_numpy_and_agree(tmp_path):
    """Past SMALL_INDEX_FILE_BYTES the default is numpy; the Python engine still agrees (it is only slower)."""
    p = writer_index_files(str(tmp_path / "s"), 20_000, 60_000, n=300)[0]
    size = os.path.getsize(p)
    assert size > SMALL_INDEX_FILE_BYTES
    g = prove_geometry_of(p)
    assert (g.source, g.slots, g.max_items) == ("inferred", 20_000, 60_000)
    assert g == prove_geometry_of(p, engine="python")


@pytest.mark.parametrize("slots,items", [(100_000, 400_000), (100_005, 399_999)])
def test_large_file_settled_by_sampled_heads_same_verdict(tmp_path, slots, items):
    """Past 262,144 items the sampled stage alone can settle a file: with a broken head among the slots the
    sample leaves out, the verdict still comes from the sample - in both engines (the Python one forced)."""
    p = str(tmp_path / "20240101000000000")
    write_chained_index(p, slots, items, used=300_000, seed=7)
    data = bytearray(open(p, "rb").read())
    ic = _index_count(bytes(data))
    used = [s for s in range(slots) if data[slot_position(s):slot_position(s) + 4] != bytes(4)]
    victim = used[1]  # the sample takes every (len(used) // 256)-th used slot from the first: not this one
    data[slot_position(victim):slot_position(victim) + 4] = data[slot_position(used[2]):slot_position(used[2]) + 4]
    for whole in (False, True):
        py = prove_index_geometry(bytes(data), len(data), ic, whole, engine="python")
        npy = prove_index_geometry(bytes(data), len(data), ic, whole, engine="numpy")
        assert py == npy, (whole, py, npy)
        assert (py.slots, py.source) == ((slots, "inferred") if not whole else (None, "ambiguous"))


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.one_of(st.just(0), st.integers(-3, 40), st.integers(-(1 << 31), (1 << 31) - 1)),
                      max_size=9000),
       ic=st.integers(-1, 41), zero_tail=st.integers(0, 3))
def test_scans_agree_word_for_word(words, ic, zero_tail):
    """The two linear scans on their own (their off-by-ones move a bound by one word, which the verdict only
    sometimes shows): the first word that cannot be a slot value, and the last non-zero word, over chunk edges
    (the Python engine takes 4096 words at a time) and with zero bytes inside the last word."""
    buf = bytes(INDEX_HEADER_SIZE) + b"".join(w.to_bytes(4, "big", signed=True) for w in words) + bytes(zero_tail)
    py, npy = index_words(buf, len(buf), "python"), index_words(buf, len(buf), "numpy")
    assert py.first_bad_slot_word(ic) == npy.first_bad_slot_word(ic)
    assert py.last_nonzero_word() == npy.last_nonzero_word()


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError):
        prove_index_geometry(bytes(8296), 8296, 1, engine="fortran")


@settings(max_examples=200, deadline=None)
@given(nwords=st.integers(0, 3000), nonzero=st.lists(st.integers(0, 2999), max_size=6),
       extra=st.lists(st.tuples(st.integers(0, 12_100), st.integers(0, 400)), max_size=3))
def test_last_nonzero_word_reads_only_the_data_ranges_and_finds_the_same_word(nwords, nonzero, extra):
    """The proof's search for the last non-zero word reads only the file's data ranges (a sparse file's holes
    read as zeros): given any ranges that hold every non-zero byte - the pages around each, merged, plus ranges
    of zeros anywhere - it finds the word the whole-file search finds."""
    data = bytearray(INDEX_HEADER_SIZE + 4 * nwords)
    spans = [(a, a + n) for a, n in extra]
    for w in nonzero:
        if w < nwords:
            at = INDEX_HEADER_SIZE + 4 * w
            data[at + w % 4] = 1 + w % 255
            page = at - at % 64
            spans.append((page, page + 64))
    size = len(data)
    merged: list[tuple[int, int]] = []
    for a, b in sorted((max(a, 0), min(b, size)) for a, b in spans if min(b, size) > max(a, 0)):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    for engine in ("python", "numpy"):
        w = index_words(bytes(data), size, engine)
        assert w.last_nonzero_word(merged) == w.last_nonzero_word(None), (engine, merged)


def test_sparse_full_size_index_file_same_verdict_with_and_without_its_holes(tmp_path):
    """A default-geometry (420 MB) index file the writer filled to a few items, its unwritten rest a hole as the
    broker's preallocation leaves it: the proof that skips the hole gives the verdict of the one that reads
    every byte, and the file system reports the hole (else the skip is not exercised here)."""
    from rmqinspect.formats.constants import DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
    from rmqinspect.formats.indexfile import index_file_size
    from rmqinspect.store.mapped import MappedFile

    small = writer_index_files(str(tmp_path / "s"), DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX, n=40)[0]
    data = open(small, "rb").read()
    used = _used_end(data)
    path = str(tmp_path / "sparse")
    with open(path, "wb") as f:  # the used part written, the rest left a hole
        f.write(data[:used])
        f.truncate(index_file_size(DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX))
    m = MappedFile(path)
    ranges = m.data_ranges(0, m.size)
    if ranges == [(0, m.size)]:
        pytest.skip("this file system reports no holes (SEEK_DATA/SEEK_HOLE)")
    assert ranges and ranges[-1][1] < m.size
    ic = _index_count(data)
    with_holes = prove_index_geometry(m.buffer, m.size, ic, data=ranges)
    assert with_holes == prove_index_geometry(m.buffer, m.size, ic)
    assert with_holes == prove_geometry_of(path) and with_holes.slots == DEFAULT_INDEX_SLOTS
    m.close()
