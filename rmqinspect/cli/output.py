"""One rendering helper for every command: table | json | ndjson, progress bars, and error exits.

Every command calls ``emit`` (a stream of row dicts) or ``emit_document`` (one JSON-able object), so
a new command gets all formats for free and they behave the same everywhere (sqlite-utils style).
JSON and NDJSON are streamed as produced: a 100 GB walk never sits in memory.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from ..errors import EXIT_CORRUPT, EXIT_IO, RmqInspectError, StoreNotFoundError
from .lifecycle import Interrupted, release_frames

FORMAT_CHOICES = ("table", "json", "ndjson")

format_option = click.option(
    "--format", "fmt", type=click.Choice(FORMAT_CHOICES), default="table", show_default=True,
    help="Output: human table, one JSON document, or one JSON object per line.")


def _default(o: Any):
    if isinstance(o, (bytes, bytearray, memoryview)):
        return bytes(o).hex()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(o)
    return str(o)


def dumps(obj: Any, pretty: bool = False) -> str:
    """JSON text; NaN and Infinity are refused (ValueError, reported by ``handle_errors``): they are not JSON,
    and a consumer of ``--format json`` must always get a document it can parse."""
    kw: dict[str, Any] = {"indent": 2} if pretty else {"separators": (",", ":")}
    text = json.dumps(obj, ensure_ascii=False, default=_default, allow_nan=False, **kw)
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # a name that is not UTF-8 (a file name's raw bytes, held as surrogate escapes): written raw they would make
        # the output invalid UTF-8, so the document is escaped (\udcff); json.loads + os.fsencode give the bytes back
        return json.dumps(obj, ensure_ascii=True, default=_default, allow_nan=False, **kw)
    return text


def is_terminal(stream=None) -> bool:
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def ms_to_iso(ms: int | None) -> str:
    if ms is None:
        return ""
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


# Columns of free text (explanations, not identifiers): folded at spaces to fit a terminal. Everything else
# (offsets, topics, keys, ids, file names, times) is printed whole: never cut, never split inside a token.
FREE_TEXT_COLUMNS = frozenset({"note", "notes", "problems", "reason", "reasons", "detail", "why", "body", "record",
                               "evidence", "damage", "stopped", "message", "description", "explanation", "error",
                               "what", "verdict", "cause", "sentence", "details"})
NOTES_REMEMBERED = 10_000  # distinct stderr lines remembered to say each once (bounded on a walk full of damage)


@dataclass
class Invocation:
    """What one command invocation decided about its output, held on click's context (``ctx.obj``), never in
    module state: the layout options every command has (--columns, --vertical, --no-truncate), --debug, and the
    notes held for the end of the command (each said once)."""

    columns: tuple[str, ...] | None = None
    vertical: bool = False
    no_truncate: bool = False
    debug: bool = False
    columns_seen: set[str] = field(default_factory=set)  # asked columns some table had
    columns_offered: set[str] = field(default_factory=set)  # every column some table could show
    notes: list[str] = field(default_factory=list)
    said: set[str] = field(default_factory=set)
    holding: int = 0


def current() -> Invocation:
    """The running command's Invocation (created on the root context when a command runs outside the group, as
    in tests); outside any command a fresh one, so library callers get plain defaults and notes at once."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return Invocation()
    inv = ctx.find_object(Invocation)
    if inv is None:
        root = ctx.find_root()
        if root.obj is None:
            root.obj = Invocation()
        inv = root.obj if isinstance(root.obj, Invocation) else Invocation()
        if ctx.obj is None:
            ctx.obj = inv
    return inv


def _cell(v: Any) -> str:
    """A cell's text on one line (control characters escaped). A list of scalars is written ``a, b, c`` so it
    folds between items, never inside one."""
    if v is None:
        return ""
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v):
        s = ", ".join(str(x) for x in v)
    elif isinstance(v, (dict, list, tuple)):  # spaced, so it folds between entries on a terminal
        s = json.dumps(v, ensure_ascii=False, default=_default, separators=(", ", ": "))
    else:
        s = str(v)
    return s.replace("\x01", "\\x01").replace("\x02", "\\x02").replace("\n", "\\n").replace("\r", "\\r")


