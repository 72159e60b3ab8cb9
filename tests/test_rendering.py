"""Tables on a terminal: at 80 and 200 columns long topics and 32-character ids are never cut or split; free text
folds at spaces; a long identifier among short ones goes alone above its row (once per run of equal values); when
identifiers alone do not fit, one record per block. Widths are terminal cells (East Asian characters count two)."""

from __future__ import annotations

import io
import re

import click
import pytest
from rich.cells import cell_len

from rmqinspect.cli import output

TOPIC = "V2Topic_longer_than_127_chars_" + "abcdefghijklmnopqrstuvwxyz" * 2
IDS = ["C0A80A0B3E8F1B6D3586F1F8665C0005", "AC10FE0100417FFFAAAA00A1F7780549"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:  # what output.is_terminal asks
        return True


def render(rows, cols, width, monkeypatch, **layout) -> tuple[str, output.Invocation]:
    monkeypatch.setenv("COLUMNS", str(width))
    out = Terminal()
    inv = output.Invocation(**layout)
    with click.Context(click.Command("t"), obj=inv):
        output.emit(rows, "table", cols, out=out)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()), inv


def rows(topic, n=3):
    return [{"physical_offset": 1197830 + i, "topic": topic, "queue_id": i, "uniq_key": IDS[i % 2],
             "file": "00000000000001048576", "note": "lengths inside the record add up to 141, TOTALSIZE says 249 "
             "and the record is skipped as the dispatcher does"} for i in range(n)]


COLS = ("physical_offset", "topic", "queue_id", "uniq_key", "file", "note")


def fits(text: str, width: int) -> bool:
    return all(cell_len(line) <= width or len(line.split()) == 1 for line in text.splitlines())


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("topic", ["OrderTopic", TOPIC])
def test_identifiers_whole_on_one_line(width, topic, monkeypatch):
    text, _ = render(rows(topic), COLS, width, monkeypatch)
    lines = text.splitlines()
    assert fits(text, width), text
    for ident in [topic, *IDS, "00000000000001048576", "1197830"]:
        assert any(ident in line.split() or ident in re.split(r"\s*\|\s*|\s+", line) for line in lines), (ident, text)
    assert "…" not in text


def test_free_text_folds_at_spaces(monkeypatch):
    cols = ("physical_offset", "topic", "queue_id", "note")
    text, _ = render(rows("OrderTopic"), cols, 80, monkeypatch)
    assert "-[ RECORD" not in text and fits(text, 80)
    assert "TOTALSIZE says 249" in " ".join(text.split())  # every word still there, in order
    assert all(len(line) <= 80 for line in text.splitlines())


def test_a_long_identifier_goes_above_its_rows_once_per_run(monkeypatch):
    data = [{"topic": "OrderTopic", "queue_id": 0, "messages": 5}] + [
        {"topic": TOPIC, "queue_id": q, "messages": q} for q in range(30)]
    text, _ = render(data, ("topic", "queue_id", "messages"), 80, monkeypatch)
    lines = text.splitlines()
    assert lines.count(TOPIC) == 1 and sum("(above)" in line for line in lines) == 30
    assert len(lines) == 2 + 1 + 1 + 30 and fits(text, 80)


def test_vertical_when_identifiers_do_not_fit(monkeypatch):
    wide_rows = [{"a_file": f"/very/long/path/{i:040d}", "b_file": f"/other/long/path/{i:040d}", "n": i}
                 for i in range(3)]
    text, _ = render(wide_rows, ("a_file", "b_file", "n"), 80, monkeypatch)
    assert "-[ RECORD 1 ]" in text and "a_file | /very/long/path/" in text and fits(text, 80)


def test_east_asian_characters_count_two_cells(monkeypatch):
    data = [{"tags": "标签タグ", "keys": "订单-三号", "n": 1}, {"tags": "TagA", "keys": "k-1", "n": 2}]
    text, _ = render(data, ("tags", "keys", "n"), 80, monkeypatch)
    header, _, *body = text.splitlines()
    col = cell_len(header[:header.index("keys")])
    for line in body:
        key = re.search(r"(订单-三号|k-1)", line)
        assert key and cell_len(line[:key.start()]) == col, text


def test_vertical_shows_every_field_and_unknown_columns_list_the_valid_ones(monkeypatch):
    data = [{"physical_offset": 1, "topic": "T", "properties": {"KEYS": "a b"}, "reconsume_times": 0}]
    text, _ = render(data, ("physical_offset", "topic"), 80, monkeypatch, vertical=True)
    assert "properties" in text and "reconsume_times" in text
    _, inv = render(data, ("physical_offset", "topic"), 80, monkeypatch, columns=("topic", "nope"))
    assert inv.columns_seen == {"topic"} and {"properties", "reconsume_times"} <= inv.columns_offered


def test_notes_are_said_once(capsys):
    inv = output.Invocation()
    with click.Context(click.Command("t"), obj=inv):
        inv.holding += 1
        output.note("the same sentence")
        output.note("the same sentence")
        inv.holding -= 1
        output.flush_notes()
        output.note("the same sentence")
    assert capsys.readouterr().err.count("the same sentence") == 1


def test_key_value_blocks_fold_between_items_and_never_inside_one(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    offsets = list(range(1_000_000, 1_000_000 + 64 * 4099, 4099))
    with click.Context(click.Command("t"), obj=output.Invocation()):
        output.print_kv("Query", [("verified", offsets), ("topic", TOPIC + TOPIC)], out=out)
    text = out.getvalue()
    assert fits(text, 80)
    assert {str(o) for o in offsets} <= set(re.split(r"[\s,]+", text))
    assert (TOPIC + TOPIC) in text.splitlines()  # longer than the line: alone on its own line
