"""Every recorded broker query of every oracle scenario, with no geometry flag and with a broker.conf built
from the scenario's storeConfig: the on-disk answer equals the broker's where the recorded state
is the on-disk one, and the hits whose fate after restart is survives/redispatched equal what the broker
returned after recovering the directory (crash scenarios included)."""

from __future__ import annotations

import pytest

from rmqinspect.analyses.lookup.fates import mark_fates, recovery_view
from rmqinspect.analyses.lookup.query import IndexService, query_message
from rmqinspect.store import Store
from rmqinspect.store.broker_conf import read_broker_conf
from support import ALL_SCENARIOS, load_expected, require_oracle

KEEP = ("survives", "redispatched")


def _conf_file(tmp_path, store_config: dict):
    lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in store_config.items()]
    p = tmp_path / "broker.conf"
    p.write_text("\n".join(lines) + "\n")
    return read_broker_conf(p)


def _matches(path, exp, conf) -> tuple[int, int, set]:
    st = Store.open(path / "store", conf=conf)
    idx = path / "expected" / "index"
    svc = IndexService.for_store(st, str(idx) if idx.is_dir() else None)
    view = recovery_view(st)
    on_disk = as_recovered = 0
    for rec in exp["queries"]:
        q = rec["query"]
        r = query_message(svc, st.commitlog, q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        mark_fates(r, view)
        on_disk += r.phy_offsets == rec["phyOffsets"]
        as_recovered += [h.physical_offset for h in r.hits if h.fate in KEEP] == rec["phyOffsets"]
    return on_disk, as_recovered, {i.geometry.get("source") for i in svc.infos}


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
@pytest.mark.parametrize("with_conf", [False, True], ids=["no-config", "broker-conf"])
def test_queries_equal_the_broker(scenario, with_conf, tmp_path):
    path = require_oracle(scenario)
    exp = load_expected(scenario)
    if not exp.get("queries"):
        pytest.skip("no recorded queries")
    if "dledgerVersion" in exp and exp["abortFilePresentBeforeLoad"]:
        pytest.skip("DLedger crash: the broker deleted an index file and DLedger re-indexes nothing, so a query "
                    "of the files on disk differs by design (test_index_oracle queries the files the broker kept)")
    conf = _conf_file(tmp_path, exp["storeConfig"]) if with_conf else None
    on_disk, as_recovered, sources = _matches(path, exp, conf)
    n = len(exp["queries"])
    assert as_recovered == n, (as_recovered, n)
    assert on_disk == n
    assert sources == ({"config"} if with_conf else {"inferred"})
