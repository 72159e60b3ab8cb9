"""The report's charts as plotly figure JSON, built as plain dicts and lists from a ``StoreReport``.

The page needs only the JSON plotly's graph objects serialise to, and building those objects was most of the page's
time (a validator on every property set, a deep copy of the template per figure). So each function here returns
that JSON itself: the same keys in the order plotly's objects leave them (``_trace``, ``_update``, ``_subplots``
say where that order comes from), the same numbers, the template by name; ``plotly_json.PageAssets.figure_json``
writes it as ``plotly.io.to_json`` does. tests/test_report_figures.py keeps plotly as the reference: every figure
here serialises byte for byte to what the graph-object construction (tests/support/plotly_reference_figures.py)
gives.

Offsets go on linear axes as exact integers (hover shows them in full), store times on date axes in UTC.
"""

from __future__ import annotations

import datetime as dt

from ..analyses.report_data import LAYOUT_KINDS, StoreReport

KIND_COLOURS = {
    "records": "#4c78a8", "blank_tail": "#b9c3cc", "zero_tail": "#e6e6e6", "gap": "#f2cf5b",
    "torn_tail": "#d62728", "crc_mismatch": "#ff7f0e", "property_crc": "#ff9d4d", "zero_page": "#9467bd",
    "stale_data": "#8c564b", "half": "#e377c2", "illegal": "#7f7f7f", "missing_file": "#f2cf5b",
    "store_time_outlier": "#bcbd22",
}
DAMAGE_FALLBACK = "#c0392b"
TEMPLATE = "plotly_white"
DEFAULT_TEMPLATE = "plotly"  # plotly's default (plotly.io.templates.default): the replica map was made without one
LAYOUT = dict(margin=dict(l=10, r=10, t=90, b=40), font=dict(size=12),
              legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))


def _figure(template: str = TEMPLATE) -> dict:
    """An empty figure, its template first in the layout (where plotly puts the one a figure is made with). The
    template goes by name, as plotly takes it; ``plotly_json.PageAssets.figure_json`` writes its JSON."""
    return {"data": [], "layout": {"template": template}}


def _constructed(props: dict) -> dict:
    """``props`` as the plotly object made from them holds them: its constructor sets the properties in alphabetical
    order, an object nested in them likewise, and leaves out those given as None. Lists are data, kept as given."""
    return {k: _constructed(v) if isinstance(v, dict) else v for k, v in sorted(props.items()) if v is not None}


def _trace(kind: str, **props) -> dict:
    """A trace as plotly's trace class (go.Bar, go.Scatter) leaves it: the properties in constructor order, then
    the type."""
    trace = _constructed(props)
    trace["type"] = kind
    return trace


def _add_trace(fig: dict, trace: dict, cell: int | None = None) -> None:
    """``fig.add_trace``; in a subplot grid the trace then names its cell's axes (cell 1 is x/y, cell 2 x2/y2)."""
    if cell is not None:
        suffix = "" if cell == 1 else str(cell)
        trace["xaxis"], trace["yaxis"] = "x" + suffix, "y" + suffix
    fig["data"].append(trace)


def _update(target: dict, patch: dict) -> None:
    """plotly's ``update_layout`` (or an axis's ``update``) of ``target`` with ``patch``, in the key order plotly's
    batch update leaves: walking the patch it makes each object that gets a value at once (in the patch's order),
    but sets the values themselves only when the batch ends, so a key new to its object lands after every object
    the walk made. A title given as text is the object {"text": ...}, set at the end like a value."""
    edits: list[tuple[tuple[str, ...], object]] = []
    _walk(target, patch, (), edits)
    for path, value in edits:
        inner = target
        for key in path[:-1]:
            inner = inner.setdefault(key, {})
        inner[path[-1]] = value


def _walk(target: dict, patch: dict, path: tuple[str, ...], edits: list) -> None:
    for key, value in patch.items():
        if isinstance(value, dict):
            _walk(target, value, path + (key,), edits)
        elif key == "title" and isinstance(value, str):
            edits.append((path + (key,), {"text": value}))
        elif value is not None:
            inner = target
            for k in path:
                inner = inner.setdefault(k, {})
            edits.append((path + (key,), value))


