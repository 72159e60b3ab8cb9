"""`rmqinspect report`: the post-mortem of one or more stores as one self-contained HTML page.

A layer of its own beside cli/: it turns ``analyses.report_data.ReportData`` into HTML (charts drawn by plotly.js,
embedded in the page, from plotly figure JSON written the way plotly's Python library writes it) and imports
nothing above analyses. plotly is an optional extra
(``pip install 'rmqinspect[report]'``); ``require_plotly`` says so in one line when it is missing.
"""

from __future__ import annotations

from ..errors import ReportDependencyError

INSTALL_HINT = "pip install 'rmqinspect[report]'"




def require_plotly():
    """The plotly module, or ReportDependencyError naming the extra that installs it."""
    try:
        import plotly
    except ImportError as e:
        raise ReportDependencyError(f"report needs plotly, which is not installed ({e.msg}): {INSTALL_HINT}") from None
    return plotly


def plotly_cache_dir(environ) -> str | None:
    """The per-user cache of plotly.js compressed that ``environ`` names (``RMQINSPECT_CACHE_DIR``, empty for none;
    else ``$XDG_CACHE_HOME/rmqinspect`` or ``~/.cache/rmqinspect``): plotly_cache.py."""
    from .plotly_cache import cache_dir_from_environ

    return cache_dir_from_environ(environ)


def start_page_assets(cache_dir: str | None = None):
    """Begin making the page's parts that need no store data (plotly.js compressed, from ``cache_dir`` when it holds
    it, and plotly's templates) in a thread: call it before reading the stores and hand the result to
    ``render_html``."""
    require_plotly()
    from .plotly_json import start_page_assets as start

    return start(cache_dir)


def render_html(data, pending=None) -> str:
    """The report page for a ``ReportData``; ``pending`` is ``start_page_assets()``'s answer (made here, without the
    cache, when None)."""
    require_plotly()
    from .html import render
    from .plotly_json import page_assets

    return render(data, pending.result() if pending is not None else page_assets())


__all__ = ["INSTALL_HINT", "ReportDependencyError", "plotly_cache_dir", "render_html", "require_plotly",
           "start_page_assets"]
