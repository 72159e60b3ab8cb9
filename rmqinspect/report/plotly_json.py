"""What the page takes from plotly without its graph objects: its templates' JSON, its way of writing figure JSON,
and its JavaScript bundle, gzip-compressed.

The bundle's compression (~0.2 s) and the templates need no store data: ``start_page_assets`` makes them in a thread
from the command's start, beside the walk (zlib lets go of the GIL while it compresses; the thread touches no lock
a forked walk worker could need: it reads one file of plotly's and compresses it, or reads it compressed from the
per-user cache, plotly_cache.py, and writes it there).
"""

from __future__ import annotations

import json
import pkgutil
from dataclasses import dataclass

from .figures import DEFAULT_TEMPLATE, TEMPLATE
from .plotly_cache import gzip_base64


def plotly_js_gzip_base64(cache_dir: str | None = None) -> str:
    """plotly.js (what ``plotly.offline.get_plotlyjs`` reads), gzip-compressed (level 6, mtime 0: the same bytes
    every run) and base64-encoded; taken from the cache in ``cache_dir`` when it holds exactly that (None: no
    cache)."""
    js = pkgutil.get_data("plotly", "package_data/plotly.min.js")
    if js is None:
        raise FileNotFoundError("plotly's package data has no plotly.min.js")
    return gzip_base64(js, cache_dir)


def plotly_template(name: str, validated: bool = True) -> dict:
    """plotly's template ``name`` as a figure's JSON holds it: its data then its layout (plotly's Template sets them
    so), as the package data's file has them when plotly took the template as its default (unvalidated), else with
    their keys in the order plotly's objects set them (alphabetical, each
    trace's type last, and the trace types in the order of the template's Data class, which puts a type's longer
    names first: barpolar before bar, scatter3d before scatter)."""
    raw = pkgutil.get_data("plotly", f"package_data/templates/{name}.json")
    if raw is None:
        raise FileNotFoundError(f"plotly's package data has no template {name}")
    spec = json.loads(raw)
    if not validated:
        return {"data": spec.get("data", {}), "layout": spec.get("layout", {})}
    data = {kind: [dict(_sorted({k: v for k, v in t.items() if k != "type"}), type=t["type"]) for t in traces]
            for kind, traces in sorted(spec.get("data", {}).items(), key=lambda kv: kv[0] + "s")}
    return {"data": data, "layout": _sorted(spec.get("layout", {}))}


def _sorted(value):
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _plain(value):
    """A numpy number as the Python number it holds (plotly's encoder does the same by ``tolist``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def plotly_dumps(obj) -> str:
    """``obj`` as ``plotly.io.to_json`` writes it with its json engine (the one used unless orjson is installed):
    compact, ASCII, NaN and infinities as null, and "<", ">" and "/" escaped so that the text is safe in HTML."""
    text = json.dumps(obj, separators=(",", ":"), default=_plain)
    if "NaN" in text or "Infinity" in text:  # plotly's test too: a name holding the word costs one more round
        text = json.dumps(json.loads(text, parse_constant=lambda _: None), separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("/", "\\u002f")


def orjson_dumps(orjson, obj) -> str:
    """``obj`` as ``plotly.io.to_json`` writes it with orjson, its engine when orjson is installed."""
    text = orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode("utf8")
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


@dataclass
class PageAssets:
    """The page's parts from plotly that need no store data."""

    plotly_js_gzip_base64: str
    templates: dict[str, dict]
    orjson: object | None  # plotly.io writes figures with orjson when it is importable

    def figure_json(self, fig: dict) -> str:
        """``fig`` (figures.py) as ``plotly.io.to_json(fig, validate=False)`` writes the figure: the template named
        in its layout written out where it stands."""
        layout = fig["layout"]
        if isinstance(layout.get("template"), str):
            fig = {**fig, "layout": {**layout, "template": self.templates[layout["template"]]}}
        return plotly_dumps(fig) if self.orjson is None else orjson_dumps(self.orjson, fig)


def page_assets(cache_dir: str | None = None) -> PageAssets:
    try:
        import orjson
    except ImportError:
        orjson = None
    # a figure made with a template has it validated (reordered); plotly gives one made without its default as is
    templates = {TEMPLATE: plotly_template(TEMPLATE), DEFAULT_TEMPLATE: plotly_template(DEFAULT_TEMPLATE, False)}
    return PageAssets(plotly_js_gzip_base64(cache_dir), templates, orjson)


def start_page_assets(cache_dir: str | None = None):
    """``page_assets(cache_dir)`` made in a daemon thread from now (``parallel.Beside``: one that fails, or a
    command that fails first, never holds up the exit); its ``result()`` waits for them and raises what the thread
    raised."""
    from ..store.walk.parallel import Beside

    return Beside(page_assets, cache_dir, name="rmqinspect-report-page", start=True)