def _add_annotation(fig: dict, **props) -> None:
    fig["layout"].setdefault("annotations", []).append(_constructed(props))


def _add_vline(fig: dict, x, line: dict, cells: int = 1) -> None:
    """``fig.add_vline``: a line over the whole height of each of the first ``cells`` subplots (each has traces;
    a plot without a grid is one cell), at ``x`` on its x axis."""
    shapes = fig["layout"].setdefault("shapes", [])
    for cell in range(1, cells + 1):
        suffix = "" if cell == 1 else str(cell)
        shapes.append(_constructed(dict(type="line", x0=x, x1=x, y0=0, y1=1, line=line, xref="x" + suffix,
                                        yref=f"y{suffix} domain")))


def _subplots(fig: dict, titles: tuple[str, ...], rows: int = 1, cols: int = 1, vertical_spacing: float | None = None,
              horizontal_spacing: float | None = None, column_widths: list[float] | None = None,
              shared_xaxes: bool = False) -> None:
    """``make_subplots(..., figure=fig)`` for a grid of x/y cells from the top left: each cell's axes with their
    domains, computed as plotly computes them (the same float operations, so the same digits), and each cell's
    title above it."""
    hs = 0.2 / cols if horizontal_spacing is None else horizontal_spacing
    vs = 0.3 / rows if vertical_spacing is None else vertical_spacing
    if column_widths is None:
        widths = [(1.0 - hs * (cols - 1)) / cols] * cols
    else:
        widths = [(1.0 - hs * (cols - 1)) * (w / float(sum(column_widths))) for w in column_widths]
    heights = [(1.0 - vs * (rows - 1)) / rows] * rows
    patch: dict = {}
    notes = []
    for r in range(rows):
        # plotly lays the grid out from the bottom row up and numbers the cells from the top: row r starts where
        # the rows below it end
        y0 = sum(heights[:rows - 1 - r]) + (rows - 1 - r) * vs
        for c in range(cols):
            n = r * cols + c + 1
            x0 = sum(widths[:c]) + c * hs
            # clamped to [0, 1] as plotly does against rounding
            x = [max(0.0, x0), min(1.0, x0 + widths[c])]
            y = [max(0.0, y0), min(1.0, y0 + heights[-1 - r])]
            suffix = "" if n == 1 else str(n)
            patch["xaxis" + suffix] = {"anchor": "y" + suffix, "domain": x}
            patch["yaxis" + suffix] = {"anchor": "x" + suffix, "domain": y}
            if titles[n - 1]:
                notes.append(_constructed(dict(y=y[1], xref="paper", x=sum(x) / 2.0, yref="paper", text=titles[n - 1],
                                               showarrow=False, font=dict(size=16), xanchor="center",
                                               yanchor="bottom")))
    if shared_xaxes:
        # each column's axes follow its bottom cell's, and only that one keeps its tick labels
        for c in range(cols):
            bottom = "" if (rows - 1) * cols + c == 0 else str((rows - 1) * cols + c + 1)
            for r in range(rows - 2, -1, -1):
                n = r * cols + c + 1
                axis = patch["xaxis" + ("" if n == 1 else str(n))]
                axis["matches"], axis["showticklabels"] = "x" + bottom, False
    patch["annotations"] = notes
    _update(fig["layout"], patch)


def chart_title(text: str) -> dict:
    return dict(text=text, x=0.01, xanchor="left", y=0.995, yanchor="top")


def iso(ms: int | None) -> str | None:
    """UTC time as plotly's date axis reads it (millisecond precision)."""
    if ms is None:
        return None
    try:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return None


LABEL_CHARS = 28  # a tick or legend label longer than this is shortened; hover and the tables give the full name


