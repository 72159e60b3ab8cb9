"""`rmqinspect report` opened in a real headless browser (Debian's chromium, driven over the DevTools protocol
on a pipe): the page draws its charts offline, logs no error, requests nothing from any network, and carries the
truncation point and the damaged regions `recover --dry-run` reports - for the oracle's crashed stores (4.9.8
and 5.3.3 torn tails, written by RocketMQ) and a writer-made store with one body byte flipped (CRC damage).

Run as a script to refresh the README's example screenshot of the bundled sample store:
    python tests/test_report_browser.py docs/report-example.png
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from click.testing import CliRunner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from rmqinspect.cli.main import cli  # noqa: E402
from support import require_oracle, tree_hashes  # noqa: E402
from support.recover_fixtures import build_store  # noqa: E402
from support.wide_store import QUEUES, build_wide_store  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio"]
AS_OF = "2026-11-21T21:40:00Z"


class Browser:
    """Chromium with --remote-debugging-pipe: CDP messages are JSON, each ended by a NUL byte, read by the browser
    on fd 3 and written on fd 4."""

    def __init__(self, profile: str) -> None:
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()

        def child_fds() -> None:  # runs in the child before exec: its pipe ends become fds 3 and 4
            os.dup2(to_r, 100)
            os.dup2(from_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                                      "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=child_fds)
        os.close(to_r)
        os.close(from_w)
        self._next = 0
        self.events: list[dict] = []
        self._inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._from_r, 1 << 16)
            if not chunk:
                self._inbox.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self._inbox.put(json.loads(msg))

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 20) -> dict:
        self._next += 1
        msg: dict = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
            if m is None:
                raise RuntimeError("chromium closed the pipe")
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 20) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e.get("method") == method:
                    self.events.remove(e)
                    return e
            m = self._inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
            if m is None:
                raise RuntimeError("chromium closed the pipe")
            self.events.append(m)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_w)


class Page:
    def __init__(self, browser: Browser) -> None:
        self.b = browser
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1,
                                                         "mobile": False})

    def call(self, method: str, params: dict | None = None, timeout: float = 20) -> dict:
        return self.b.send(method, params, self.session, timeout)

    def evaluate(self, expr: str):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open(self, path: str, timeout: float = 15) -> str:
        """Load the file and wait until its charts are drawn (or failed): the page's data-charts-ready."""
        self.b.events.clear()
        self.call("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1,
                                                         "mobile": False})
        self.call("Page.navigate", {"url": "file://" + os.path.abspath(path)})
        self.b.wait_event("Page.loadEventFired", timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.evaluate("document.documentElement.dataset.chartsReady || ''")
            if state:
                return state
            time.sleep(0.1)
        return "timeout"

    def screenshot(self, out: str, max_height: int = 9000) -> tuple[int, int]:
        h = min(int(self.call("Page.getLayoutMetrics")["cssContentSize"]["height"]) + 1, max_height)
        self.call("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": h, "deviceScaleFactor": 1,
                                                         "mobile": False})
        time.sleep(0.3)  # plotly's responsive resize
        png = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"}, timeout=30)["data"])
        with open(out, "wb") as f:
            f.write(png)
        return struct.unpack(">II", png[16:24])  # IHDR width, height

    def problems(self, page_url: str) -> tuple[list[str], list[str]]:
        """(console errors and uncaught exceptions, every request for anything but the page itself)."""
        errors, requests = [], []
        for e in self.b.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(json.dumps(p.get("args"))[:300])
            elif m == "Runtime.exceptionThrown":
                errors.append(json.dumps(p.get("exceptionDetails"))[:300])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(p["entry"].get("text", "")[:300])
            elif m == "Network.requestWillBeSent" and p.get("request", {}).get("url") != page_url:
                requests.append(p["request"]["url"][:200])
        return errors, requests


def chromium_or_skip() -> None:
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install -y chromium)")


