"""A STORETIMESTAMP is not covered by the body CRC: a flipped bit there passes the broker's checks and used to
become a loop bound (issue 19). verify reports it as damage, naming file and position; an undamaged store
(every oracle scenario) reports none."""

from __future__ import annotations

import shutil

import pytest

from rmqinspect.analyses.verify import verify
from rmqinspect.formats.commitlog import store_timestamp_position
from rmqinspect.store import Store
from rmqinspect.store.commitlog import RecordRun
from support import ALL_SCENARIOS, require_oracle


@pytest.mark.parametrize("name", [n for n in ALL_SCENARIOS if "dledger" not in n])
def test_no_outlier_in_broker_written_stores(name):
    store = require_oracle(name) / "store"
    assert [p for p in verify(Store.open(store), ("structure",)).problems if p.kind == "store_time_outlier"] == []


def _records(root):
    with Store.open(root) as st:
        return [(ev.file.path, ev.file.name, int(p), int(sf)) for ev in st.commitlog.walk(check_crc=False)
                if type(ev) is RecordRun for p, sf in zip(ev.records["position"], ev.records["sys_flag"])]


@pytest.mark.parametrize("bit, kind", [(44, "days from both neighbours"), (50, "outside the calendar"),
                                       (63, "outside the calendar")])
def test_flipped_store_time_is_reported_where_it_is(tmp_path, bit, kind):
    src = require_oracle("rocketmq-all-5.3.3/clean") / "store"
    root = tmp_path / "store"
    shutil.copytree(src, root)
    recs = _records(root)
    path, name, pos, sf = recs[len(recs) // 2]
    at = pos + store_timestamp_position(sf)
    with open(path, "r+b") as f:
        f.seek(at)
        ts = int.from_bytes(f.read(8), "big", signed=True)
        f.seek(at)
        f.write((ts ^ (1 << bit)).to_bytes(8, "big", signed=False if bit == 63 else True))
    probs = [p for p in verify(Store.open(root), ("structure", "crc")).problems]
    assert [(p.kind, p.file, p.position) for p in probs] == [("store_time_outlier", f"commitlog/{name}", pos)]
    assert kind in probs[0].reason
