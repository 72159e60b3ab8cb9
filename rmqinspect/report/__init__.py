"""`rmqinspect report`: the post-mortem of one or more stores as one self-contained HTML page.

A layer of its own beside cli/: it turns ``analyses.report_data.ReportData`` into HTML (charts drawn by plotly.js,
embedded in the page, from plotly figure JSON written the way plotly's Python library writes it) and imports
nothing above analyses. plotly is an optional extra
(``pip install 'rmqinspect[report]'``); ``require_plotly`` says so in one line when it is missing.
"""

from __future__ import annotations

from ..errors import ReportDependencyError

INSTALL_HINT = "pip install 'rmqinspect[report]'"




def require_plotly() -> str:
    """plotly's package directory, or ReportDependencyError naming the extra that installs it. Found, not imported:
    the page reads plotly's files (``plotly_json``) and needs none of its code, and ``import plotly`` costs ~45 ms
    (its __init__ reads its version through importlib.metadata) before the walk can start."""
    from .plotly_json import plotly_package_dir

    try:
        where = plotly_package_dir()
    except (ImportError, ValueError) as e:
        raise ReportDependencyError(f"report needs plotly, which cannot be found ({e}): {INSTALL_HINT}") from None
    if where is None:
        raise ReportDependencyError(f"report needs plotly, which is not installed (No module named 'plotly'): "
                                    f"{INSTALL_HINT}")
    return where


def plotly_cache_dir(environ) -> str | None:
    """The per-user cache of plotly.js compressed that ``environ`` names (``RMQINSPECT_CACHE_DIR``, empty for none;
    else ``$XDG_CACHE_HOME/rmqinspect`` or ``~/.cache/rmqinspect``): plotly_cache.py."""
    from .plotly_cache import cache_dir_from_environ

    return cache_dir_from_environ(environ)


def start_page_assets(cache_dir: str | None = None):
    """Begin making the page's parts that need no store data (plotly.js compressed, from ``cache_dir`` when it holds
    it, and plotly's templates) in a thread: call it before reading the stores and hand the result to
    ``render_html``."""
    from .plotly_json import start_page_assets as start

    return start(require_plotly(), cache_dir)


def render_html(data, pending=None) -> str:
    """The report page for a ``ReportData``; ``pending`` is ``start_page_assets()``'s answer (made here, without the
    cache, when None)."""
    plotly_dir = require_plotly()
    from .html import render
    from .plotly_json import page_assets

    return render(data, pending.result() if pending is not None else page_assets(plotly_dir))


__all__ = ["INSTALL_HINT", "ReportDependencyError", "plotly_cache_dir", "render_html", "require_plotly",
           "start_page_assets"]
