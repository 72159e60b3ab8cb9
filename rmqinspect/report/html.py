"""The report page: one HTML file, everything inside it, nothing fetched.

plotly's own minified bundle (plotly.offline.get_plotlyjs, 4.8 MB in plotly 7.x) would fill most of the 5 MB
budget by itself, so it is embedded gzip-compressed (about 1.5 MB, 2 MB as base64) and unpacked by the browser
(DecompressionStream) when the page opens: the same library, no request. Every number of the charts is also in
plain HTML tables (readable without JavaScript) and in one JSON data island (``<script type="application/json"
id="rmqinspect-data">``) for tools and tests.
"""

from __future__ import annotations

import datetime as dt
import html
import json

from ..analyses.report_data import LAYOUT_KINDS, ReportData, StoreReport
from .figures import (
    LABEL_CHARS,
    commitlog_map,
    consumer_chart,
    index_charts,
    off_axis_marks,
    queue_chart,
    replica_map,
    short_label,
    traffic,
)
from .plotly_json import PageAssets

MAX_FINDING_ROWS = 500  # findings listed as HTML rows; all of them are in the data island and on the charts


def script_json(obj) -> str:
    """JSON safe inside <script>: no "</" can close the element early."""
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, allow_nan=False,
                                                       separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def _e(v) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _iso(ms: int | None) -> str:
    if ms is None:
        return ""
    try:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _kv(rows: list[tuple[str, object]]) -> str:
    return "<table class='kv'>" + "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _table(columns: list[str], rows: list[list], ids: list[str] | None = None, cls: str = "sortable",
           table_id: str = "") -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for i, r in enumerate(rows):
        rid = f" id='{_e(ids[i])}'" if ids else ""
        body.append(f"<tr{rid}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    tid = f" id='{_e(table_id)}'" if table_id else ""
    return (f"<div class='scroll'><table class='{cls}'{tid}><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


class _Page:
    def __init__(self, assets: PageAssets) -> None:
        self.assets = assets
        self.figures: list[tuple[str, str]] = []  # (element id, figure JSON)

    def chart(self, fid: str, fig: dict) -> str:
        self.figures.append((fid, self.assets.figure_json(fig)))
        return f"<div class='rmq-chart' id='{_e(fid)}' data-fig='{_e(fid)}-fig'></div>"


def render(data: ReportData, assets: PageAssets) -> str:
    page = _Page(assets)
    sections = [_store_sections(page, i, r) for i, r in enumerate(data.stores)]
    if data.replicas is not None:
        sections.insert(0, _replica_section(page, data.replicas))
    island = {"replicas": data.replicas, "rmqinspect_version": data.rmqinspect_version,
              "plotly_version": assets.plotly_version,
              "command_line": data.command_line, "generated_at_ms": data.generated_at_ms,
              "generated_at": _iso(data.generated_at_ms), "stores": [store_data(r) for r in data.stores]}
    nav = "".join(f"<li><a href='#s{i}'>{_e(r.root)}</a></li>" for i, r in enumerate(data.stores))
    if data.replicas is not None:
        nav = "<li><a href='#replicas'>Replicas</a></li>" + nav
    when = ("as of " if data.as_of_given else "made ") + _iso(data.generated_at_ms)
    figs = "".join(f"<script type='application/json' id='{_e(fid)}-fig'>{script_json(js)}</script>"
                   for fid, js in page.figures)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>rmqinspect report: {_e(', '.join(r.root for r in data.stores))}</title>"
            f"<style>{CSS}</style></head><body>"
            f"<header><h1>RocketMQ store post-mortem</h1><p class='meta'>rmqinspect {_e(data.rmqinspect_version)}"
            f" · plotly {_e(assets.plotly_version)} · {_e(when)}<br><code>{_e(data.command_line)}</code></p>"
            f"<p id='chart-status' class='status'>Drawing the charts…</p><ul class='nav'>{nav}</ul></header>"
            f"<main>{''.join(sections)}</main>"
            f"<script type='application/json' id='rmqinspect-data'>{script_json(island)}</script>{figs}"
            f"<script type='application/octet-stream' id='plotly-js-gzip'>{assets.plotly_js_gzip_base64}</script>"
            f"<script>{JS}</script></body></html>\n")


def store_data(r: StoreReport) -> dict:
    """The data island of one store: every number the page shows, in machine form."""
    p = r.plan
    return {
        "root": r.root, "geometry": r.geometry, "mode": p.mode, "broker_version": p.version.to_dict(),
        "detection": r.summary.detection, "abort_present": r.summary.abort_present,
        "first_store_timestamp": r.summary.first_store_timestamp,
        "last_store_timestamp": r.summary.last_store_timestamp,
        "min_physical_offset": r.summary.min_physical_offset, "max_physical_offset": r.summary.max_physical_offset,
        "messages": r.summary.messages, "message_bytes": r.summary.message_bytes, "checkpoint": r.summary.checkpoint,
        "truncate_offset": p.truncate_offset, "headline": p.headline(), "headline_text": p.headline_text(),
        "max_offset_after_load": p.max_offset_after_load, "max_offset_after_start": p.max_offset_after_start,
        "stop": {"kind": p.stop_kind, "reason": p.stop_reason, "file": p.stop_file, "position": p.stop_position},
        "max_phy_offset_of_consume_queue": p.max_phy_offset_of_consume_queue,
        "reput_from_offset": p.reput_from_offset,
        "commitlog_files_deleted": p.commitlog_files_deleted, "commitlog_file_truncated": p.commitlog_file_truncated,
        "index_files_dropped": p.index_files_dropped, "messages_lost": p.messages_lost,
        "verify": r.verify.to_dict(),
        # the map: damaged ranges apart from the rest (records, tails, gaps), each range once
        "segments": [s.to_dict() for s in r.segments if s.kind in LAYOUT_KINDS],
        "damage": [s.to_dict() for s in r.damage],
        "findings": [f.to_dict() for f in r.findings], "queues": [q.to_dict() for q in r.queues],
        "consumers": r.consumers.to_dict() if r.consumers else None,
        "index_files": [i.to_dict() for i in r.index_files], "traffic": r.traffic.to_dict(), "notes": r.notes,
        "transactions": r.transactions.to_dict() if r.transactions else None,
    }


def _replica_section(page: _Page, d: dict) -> str:
    """The copies of one broker group on one offset axis: ends, confirm offsets, epochs, loss windows, truncation
    points (analyses.peers, the `rmqinspect peers` answer)."""
    out = ["<section id='replicas'><h2>Replicas of one broker group</h2>"]
    out.append(_kv([("HA mode", _e(d["mode"])),
                    ("newest confirmed data",
                     _e(f"{d['newest_confirmed']['replica']}: {d['newest_confirmed']['why']}")),
                    ("rejoin master", _e(f"{d['rejoin_master']['replica']}: {d['rejoin_master']['why']}"))]
                   + [("note", _e(n)) for n in d["notes"]]))
    out.append("<p class='hint'>Each copy is a bar on one physical-offset axis: confirmed data, the unconfirmed "
               "tail, CRC-valid records past the end; ▼ marks a truncation point.</p>"
               + page.chart("replicas-map", replica_map(d)))
    out.append(_table(["replica", "mode", "role", "min offset", "end", "messages", "confirm", "epochs", "will start",
                       "records past the end"],
                      [[_e(r["label"]), _e(r["ha"]["mode"]), _e(r["ha"]["role"] or "?"), r["min_offset"],
                        r["max_offset"], r["messages"], r["confirm_offset"],
                        _e(" ".join(f"{e['epoch']}@{e['start_offset']}" for e in r["epochs"]["entries"]) or "-"),
                        "yes" if r["will_start"] else "<b>no</b>: " + _e(r["load_failure"]["sentence"]),
                        r["stale_records"]["count"]] for r in d["replicas"]]))
    out.append("<h3>Pairs</h3>" + _table(
        ["a", "b", "verdict", "common prefix end", "common messages", "consistent point", "only on a", "only on b",
         "what it means"],
        [[_e(p["a"]), _e(p["b"]), _e(p["verdict"]), p["common_prefix_end"], p["common_prefix_messages"],
          _e(p["consistent_point"]), p["only_on_a"]["messages"], p["only_on_b"]["messages"], _e(p["sentence"])]
         for p in d["pairs"]]))
    out.append("<h3>On rejoin</h3>" + _table(
        ["replica", "kind", "point", "cuts", "what happens"],
        [[_e(t["replica"]), _e(t["kind"]), _e(t["point"]), t["cut"]["messages"] if t["cut"] else 0, _e(t["sentence"])]
         for t in d["truncations"]]))
    rows = [[_e(w["holder"]), m["physical_offset"], _e(m["topic"]), m["queue_id"], m["queue_offset"], _e(m["keys"]),
             _e(m["uniq_key"]), "yes" if m["in_consume_queue"] else "no"]
            for p in d["pairs"] for w in (p["only_on_a"], p["only_on_b"]) for m in w["list"][:MAX_FINDING_ROWS]]
    if rows:
        out.append("<h3>Loss windows</h3>" + _table(["only on", "physical offset", "topic", "queue", "queue offset",
                                                      "keys", "UNIQ_KEY", "in its queues"], rows))
    if d["consumer_offsets_beyond_survivor"]:
        out.append("<h3>Consumer offsets past the survivor</h3><ul>" + "".join(
            f"<li>{_e(c['sentence'])}</li>" for c in d["consumer_offsets_beyond_survivor"]) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _store_sections(page: _Page, i: int, r: StoreReport) -> str:
    s = f"s{i}"
    out = [f"<section id='{s}'><h2>{_e(r.root)}</h2>"]
    out.append(f"<h3 id='{s}-header'>1. The store</h3>" + _header(r))
    out.append("<h3>2. Commit-log map</h3><p class='hint'>Each file is a bar on one physical-offset axis; damage "
               "is marked ▼ at its start. Hover for exact offsets; drag to zoom, double-click to reset.</p>"
               + page.chart(f"{s}-map", commitlog_map(r)) + _segments_table(r))
    off = off_axis_marks(r)
    extra = (f"<p class='hint'>Left off the time axis (far from every record's store time): "
             f"{_e('; '.join(f'{k} {_iso(v)}' for k, v in off))}</p>" if off else "")
    if r.traffic.excluded:
        extra += (f"<p class='hint'>{r.traffic.excluded} record(s) left off: their STORETIMESTAMP is a damaged "
                  "field (verify store_time_outlier).</p>")
    out.append("<h3>3. Traffic over store time</h3>" + page.chart(f"{s}-traffic", traffic(r)) + extra)
    qfig, hidden = queue_chart(r)
    note = (f"<p class='hint'>{hidden} quiet queue(s) (nothing cut, re-dispatched or flagged) are only in the "
            "table.</p>" if hidden else "")
    out.append("<h3>4. Consume queues</h3>" + page.chart(f"{s}-queues", qfig) + note + _queue_table(s, r))
    cfig = consumer_chart(r)
    if cfig is None:
        why = "; ".join(r.consumers.problems) if r.consumers else "no config/consumerOffset.json (give --offsets FILE)"
        out.append(f"<h3>5. Consumers</h3><p class='hint'>No consumer offsets: {_e(why)}</p>")
    else:
        out.append(f"<h3>5. Consumers</h3><p class='hint'>Offsets from {_e(r.consumers.source)}"
                   f"{' (.bak)' if r.consumers.used_backup else ''}.</p>" + page.chart(f"{s}-consumers", cfig)
                   + _consumer_table(r))
    ifig = index_charts(r)
    out.append(f"<h3 id='{s}-index-h'>6. Index health</h3>" + (page.chart(f"{s}-index", ifig) if ifig else
                                                               "<p class='hint'>No index files.</p>") + _index_table(r))
    out.append(f"<h3 id='{s}-findings'>7. Findings</h3>" + _findings(s, r))
    if r.transactions is not None:
        out.append(f"<h3 id='{s}-transactions'>8. Transactions</h3>" + _transactions(r.transactions))
    if r.notes:
        out.append("<h4>Notes</h4><ul>" + "".join(f"<li>{_e(n)}</li>" for n in r.notes) + "</ul>")
    out.append("</section>")
    return "".join(out)


def _header(r: StoreReport) -> str:
    sm, p, v = r.summary, r.plan, r.verify
    det = sm.detection or {}
    evidence = "; ".join(f"{e['signal']}: {e['detail']}" for e in det.get("evidence", []) if e.get("found"))
    if sm.abort_present:
        shutdown = ("<b class='bad'>not clean</b>: the abort file is present, a restart runs the abnormal "
                    "recovery")
    else:
        shutdown = "clean (no abort file): a restart runs the normal recovery"
    cp = sm.checkpoint
    rows = [
        ("store", f"<code>{_e(r.root)}</code>"),
        ("version detected", f"{_e(det.get('version'))} (guess {_e(det.get('version_guess'))}); evidence: "
                             f"{_e(evidence or 'none found')}"),
        ("recovery rules", _e(p.version.describe())),
        ("last shutdown", shutdown),
        ("commit-log geometry", f"mappedFileSizeCommitLog {r.geometry['mapped_file_size']} "
                                f"({_e(r.geometry['source'])}: {_e(r.geometry.get('detail', ''))}); "
                                f"{len(sm.files)} file(s), {len(sm.gaps)} gap(s)"),
        ("physical offsets", f"{sm.min_physical_offset} .. {sm.max_physical_offset} (end of the last valid record)"),
        ("store time span", f"{_e(_iso(sm.first_store_timestamp))} .. {_e(_iso(sm.last_store_timestamp))}"),
        ("messages", f"{sm.messages} in {len(sm.topics)} topic(s), {sm.message_bytes} bytes"),
        ("checkpoint", _e(", ".join(f"{k} {v}" + (f" ({_iso(v)})" if k.endswith("timestamp") and v else "")
                                    for k, v in cp.items() if k in ("physic_msg_timestamp", "logics_msg_timestamp",
                                                                    "index_msg_timestamp", "master_flushed_offset",
                                                                    "confirm_phy_offset"))) if cp else "absent"),
        ("verify", "clean" if v.ok else f"<b class='bad'>{len(v.problems)} problem range(s)</b>"
         + (f", {v.suppressed} more" if v.suppressed else "")),
        # the restart model's own headline (RecoveryPlan.headline_text), then where its scan stopped
        ("restart", f"<b>{_e(p.headline_text())}</b>; {_e(p.mode)} recovery from {_e(p.start_file)} "
                    f"({_e(p.stop_kind)}: {_e(p.stop_reason)}); index file(s) deleted: "
                    f"{_e(', '.join(p.index_files_dropped) or 'none')}"),
    ]
    return _kv(rows)


def _segments_table(r: StoreReport) -> str:
    rows = [[_e(s.kind), s.start, s.end, s.end - s.start, f"<code>{_e(s.file or '')}</code>", _e(s.detail)]
            for s in r.segments if s.kind != "records"]
    if not rows:
        return ""
    return ("<details><summary>Tails, gaps and damage as a table</summary>"
            + _table(["kind", "start", "end", "bytes", "file", "detail"], rows) + "</details>")


def _queue_table(s: str, r: StoreReport) -> str:
    # identifiers are never cut or wrapped: the numbers come first, the topic (up to 255 characters) last
    cols = ["queue", "type", "min offset", "max offset", "entries", "commit-log msgs", "cq behind", "bad entries",
            "after load", "after start", "cut by restart", "re-dispatched", "files deleted", "topic"]
    rows = [[q.queue_id, _e(q.cq_type or "none"), _e(q.min_offset), _e(q.max_offset), q.entries,
             q.commitlog_messages, q.cq_behind, q.cq_bad_entries, _e(q.max_offset_after_load),
             _e(q.max_offset_after_start), q.entries_cut, q.redispatched, _e(", ".join(q.files_deleted)),
             _name_cell(q.topic)] for q in r.queues]
    long = sorted({q.topic for q in r.queues if len(q.topic) > LABEL_CHARS})
    names = ("<details><summary>Full topic names (shortened in the table and the charts; hover shows them)</summary>"
             "<ul>" + "".join(f"<li><code class='name'>{_e(t)}</code></li>" for t in long) + "</ul></details>"
             if long else "")
    return _table(cols, rows, [f"{s}-q-{q.key}" for q in r.queues], table_id=f"{s}-queue-table") + names


def _short_tokens(text: str) -> str:
    """A sentence for the page with each word longer than LABEL_CHARS (a topic, a path) shortened in the middle and
    whole in its hover title: a reason naming a 200-character topic stays a few lines in its column."""
    return " ".join(_name_cell(w) if len(w) > LABEL_CHARS else _e(w) for w in text.split(" "))


def _name_cell(name: str) -> str:
    """A topic in a table: shortened in the middle past LABEL_CHARS (a 200-character topic on every one of 100
    rows is six lines per row), whole in the hover title and in the list under the table."""
    short = short_label(name)
    return f"<code title='{_e(name)}' data-full='{_e(name)}'>{_e(short)}</code>"


def _consumer_table(r: StoreReport) -> str:
    cols = ["group", "queue", "committed", "max before", "max after", "never see", "consumed then cut", "backlog",
            "status", "topic"]
    rows = [[f"<code>{_e(w.group)}</code>", w.queue_id, w.committed, _e(w.max_offset_before),
             _e(w.max_offset_after), w.never_see, w.consumed_then_cut, w.backlog, _e(w.status),
             f"<code>{_e(w.topic)}</code>"] for w in r.consumers.rows]
    return _table(cols, rows)


def _index_table(r: StoreReport) -> str:
    if not r.index_files:
        return ""
    cols = ["file", "begin", "end", "phy offsets", "indexCount", "maxIndexNum", "fill %", "hash slots used",
            "maxHashSlotNum", "items per used slot", "geometry", "restart", "problem"]
    rows = []
    for i in r.index_files:
        per_slot = f"{(i.index_count - 1) / i.hash_slot_count:.2f}" if i.hash_slot_count and i.index_count else ""
        rows.append([f"<code>{_e(i.name)}</code>", _e(_iso(i.begin_timestamp)), _e(_iso(i.end_timestamp)),
                     f"{_e(i.begin_phy_offset)} .. {_e(i.end_phy_offset)}", _e(i.index_count), _e(i.max_items),
                     f"{100 * i.fill:.1f}" if i.fill is not None else "", _e(i.hash_slot_count), _e(i.slots),
                     per_slot, _e(i.geometry_source), "<b class='bad'>deleted</b>" if i.dropped_on_restart else "kept",
                     _e(i.problem)])
    return _table(cols, rows)


def _transactions(t) -> str:
    """Counts by state and real topic, then the transactions to look at (`rmqinspect txn` lists them all)."""
    states = list(t.counts)
    out = ["<p class='hint'>Verdicts from the commit log alone (half/op/commit records and 4.x PREPARED/COMMIT/"
           "ROLLBACK); <code>rmqinspect txn STORE</code> lists every transaction.</p>",
           _kv([(k.replace("_", " "), v) for k, v in t.counts.items()]
               + [("changed by a restart", t.changed_by_restart)]),
           _table(["real topic"] + states, [[f"<code>{_e(r['topic'])}</code>"] + [r[k] for k in states]
                                            for r in t.by_topic])]
    if t.rows:
        more = f" (the first {len(t.rows)} of {t.listed_of})" if t.listed_of > len(t.rows) else ""
        out.append(f"<h4>Not committed, or changed by a restart{more}</h4>" + _table(
            ["half", "state", "after restart", "real topic", "uniq key", "checks", "commit", "op"],
            [[f"<code>{x.physical_offset}</code>", _e(x.state), _e(x.after_restart or x.state_after_restart),
              f"<code>{_e(x.real_topic)}</code>", f"<code>{_e(x.uniq_key)}</code>", x.check_count,
              _e(x.commit_offset), _e(x.op_offset)] for x in t.rows]))
    if t.notes:
        out.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in t.notes) + "</ul>")
    return "".join(out)


