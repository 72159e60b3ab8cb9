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


# Columns of free text (explanations, not identifiers): the only ones ever folded or dropped to fit a terminal.
# Everything else (offsets, topics, keys, ids, file names, times) is printed whole on one line, always.
FREE_TEXT_COLUMNS = frozenset({"note", "notes", "problems", "reason", "reasons", "detail", "why", "body", "record",
                               "evidence", "damage", "stopped", "message", "description", "explanation", "error",
                               "what", "verdict", "cause"})


class TableLayout:
    """How tables are laid out, from the options every command has (--columns, --vertical, --no-truncate)."""

    columns: tuple[str, ...] | None = None
    vertical = False
    no_truncate = False
    asked_columns_seen: set[str] = set()


layout = TableLayout()


def _cell(v: Any, width: int | None = None) -> str:
    """A cell's text on one line (control characters escaped); cut only when ``width`` is given (free text on
    a terminal that cannot hold it)."""
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        s = dumps(v)
    else:
        s = str(v)
    s = s.replace("\x01", "\\x01").replace("\x02", "\\x02").replace("\n", "\\n").replace("\r", "\\r")
    if width is not None and len(s) > width:
        s = s[: width - 1] + "…"
    return s


def _pick_columns(rows: list[dict], columns: Sequence[str] | None) -> list[str]:
    cols = list(columns) if columns is not None else (list(rows[0].keys()) if rows else [])
    if layout.columns:
        available = set(cols) | {k for r in rows for k in r}
        wanted = [c for c in layout.columns if c in available]
        layout.asked_columns_seen.update(wanted)
        if wanted:
            return wanted
    return cols


def _project(row: dict) -> dict:
    picked = {c: row[c] for c in layout.columns or () if c in row}
    layout.asked_columns_seen.update(picked)
    return picked or row


def terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def emit(rows: Iterable[dict], fmt: str, columns: Sequence[str] | None = None, *, title: str | None = None,
         out=None, cell_width: int | None = None) -> int:
    """Render a stream of row dicts. ``columns`` picks and orders the table columns (JSON keeps all keys;
    ``--columns`` picks in every format). Returns the number of rows written. ``cell_width`` is kept for
    callers; identifiers are never cut, free text only to fit a terminal."""
    out = out or sys.stdout
    n = 0
    if layout.columns and fmt in ("json", "ndjson"):
        rows = (_project(r) for r in rows)
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
    # table: buffered in chunks so huge walks still print progressively
    chunk: list[dict] = []
    first = True
    try:
        for row in rows:
            chunk.append(row)
            n += 1
            if len(chunk) >= 500:
                _print_table(chunk, columns, title if first else None, out, cell_width, header=first)
                first = False
                chunk = []
    except BaseException as e:  # an interrupt too (cli.lifecycle)
        if chunk:
            _print_table(chunk, columns, title if first else None, out, cell_width, header=first)
        _mark_stopped(e, n, "the table is incomplete")
        raise
    if chunk:
        _print_table(chunk, columns, title if first else None, out, cell_width, header=first)
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


def _print_table(rows: list[dict], columns, title, out, width=None, header=True) -> None:
    columns = _pick_columns(rows, columns)
    if layout.vertical:
        _print_vertical(rows, columns, title, out)
        return
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    if is_terminal(out):
        _print_terminal_table(cells, columns, title, out, header)
        return
    if title:
        out.write(title + "\n")
    out.write(text_table(cells, columns if header else None) + "\n")


def text_table(cells: list[list[str]], headers: Sequence[str] | None = None) -> str:
    """Plain-text columns: tabulate's "simple" format (with headers) or "plain" (without), numbers left as text.
    Imported here, not at module load: tabulate pulls in importlib.metadata (~30 ms), which --help, --version
    and commands that print no table should not pay."""
    from tabulate import tabulate

    if headers is not None:
        return tabulate(cells, headers=list(headers), tablefmt="simple", disable_numparse=True)
    return tabulate(cells, tablefmt="plain", disable_numparse=True)


def _print_vertical(rows: list[dict], columns: list[str], title, out) -> None:
    """One record per block (psql's \\x): every value whole on its own line, whatever the width."""
    if title:
        out.write(title + "\n")
    import textwrap

    w = max((len(c) for c in columns), default=0)
    room = terminal_width() - w - 3 if is_terminal(out) and not layout.no_truncate else 0
    for i, r in enumerate(rows, 1):
        out.write(f"-[ RECORD {i} ]" + "-" * max(w - 8, 4) + "\n")
        for c in columns:
            v = _cell(r.get(c))
            if c in FREE_TEXT_COLUMNS and room >= 20 and len(v) > room:  # only free text is folded
                v = ("\n" + " " * w + " | ").join(textwrap.wrap(v, room, break_long_words=False))
            out.write(f"{c.ljust(w)} | {v}\n")