def _pick_columns(rows: list[dict], columns: Sequence[str] | None, inv: Invocation) -> list[str]:
    cols = list(columns) if columns is not None else (list(rows[0].keys()) if rows else [])
    available = list(dict.fromkeys([*cols, *(k for r in rows for k in r)]))
    inv.columns_offered.update(available)
    if inv.columns:
        wanted = [c for c in inv.columns if c in available]
        inv.columns_seen.update(wanted)
        if wanted:
            return wanted
    elif inv.vertical:  # one record per block has room for every field the rows carry
        return available
    return cols


def _project(row: dict, inv: Invocation) -> dict:
    inv.columns_offered.update(row)
    picked = {c: row[c] for c in inv.columns or () if c in row}
    inv.columns_seen.update(picked)
    return picked or row


def terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def fit_width(out) -> int | None:
    """The width output to ``out`` must fit: the terminal's when ``out`` is one (and --no-truncate is not given),
    else None (a pipe or file gets every row on one line, for grep)."""
    if not is_terminal(out) or current().no_truncate:
        return None
    return terminal_width()


def emit(rows: Iterable[dict], fmt: str, columns: Sequence[str] | None = None, *, title: str | None = None,
         out=None, cell_width: int | None = None) -> int:
    """Render a stream of row dicts. ``columns`` picks and orders the table columns (JSON keeps all keys;
    ``--columns`` picks in every format). Returns the number of rows written. ``cell_width`` is kept for
    callers; identifiers are never cut, free text only to fit a terminal."""
    out = out or sys.stdout
    inv = current()
    n = 0
    if inv.columns and fmt in ("json", "ndjson"):
        rows = (_project(r, inv) for r in rows)
    if fmt == "ndjson":
        # each line is serialised before it is written: a failure mid-stream leaves only complete lines
        try:
            for row in rows:
                out.write(dumps(row) + "\n")
                n += 1
        except BaseException as e:  # an interrupt too (cli.lifecycle)
            _mark_stopped(e, n, "NDJSON ends on a complete line")
            raise
        finally:
            _safe_flush(out)
        return n
    if fmt == "json":
        out.write("[")
        try:
            for row in rows:
                out.write(("\n" if n == 0 else ",\n") + dumps(row))
                n += 1
        except BaseException as e:  # an interrupt too (cli.lifecycle)
            # close the array so what was written stays one valid JSON document
            _mark_stopped(e, n, "the JSON array was closed early")
            raise
        finally:
            out.write("\n]\n" if n else "]\n")
            _safe_flush(out)
        return n
    # table: buffered in chunks so huge walks still print progressively (one layout for all: ``state``)
    state: dict[str, Any] = {"records": 0}
    chunk: list[dict] = []
    first = True
    try:
        for row in rows:
            chunk.append(row)
            n += 1
            if len(chunk) >= 500:
                _print_table(chunk, columns, title if first else None, out, header=first, state=state)
                first = False
                chunk = []
    except BaseException as e:  # an interrupt too (cli.lifecycle)
        if chunk:
            _print_table(chunk, columns, title if first else None, out, header=first, state=state)
        _mark_stopped(e, n, "the table is incomplete")
        raise
    if chunk:
        _print_table(chunk, columns, title if first else None, out, header=first, state=state)
    elif first and title:  # an empty table is its title and "(none)", not a header with no rows under it
        out.write(f"{title}\n(none)\n")
    return n


def _safe_flush(out) -> None:
    try:
        out.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: stdout set to None after a broken pipe
        pass


def _mark_stopped(e: BaseException, rows: int, how: str) -> None:
    """Remember on the exception where the output stopped; ``handle_errors`` says it on the error line."""
    if getattr(e, "rmq_output_stopped", None) is None:
        e.rmq_output_stopped = f"output stopped after {rows} row{'s' if rows != 1 else ''}; {how}"  # type: ignore[attr-defined]