def _findings(s: str, r: StoreReport) -> str:
    if not r.findings:
        return "<p>No problems: verify found nothing and a restart discards nothing.</p>"
    rows = []
    for f in r.findings[:MAX_FINDING_ROWS]:
        if f.axis == "commitlog":
            link = (f"<a href='#{s}-map' class='goto' data-chart='{s}-map' data-x0='{f.start}' "
                    f"data-x1='{f.end}'>map</a>")
        elif f.axis == "consumequeue":
            k = "/".join((f.file or "").split("/")[1:3])
            link = f"<a href='#{s}-q-{_e(k)}' class='row'>queue</a>"
        elif f.axis == "index":
            link = f"<a href='#{s}-index-h'>index</a>"
        else:
            link = f"<a href='#{s}-header'>store</a>"
        rows.append([_e(f.source), _e(f.check), f"<b>{_e(f.kind)}</b>", f.start, f.end, f.count, _e(f.position),
                     link, f"<div class='reason'>{_short_tokens(f.reason or '')}</div>", _name_cell(f.file or ""),
                     f"<code class='cmd'>{_e(f.command)}</code>"])
    more = len(r.findings) - MAX_FINDING_ROWS
    tail = (f"<p class='hint'>{more} more finding(s): all are on the charts and in the data island "
            "(<code>rmqinspect-data</code>); <code>verify --format json</code> lists them too.</p>" if more > 0 else "")
    return _table(["source", "check", "kind", "start", "end", "count", "position", "see", "reason", "file",
                   "shown by"], rows) + tail


CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:12px 24px}header h1{margin:0;font-size:22px}
header code{color:#cfe3ff;word-break:break-all}.meta{margin:4px 0;color:#c9d3de;font-size:12px}
.nav{margin:6px 0 0;padding:0;list-style:none}.nav li{display:inline;margin-right:14px}.nav a{color:#9fd0ff}
.status{margin:4px 0;font-size:12px;color:#ffd479}
main{padding:8px 24px 48px}section{background:#fff;border:1px solid #ddd;border-radius:6px;margin:16px 0;
padding:8px 16px}h2{font-size:18px;word-break:break-all}h3{font-size:16px;margin:22px 0 6px;border-bottom:1px solid
#eee}.hint{color:#666;font-size:12px;margin:2px 0}.bad{color:#c0392b}
table{border-collapse:collapse;font-size:12px;margin:6px 0}td,th{border:1px solid #e3e3e3;padding:2px 6px;
text-align:left;vertical-align:top}th{background:#f3f5f7}table.sortable th{cursor:pointer}
table.kv th{width:170px}code{font-family:ui-monospace,Menlo,Consolas,monospace;white-space:nowrap}
tr.hit{background:#fff3c4}.rmq-chart{width:100%;min-height:120px}
details{margin:4px 0}.scroll{overflow-x:auto;max-width:100%}
div.reason{min-width:22em;max-width:36em;overflow-wrap:anywhere}code.cmd{white-space:normal;display:inline-block;
min-width:14em;max-width:24em;overflow-wrap:break-word}code.name{white-space:normal;display:inline-block;
max-width:28em;overflow-wrap:anywhere}
"""

JS = r"""
(function(){
  'use strict';
  var status = document.getElementById('chart-status');
  function charts(){ return Array.prototype.slice.call(document.querySelectorAll('.rmq-chart')); }
  function draw(){
    return Promise.all(charts().map(function(div){
      var fig = JSON.parse(document.getElementById(div.dataset.fig).textContent);
      return window.Plotly.newPlot(div, fig.data, fig.layout, {displaylogo:false, responsive:true});
    }));
  }
  function loadPlotly(){
    if (typeof DecompressionStream === 'undefined') {
      return Promise.reject(new Error('this browser has no DecompressionStream (needs Chrome 80, Firefox 113, ' +
                                      'Safari 16.4 or later)'));
    }
    var b64 = document.getElementById('plotly-js-gzip').textContent;
    var raw = atob(b64), bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text().then(function(js){ (0, eval)(js); });
  }
  loadPlotly().then(draw).then(function(){
    status.textContent = 'Charts drawn: hover for offsets, drag to zoom, double-click to reset.';
    document.documentElement.dataset.chartsReady = 'yes';
  }).catch(function(e){
    status.textContent = 'Charts could not be drawn (' + e.message + '); the tables hold the same numbers.';
    document.documentElement.dataset.chartsReady = 'failed';
  });
  document.addEventListener('click', function(ev){
    var a = ev.target.closest ? ev.target.closest('a') : null;
    if (a && a.classList.contains('goto') && window.Plotly) {
      var x0 = Number(a.dataset.x0), x1 = Number(a.dataset.x1), pad = Math.max(x1 - x0, 4096);
      window.Plotly.relayout(document.getElementById(a.dataset.chart), {'xaxis.range': [x0 - pad, x1 + pad]});
    } else if (a && a.classList.contains('row')) {
      var row = document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)));
      if (row) { row.classList.add('hit'); }
    }
    var th = ev.target.closest ? ev.target.closest('table.sortable th') : null;
    if (!th) return;
    var table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
    var asc = th.dataset.sort !== 'asc';
    Array.prototype.forEach.call(th.parentNode.children, function(h){ delete h.dataset.sort; });
    th.dataset.sort = asc ? 'asc' : 'desc';
    var rows = Array.prototype.slice.call(body.rows);
    var key = function(r){ var t = r.cells[col].textContent.trim(); var n = Number(t);
                           return t !== '' && !isNaN(n) ? [0, n] : [1, t]; };
    rows.sort(function(a, b){ var ka = key(a), kb = key(b);
      var c = ka[0] - kb[0] || (ka[1] < kb[1] ? -1 : ka[1] > kb[1] ? 1 : 0); return asc ? c : -c; });
    rows.forEach(function(r){ body.appendChild(r); });
  });
})();
"""
