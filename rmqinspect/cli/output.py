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
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import click

from ..store.errors import EXIT_IO, RmqInspectError

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
    if pretty:
        return json.dumps(obj, ensure_ascii=False, default=_default, indent=2)
    return json.dumps(obj, ensure_ascii=False, default=_default, separators=(",", ":"))


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


def _cell(v: Any, width: int = 60) -> str:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        s = dumps(v)
    else:
        s = str(v)
    s = s.replace("\x01", "\\x01").replace("\x02", "\\x02").replace("\n", "\\n")
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s


def emit(rows: Iterable[dict], fmt: str, columns: Sequence[str] | None = None, *, title: str | None = None,
         out=None, cell_width: int = 60) -> int:
    """Render a stream of row dicts. ``columns`` picks and orders the table columns (JSON keeps all keys).
    Returns the number of rows written."""
    out = out or sys.stdout
    n = 0
    if fmt == "ndjson":
        for row in rows:
            out.write(dumps(row) + "\n")
            n += 1
        out.flush()
        return n
    if fmt == "json":
        out.write("[")
        for row in rows:
            out.write(("\n" if n == 0 else ",\n") + dumps(row))
            n += 1
        out.write("\n]\n" if n else "]\n")
        out.flush()
        return n
    # table: buffered in chunks so huge walks still print progressively
    chunk: list[dict] = []
    first = True
    for row in rows:
        chunk.append(row)
        n += 1
        if len(chunk) >= 500:
            _print_table(chunk, columns, title if first else None, out, cell_width, header=first)
            first = False
            chunk = []
    if chunk or first:
        _print_table(chunk, columns, title if first else None, out, cell_width, header=True)
    return n


def _print_table(rows: list[dict], columns, title, out, width, header=True) -> None:
    if columns is None:
        columns = list(rows[0].keys()) if rows else []
    if is_terminal(out):
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, show_header=header, header_style="bold")
        for c in columns:
            t.add_column(c, overflow="fold")
        for r in rows:
            t.add_row(*[_cell(r.get(c), width) for c in columns])
        Console(file=out, soft_wrap=False).print(t)
    else:
        from tabulate import tabulate

        if title:
            out.write(title + "\n")
        out.write(tabulate([[_cell(r.get(c), width) for c in columns] for r in rows],
                           headers=columns if header else (), tablefmt="simple", disable_numparse=True) + "\n")


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


def print_kv(title: str, pairs: Sequence[tuple[str, Any]], out=None) -> None:
    """A two-column key/value block for human output."""
    out = out or sys.stdout
    if is_terminal(out):
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, show_header=False)
        t.add_column("field", style="bold")
        t.add_column("value", overflow="fold")
        for k, v in pairs:
            t.add_row(str(k), _cell(v, 200))
        Console(file=out).print(t)
    else:
        from tabulate import tabulate

        out.write(title + "\n" + tabulate([[k, _cell(v, 200)] for k, v in pairs], tablefmt="plain") + "\n\n")


@contextlib.contextmanager
def progress(total: int, description: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr when it is a terminal and ``enabled``; otherwise a no-op.
    Yields ``advance_to(done)``."""
    if not enabled or not is_terminal(sys.stderr) or total <= 0:
        yield lambda done: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn(), transient=True, console=__import__("rich.console").console.Console(
                      file=sys.stderr)) as p:
        task = p.add_task(description, total=total)
        last = [0]

        def advance_to(done: int) -> None:
            if done - last[0] >= (1 << 22) or done >= total:
                p.update(task, completed=min(done, total))
                last[0] = done

        yield advance_to


def error(message: str) -> None:
    click.echo(f"rmqinspect: error: {message}", err=True)


def warn(message: str) -> None:
    click.echo(f"rmqinspect: warning: {message}", err=True)


def handle_errors(fn: Callable) -> Callable:
    """Turn library errors into a one-line message and the documented exit code; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RmqInspectError as e:
            error(str(e))
            sys.exit(e.exit_code)
        except BrokenPipeError:
            try:
                sys.stdout = None  # type: ignore[assignment]
            finally:
                sys.exit(0)
        except (OSError, MemoryError) as e:
            fname = getattr(e, "filename", None)
            error(f"{fname + ': ' if fname else ''}{getattr(e, 'strerror', None) or e}")
            sys.exit(EXIT_IO)

    return wrapper