def short_label(name: str, limit: int = LABEL_CHARS) -> str:
    """``name`` cut in the middle to ``limit`` characters, keeping its end (a queue's "/id", a file's tail): a
    200-character topic is no 600 px diagonal tick label. Hover text and the tables carry the full name."""
    if len(name) <= limit:
        return name
    tail = name[name.rfind("/"):] if "/" in name[-12:] else name[-6:]
    return name[:limit - len(tail) - 1] + "…" + tail


def short_labels(names: list[str], limit: int = LABEL_CHARS) -> list[str]:
    """``short_label`` of each name, made unique again where two long names share their ends (plotly merges equal
    categories)."""
    out, seen = [], {}
    for n in names:
        s = short_label(n, limit)
        if s in seen and seen[s] != n:
            k = 2
            while f"{s} ({k})" in seen:
                k += 1
            s = f"{s} ({k})"
        seen.setdefault(s, n)
        out.append(s)
    return out


def _marks_band(fig: dict, marks: list[tuple[str, object, str]], above: int) -> int:
    """The labelled lines' captions, one per row in a band above the plot (never over a subplot title, a legend
    or each other): ``marks`` are (text, x, anchor). Returns the band's height in px."""
    for i, (text, x, anchor) in enumerate(marks):
        _add_annotation(fig, x=x, yref="paper", y=1.0, yanchor="bottom", yshift=above + 16 * i, text=text,
                        showarrow=False, xanchor=anchor, bgcolor="rgba(255,255,255,0.85)", font=dict(size=11))
    return 16 * len(marks)


BOTTOM_LEGEND = dict(orientation="h", yanchor="top", y=-0.12, x=0)


def file_label(name: str | None, start: int) -> str:
    return name if name else f"gap at {start}"


def map_segments(r: StoreReport) -> tuple[dict[str, list], list[str], int, int]:
    """What the commit-log map draws: the segments by kind (kinds in order of first appearance), the y categories
    (the files and the gaps, in offset order) and the x span (lo, hi) of the files and segments."""
    by_kind: dict[str, list] = {}
    for s in r.segments:
        by_kind.setdefault(s.kind, []).append(s)
    files = [f.name for f in r.summary.files]
    gaps = [file_label(None, s.start) for s in r.segments if s.kind == "gap"]
    categories = sorted(files + gaps, key=lambda c: int(c.split()[-1]) if c.startswith("gap") else int(c))
    lo = min([f.start_offset for f in r.summary.files] + [s.start for s in r.segments], default=0)
    hi = max([f.start_offset + f.size for f in r.summary.files] + [s.end for s in r.segments], default=1)
    return by_kind, categories, lo, hi


def segment_points(kind: str, segs: list) -> tuple[list[str], list[list]]:
    """The map's y category and hover data (start, end, length, file, detail) of each segment of one kind."""
    return ([file_label(s.file if kind != "gap" else None, s.start) for s in segs],
            [[s.start, s.end, s.end - s.start, s.file or "", s.detail] for s in segs])