def crc_damaged_store(root: str) -> str:
    """The docs' damaged store (docs/regen.py build_demo_store): 240 messages in five 16 KiB files, abort file,
    one body byte of the record at 17290 flipped."""
    fx = build_store(os.path.join(root, "store"))
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts)
    fx.patch(17290 + 100, b"\xff")
    return os.path.join(root, "store")


def write_report(stores: list[str], out: str) -> None:
    res = CliRunner().invoke(cli, ["report", *stores, "--out", out, "--as-of", AS_OF])
    assert res.exit_code == 0, res.output


def recover_json(store: str) -> dict:
    res = CliRunner().invoke(cli, ["recover", store, "--dry-run", "--format", "json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium_or_skip()
    b = Browser(str(tmp_path_factory.mktemp("chromium-profile")))
    yield Page(b)
    b.close()


def test_reports_of_crashed_and_crc_damaged_stores_in_headless_chromium(browser, tmp_path):
    stores = [str(require_oracle("rocketmq-all-4.9.8/crash-torn-tail") / "store"),
              str(require_oracle("rocketmq-all-5.3.3/crash-torn-tail") / "store"),
              crc_damaged_store(str(tmp_path / "crc"))]
    before = [tree_hashes(s) for s in stores]
    t0 = time.monotonic()
    for i, store in enumerate(stores):
        out = str(tmp_path / f"report-{i}.html")
        write_report([store], out)
        assert os.path.getsize(out) < 5_000_000
        assert browser.open(out) == "yes", browser.evaluate("document.getElementById('chart-status').textContent")
        errors, requests = browser.problems("file://" + os.path.abspath(out))
        assert errors == [] and requests == [], (errors, requests)
        data = json.loads(browser.evaluate("document.getElementById('rmqinspect-data').textContent"))
        rec = recover_json(store)
        got = data["stores"][0]
        assert got["truncate_offset"] == rec["truncate_offset"]
        regions = rec["messages_lost"]["regions"]
        assert regions, store  # each of these stores has damage past its truncation point
        damage = {(d["kind"], d["start"], d["end"]) for d in got["damage"]}
        assert {(r["kind"], r["start"], r["end"]) for r in regions} <= damage
        # ... and drawn: the map's plotly traces (as the browser holds them) have a bar starting at each region
        drawn = browser.evaluate("JSON.stringify(document.getElementById('s0-map').data.map("
                                 "t => ({name: t.name, base: t.base, x: t.x})))")
        bars = {(t["name"], b, b + w) for t in json.loads(drawn) if t.get("base") for b, w in zip(t["base"], t["x"])}
        assert {(r["kind"], r["start"], r["end"]) for r in regions} <= bars
        # the truncation line is on the map, labelled with its offset
        shapes = browser.evaluate("JSON.stringify(document.getElementById('s0-map').layout.annotations"
                                  ".map(a => a.text))")
        assert any("truncation point (restart)" in a and a.endswith(f": {rec['truncate_offset']}")
                   for a in json.loads(shapes))
        assert browser.evaluate("document.querySelectorAll('.rmq-chart .main-svg').length") >= 5
        # a finding's "map" link zooms the map onto its range
        x0, x1 = json.loads(browser.evaluate(
            "const a = document.querySelector('a.goto'); a.click();"
            "JSON.stringify([Number(a.dataset.x0), Number(a.dataset.x1)])"))
        lo, hi = browser.evaluate("document.getElementById('s0-map').layout.xaxis.range")
        assert lo <= x0 <= x1 <= hi and hi - lo < 3 * max(x1 - x0, 4096) + 1
        # the queue table sorts by a clicked column (entries cut, largest first on the second click)
        cut = browser.evaluate(
            "const t = document.getElementById('s0-queue-table'); const h = [...t.tHead.rows[0].cells]"
            ".find(c => c.textContent === 'cut by restart'); h.click(); h.click();"
            "[...t.tBodies[0].rows].map(r => Number(r.cells[h.cellIndex].textContent))")
        assert cut == sorted(cut, reverse=True) and cut[0] > 0
        w, h = browser.screenshot(str(tmp_path / f"report-{i}.png"))
        assert w == 1400 and h > 2000 and os.path.getsize(tmp_path / f"report-{i}.png") > 50_000
    assert time.monotonic() - t0 < 60
    assert [tree_hashes(s) for s in stores] == before


# what the layout rules measure in the page: boxes of every chart's legend and annotations (subplot titles and the
# labelled lines' captions are annotations), tick labels, and the tables' scroll boxes
LAYOUT_PROBE = """JSON.stringify({
  charts: [...document.querySelectorAll('.rmq-chart')].map(c => ({
    id: c.id,
    boxes: [...c.querySelectorAll('g.legend, g.annotation')].map(g => {
      const r = g.getBoundingClientRect(); return [g.getAttribute('class'), r.left, r.top, r.right, r.bottom]; }),
    ticks: [...c.querySelectorAll('.xtick text, .ytick text')].map(t => t.textContent),
    tickBand: Math.max(0, ...[...c.querySelectorAll('.xtick text')].map(t => t.getBoundingClientRect().height))})),
  scroll: [...document.querySelectorAll('div.scroll')].map(d => [d.scrollWidth, d.clientWidth,
      d.querySelector('table').id || d.querySelector('th').textContent]),
  reason: Math.min(...[...document.querySelectorAll('div.reason')].map(d => d.getBoundingClientRect().width)),
  titles: [...document.querySelectorAll('#s0-queue-table code[title]')].map(c => [c.textContent, c.title])
})"""


def _overlap(a, b) -> bool:
    return a[1] < b[3] - 1 and b[1] < a[3] - 1 and a[2] < b[4] - 1 and b[2] < a[4] - 1


def test_report_layout_holds_a_long_topic_over_a_hundred_queues(browser, tmp_path):
    """The 200-character topic over 100 queues (tests/support/wide_store.py): tick and legend labels are short
    (the full name is in hover and the tables), no legend or caption lies over another or over a subplot title,
    Findings' reason column is readable and no table needs horizontal scrolling at 1400 px."""
    store = build_wide_store(str(tmp_path / "store"))
    out = str(tmp_path / "report.html")
    write_report([store], out)
    assert browser.open(out) == "yes"
    got = json.loads(browser.evaluate(LAYOUT_PROBE))
    from rmqinspect.fixtures.sample import LONG_TOPIC
    from rmqinspect.report.figures import LABEL_CHARS

    for c in got["charts"]:
        assert all(len(t) <= LABEL_CHARS + 4 for t in c["ticks"]), (c["id"], c["ticks"])
        assert c["tickBand"] < 200, c["id"]  # no ~600 px of diagonal topic name
        boxes = c["boxes"]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not _overlap(a, b), (c["id"], a, b)
    assert all(sw <= cw + 1 for sw, cw, _ in got["scroll"]), got["scroll"]
    assert got["reason"] >= 250
    names = got["titles"]
    assert len(names) == QUEUES + 1 and all(t == LONG_TOPIC for short, t in names if short != t)
    assert any(short != t for short, t in names)  # shortened in the cell, whole in the title


def test_a_page_that_fails_is_caught(browser, tmp_path):
    """The checks above can fail: a page that throws and asks the network is seen doing both."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><img src='http://127.0.0.1:9/x.png'><script>"
                   "document.documentElement.dataset.chartsReady='yes'; console.error('boom');</script></body></html>")
    browser.open(str(bad))
    time.sleep(0.3)
    errors, requests = browser.problems("file://" + str(bad))
    assert any("boom" in e for e in errors)
    assert any(r.startswith("http://127.0.0.1:9/") for r in requests)


def main(out: str) -> None:
    """Write the README's example: the report of tests/fixtures/sample-store, screenshot of its first 2400 px."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "report.html")
        os.chdir(repo)
        write_report(["tests/fixtures/sample-store"], html)
        b = Browser(os.path.join(tmp, "profile"))
        try:
            page = Page(b)
            assert page.open(html) == "yes"
            page.screenshot(out, max_height=2400)
        finally:
            b.close()


if __name__ == "__main__":
    main(sys.argv[1])
