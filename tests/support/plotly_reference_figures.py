"""The report's figures as plotly's graph objects built them (rmqinspect/report/figures.py at b39ad52, before the
figures became plain dicts), kept as the reference: tests/test_report_figures.py asserts that each figure the
report writes serialises byte for byte to what this construction gives through ``plotly.io.to_json``. The chart
functions are that file's; what picks the charts' data, colours and words (marks, labels, palette, layout
constants) is imported from the report's figures, since the reference is about plotly's construction and
serialisation, not about the choice of what to draw. Change it only together with the report's figures, for a
change the page is meant to show.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqinspect.analyses.report_data import LAYOUT_KINDS, StoreReport
from rmqinspect.report.figures import (
    BOTTOM_LEGEND,
    DAMAGE_FALLBACK,
    KIND_COLOURS,
    LAYOUT,
    QUEUE_SERIES,
    REPLICA_PARTS,
    TEMPLATE,
    chart_title,
    iso,
    map_positions,
    map_segments,
    merged_marks,
    palette,
    queues_shown,
    replica_spans,
    segment_points,
    short_labels,
    time_marks,
    traffic_axis,
    traffic_steps,
)


def _figure() -> go.Figure:
    """An empty figure with the report's template from the start: plotly validates a template by a deep copy each
    time one is set (~10 ms), and a figure made without one first takes plotly's default. The figure is the one
    setting it later gave (the template first in the layout)."""
    return go.Figure(layout={"template": TEMPLATE})


def _marks_band(fig: go.Figure, marks: list[tuple[str, object, str]], above: int) -> int:
    """The labelled lines' captions, one per row in a band above the plot (never over a subplot title, a legend
    or each other): ``marks`` are (text, x, anchor). Returns the band's height in px."""
    for i, (text, x, anchor) in enumerate(marks):
        fig.add_annotation(x=x, yref="paper", y=1.0, yanchor="bottom", yshift=above + 16 * i, text=text,
                           showarrow=False, xanchor=anchor, bgcolor="rgba(255,255,255,0.85)", font=dict(size=11))
    return 16 * len(marks)


def commitlog_map(r: StoreReport) -> go.Figure:
    """Every commit-log file as a bar on one physical-offset axis: records, blank and zero tails, missing files,
    damage by kind (bars, and a marker at each range so that a 1-byte range stays visible), with the recovery's
    truncation point and the other positions as labelled lines."""
    fig = _figure()
    by_kind, categories, lo, hi = map_segments(r)
    for kind, segs in by_kind.items():
        damage = kind not in LAYOUT_KINDS
        colour = KIND_COLOURS.get(kind, DAMAGE_FALLBACK)
        y, custom = segment_points(kind, segs)
        fig.add_trace(go.Bar(
            name=kind, orientation="h", y=y, x=[max(s.end - s.start, 1) for s in segs], base=[s.start for s in segs],
            marker=dict(color=colour, line=dict(width=1 if damage else 0, color="#000")), customdata=custom,
            hovertemplate="%{customdata[3]}<br>" + kind + " [%{customdata[0]}, %{customdata[1]}) "
                          "%{customdata[2]} bytes<br>%{customdata[4]}<extra></extra>",
            legendgroup=kind, width=0.6 if damage else 0.8))
        if damage:
            fig.add_trace(go.Scatter(
                name=kind, mode="markers", y=y, x=[s.start for s in segs], customdata=custom, showlegend=False,
                legendgroup=kind, marker=dict(symbol="triangle-down", size=12, color=colour,
                                              line=dict(width=1, color="#000")),
                hovertemplate="%{customdata[3]}<br>" + kind + " [%{customdata[0]}, %{customdata[1]})<br>"
                              "%{customdata[4]}<extra></extra>"))
    marks = merged_marks(map_positions(r))
    for label, off in marks:
        truncation = "truncation" in label
        fig.add_shape(type="line", x0=off, x1=off, yref="paper", y0=0, y1=1,
                      line=dict(color="#d62728" if truncation else "#555", width=2,
                                dash="solid" if truncation else "dot"))
    band = _marks_band(fig, [(f"{label}: {off}", off, "right" if off > (lo + hi) / 2 else "left")
                             for label, off in marks], 4)
    fig.update_layout(**LAYOUT, barmode="overlay", height=200 + 30 * max(len(categories), 1) + band,
        title=chart_title("Commit log: files on the physical-offset axis"),
        yaxis=dict(categoryorder="array", categoryarray=categories, autorange="reversed", type="category"),
        xaxis=dict(title="physical offset", tickformat="d", exponentformat="none", separatethousands=False),
        hovermode="closest")
    fig.update_layout(margin=dict(l=10, r=10, t=60 + band, b=40), legend=dict(BOTTOM_LEGEND, y=-0.25))
    return fig