def commitlog_map(r: StoreReport) -> dict:
    """Every commit-log file as a bar on one physical-offset axis: records, blank and zero tails, missing files,
    damage by kind (bars, and a marker at each range so that a 1-byte range stays visible), with the recovery's
    truncation point and the other positions as labelled lines."""
    fig = _figure()
    by_kind, categories, lo, hi = map_segments(r)
    for kind, segs in by_kind.items():
        damage = kind not in LAYOUT_KINDS
        colour = KIND_COLOURS.get(kind, DAMAGE_FALLBACK)
        y, custom = segment_points(kind, segs)
        _add_trace(fig, _trace(
            "bar", name=kind, orientation="h", y=y, x=[max(s.end - s.start, 1) for s in segs],
            base=[s.start for s in segs],
            marker=dict(color=colour, line=dict(width=1 if damage else 0, color="#000")), customdata=custom,
            hovertemplate="%{customdata[3]}<br>" + kind + " [%{customdata[0]}, %{customdata[1]}) "
                          "%{customdata[2]} bytes<br>%{customdata[4]}<extra></extra>",
            legendgroup=kind, width=0.6 if damage else 0.8))
        if damage:
            _add_trace(fig, _trace(
                "scatter", name=kind, mode="markers", y=y, x=[s.start for s in segs], customdata=custom,
                showlegend=False, legendgroup=kind,
                marker=dict(symbol="triangle-down", size=12, color=colour, line=dict(width=1, color="#000")),
                hovertemplate="%{customdata[3]}<br>" + kind + " [%{customdata[0]}, %{customdata[1]})<br>"
                              "%{customdata[4]}<extra></extra>"))
    marks = merged_marks(map_positions(r))
    for label, off in marks:
        truncation = "truncation" in label
        fig["layout"].setdefault("shapes", []).append(_constructed(dict(
            type="line", x0=off, x1=off, yref="paper", y0=0, y1=1,
            line=dict(color="#d62728" if truncation else "#555", width=2, dash="solid" if truncation else "dot"))))
    band = _marks_band(fig, [(f"{label}: {off}", off, "right" if off > (lo + hi) / 2 else "left")
                             for label, off in marks], 4)
    _update(fig["layout"], dict(
        **LAYOUT, barmode="overlay", height=200 + 30 * max(len(categories), 1) + band,
        title=chart_title("Commit log: files on the physical-offset axis"),
        yaxis=dict(categoryorder="array", categoryarray=categories, autorange="reversed", type="category"),
        xaxis=dict(title="physical offset", tickformat="d", exponentformat="none", separatethousands=False),
        hovermode="closest"))
    _update(fig["layout"], dict(margin=dict(l=10, r=10, t=60 + band, b=40), legend=dict(BOTTOM_LEGEND, y=-0.25)))
    return fig


