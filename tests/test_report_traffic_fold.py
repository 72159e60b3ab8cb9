"""The report counts its traffic chart from verify's walk (``count_run_and_traffic`` through verify's tap, added up
by ``TrafficTally``) instead of a walk of its own: the series equal ``store_traffic``'s on every oracle store and the
sample store, on a store whose store times verify flags as outliers (left off the chart, known only after the walk),
with the walk split into tiny chunks over two worker processes, and with the cell cap (MAX_FINE_CELLS) forcing
coarsenings on the way."""

from __future__ import annotations

import pytest

from rmqinspect.analyses import report_data
from rmqinspect.analyses.report_data import TrafficTally, store_traffic, summary_beside_verify
from rmqinspect.formats.commitlog import store_timestamp_position
from rmqinspect.store import Store
from rmqinspect.store.walk.parallel import CHUNK_ENV, JOBS_ENV
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle, tree_hashes
from support.recover_fixtures import build_store


def _both(root) -> tuple[dict, dict]:
    """(the folded traffic, store_traffic's), with verify's store-time outliers left off both."""
    with Store.open(str(root)) as st:
        tally = TrafficTally()
        _, rep = summary_beside_verify(st, None, True, traffic=tally)
        outliers = [p.start for p in rep.problems if p.kind == "store_time_outlier"]
        folded = tally.traffic(outliers, top_topics=3, max_buckets=50).to_dict()
    with Store.open(str(root)) as st:
        alone = store_traffic(st, outliers, top_topics=3, max_buckets=50).to_dict()
    return folded, alone


@pytest.fixture(params=["one process", "tiny chunks"])
def walk(request, monkeypatch):
    if request.param == "tiny chunks":
        monkeypatch.setenv(JOBS_ENV, "2")
        monkeypatch.setenv(CHUNK_ENV, "20000")
    return request.param


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_folded_traffic_equals_its_own_walk(scenario, walk):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    folded, alone = _both(root)
    assert folded == alone
    assert tree_hashes(root) == before


def test_sample_store_folded_traffic_equals_its_own_walk(walk):
    folded, alone = _both(SAMPLE_STORE)
    assert folded == alone and folded["records"] > 0


def _outlier_store(tmp_path):
    """A writer-made store (3 files) with flipped store-time bits: in the middle of a file (far from both
    neighbours), a file's first record and a file's last record (outside the calendar; their neighbours lie in
    other runs), and one more record far from both neighbours."""
    fx = build_store(tmp_path / "s", n=400)
    firsts = {}
    lasts = {}
    for r in fx.records:
        firsts.setdefault(fx.file_of(r.offset), r)
        lasts[fx.file_of(r.offset)] = r
    names = sorted(firsts)
    picks = [(fx.records[150], 44), (firsts[names[1]], 62), (lasts[names[0]], 50), (fx.records[300], 45)]
    for r, bit in picks:
        at = r.offset + store_timestamp_position(0)
        fx.patch(at, (r.store_ts ^ (1 << bit)).to_bytes(8, "big", signed=True))
    return fx, {r.offset for r, _ in picks}


def test_store_time_outliers_are_left_off_as_in_its_own_walk(tmp_path, walk):
    fx, flipped = _outlier_store(tmp_path)
    with Store.open(fx.root) as st:
        _, rep = summary_beside_verify(st, None, True)
    assert {p.start for p in rep.problems if p.kind == "store_time_outlier"} == flipped
    folded, alone = _both(fx.root)
    assert folded == alone
    assert folded["excluded"] == len(flipped) and folded["records"] == len(fx.records) - len(flipped)


def test_cell_cap_coarsens_to_the_same_chart(tmp_path, walk, monkeypatch):
    """A cap of 5 cells: the 1 s cells coarsen to minutes and hours during the walk (the waiting cells joined
    every 7) and at its end, whichever runs or chunks come, and the outliers' own cells never decide a
    coarsening."""
    monkeypatch.setattr(report_data, "MAX_FINE_CELLS", 5)
    monkeypatch.setattr(TrafficTally, "PENDING_MAX", 7)
    fx, flipped = _outlier_store(tmp_path)
    folded, alone = _both(fx.root)
    assert folded == alone
    assert folded["bucket_ms"] >= 3_600_000 and folded["excluded"] == len(flipped)


def _asdict_equal_and_unaliased(traffic) -> dict:
    from dataclasses import asdict

    d = traffic.to_dict()
    assert d == asdict(traffic)
    assert list(d) == list(asdict(traffic))  # the page's JSON keeps its key order
    for series in ("messages", "bytes"):
        for topic, counts in d[series].items():
            assert counts is not getattr(traffic, series)[topic]  # the caller may change its copy
    return d


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_traffic_to_dict_is_asdicts_answer_on_oracle_stores(scenario):
    with Store.open(str(require_oracle(scenario) / "store")) as st:
        d = _asdict_equal_and_unaliased(store_traffic(st, [], top_topics=3, max_buckets=50))
    assert d["records"] > 0


def test_traffic_to_dict_is_asdicts_answer_on_any_counts():
    from hypothesis import given
    from hypothesis import strategies as hs

    counts = hs.dictionaries(hs.text(max_size=8), hs.lists(hs.integers(0, 2**63), max_size=30), max_size=6)

    @given(hs.one_of(hs.none(), hs.integers(0, 2**62)), hs.integers(1, 2**40), counts, counts,
           hs.integers(0, 2**40), hs.integers(0, 2**40))
    def check(start, bucket, messages, nbytes, records, excluded):
        _asdict_equal_and_unaliased(report_data.Traffic(start, bucket, sorted(messages), messages, nbytes, records,
                                                        excluded))

    check()