def traffic(r: StoreReport) -> go.Figure:
    """Messages and bytes per second per topic over store time (stacked; one bucket per point), with the last
    message, the checkpoint's timestamps and the index's last update as lines."""
    t = r.traffic
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("messages per second", "bytes per second"), figure=_figure())
    if t.start_ms is None:
        fig.update_layout(**LAYOUT, height=200, title=chart_title("Traffic over store time: no valid records"))
        return fig
    n, x, names = traffic_axis(t)
    for i, topic in enumerate(t.topics):
        colour = palette(i)
        for row, series in ((1, t.messages[topic]), (2, t.bytes[topic])):
            rates, counts = traffic_steps(t, series)
            fig.add_trace(go.Scatter(
                x=x, y=rates, name=names[i], legendgroup=topic,
                showlegend=row == 1, mode="lines", stackgroup=f"s{row}", line=dict(width=0.5, color=colour, shape="hv"),
                customdata=counts,
                hovertemplate=topic + "<br>%{x}<br>%{y} per s (%{customdata} in the bucket)<extra></extra>"),
                row=row, col=1)
    mid = t.start_ms + n * t.bucket_ms / 2
    marks = []
    for label, ms in merged_marks(time_marks(r)):
        x_iso = iso(ms)
        if x_iso is None:
            continue
        fig.add_vline(x=x_iso, line=dict(color="#d62728" if "last message" in label else "#555", dash="dot",
                                         width=1.5))
        marks.append((f"{label}: {x_iso}", x_iso, "right" if ms > mid else "left"))
    band = _marks_band(fig, marks, 22)  # above the first subplot's title
    fig.update_layout(**LAYOUT, height=540 + band, hovermode="x unified",
                      title=chart_title(f"Traffic over store time (UTC, {t.bucket_ms // 1000} s buckets)"))
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.08, x=0),
                      margin=dict(l=10, r=10, t=70 + band, b=40))
    fig.update_xaxes(type="date", range=[x[0], x[-1]])
    return fig


def queue_chart(r: StoreReport) -> tuple[go.Figure, int]:
    """Per queue: entries against the commit log's records, and what verify and the recovery find. Queues with
    anything to see are always drawn; quiet ones fill up to MAX_QUEUE_BARS (all are in the table)."""
    shown = queues_shown(r)
    fig = _grouped_bars([q.key for q in shown], shown, QUEUE_SERIES, 420, "Consume queues", "entries")
    return fig, len(r.queues) - len(shown)


def _grouped_bars(x: list[str], rows: list, series, height: int, title: str, y_title: str) -> go.Figure:
    """One bar per (name, attribute, colour) of ``series`` for each row, grouped by the category labels ``x``."""
    fig = _figure()
    labels = short_labels(x)
    for name, attr, colour in series:
        fig.add_trace(go.Bar(name=name, x=labels, y=[getattr(row, attr) for row in rows], marker_color=colour,
                             customdata=x, hovertemplate="%{customdata}<br>" + name + ": %{y}<extra></extra>"))
    # long names are shortened in the middle (LABEL_CHARS; hover and the table give them whole), so the labels
    # take at most ~LABEL_CHARS * 5 px tilted
    fig.update_layout(**LAYOUT, barmode="group", height=height + 5 * max(map(len, labels), default=0),
                      title=chart_title(title), xaxis=dict(type="category", tickangle=-45 if len(x) > 6 else 0,
                                                      automargin=True),
                      yaxis=dict(title=y_title))
    return fig