def merged_marks(marks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """One line per position: labels at the same offset or time are joined."""
    out: dict[int, list[str]] = {}
    for label, at in marks:
        out.setdefault(at, []).append(label)
    return [(", ".join(labels), at) for at, labels in sorted(out.items())]


def map_positions(r: StoreReport) -> list[tuple[str, int]]:
    p = r.plan
    # the line says "truncation" (red) only where the restart cuts data; else it marks where the kept data ends
    out = [("truncation point (restart)" if p.bytes_cut else "restart keeps up to", p.truncate_offset),
           ("end of valid records", r.summary.max_physical_offset),
           ("maxPhyOffsetOfConsumeQueue", p.max_phy_offset_of_consume_queue)]
    if p.reput_from_offset is not None and p.reput_from_offset != p.truncate_offset:
        out.append(("reput from", p.reput_from_offset))
    cp = r.summary.checkpoint or {}
    for key in ("master_flushed_offset", "confirm_phy_offset"):
        if cp.get(key):
            out.append((f"checkpoint {key}", cp[key]))
    return [(label, off) for label, off in out if off is not None and off >= 0]


def traffic_axis(t) -> tuple[int, list, list[str]]:
    """The traffic chart's buckets: how many, the x of each step (each bucket's rate holds from its start to its
    end, so one x more than buckets) and the topics' legend names."""
    n = len(next(iter(t.messages.values())))
    return n, [iso(t.start_ms + i * t.bucket_ms) for i in range(n + 1)], short_labels(list(t.topics))


def traffic_steps(t, series: list) -> tuple[list, list]:
    """One topic's per-second rates and bucket counts at the steps' x (the last value repeated at the last
    bucket's end)."""
    counts = series + series[-1:]
    per_s = 1000 / t.bucket_ms
    return [round(v * per_s, 3) for v in counts], counts


def traffic(r: StoreReport) -> dict:
    """Messages and bytes per second per topic over store time (stacked; one bucket per point), with the last
    message, the checkpoint's timestamps and the index's last update as lines."""
    t = r.traffic
    fig = _figure()
    _subplots(fig, ("messages per second", "bytes per second"), rows=2, vertical_spacing=0.08, shared_xaxes=True)
    if t.start_ms is None:
        _update(fig["layout"], dict(**LAYOUT, height=200,
                                    title=chart_title("Traffic over store time: no valid records")))
        return fig
    n, x, names = traffic_axis(t)
    for i, topic in enumerate(t.topics):
        colour = palette(i)
        for row, series in ((1, t.messages[topic]), (2, t.bytes[topic])):
            rates, counts = traffic_steps(t, series)
            _add_trace(fig, _trace(
                "scatter", x=x, y=rates, name=names[i],
                legendgroup=topic, showlegend=row == 1, mode="lines", stackgroup=f"s{row}",
                line=dict(width=0.5, color=colour, shape="hv"), customdata=counts,
                hovertemplate=topic + "<br>%{x}<br>%{y} per s (%{customdata} in the bucket)<extra></extra>"),
                cell=row)
    mid = t.start_ms + n * t.bucket_ms / 2
    marks = []
    for label, ms in merged_marks(time_marks(r)):
        x_iso = iso(ms)
        if x_iso is None:
            continue
        _add_vline(fig, x_iso, dict(color="#d62728" if "last message" in label else "#555", dash="dot", width=1.5),
                   cells=2)
        marks.append((f"{label}: {x_iso}", x_iso, "right" if ms > mid else "left"))
    band = _marks_band(fig, marks, 22)  # above the first subplot's title
    _update(fig["layout"], dict(**LAYOUT, height=540 + band, hovermode="x unified",
                                title=chart_title(f"Traffic over store time (UTC, {t.bucket_ms // 1000} s buckets)")))
    _update(fig["layout"], dict(legend=dict(orientation="h", yanchor="top", y=-0.08, x=0),
                                margin=dict(l=10, r=10, t=70 + band, b=40)))
    for axis in ("xaxis", "xaxis2"):
        _update(fig["layout"][axis], dict(type="date", range=[x[0], x[-1]]))
    return fig


def time_marks(r: StoreReport) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    if r.summary.last_store_timestamp is not None and r.traffic.start_ms is not None:
        out.append(("last message", r.summary.last_store_timestamp))
    cp = r.summary.checkpoint or {}
    for key, label in (("physic_msg_timestamp", "checkpoint physicMsgTimestamp"),
                       ("logics_msg_timestamp", "checkpoint logicsMsgTimestamp"),
                       ("index_msg_timestamp", "checkpoint indexMsgTimestamp")):
        if cp.get(key):
            out.append((label, cp[key]))
    ends = [i.end_timestamp for i in r.index_files if i.end_timestamp]
    if ends:
        out.append(("index last update", max(ends)))
    # only marks on the chart's span (a zero or far-off checkpoint time would squash the traffic to a line)
    t = r.traffic
    if t.start_ms is None:
        return out
    n = len(next(iter(t.messages.values())))
    lo, hi = t.start_ms - 10 * t.bucket_ms, t.start_ms + (n + 10) * t.bucket_ms
    return [(label, ms) for label, ms in out if lo <= ms <= hi]


def off_axis_marks(r: StoreReport) -> list[tuple[str, int]]:
    """The time marks the traffic chart leaves off because they lie far from every record's store time."""
    shown = set(time_marks(r))
    cp = r.summary.checkpoint or {}
    every = [(label, cp[key]) for key, label in (("physic_msg_timestamp", "checkpoint physicMsgTimestamp"),
                                                 ("logics_msg_timestamp", "checkpoint logicsMsgTimestamp"),
                                                 ("index_msg_timestamp", "checkpoint indexMsgTimestamp"))
             if cp.get(key)]
    return [m for m in every if m not in shown]


def palette(i: int) -> str:
    colours = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
               "#bab0ac")
    return colours[i % len(colours)]


MAX_QUEUE_BARS = 80


# the queue chart's bars: (legend name, QueueRow attribute, colour)
QUEUE_SERIES = (
    ("cq entries", "entries", "#4c78a8"),
    ("commit-log messages", "commitlog_messages", "#9ecae9"),
    ("cq behind (no entry)", "cq_behind", "#f58518"),
    ("bad entries (verify)", "cq_bad_entries", "#e45756"),
    ("cut by restart", "entries_cut", "#d62728"),
    ("re-dispatched by restart", "redispatched", "#54a24b"))


