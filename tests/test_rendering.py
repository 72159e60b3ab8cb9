"""Tables on a terminal: at 80 and 200 columns, long topics and 32-character ids are never cut or
wrapped; free-text columns are folded or left out first; rows go vertical when the identifiers alone do not fit."""

from __future__ import annotations

import io
import re

import pytest

from rmqinspect.cli import output

TOPIC = "V2Topic_longer_than_127_chars_" + "abcdefghijklmnopqrstuvwxyz" * 2
IDS = ["C0A80A0B3E8F1B6D3586F1F8665C0005", "AC10FE0100417FFFAAAA00A1F7780549"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:  # what rich and output.is_terminal ask
        return True


def render(rows, columns, width, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    out = Terminal()
    output.layout.vertical = output.layout.no_truncate = False
    output.layout.columns = None
    output.emit(rows, "table", columns, out=out)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())


def rows(topic):
    return [{"physical_offset": 1197830 + i, "topic": topic, "queue_id": i, "uniq_key": IDS[i % 2],
             "file": "00000000000001048576", "note": "lengths inside the record add up to 141, TOTALSIZE says 249 "
             "and the record is skipped as the dispatcher does"} for i in range(3)]


COLS = ("physical_offset", "topic", "queue_id", "uniq_key", "file", "note")


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("topic", ["OrderTopic", TOPIC])
def test_identifiers_whole_on_one_line(width, topic, monkeypatch):
    text = render(rows(topic), COLS, width, monkeypatch)
    lines = text.splitlines()
    # a line is longer than the terminal only when it holds an identifier that is (it is then never split)
    assert all(len(line) <= width or (topic in line and len(topic) > width - 20) for line in lines), text
    for ident in [topic, *IDS, "00000000000001048576", "1197830"]:
        assert any(ident in line for line in lines), (ident, text)
    assert "…" not in text


def test_free_text_goes_first(monkeypatch):
    cols = ("physical_offset", "topic", "queue_id", "note")
    wide = render(rows("OrderTopic"), cols, 80, monkeypatch)  # folded: every word still there, ids on one line
    assert "-[ RECORD" not in wide and "TOTALSIZE says 249" in " ".join(wide.replace("│", " ").split())
    assert all(len(line) <= 80 for line in wide.splitlines())
    output.flush_notes()
    narrow = render(rows("OrderTopic"), cols, 50, monkeypatch)  # no room to fold: the note column is left out
    assert "-[ RECORD" not in narrow and "TOTALSIZE" not in narrow and "OrderTopic" in narrow
    assert all(len(line) <= 50 for line in narrow.splitlines())
    assert output.pending_notes() == ["rmqinspect: note: column(s) note left out to fit 50 columns (--vertical, "
                                      "--columns or --no-truncate show them)"]
    output.flush_notes()


def test_vertical_when_identifiers_do_not_fit(monkeypatch):
    text = render(rows(TOPIC), COLS, 80, monkeypatch)
    assert "-[ RECORD 1 ]" in text and f"topic           | {TOPIC}" in text
