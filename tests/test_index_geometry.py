"""Index geometry is proven from the data or declared ambiguous: stores of non-default geometry
written by the project's writer, the oracle's index files, and a 420 MB file of the wrong length."""

from __future__ import annotations

import os
import time

import pytest

from rmqinspect.fixtures.indexfile import write_chained_index
from rmqinspect.formats.constants import DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
from rmqinspect.formats.indexfile import INDEX_HEADER, index_file_size, item_position, slot_position
from rmqinspect.formats.javahash import build_index_key, index_key_hash
from rmqinspect.store.indexfile import IndexFile, IndexGeometryError, prove_index_geometry
from tests.support import oracle_scenarios, require_oracle
from tests.support.msgstores import write_ambiguous_index, writer_index_files


def _prove(path: str):
    f = IndexFile(path, slots=1)  # any geometry: only the header and the buffer are read
    try:
        return prove_index_geometry(f.mapped.buffer, f.mapped.size, f.header.index_count)
    finally:
        f.close()


@pytest.mark.parametrize("slots,items", [(16, 400), (1, 400), (64, 2000), (7, 33), (1000, 50)])
def test_inference_picks_the_writers_geometry(tmp_path, slots, items):
    paths = writer_index_files(str(tmp_path / "s"), slots, items)
    assert paths
    for p in paths:
        g = _prove(p)
        assert (g.source, g.slots, g.max_items) == ("inferred", slots, items), (p, g)
        assert IndexFile(p).slots == slots


def test_a_16_slot_400_item_index_is_not_read_as_one_slot(tmp_path):
    """The issue's store: 8,104-byte files read as 1 slot / 403 items by the old search."""
    p = writer_index_files(str(tmp_path / "s"), 16, 400)[0]
    assert os.path.getsize(p) == 8104
    assert IndexFile(p).slots == 16


def test_default_geometry_is_proven(tmp_path):
    p = writer_index_files(str(tmp_path / "s"), DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX, n=30)[0]
    t = time.perf_counter()
    g = _prove(p)
    assert (g.slots, g.max_items, g.source) == (DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX, "inferred")
    assert time.perf_counter() - t < 10


def _sparse_index(path: str, slots: int, items: int, extra: int, keys: list[str]) -> None:
    """A default-geometry index file written item by item as putKey does, then ``extra`` zero bytes longer."""
    size = index_file_size(slots, items) + extra
    with open(path, "wb") as f:
        f.truncate(size)
        heads: dict[int, int] = {}
        for n, key in enumerate(keys, start=1):
            h = index_key_hash(build_index_key("T", key))
            s = h % slots
            f.seek(item_position(slots, n))
            f.write(h.to_bytes(4, "big") + (1000 * n).to_bytes(8, "big") + n.to_bytes(4, "big")
                    + heads.get(s, 0).to_bytes(4, "big"))
            heads[s] = n
        for s, n in heads.items():
            f.seek(slot_position(s))
            f.write(n.to_bytes(4, "big"))
        f.seek(0)
        f.write(INDEX_HEADER.pack(1, 2, 0, 1000 * len(keys), len(heads), len(keys) + 1))


@pytest.mark.parametrize("extra", [7, 2 * 1024 * 1024, 20, 400])
def test_wrong_length_420mb_file_settles_in_seconds(tmp_path, extra):
    """The old search tried every slot count and rescanned the slot table each time (minutes). The proof is
    linear in the file size: one pass for the bounds, a full check of the one or two survivors."""
    p = str(tmp_path / "20261121213626289")
    _sparse_index(p, DEFAULT_INDEX_SLOTS, DEFAULT_INDEX_MAX, extra, [f"k{i}" for i in range(200)])
    t = time.perf_counter()
    g = _prove(p)
    took = time.perf_counter() - t
    assert took < 10, took
    if extra % 20 == 0:  # still fits the broker's slot count, with more items: proven
        assert (g.source, g.slots) == ("inferred", DEFAULT_INDEX_SLOTS)
        assert g.max_items == DEFAULT_INDEX_MAX + extra // 20
    else:  # fits no geometry with 5,000,000 slots: said, not guessed
        assert g.slots is None and g.source == "ambiguous"
        assert "--index-slots" in g.detail and "maxHashSlotNum" in g.detail
        with pytest.raises(IndexGeometryError):
            IndexFile(p)


def test_no_item_to_prove_with_is_ambiguous_between_survivors(tmp_path):
    """A file whose one item is all zero (key hash 0 at commitlog offset 0, stored in its first second) is
    consistent with every slot count that fits: the answer is 'ambiguous', listing them, not a guess."""
    p = str(tmp_path / "20261121213626289")
    write_ambiguous_index(p)
    g = _prove(p)
    assert g.source == "ambiguous" and (10, 40) in g.candidates and (5, 41) in g.candidates
    assert g.to_dict()["value"] is None and "maxHashSlotNum" in g.detail
    with pytest.raises(IndexGeometryError):
        IndexFile(p)
    assert IndexFile(p, slots=10).max_items == 40


def test_a_forward_prev_link_proves_nothing(tmp_path):
    """A damaged file (an item whose prevIndex points forward) is consistent under no geometry: said."""
    p = writer_index_files(str(tmp_path / "s"), 16, 400)[0]
    broken = str(tmp_path / "20261121213626289")
    data = bytearray(open(p, "rb").read())
    pos = item_position(16, 3) + 16
    data[pos:pos + 4] = (9).to_bytes(4, "big")
    open(broken, "wb").write(bytes(data))
    g = _prove(broken)
    assert g.slots is None and g.candidates == () and "self-consistent" in g.detail


@pytest.mark.parametrize("scenario", oracle_scenarios())
def test_oracle_index_files_are_proven_with_the_brokers_geometry(scenario):
    from tests.support import load_expected

    root = require_oracle(scenario)
    conf = load_expected(scenario)["storeConfig"]
    idir = root / "store" / "index"
    if not idir.is_dir():
        pytest.skip("no index")
    for n in sorted(os.listdir(idir)):
        g = _prove(str(idir / n))
        assert (g.source, g.slots, g.max_items) == ("inferred", conf.get("maxHashSlotNum", DEFAULT_INDEX_SLOTS),
                                                    conf.get("maxIndexNum", DEFAULT_INDEX_MAX)), (n, g)


@pytest.mark.parametrize("slots,items", [(100_000, 400_000), (100_005, 399_999)])
def test_large_file_settled_by_the_sampled_rules(tmp_path, slots, items):
    """Past 262,144 items the whole-table chain count runs only when the sampled rules leave more than one
    geometry: two geometries of the same file size (5 slots = 1 item apart) are each told apart, and the answer
    equals the one with the whole-table rule forced."""
    from rmqinspect.store.indexfile import prove_geometry_of

    p = str(tmp_path / "20240101000000000")
    write_chained_index(p, slots, items, used=300_000, seed=7)
    assert os.path.getsize(p) == index_file_size(100_000, 400_000)
    g, full = prove_geometry_of(p), prove_geometry_of(p, whole_table=True)
    assert (g.source, g.slots, g.max_items) == ("inferred", slots, items)
    assert "settled without the whole-table chain count" in g.detail
    assert (full.slots, full.max_items) == (slots, items) and "settled" not in full.detail