def _print_table(rows: list[dict], columns, title, out, header=True, state: dict | None = None) -> None:
    """One chunk of a table. ``state`` carries the layout from chunk to chunk of one table: once it went to one
    record per block it stays so, and records are numbered on."""
    inv = current()
    state = state if state is not None else {"records": 0}
    columns = _pick_columns(rows, columns, inv)
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    term = fit_width(out)
    text = None
    if not (inv.vertical or state.get("vertical")):
        text = table_text(cells, columns if header else None, term, foldable=_foldable(rows, columns))
    if title:
        out.write(kv_line("", title, term, 0))
    if text is None:  # asked for, or wider than the terminal even folded: one record per block (psql \x auto)
        state["vertical"] = True
        _print_vertical(cells, columns, out, term, state["records"])
    else:
        out.write(text)
    state["records"] += len(cells)


def _foldable(rows: list[dict], columns: Sequence[str]) -> set[int]:
    """Columns folded at spaces to fit: free text, and lists (folded between items)."""
    return {i for i, c in enumerate(columns)
            if c in FREE_TEXT_COLUMNS or any(isinstance(r.get(c), (list, tuple)) for r in rows)}


def _width(s: str) -> int:
    """Columns a text takes on a terminal: East Asian wide characters count two (rich's cell_len)."""
    if s.isascii():
        return len(s)
    from rich.cells import cell_len

    return cell_len(s)


def _pad(s: str, width: int) -> str:
    return s + " " * (width - _width(s))


