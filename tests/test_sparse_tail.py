"""The walk's search for a file's last non-zero byte skips the holes of a sparse file (MappedFile.data_ranges):
the broker pre-allocates the newest commitlog file with setLength, so its unwritten rest is usually a hole, and
reading it page by page was verify's serial tail on a 1 GiB file. A hole reads as zeros, so the answers must be
exactly those of the same bytes written out as real zeros - including stray bytes past a hole."""

from __future__ import annotations

import os

import pytest

from rmqinspect.analyses.verify import verify
from rmqinspect.store import Store
from rmqinspect.store.mapped import MappedFile
from rmqinspect.store.walk.resync import walk_with_resync
from support import tree_hashes
from support.recover_fixtures import build_store

FILE = 1 << 20  # 1 MiB commitlog files: room for holes of whole file-system blocks


def _last_file(root) -> str:
    d = os.path.join(root, "commitlog")
    return os.path.join(d, sorted(os.listdir(d))[-1])


def _stores(tmp_path, stray: int | None):
    """Two copies of one store whose last commitlog file ends in 1 MiB of pre-allocated space: in the first the
    space is a hole, in the second real zeros; ``stray``: a non-zero byte at that position past the data."""
    out = []
    for kind in ("sparse", "dense"):
        root = tmp_path / kind
        build_store(root, n=300, file_size=FILE)
        path = _last_file(root)
        with open(path, "rb") as f:
            data = f.read().rstrip(b"\0")
        with open(path, "wb") as f:
            f.write(data)
            if kind == "sparse":
                f.truncate(FILE)
            else:
                f.write(bytes(FILE - len(data)))
            if stray is not None:
                f.seek(stray)
                f.write(b"\x5a")
        out.append((str(root), path, len(data)))
    return out


def _answers(root: str) -> tuple:
    rep = verify(Store.open(root), ("structure", "crc"))
    walk = [(type(e).__name__, e.kind, e.offset if hasattr(e, "offset") else e.start,
             getattr(e, "end", None), getattr(e, "reason", None)) for e in walk_with_resync(Store.open(root))]
    return [p.to_dict() for p in rep.problems], rep.counts.get("records"), walk


@pytest.mark.parametrize("stray", [None, FILE - 1, 3 * FILE // 4 + 7])
def test_a_hole_answers_as_its_zeros_do(tmp_path, stray):
    (sparse, spath, used), (dense, _, _) = _stores(tmp_path, stray)
    ranges = MappedFile(spath).data_ranges(0, FILE)
    if ranges == [(0, FILE)]:
        pytest.skip("this file system reports no holes (SEEK_DATA/SEEK_HOLE): the sparse case cannot be made")
    # the hole is seen: nothing past the data is listed except the block holding the stray byte
    assert ranges[0][0] == 0 and ranges[0][1] >= used
    assert all(b <= FILE for _, b in ranges)
    if stray is not None:
        assert any(a <= stray < b for a, b in ranges)
        assert sum(b - a for a, b in ranges) < FILE // 2
    before = tree_hashes(sparse)
    got, want = _answers(sparse), _answers(dense)
    assert got == want
    assert tree_hashes(sparse) == before  # evidence untouched
    problems = got[0]
    if stray is None:
        assert problems == []
    else:
        # one torn tail from the end of the data to just after the stray byte, in the one commitlog file
        assert [(p["kind"], p["position"], p["end"]) for p in problems] == [("torn_tail", used, stray + 1)]
        assert problems[0]["file"] == "commitlog/" + os.path.basename(spath)


def test_data_ranges_of_a_buffer_and_of_an_empty_range(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"\1" * 10)
    m = MappedFile(str(p))
    assert m.data_ranges(5, 5) == []
    assert m.data_ranges(0, 10) == [(0, 10)]
    assert MappedFile.of_buffer(b"\0" * 64).data_ranges(0, 64) == [(0, 64)]