def queues_shown(r: StoreReport) -> list:
    """The queues the chart draws, by (topic, queue id): every one with anything to see, then the busiest quiet
    ones up to MAX_QUEUE_BARS."""
    rows = r.queues
    noisy = [q for q in rows if q.entries_cut or q.redispatched or q.cq_behind or q.cq_bad_entries
             or (q.cq_type is not None and q.entries != q.commitlog_messages)]
    quiet = sorted((q for q in rows if q not in noisy), key=lambda q: -q.commitlog_messages)
    shown = noisy + quiet[:max(0, MAX_QUEUE_BARS - len(noisy))]
    shown.sort(key=lambda q: (q.topic, q.queue_id))
    return shown


def queue_chart(r: StoreReport) -> tuple[dict, int]:
    """Per queue: entries against the commit log's records, and what verify and the recovery find. Queues with
    anything to see are always drawn; quiet ones fill up to MAX_QUEUE_BARS (all are in the table)."""
    shown = queues_shown(r)
    fig = _grouped_bars([q.key for q in shown], shown, QUEUE_SERIES, 420, "Consume queues", "entries")
    return fig, len(r.queues) - len(shown)


def _grouped_bars(x: list[str], rows: list, series, height: int, title: str, y_title: str) -> dict:
    """One bar per (name, attribute, colour) of ``series`` for each row, grouped by the category labels ``x``."""
    fig = _figure()
    labels = short_labels(x)
    for name, attr, colour in series:
        _add_trace(fig, _trace("bar", name=name, x=labels, y=[getattr(row, attr) for row in rows],
                               marker=dict(color=colour), customdata=x,
                               hovertemplate="%{customdata}<br>" + name + ": %{y}<extra></extra>"))
    # long names are shortened in the middle (LABEL_CHARS; hover and the table give them whole), so the labels
    # take at most ~LABEL_CHARS * 5 px tilted
    _update(fig["layout"], dict(**LAYOUT, barmode="group", height=height + 5 * max(map(len, labels), default=0),
                                title=chart_title(title),
                                xaxis=dict(type="category", tickangle=-45 if len(x) > 6 else 0, automargin=True),
                                yaxis=dict(title=y_title)))
    return fig


def consumer_chart(r: StoreReport) -> dict | None:
    if r.consumers is None or not r.consumers.rows:
        return None
    rows = r.consumers.rows
    return _grouped_bars([f"{w.group} · {w.topic}/{w.queue_id}" for w in rows], rows, (
        ("never see (cut before consumed)", "never_see", "#d62728"),
        ("consumed, then cut (offsets reused)", "consumed_then_cut", "#f58518"),
        ("backlog after restart (may repeat)", "backlog", "#4c78a8")), 400,
        "Consumer groups: committed offset against the queue before and after a restart", "messages")


