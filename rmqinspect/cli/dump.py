"""`dump`: the raw bytes at any commit-log offset, valid or not, with the record header laid over them."""

from __future__ import annotations

import click

from ._params import OFFSET, POSITIVE_INT, broker_conf, store_argument
from .output import emit, handle_errors, note, render

DEFAULT_LENGTH = 256
MAX_LENGTH = 1 << 24  # 16 MiB: a dump is read in memory; larger ranges are for `hexdump` on the file itself


@click.command("dump")
@store_argument
@click.option("--offset", type=OFFSET, required=True, help="Physical offset of the first byte (decimal or 0x-hex).")
@click.option("--length", type=POSITIVE_INT, default=None,
              help=f"Bytes to show (default: the enclosing record's size when --offset starts it, else "
                   f"{DEFAULT_LENGTH}; at most {MAX_LENGTH}).")
@click.option("--snap", is_flag=True, help="Start at the beginning of the record that contains --offset.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
@handle_errors
def dump(store, offset, length, snap, fmt):
    """The raw bytes at any commit-log offset (hexdump -C), valid or not, with the record header laid over them.

    The bytes are read as they are on disk (no record check decides what is shown). The record that contains
    the offset is named (the broker's walk from the file's start); --snap starts the dump there. The field
    overlay names each header field where it lies and stops where the lengths stop adding up.

    \b
    Examples:
      rmqinspect dump STORE --offset 1197830
      rmqinspect dump STORE --offset 580 --snap
    """
    from ..analyses.dump import enclosing_record, field_overlay, hexdump_lines
    from ..store import Store

    st = Store.open(store, conf=broker_conf())
    cl = st.commitlog
    f, _ = cl.locate(offset)
    rec = enclosing_record(cl, offset)
    if rec is not None and rec.start != offset:
        if snap:
            offset = rec.start
        else:
            note(f"offset {offset} lies inside the {rec.kind} record at {rec.start} (size {rec.size}); "
                 f"--snap starts the dump there")
    elif rec is None:
        note(f"the broker's walk of {f.name} stops before offset {offset}: no record encloses it")
    if length is None:
        length = rec.size if rec is not None and rec.start == offset and 0 < rec.size <= MAX_LENGTH \
            else DEFAULT_LENGTH
    length = min(length, MAX_LENGTH)
    pos = offset - f.start
    data = bytes(f.buffer[pos:min(pos + length, f.size)])
    if len(data) < length:
        note(f"{f.name} ends {len(data)} bytes after offset {offset}; the dump stops at the file's end")
    fields = field_overlay(data, offset)
    render({"file": f.path, "position": pos, "physical_offset": offset, "length": len(data), "bytes": data.hex(),
            "enclosing_record": rec.to_dict() if rec else None, "fields": [x.to_dict() for x in fields]}, fmt,
           lambda d: _render_dump(d, data, fields, hexdump_lines))


def _render_dump(d: dict, data: bytes, fields, hexdump_lines) -> None:
    offset = d["physical_offset"]
    click.echo(f"# {d['file']} position {d['position']}, physical offset {offset} (0x{offset:x}), {len(data)} bytes")
    for line in hexdump_lines(data, offset):
        click.echo(line)
    if fields:
        click.echo()
        emit((x.to_dict() for x in fields), "table", ("name", "physical_offset", "length", "value", "note"),
             title="Record fields over these bytes")


COMMANDS = [dump]