def _print_terminal_table(cells: list[list[str]], columns: list[str], title, out, header: bool) -> None:
    """A rich table that fits the terminal: identifiers never wrap or cut. When it is too wide, free-text
    columns are folded, then dropped (a note says so), and when the identifiers alone do not fit the rows are
    shown one per block (--vertical); --no-truncate prints the full width instead."""
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table

    term = terminal_width()
    natural = [max([cell_len(c)] + [cell_len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    overhead = 3 * len(columns) + 1  # rich's box: "│ " before each cell, " " after, and the closing "│"
    free = [i for i, c in enumerate(columns) if c in FREE_TEXT_COLUMNS]
    fold: dict[int, int] = {}
    keep = list(range(len(columns)))
    if sum(natural) + overhead > term and not layout.no_truncate:
        fixed = sum(natural[i] for i in keep if i not in free)
        room = term - overhead - fixed
        if free and room >= 12 * len(free):
            share = room // len(free)
            fold = {i: min(natural[i], share) for i in free}
        elif free:
            keep = [i for i in keep if i not in free]
        if sum(natural[i] for i in keep if i not in fold) + sum(fold.values()) + 3 * len(keep) + 1 > term:
            _print_vertical([dict(zip(columns, row, strict=True)) for row in cells], columns, title, out)
            return
        if len(keep) < len(columns):
            hold_note(f"column(s) {', '.join(c for i, c in enumerate(columns) if i not in keep)} left out to fit "
                      f"{term} columns (--vertical, --columns or --no-truncate show them)")
    t = Table(title=title, show_header=header, header_style="bold")
    for i in keep:
        if i in fold:
            t.add_column(columns[i], overflow="fold", max_width=fold[i], min_width=min(fold[i], 12))
        else:
            t.add_column(columns[i], no_wrap=True, min_width=natural[i], overflow="ignore")
    for row in cells:
        t.add_row(*[row[i] for i in keep])
    width = max(term, sum(natural[i] for i in keep if i not in fold) + sum(fold.values()) + 3 * len(keep) + 1)
    Console(file=out, soft_wrap=False, width=width).print(t)


def emit_document(doc: Any, fmt: str, render_table: Callable[[Any], None] | None = None, out=None) -> None:
    """One object: JSON for json/ndjson (ndjson = compact on one line), ``render_table`` for humans."""
    out = out or sys.stdout
    if fmt == "json":
        out.write(dumps(doc, pretty=True) + "\n")
    elif fmt == "ndjson":
        out.write(dumps(doc) + "\n")
    elif render_table is not None:
        render_table(doc)
    else:
        out.write(dumps(doc, pretty=True) + "\n")


def print_kv(title: str, pairs: Sequence[tuple[str, Any]], out=None, skip_empty: bool = False) -> None:
    """A two-column key/value block for human output: plain text on a terminal too, so a long value (a path,
    an offset list) is never folded inside a cell; --columns does not apply (the keys are the fields)."""
    out = out or sys.stdout
    if skip_empty:
        pairs = [(k, v) for k, v in pairs if v not in (None, "", [])]
    out.write(title + "\n" + text_table([[str(k), _cell(v)] for k, v in pairs]) + "\n\n")


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


# Notes and warnings raised while a command runs are held and written to stderr when it ends, so they come
# after the table, never inside it (both streams often go to one terminal). Past _NOTES_HELD they are written
# at once: memory stays bounded on a walk that meets damage at every record, and nothing is dropped.
_NOTES_HELD = 1000
_notes: list[str] = []
_holding = [0]


def warn(message: str) -> None:
    _stderr_line(f"rmqinspect: warning: {message}")


def note(message: str) -> None:
    """Something the reader should know about the answer (an assumption, where an input was resolved to)."""
    _stderr_line(f"rmqinspect: note: {message}")


def hold_note(message: str) -> None:
    """A note said before the command runs (e.g. how STORE was resolved), written with the others at its end."""
    line = f"rmqinspect: note: {message}"
    if len(_notes) < _NOTES_HELD:
        _notes.append(line)
    else:
        click.echo(line, err=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(flush_notes)


def _stderr_line(line: str) -> None:
    if _holding[0] and len(_notes) < _NOTES_HELD:
        _notes.append(line)
    else:
        click.echo(line, err=True)


def pending_notes() -> list[str]:
    """The notes held for the end of the running command (tests, and commands that render them)."""
    return list(_notes)


def flush_notes() -> None:
    lines, _notes[:] = list(_notes), []
    for line in lines:
        click.echo(line, err=True)


_debug = [False]


def set_debug(enabled: bool) -> None:
    """The global ``--debug``: errors show their traceback (also RMQINSPECT_DEBUG=1)."""
    _debug[0] = bool(enabled)


def debug_enabled() -> bool:
    return _debug[0] or os.environ.get("RMQINSPECT_DEBUG", "") not in ("", "0")


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
        _holding[0] += 1
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
            _holding[0] -= 1
            if not _holding[0]:
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