def consumer_chart(r: StoreReport) -> go.Figure | None:
    if r.consumers is None or not r.consumers.rows:
        return None
    rows = r.consumers.rows
    return _grouped_bars([f"{w.group} · {w.topic}/{w.queue_id}" for w in rows], rows, (
        ("never see (cut before consumed)", "never_see", "#d62728"),
        ("consumed, then cut (offsets reused)", "consumed_then_cut", "#f58518"),
        ("backlog after restart (may repeat)", "backlog", "#4c78a8")), 400,
        "Consumer groups: committed offset against the queue before and after a restart", "messages")


def index_charts(r: StoreReport) -> go.Figure | None:
    """Index files on the store-time axis (kept or dropped by a restart), then fill level and hash-slot load."""
    rows = [i for i in r.index_files if i.begin_timestamp is not None and i.end_timestamp is not None]
    if not rows:
        return None
    fig = make_subplots(rows=1, cols=2, column_widths=[0.65, 0.35], horizontal_spacing=0.12,
                        subplot_titles=("index files over store time", "fill (indexCount / maxIndexNum) and "
                                        "hash-slot load"), figure=_figure())
    fig.add_trace(go.Bar(
        name="index file (red: deleted by a restart)", orientation="h", y=[i.name for i in rows],
        base=[iso(i.begin_timestamp) for i in rows], x=[max(i.end_timestamp - i.begin_timestamp, 1) for i in rows],
        marker_color=["#d62728" if i.dropped_on_restart else "#4c78a8" for i in rows],
        customdata=[[iso(i.begin_timestamp), iso(i.end_timestamp), i.begin_phy_offset, i.end_phy_offset,
                     i.index_count, i.max_items,
                     "deleted by a restart" if i.dropped_on_restart else "kept by a restart"]
                    for i in rows],
        hovertemplate="%{y}: %{customdata[6]}<br>%{customdata[0]} .. %{customdata[1]}<br>physical offsets "
                      "[%{customdata[2]}, %{customdata[3]}]<br>indexCount %{customdata[4]} of "
                      "%{customdata[5]}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(name="fill", orientation="h", y=[i.name for i in rows],
                         x=[round(100 * (i.fill or 0), 2) for i in rows], marker_color="#72b7b2",
                         hovertemplate="%{y}<br>fill %{x}%<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Bar(name="hash slots used", orientation="h", y=[i.name for i in rows],
                         x=[round(100 * (i.slot_load or 0), 2) for i in rows], marker_color="#b279a2",
                         hovertemplate="%{y}<br>hash slots used %{x}%<extra></extra>"), row=1, col=2)
    height, top, bottom = 230 + 34 * len(rows), 70, 110
    fig.update_layout(**LAYOUT, height=height, barmode="group", title=chart_title("Index files"))
    # the legend below the charts, past the axis ticks and titles (~60 px): above them it lay over the subplot titles
    fig.update_layout(legend=dict(BOTTOM_LEGEND, y=-60 / (height - top - bottom)),
                      margin=dict(l=10, r=10, t=top, b=bottom))
    fig.update_xaxes(type="date", row=1, col=1)
    fig.update_xaxes(range=[0, 105], title="%", row=1, col=2)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def replica_map(d: dict) -> go.Figure:
    """The replicas of one group (analyses.peers.PeersReport.to_dict()) on one physical-offset axis."""
    fig = go.Figure()
    labels = [r["label"] for r in d["replicas"]]
    for name, colour in REPLICA_PARTS:
        base, length, text = replica_spans(d, name)
        fig.add_trace(go.Bar(name=name, orientation="h", y=labels, x=length, base=base, marker_color=colour,
                             hovertext=text, hoverinfo="text+name"))
    xs, ys, tx = [], [], []
    for t in d["truncations"]:
        if t["point"] is not None and t["kind"] in ("truncate", "not_aligned"):
            xs.append(t["point"])
            ys.append(t["replica"])
            tx.append(f"{t['kind']} at {t['point']}")
    if xs:
        fig.add_trace(go.Scatter(name="truncation point", x=xs, y=ys, mode="markers", hovertext=tx,
                                 marker={"symbol": "triangle-down", "size": 14, "color": "#e45756"}))
    for p in d["pairs"]:
        fig.add_vline(x=p["common_prefix_end"], line_dash="dot", line_color="#54a24b")
    fig.update_layout(barmode="overlay", height=160 + 40 * len(labels),
                      title=chart_title("Replicas on one offset axis"), xaxis_title="physical offset",
                      margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return fig
