"""`rmqinspect report`: the post-mortem of one or more stores as one self-contained HTML page.

A layer of its own beside cli/: it turns ``analyses.report_data.ReportData`` into HTML (charts by plotly,
whose JavaScript is embedded in the page) and imports nothing above analyses. plotly is an optional extra
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


def render_html(data) -> str:
    """The report page for a ``ReportData``."""
    require_plotly()
    from .html import render

    return render(data)


__all__ = ["INSTALL_HINT", "ReportDependencyError", "render_html", "require_plotly"]
