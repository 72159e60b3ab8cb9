"""The report writes its figures as plain dicts (rmqinspect/report/figures.py) and serialises them itself
(report/plotly_json.py), without plotly's graph objects; plotly stays the reference. For the report data of the
oracle stores, the sample store, the wide store and stores the project's writer damaged, every figure serialises
byte for byte to what plotly's graph objects (tests/support/plotly_reference_figures.py, the figures as they were
built before) give through ``plotly.io.to_json``, and the page holds exactly those texts and plotly's own bundle.
Timings are not asserted here (benchmarks/)."""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmqinspect.analyses.report_data import ReportData, collect_store_report
from rmqinspect.report import figures, render_html
from rmqinspect.report import plotly_json as pj
from rmqinspect.report.html import script_json
from rmqinspect.store import Store
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle, require_replicas
from support.recover_fixtures import build_store
from support.wide_store import build_wide_store

pio = pytest.importorskip("plotly.io")
go = pytest.importorskip("plotly.graph_objects")
from support import plotly_reference_figures as reference  # noqa: E402  (needs plotly)

ASSETS = pj.page_assets()
OFFSETS = {"offsetTable": {"OrderTopic@billing": {"0": 79, "1": 20}, "PayTopic@billing": {"0": 80}}}


def store_figures(module, r) -> dict:
    """Every figure ``module`` (figures, or the graph-object reference) makes of one store's report data."""
    return {"map": module.commitlog_map(r), "traffic": module.traffic(r), "queues": module.queue_chart(r)[0],
            "consumers": module.consumer_chart(r), "index": module.index_charts(r)}


def assert_figures_equal_plotlys(r) -> set[str]:
    """Each figure of ``r`` serialised equals plotly's serialisation of the graph-object figure; returns the names
    of the figures made (the others are None on both sides)."""
    mine, ref = store_figures(figures, r), store_figures(reference, r)
    for name, fig in ref.items():
        assert (mine[name] is None) == (fig is None), name
        if fig is not None:
            assert ASSETS.figure_json(mine[name]) == pio.to_json(fig, validate=False), name
    return {name for name, fig in ref.items() if fig is not None}


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_store_figures_serialise_as_plotlys(scenario):
    root = require_oracle(scenario) / "store"
    with Store.open(str(root)) as st:
        made = assert_figures_equal_plotlys(collect_store_report(st))
    assert {"map", "traffic", "queues"} <= made


def test_sample_and_wide_store_figures_serialise_as_plotlys(tmp_path):
    with Store.open(str(SAMPLE_STORE)) as st:
        assert_figures_equal_plotlys(collect_store_report(st))
    # 200-character topic over 100 queues: shortened labels, tilted ticks, quiet queues left to the table
    with Store.open(build_wide_store(str(tmp_path / "wide"))) as st:
        r = collect_store_report(st)
    assert figures.queue_chart(r)[1] > 0
    assert_figures_equal_plotlys(r)


def test_damaged_store_figures_serialise_as_plotlys(tmp_path):
    """The project's writer, then damage: CRC flips (bars and ▼ markers), a file gone from the middle (a gap), an
    abort file and a checkpoint behind (the truncation and checkpoint lines), consumer offsets (the consumer
    chart)."""
    fx = build_store(tmp_path / "store")
    fx.set_abort()
    fx.write_checkpoint(fx.records[100].store_ts)
    for rec in (fx.records[10], fx.records[150]):
        fx.patch(rec.offset + 100, b"\xff")
    os.remove(os.path.join(fx.commitlog, fx.file_names()[2]))
    with open(tmp_path / "offsets.json", "w") as f:
        json.dump(OFFSETS, f)
    with Store.open(fx.root) as st:
        r = collect_store_report(st, offsets_file=str(tmp_path / "offsets.json"))
    assert {"crc_mismatch", "gap"} <= {s.kind for s in r.segments}
    assert assert_figures_equal_plotlys(r) == {"map", "traffic", "queues", "consumers"}  # no index files written


def test_a_store_without_valid_records_serialises_as_plotlys(tmp_path):
    """Traffic with no record to draw (the subplots alone), a map of zeros, no index chart."""
    fx = build_store(tmp_path / "store", n=20)
    fx.zero(0, fx.records[-1].end)
    with Store.open(fx.root) as st:
        r = collect_store_report(st)
    assert r.traffic.start_ms is None
    assert_figures_equal_plotlys(r)


@pytest.mark.parametrize("replica_set, stores", [
    ("rocketmq-develop-8fc57f1/ha-autoswitch-failover", ("master", "slave", "old-master-before")),
    ("rocketmq-develop-8fc57f1/ha-classic-lag", ("master", "slave")),
])
def test_replica_map_serialises_as_plotlys(replica_set, stores):
    """The replica view's map (plotly's default template, truncation markers, a line per pair)."""
    from rmqinspect.analyses.peers import compare_replicas

    root = require_replicas(replica_set)
    opened = [Store.open(str(root / s / "store")) for s in stores]
    d = compare_replicas(opened, labels=list(stores)).to_dict()
    assert ASSETS.figure_json(figures.replica_map(d)) == pio.to_json(reference.replica_map(d), validate=False)


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(pio.__file__).parents[1] / "package_data" /
                                                          "templates").glob("*.json")))
