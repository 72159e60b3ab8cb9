"""What the page takes from plotly without its graph objects: its templates' JSON, its way of writing figure JSON,
and its JavaScript bundle, gzip-compressed.

The bundle's compression (~0.2 s) and the templates need no store data: ``start_page_assets`` makes them in a thread
from the command's start, beside the walk (zlib lets go of the GIL while it compresses; the thread touches no lock
a forked walk worker could need: it reads one file of plotly's and compresses it, or reads it compressed from the
per-user cache, plotly_cache.py, and writes it there).
"""

from __future__ import annotations

import json
import os
import pkgutil
from dataclasses import dataclass

from .figures import DEFAULT_TEMPLATE, TEMPLATE
from .plotly_cache import gzip_base64


def plotly_package_dir() -> str | None:
    """plotly's package directory as the import system finds it, without importing plotly (None: not installed,
    or blocked by a None in sys.modules, as ``import plotly`` would say)."""
    import importlib.util
    import sys

    if "plotly" in sys.modules and sys.modules["plotly"] is None:
        return None
    spec = importlib.util.find_spec("plotly")
    where = spec.submodule_search_locations if spec is not None else None
    return list(where)[0] if where else None


def plotly_file(relpath: str, plotly_dir: str | None = None) -> bytes:
    """One of plotly's package files (what ``pkgutil.get_data("plotly", relpath)`` reads), from ``plotly_dir``
    (None: found here); a plotly not installed as files (a zip) is read through its loader."""
    where = plotly_dir if plotly_dir is not None else plotly_package_dir()
    if where is not None:
        try:
            with open(os.path.join(where, relpath), "rb") as f:
                return f.read()
        except OSError:
            pass
    data = pkgutil.get_data("plotly", relpath)
    if data is None:
        raise FileNotFoundError(f"plotly's package data has no {relpath}")
    return data


def plotly_version(plotly_dir: str | None = None) -> str:
    """``plotly.__version__`` (importlib.metadata's version of the plotly distribution) from the METADATA of the one
    plotly-*.dist-info beside the package; importlib.metadata itself (~20 ms to import) where that is not so."""
    where = plotly_dir if plotly_dir is not None else plotly_package_dir()
    if where is not None:
        site = os.path.dirname(os.path.abspath(where))
        try:
            infos = [n for n in os.listdir(site) if n.lower().startswith("plotly-") and n.endswith(".dist-info")]
        except OSError:
            infos = []
        if len(infos) == 1:
            try:
                with open(os.path.join(site, infos[0], "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break  # the headers end: no Version
            except OSError:
                pass
    import importlib.metadata

    return importlib.metadata.version("plotly")


def plotly_js_gzip_base64(cache_dir: str | None = None, plotly_dir: str | None = None) -> str:
    """plotly.js (what ``plotly.offline.get_plotlyjs`` reads), gzip-compressed (level 6, mtime 0: the same bytes
    every run) and base64-encoded; taken from the cache in ``cache_dir`` when it holds exactly that (None: no
    cache)."""
    return gzip_base64(plotly_file("package_data/plotly.min.js", plotly_dir), cache_dir)


def plotly_template(name: str, validated: bool = True, plotly_dir: str | None = None) -> dict:
    """plotly's template ``name`` as a figure's JSON holds it: its data then its layout (plotly's Template sets them
    so), as the package data's file has them when plotly took the template as its default (unvalidated), else with
    their keys in the order plotly's objects set them (alphabetical, each
    trace's type last, and the trace types in the order of the template's Data class, which puts a type's longer
    names first: barpolar before bar, scatter3d before scatter)."""
    spec = json.loads(plotly_file(f"package_data/templates/{name}.json", plotly_dir))
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
    plotly_version: str = ""

    def figure_json(self, fig: dict) -> str:
        """``fig`` (figures.py) as ``plotly.io.to_json(fig, validate=False)`` writes the figure: the template named
        in its layout written out where it stands."""
        layout = fig["layout"]
        if isinstance(layout.get("template"), str):
            fig = {**fig, "layout": {**layout, "template": self.templates[layout["template"]]}}
        return plotly_dumps(fig) if self.orjson is None else orjson_dumps(self.orjson, fig)


def orjson_module():
    """orjson, where it is installed (plotly.io then writes figures with it), else None."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson


def page_assets(plotly_dir: str | None = None, cache_dir: str | None = None, orjson=False) -> PageAssets:
    """The page's parts from plotly's files in ``plotly_dir`` (None: found here); ``orjson``: ``orjson_module()``'s
    answer where the caller has it (False: asked here)."""
    if orjson is False:
        orjson = orjson_module()
    where = plotly_dir if plotly_dir is not None else plotly_package_dir()  # found once for its four reads
    # a figure made with a template has it validated (reordered); plotly gives one made without its default as is
    templates = {TEMPLATE: plotly_template(TEMPLATE, plotly_dir=where),
                 DEFAULT_TEMPLATE: plotly_template(DEFAULT_TEMPLATE, False, where)}
    return PageAssets(plotly_js_gzip_base64(cache_dir, where), templates, orjson, plotly_version(where))


def start_page_assets(plotly_dir: str | None = None, cache_dir: str | None = None):
    """``page_assets`` made in a daemon thread from now (``parallel.Beside``: one that fails, or a command that fails
    first, never holds up the exit); its ``result()`` waits for them and raises what the thread raised. Every import
    happens here, before the thread: one importing while the walk forks its workers could leave them an import lock
    held by a thread they do not have."""
    from ..store.walk.parallel import Beside

    where = plotly_dir if plotly_dir is not None else plotly_package_dir()
    return Beside(page_assets, where, cache_dir, orjson_module(), name="rmqinspect-report-page", start=True)
