"""Field tables: each fixed-size, big-endian RocketMQ layout is declared once, as (name, type code) pairs.

Everything a reader needs is derived from that one declaration, so the four forms cannot drift apart:

* ``construct()`` / ``subcons()`` - the construct schema (declarative; documentation, tests, single records);
* ``struct`` / ``format`` - a precompiled ``struct.Struct`` (hot paths that unpack one entry at a time);
* ``dtype`` - a packed numpy dtype with the same field names (hot paths that view a whole file as rows);
* ``position(name)`` / ``index(name)`` - byte offset of a field, and its place in the unpacked tuple.

Type codes are the ``struct`` ones: ``b`` int8, ``h`` int16, ``i`` int32, ``q`` int64 (all signed, as Java
writes them), and ``<n>s`` for n raw bytes (IP addresses, one-byte separators). Java has no unsigned types,
so neither has this table.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from construct import Struct

# numpy and construct are imported when a table's dtype or schema is first used, not when the table is
# declared: every format module declares its tables at import, and a command that reads one msgId or one
# index slot should not pay ~0.1 s of numpy start-up for it.
_INTS = {"b": ("Int8sb", ">i1"), "h": ("Int16sb", ">i2"), "i": ("Int32sb", ">i4"), "q": ("Int64sb", ">i8")}
_BYTES = re.compile(r"^([0-9]+)s$")


def _byte_count(code: str) -> int:
    m = _BYTES.match(code)
    if not m:
        raise ValueError(f"unknown field type code {code!r}")
    return int(m.group(1))


def _subcon(code: str):
    import construct

    if code in _INTS:
        return getattr(construct, _INTS[code][0])
    return construct.Bytes(_byte_count(code))


def _numpy_code(code: str) -> str:
    if code in _INTS:
        return _INTS[code][1]
    return f"V{_byte_count(code)}"  # raw bytes, kept exact (no NUL stripping as with "S")


class FieldTable:
    """One fixed-size big-endian layout. ``fields`` are ``(name, type code)`` pairs in file order."""

    def __init__(self, fields: Iterable[tuple[str, str]]):
        self.fields: tuple[tuple[str, str], ...] = tuple((str(n), str(c)) for n, c in fields)
        self.names: tuple[str, ...] = tuple(n for n, _ in self.fields)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"duplicate field names in {self.names}")
        self.format: str = ">" + "".join(c for _, c in self.fields)
        self.struct: struct.Struct = struct.Struct(self.format)
        self.size: int = self.struct.size
        pos = 0
        self.positions: dict[str, int] = {}
        for n, c in self.fields:
            self.positions[n] = pos
            pos += struct.calcsize(">" + c)
        assert pos == self.size
        self._schema: Struct | None = None

    @cached_property
    def dtype(self) -> np.dtype:
        """A packed numpy dtype with the same field names and positions."""
        import numpy as np

        dt = np.dtype([(n, _numpy_code(c)) for n, c in self.fields])
        assert dt.itemsize == self.size
        return dt

    def __len__(self) -> int:
        return len(self.fields)

    def __add__(self, other: FieldTable | Sequence[tuple[str, str]]) -> FieldTable:
        more = other.fields if isinstance(other, FieldTable) else tuple(other)
        return FieldTable(self.fields + tuple(more))

    def __getitem__(self, item: slice) -> FieldTable:
        return FieldTable(self.fields[item])

    def position(self, name: str) -> int:
        """Byte offset of ``name`` from the start of the layout."""
        return self.positions[name]

    def index(self, name: str) -> int:
        """Place of ``name`` in the tuple ``struct.unpack`` returns (and in ``names``)."""
        return self.names.index(name)

    def subcons(self, **override: Any) -> list:
        """``name / type`` construct fields, in order; ``override`` replaces a field's type by name
        (e.g. ``magic_code=OneOf(Int32sb, ...)`` or a ``Const``) without changing its size."""
        unknown = set(override) - set(self.names)
        if unknown:
            raise KeyError(f"no such fields: {sorted(unknown)}")
        return [n / (override[n] if n in override else _subcon(c)) for n, c in self.fields]

    def construct(self, **override: Any) -> Struct:
        from construct import Struct

        if override:
            return Struct(*self.subcons(**override))
        if self._schema is None:
            self._schema = Struct(*self.subcons())
        return self._schema

    def unpack_from(self, buf, offset: int = 0) -> tuple:
        return self.struct.unpack_from(buf, offset)

    def pack(self, *values) -> bytes:
        return self.struct.pack(*values)

    def parse_dict(self, buf, offset: int = 0) -> dict[str, Any]:
        """The struct form as a ``{name: value}`` dict (what a construct parse gives, field for field)."""
        return dict(zip(self.names, self.struct.unpack_from(buf, offset)))

    def __repr__(self) -> str:
        return f"FieldTable({self.format!r}, {self.size} bytes)"