def fold(text: str, width: int, first: int | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` columns (the first line: ``first``), broken only at spaces: a token
    longer than its line is a line of its own (never split)."""
    lines: list[str] = []
    line = ""
    cap = width if first is None else first
    for word in text.split(" "):
        if not line:
            line = word
        elif _width(line) + 1 + _width(word) <= cap:
            line += " " + word
        else:
            lines.append(line)
            line, cap = word, width
    lines.append(line)
    return lines


_SEP = "  "
ABOVE_MIN = 40  # an identifier shorter than this is never taken out of its row (a table of them goes vertical)
_ABOVE = "(above)"  # in a cell whose identifier is too long for the column: it is printed alone just above its row


def table_text(cells: list[list[str]], headers: Sequence[str] | None = None, width: int | None = None,
               foldable: set[int] | frozenset[int] = frozenset()) -> str | None:
    """The one table style of every command: columns left-aligned, two spaces apart, a dashed rule under the
    headers (tabulate's "simple"), widths measured in terminal cells. With ``width`` (a terminal's) the table is
    made to fit: ``foldable`` columns are folded at spaces; then a few identifiers too long for their column
    (a 200-character topic among short ones) are each printed alone on the line above their row, the cell saying
    ``(above)``; when that is not enough, None: the caller prints one record per block."""
    n = len(headers) if headers is not None else (len(cells[0]) if cells else 0)
    head = list(headers) if headers is not None else [""] * n
    lens = [[_width(row[i]) for row in cells] for i in range(n)]
    natural = [max([_width(head[i]), *lens[i]]) for i in range(n)]
    widths = list(natural)
    above: dict[int, set[int]] = {}  # column -> rows whose cell is printed above the row
    if width is not None and sum(widths) + len(_SEP) * (n - 1) > width:
        widths = _fit(cells, head, lens, natural, foldable, width, above)
        if widths is None:
            return None
    out = []
    if headers is not None:
        out.append(_SEP.join(_pad(h, w) for h, w in zip(head, widths, strict=True)).rstrip())
        out.append(_SEP.join("-" * w for w in widths))
    for r, row in enumerate(cells):
        for i in range(n):
            moved = above.get(i, ())
            if r in moved and (r - 1 not in moved or cells[r - 1][i] != row[i]):
                out.append(row[i])
        parts = [[_ABOVE if _ABOVE_FITS(widths[i]) else "^"] if r in above.get(i, ())
                 else fold(row[i], widths[i]) if i in foldable and lens[i][r] > widths[i] else [row[i]]
                 for i in range(n)]
        for k in range(max(len(p) for p in parts)):
            out.append(_SEP.join(_pad(p[k] if k < len(p) else "", w) for p, w in zip(parts, widths, strict=True))
                       .rstrip())
    return "".join(line + "\n" for line in out)


def _runs(cells: list[list[str]], i: int, rows: set[int]) -> int:
    """Lines the values of column ``i`` in ``rows`` take above the table's rows: one per run of equal values."""
    return sum(1 for r in rows if r - 1 not in rows or cells[r - 1][i] != cells[r][i])


def _ABOVE_FITS(w: int) -> bool:
    return w >= len(_ABOVE)


def _fit(cells, head, lens, natural, foldable, width, above) -> list[int] | None:
    """Column widths that fit ``width`` (see table_text), filling ``above``; None when none do."""
    n = len(natural)
    avail = width - len(_SEP) * (n - 1)
    # a foldable column needs its longest word
    need = {i: max([_width(head[i]), *(_width(w) for row in cells for w in row[i].split(" "))]) for i in foldable}
    # free text keeps 16 columns to stay readable; a list (keys, offsets) may go down to its longest item
    floor = {i: min(natural[i], max(need[i], 16 if head[i] in FREE_TEXT_COLUMNS else 0)) for i in foldable}
    ident = [i for i in range(n) if i not in foldable]
    widths = [floor.get(i, natural[i]) for i in range(n)]
    # identifiers too long for the room: a column's longest values go above their rows, each run of equal values
    # once (a long topic over 100 queues is one line), as long as that is a few lines (else: vertical)
    limit = max(1, len(cells) // 4)  # the lines above stay few: outliers, or one value repeated down the column
    while sum(widths) > avail:
        best = None
        for i in ident:
            moved = above.get(i, set())
            rest = [lens[i][r] for r in range(len(cells)) if r not in moved]
            if not rest:
                continue
            top = max(rest)
            lower = max([_width(head[i]), 1, *(x for x in rest if x < top)])
            # only outliers go above: a long identifier (a topic, a path) among much shorter ones
            if top < ABOVE_MIN or top < 2 * lower:
                continue
            new = moved | {r for r in range(len(cells)) if lens[i][r] == top}
            if _runs(cells, i, new) > limit:
                continue
            if best is None or top - lower > best[1]:
                best = (i, top - lower, new, lower)
        if best is None:
            return None
        i, _, new, lower = best
        above[i] = new
        widths[i] = max(lower, len(_ABOVE) if lower >= len(_ABOVE) else 1)
    # what is left over goes back to the folded columns, up to their natural width
    spare = avail - sum(widths)
    for i in sorted(foldable, key=lambda i: natural[i] - widths[i]):
        extra = min(natural[i] - widths[i], spare // max(1, sum(1 for j in foldable if natural[j] > widths[j])))
        widths[i] += max(0, extra)
        spare -= max(0, extra)
    return widths


def text_table(cells: list[list[str]], headers: Sequence[str] | None = None) -> str:
    """The table style (``table_text``) at full width, without the final newline (for text built around it)."""
    return (table_text(cells, headers) or "").rstrip("\n")


def _print_vertical(cells: list[list[str]], columns: list[str], out, term: int | None, before: int = 0) -> None:
    """One record per block (psql's \\x): each field on its own line; on a terminal, a value longer than the line
    is folded at spaces, and an identifier that cannot fit beside its name is alone on the next line. ``before``:
    records already shown (the numbering goes on)."""
    w = max((_width(c) for c in columns), default=0)
    room = term - w - 3 if term is not None else None
    for i, row in enumerate(cells, before + 1):
        out.write(f"-[ RECORD {i} ]" + "-" * max(w - 8, 4) + "\n")
        for c, v in zip(columns, row, strict=True):
            out.write(kv_line(_pad(c, w) + " | ", v, room, w + 3))


def kv_line(prefix: str, value: str, room: int | None, indent: int, later: int | None = None) -> str:
    """``prefix`` + ``value``, folded at spaces into ``room`` columns, the continuations indented by ``indent`` in
    ``later`` columns (default ``room``); a token longer than its line is printed alone on a line, whole."""
    if room is None or _width(value) <= room:
        return (prefix + value).rstrip() + "\n"
    room = max(room, 16)
    later = max(later or room, 16)
    lines = []
    for k, part in enumerate(fold(value, later, room)):
        if k == 0 and _width(part) > room:  # a token too long beside the key starts on the next line
            lines.append(prefix)
            k = 1
        if k and _width(part) > later:  # one token longer than the line: alone, whole
            lines.append(part)
        else:
            lines.append((prefix if k == 0 else " " * indent) + part)
    return "".join(x.rstrip() + "\n" for x in lines)


def render(result: Any, fmt: str, table: Callable[[Any], Any] | None = None, *,
           document: Callable[[Any], Any] | None = None, lines: Callable[[Any], Iterable[Any]] | None = None,
           rows: Callable[[Any], Iterable[dict]] | None = None, out=None) -> int | None:
    """The one contract between a command's result and its output.

    A document: ``--format json`` writes ``document(result)`` (default: the result itself) pretty, ``ndjson`` each
    of ``lines(result)`` (default: that document) compact on its own line. A stream of records (``rows``): json
    writes them as one array and ndjson one per line, both streamed through ``emit`` (a 100 GB walk never sits in
    memory). ``table`` calls ``table(result)``: the human rendering, key/value blocks and tables through
    ``print_kv`` and ``emit``. Returns what ``emit`` or ``table`` returned (a row count), else None."""
    out = out or sys.stdout
    if rows is not None and fmt in ("json", "ndjson"):
        return emit(rows(result), fmt, out=out)
    doc = document(result) if document is not None and fmt != "table" else result
    if fmt == "json":
        out.write(dumps(doc, pretty=True) + "\n")
    elif fmt == "ndjson" and lines is not None:  # a stream: through emit (--columns, where it stopped)
        return emit(lines(result), "ndjson", out=out)
    elif fmt == "ndjson":
        out.write(dumps(doc) + "\n")
    elif table is not None:
        return table(result)
    else:
        out.write(dumps(doc, pretty=True) + "\n")
    return None


def emit_document(doc: Any, fmt: str, render_table: Callable[[Any], None] | None = None, out=None) -> None:
    """One object: ``render`` with the object as its own JSON document."""
    render(doc, fmt, render_table, out=out)


def paragraph(text: str, out=None) -> None:
    """A sentence or two for people, under a table: folded at spaces to the terminal's width."""
    out = out or sys.stdout
    out.write(kv_line("", text, fit_width(out), 0))


def print_kv(title: str, pairs: Sequence[tuple[str, Any]], out=None, skip_empty: bool = False) -> None:
    """A key/value block for human output, in the table style without headers: on a terminal a long value is
    folded at spaces beside its key, and a token (a path, a topic) longer than the line is alone on its line;
    --columns does not apply (the keys are the fields)."""
    out = out or sys.stdout
    if skip_empty:
        pairs = [(k, v) for k, v in pairs if v not in (None, "", [])]
    term = fit_width(out)
    w = max((_width(str(k)) for k, _ in pairs), default=0)
    room = term - w - len(_SEP) if term is not None else None
    # long keys leave a narrow value column: a folded value then goes on under its first line, 4 columns in
    indent, later = (4, term - 4) if term is not None and w + len(_SEP) > term * 0.3 else (w + len(_SEP), room)
    out.write(kv_line("", title, term, 0) + "".join(kv_line(_pad(str(k), w) + _SEP, _cell(v), room, indent, later)
                                     for k, v in pairs) + "\n")


@contextlib.contextmanager
def progress(total: int, description: str, enabled: bool) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr when it is a terminal and ``enabled``; otherwise a no-op.
    Yields ``advance_to(done, description=None)``: ``total`` and ``done`` are bytes the command reads, the bar
    shows them with the rate and the time left."""
    if not enabled or not is_terminal(sys.stderr) or total <= 0:
        yield lambda done, description=None: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), transient=True, console=__import__("rich.console").console.Console(
                      file=sys.stderr)) as p:
        task = p.add_task(description, total=total)
        last = [0, time.monotonic()]

        def advance_to(done: int, description: str | None = None) -> None:
            # every 4 MiB or a quarter of a second, whichever comes first: the rate and ETA follow the work
            now = time.monotonic()
            if done - last[0] >= (1 << 22) or done >= total or now - last[1] >= 0.25 or description:
                p.update(task, completed=min(done, total), **({"description": description} if description else {}))
                last[0], last[1] = done, now

        yield advance_to


def topic_names(store_root: str, rocksdb_rows: bool = True) -> list[str]:
    """The topics a store knows, without a walk: its queue directories (consumequeue/, batchconsumequeue/), the
    topics of config/topics.json (or its .bak, as the broker loads it), and when the consume queue is a RocksDB
    database (5.x storeType=defaultRocksDB: its file names are not topics) the topics of its rows, read through a
    private snapshot - the one costly source, asked only when an answer came back empty (``rocksdb_rows=False``
    leaves it out)."""
    names: set[str] = set()
    for d in ("consumequeue", "batchconsumequeue"):
        with contextlib.suppress(OSError):
            path = os.path.join(store_root, d)
            entries = os.listdir(path)
            if "CURRENT" not in entries:
                names.update(n for n in entries if not n.startswith("."))
                continue
            if not rocksdb_rows:
                continue
            with contextlib.suppress(ImportError, RmqInspectError, OSError):
                from ..store.rocksdb_cq import list_rocksdb_queues

                names.update(q.topic for q in list_rocksdb_queues(path))
    from ..store.config_files import load_config_file, topic_rows

    with contextlib.suppress(OSError):
        load = load_config_file(os.path.join(store_root, "config"), "topics.json")
        names.update(r["topic"] for r in topic_rows(load.data) if isinstance(r["topic"], str) and r["topic"])
    return sorted(names)


def nearest_topics(topic: str, store_root: str, names: Sequence[str] | None = None) -> str:
    """" (nearest topics: A, B)" for a topic the store does not have, or "" when it has it, or when the store's
    topics are unknown (``names`` defaults to the queue directories of ``store_root``)."""
    import difflib

    names = topic_names(store_root) if names is None else sorted(set(names))
    if topic in names or not names:
        return ""
    near = difflib.get_close_matches(topic, names, n=3, cutoff=0.6) or difflib.get_close_matches(
        topic.lower(), [n.lower() for n in names], n=3, cutoff=0.6)
    if not near:
        return f" (the store has no topic {topic!r}; {len(names)} topics, `cq STORE --all` or `config STORE` list them)"
    return f" (the store has no topic {topic!r}; nearest: {', '.join(near)})"


def no_match(sentence: str, *, topic: str | None = None, store_root: str | None = None,
             names: Sequence[str] | None = None):
    """The one rule for an empty answer, in every command: one sentence on stderr (with the nearest topic names
    when the topic is not in the store) and exit code 3 (not found), after whatever was printed. ``names``: the
    topics to compare with when they are not the store's queue directories (a RocksDB consume queue's)."""
    hint = nearest_topics(topic, store_root or "", names) if topic is not None and (
        store_root is not None or names is not None) else ""
    raise StoreNotFoundError(sentence + hint)


def error(message: str) -> None:
    flush_notes()
    click.echo(f"rmqinspect: error: {message}", err=True)


# Notes and warnings raised while a command runs are held (on its Invocation) and written to stderr when it
# ends, so they come after the table, never inside it (both streams often go to one terminal), each once. Past
# _NOTES_HELD they are written at once: memory stays bounded on a walk that meets damage at every record.
_NOTES_HELD = 1000


def warn(message: str) -> None:
    _stderr_line(f"rmqinspect: warning: {message}")


def note(message: str) -> None:
    """Something the reader should know about the answer (an assumption, where an input was resolved to)."""
    _stderr_line(f"rmqinspect: note: {message}")


def hold_note(message: str) -> None:
    """A note said before the command runs (e.g. how STORE was resolved), written with the others at its end."""
    inv = current()
    line = f"rmqinspect: note: {message}"
    if len(inv.notes) < _NOTES_HELD:
        inv.notes.append(line)
    else:
        _say(inv, line)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(flush_notes)


def _stderr_line(line: str) -> None:
    inv = current()
    if inv.holding and len(inv.notes) < _NOTES_HELD:
        inv.notes.append(line)
    else:
        _say(inv, line)


def _say(inv: Invocation, line: str) -> None:
    """One line on stderr, unless this invocation already said it (a note reached by two paths is said once)."""
    if line in inv.said:
        return
    if len(inv.said) < NOTES_REMEMBERED:
        inv.said.add(line)
    click.echo(line, err=True)


def already_said(text: str) -> bool:
    """Whether a stderr line of this invocation holds ``text`` (said or held): a command that prints a paragraph
    on stdout leaves out the note saying the same."""
    inv = current()
    return any(text in line for line in [*inv.said, *inv.notes])


def pending_notes() -> list[str]:
    """The notes held for the end of the running command (tests, and commands that render them)."""
    return list(current().notes)


def flush_notes() -> None:
    inv = current()
    lines, inv.notes[:] = list(inv.notes), []
    for line in lines:
        _say(inv, line)


def set_debug(enabled: bool) -> None:
    """The global ``--debug``: errors show their traceback (also RMQINSPECT_DEBUG=1)."""
    current().debug = bool(enabled)


def debug_enabled() -> bool:
    return current().debug or os.environ.get("RMQINSPECT_DEBUG", "") not in ("", "0")


def _innermost(tb) -> str:
    last = None
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith("rmqinspect"):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    co = last.tb_frame.f_code
    return f"{last.tb_frame.f_globals.get('__name__')}.{co.co_name}:{last.tb_lineno}"


def describe_unexpected(e: BaseException) -> tuple[str, int]:
    """The one stderr line and exit code for an exception that no reader turned into a typed error.

    Readers name the file and offset of damage themselves (``CorruptDataError``, through ``errors.unpack_at``):
    an exception arriving here untyped is a value no check caught, said as unreadable data (exit 4) with the
    place in the code it came from, never a file guessed from the code's variables. A MemoryError is a size or
    count too large to hold (from the store or an option), never an empty message."""
    inner = _innermost(e.__traceback__)
    if isinstance(e, MemoryError):
        detail = str(e) or "no detail"
        msg = (f"too large to hold in memory ({detail}): a size or count read from the store, or given as an "
               f"option, is absurd")
    elif isinstance(e, RecursionError):
        msg = "data nested too deeply to read"
    else:
        text = str(e) or type(e).__name__
        msg = f"unreadable data ({type(e).__name__}: {text})"
    if inner:
        msg += f" [in {inner}; --debug shows the traceback]"
    return msg, EXIT_CORRUPT


def _stopped(e: BaseException) -> str:
    s = getattr(e, "rmq_output_stopped", None)
    return f" ({s})" if s else ""


def handle_errors(fn: Callable) -> Callable:
    """The error contract, in one place: every exception escaping a command becomes ONE line on stderr
    (``rmqinspect: error: FILE @ OFFSET: what``, plus where the output stopped when it had started) and the
    documented exit code (errors.py); ``--debug`` adds the traceback. Usage errors stay click's (2)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        inv = current()
        inv.holding += 1
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Interrupted as e:
            _interrupted(e)
        except RmqInspectError as e:
            _report(e, str(e), e.exit_code)
        except BrokenPipeError:
            try:
                sys.stdout = None  # type: ignore[assignment]
            finally:
                sys.exit(0)
        except OSError as e:
            from ..sinks.staging import describe_write_error

            fname = getattr(e, "filename", None)
            full = describe_write_error(e)
            if full is not None and full.startswith("standard output"):
                e.rmq_output_stopped = None  # type: ignore[attr-defined]  # stdout itself is cut: no claim on it
            _report(e, full or f"{fname + ': ' if fname else ''}{getattr(e, 'strerror', None) or e}", EXIT_IO)
        except Exception as e:  # noqa: BLE001 - the contract: no traceback reaches the user
            _report(e, *describe_unexpected(e))
        finally:
            inv.holding -= 1
            if not inv.holding:
                _safe_flush(sys.stdout)
                flush_notes()

    return wrapper


def _interrupted(e: Interrupted) -> None:
    """A signal (cli.lifecycle): outputs not yet in place removed, worker pools shut down, one line, 128 + n."""
    from ..sinks.staging import discard_pending, pending

    release_frames(e)
    removed = [f"{s.what} ({s.final})" for s in pending()]
    discard_pending()
    _safe_flush(sys.stdout)
    error(f"interrupted by {e.name}: stopped before the end{_stopped(e)}"
          + (f"; removed {', '.join(removed)}, unfinished" if removed else ""))
    sys.exit(e.exit_code)


def _report(e: BaseException, message: str, code: int) -> None:
    from ..sinks.staging import discard_pending

    discard_pending()  # an output being written is removed, never left looking complete
    if debug_enabled():
        import traceback

        traceback.print_exception(e, file=sys.stderr)
    error(message + _stopped(e))
    sys.exit(code)