def test_every_plotly_template_is_written_as_plotly_writes_it(name):
    """Given by name (validated: plotly's key order) and as plotly's default (taken as the file has it)."""
    assets = pj.PageAssets("", {"given": pj.plotly_template(name), "default": pj.plotly_template(name, False)}, None)
    given = pio.to_json(go.Figure(layout={"template": name}), validate=False)
    assert assets.figure_json({"data": [], "layout": {"template": "given"}}) == given
    saved = pio.templates.default
    try:
        pio.templates.default = name
        default = pio.to_json(go.Figure(), validate=False)
    finally:
        pio.templates.default = saved
    assert assets.figure_json({"data": [], "layout": {"template": "default"}}) == default


@pytest.mark.parametrize("value", [
    {"text": "</script><!-- a > b", "name": "NaN-topic", "emoji": "主题 ✓ \u2028"},
    {"y": [1.5, math.nan, math.inf, -math.inf, 1e-7, 10**20], "label": "Infinity"},
    {"x": [0.1 + 0.2, 2.0, -0.0], "none": None, "flag": False},
])
def test_json_is_written_as_plotly_io_writes_it(value):
    """Escapes for HTML, NaN and infinities as null, float digits, non-ASCII text: as plotly.io's json engine."""
    assert pj.plotly_dumps(value) == pio.to_json(value, validate=False, engine="json")


def test_orjson_is_used_as_plotly_io_uses_it():
    orjson = pytest.importorskip("orjson")
    value = {"text": "</script> 主题 \u2028", "y": [1.5, 1e-7, 10**15]}
    assert pj.orjson_dumps(orjson, value) == pio.to_json(value, validate=False, engine="orjson")


def test_page_holds_each_figure_and_plotlys_bundle(tmp_path):
    """The page's figure islands are plotly's texts, in page order, and its bundle is plotly.js gzip-compressed
    (level 6, mtime 0) as before: render_html with the assets made in the thread and made in place."""
    from plotly.offline import get_plotlyjs

    with Store.open(str(require_oracle("rocketmq-all-5.3.3/crash-torn-tail") / "store")) as st:
        r = collect_store_report(st)
    data = ReportData([r], "0", "rmqinspect report STORE --out r.html", 0, True)
    page = render_html(data, pj.start_page_assets())
    assert render_html(data) == page
    islands = re.findall(r"<script type='application/json' id='(s0-[a-z]+)-fig'>(.*?)</script>", page)
    ref = {"s0-map": reference.commitlog_map(r), "s0-traffic": reference.traffic(r),
           "s0-queues": reference.queue_chart(r)[0], "s0-index": reference.index_charts(r)}
    assert [fid for fid, _ in islands] == list(ref)
    for fid, text in islands:
        assert text == script_json(pio.to_json(ref[fid], validate=False)), fid
    blob = re.search(r"<script type='application/octet-stream' id='plotly-js-gzip'>(.*?)</script>", page).group(1)
    assert blob == base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), 6, mtime=0)).decode("ascii")


def test_a_failure_in_the_assets_thread_is_raised_by_result(monkeypatch):
    def broken(*args, **kwargs) -> str:
        raise FileNotFoundError("no plotly.min.js")

    monkeypatch.setattr(pj, "plotly_js_gzip_base64", broken)
    pending = pj.start_page_assets()
    with pytest.raises(FileNotFoundError, match="no plotly.min.js"):
        pending.result()


def test_the_report_command_never_imports_plotly(tmp_path):
    """The point of the dicts: the report's path reads plotly's package data and its distribution's version from
    its files, and imports nothing of plotly (``import plotly`` alone is ~45 ms before the walk)."""
    code = ("import sys, json; from click.testing import CliRunner; from rmqinspect.cli.main import cli; "
            f"res = CliRunner().invoke(cli, ['report', {str(SAMPLE_STORE)!r}, '--out', "
            f"{str(tmp_path / 'r.html')!r}, '--as-of', '0']); "
            "print(json.dumps([res.exit_code, sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('plotly', '_plotly_utils'))]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    exit_code, modules = json.loads(p.stdout.splitlines()[-1])
    assert exit_code == 0 and modules == [], p.stderr


def test_plotly_files_and_version_read_without_importing_plotly_are_plotlys():
    import pkgutil

    import plotly

    assert pj.plotly_version() == plotly.__version__
    for rel in ("package_data/plotly.min.js", "package_data/templates/plotly.json",
                "package_data/templates/plotly_white.json"):
        assert pj.plotly_file(rel) == pkgutil.get_data("plotly", rel)