def index_charts(r: StoreReport) -> dict | None:
    """Index files on the store-time axis (kept or dropped by a restart), then fill level and hash-slot load."""
    rows = [i for i in r.index_files if i.begin_timestamp is not None and i.end_timestamp is not None]
    if not rows:
        return None
    fig = _figure()
    _subplots(fig, ("index files over store time", "fill (indexCount / maxIndexNum) and hash-slot load"), cols=2,
              column_widths=[0.65, 0.35], horizontal_spacing=0.12)
    _add_trace(fig, _trace(
        "bar", name="index file (red: deleted by a restart)", orientation="h", y=[i.name for i in rows],
        base=[iso(i.begin_timestamp) for i in rows], x=[max(i.end_timestamp - i.begin_timestamp, 1) for i in rows],
        marker=dict(color=["#d62728" if i.dropped_on_restart else "#4c78a8" for i in rows]),
        customdata=[[iso(i.begin_timestamp), iso(i.end_timestamp), i.begin_phy_offset, i.end_phy_offset,
                     i.index_count, i.max_items,
                     "deleted by a restart" if i.dropped_on_restart else "kept by a restart"]
                    for i in rows],
        hovertemplate="%{y}: %{customdata[6]}<br>%{customdata[0]} .. %{customdata[1]}<br>physical offsets "
                      "[%{customdata[2]}, %{customdata[3]}]<br>indexCount %{customdata[4]} of "
                      "%{customdata[5]}<extra></extra>"), cell=1)
    _add_trace(fig, _trace("bar", name="fill", orientation="h", y=[i.name for i in rows],
                           x=[round(100 * (i.fill or 0), 2) for i in rows], marker=dict(color="#72b7b2"),
                           hovertemplate="%{y}<br>fill %{x}%<extra></extra>"), cell=2)
    _add_trace(fig, _trace("bar", name="hash slots used", orientation="h", y=[i.name for i in rows],
                           x=[round(100 * (i.slot_load or 0), 2) for i in rows], marker=dict(color="#b279a2"),
                           hovertemplate="%{y}<br>hash slots used %{x}%<extra></extra>"), cell=2)
    height, top, bottom = 230 + 34 * len(rows), 70, 110
    layout = fig["layout"]
    _update(layout, dict(**LAYOUT, height=height, barmode="group", title=chart_title("Index files")))
    # the legend below the charts, past the axis ticks and titles (~60 px): above them it lay over the subplot titles
    _update(layout, dict(legend=dict(BOTTOM_LEGEND, y=-60 / (height - top - bottom)),
                         margin=dict(l=10, r=10, t=top, b=bottom)))
    _update(layout["xaxis"], dict(type="date"))
    _update(layout["xaxis2"], dict(range=[0, 105], title="%"))
    for axis in ("yaxis", "yaxis2"):
        _update(layout[axis], dict(type="category", autorange="reversed"))
    return fig


REPLICA_PARTS = (("confirmed", "#4c78a8"), ("unconfirmed tail", "#f58518"), ("records past the end", "#bab0ac"))


def replica_spans(d: dict, part: str) -> tuple[list[int], list[int], list[str]]:
    """Each replica's span of one of REPLICA_PARTS on the offset axis: (starts, lengths, hover texts)."""
    base, length, text = [], [], []
    for r in d["replicas"]:
        if part == "confirmed":
            lo, hi = r["min_offset"], r["confirm_offset"]
        elif part == "unconfirmed tail":
            lo, hi = r["confirm_offset"], r["max_offset"]
        else:
            lo, hi = r["stale_records"]["range"] or [r["max_offset"], r["max_offset"]]
        base.append(lo)
        length.append(max(hi - lo, 0))
        text.append(f"[{lo}, {hi})")
    return base, length, text


def replica_map(d: dict) -> dict:
    """The replicas of one group (analyses.peers.PeersReport.to_dict()) on one physical-offset axis."""
    fig = _figure(DEFAULT_TEMPLATE)
    labels = [r["label"] for r in d["replicas"]]
    for name, colour in REPLICA_PARTS:
        base, length, text = replica_spans(d, name)
        _add_trace(fig, _trace("bar", name=name, orientation="h", y=labels, x=length, base=base,
                               marker=dict(color=colour), hovertext=text, hoverinfo="text+name"))
    xs, ys, tx = [], [], []
    for t in d["truncations"]:
        if t["point"] is not None and t["kind"] in ("truncate", "not_aligned"):
            xs.append(t["point"])
            ys.append(t["replica"])
            tx.append(f"{t['kind']} at {t['point']}")
    if xs:
        _add_trace(fig, _trace("scatter", name="truncation point", x=xs, y=ys, mode="markers", hovertext=tx,
                               marker={"symbol": "triangle-down", "size": 14, "color": "#e45756"}))
    for p in d["pairs"]:
        _add_vline(fig, p["common_prefix_end"], dict(dash="dot", color="#54a24b"))
    _update(fig["layout"], dict(barmode="overlay", height=160 + 40 * len(labels),
                                title=chart_title("Replicas on one offset axis"), xaxis=dict(title="physical offset"),
                                margin={"l": 10, "r": 10, "t": 40, "b": 40}))
    return fig
