"""``epochFileCheckpoint`` (controller mode, AutoSwitch HA): the epoch history of one replica, as text.

Layout (``common/.../utils/CheckpointFile`` and ``EpochFileCache.EpochEntrySerializer``, develop 8fc57f1):

- line 1: the number of entries (``Integer.parseInt``);
- line 2: ``UtilAll.crc32`` of the entry block - ``CRC32 & 0x7FFFFFFF`` as a decimal int - where **0 means
  "not checked"** (``NOT_CHECK_CRC_MAGIC_CODE``);
- one ``epoch-startOffset`` line per entry. Reading re-joins the lines with ``System.lineSeparator()`` before the
  CRC, so the CRC is over ``"\\n"``-terminated lines on Linux whatever the file's own line ends are.

A line that does not split into exactly two parts on ``-`` is skipped (``fromLine`` returns null), which then
fails the count check. The end offset of an entry is never stored: ``EpochFileCache.initEntries`` gives every
entry the start of the entry *after it in the file* and the last one runs to the max physical offset (the
entries themselves are kept in a map sorted by epoch, so a file out of order yields end offsets that do not
follow the epochs). Pure functions here; reading files and choosing between the file and its ``.bak`` is
``store.epoch``'s.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

LONG_MAX = (1 << 63) - 1
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
NOT_CHECK_CRC = 0


@dataclass
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX  # Long.MAX_VALUE until a later entry or the max offset bounds it

    def to_dict(self) -> dict:
        return {"epoch": self.epoch, "start_offset": self.start_offset,
                "end_offset": None if self.end_offset == LONG_MAX else self.end_offset}


@dataclass
class EpochFileParse:
    """One epoch file as ``CheckpointFile.read`` sees it. ``error`` is the reason the broker's read throws (it then
    reads the ``.bak``); ``entries`` are in file order with end offsets as ``initEntries`` derives them."""

    count: int | None
    stored_crc: int | None
    computed_crc: int | None
    entries: list[EpochEntry] = field(default_factory=list)
    error: str | None = None
    crc_checked: bool = False
    fatal: bool = False  # a NumberFormatException: not an IOException, so no .bak fallback - the read itself fails

    @property
    def ok(self) -> bool:
        return self.error is None


def crc32_of_lines(lines: list[str]) -> int:
    block = "".join(line + "\n" for line in lines).encode("utf-8")
    return zlib.crc32(block) & 0x7FFFFFFF


def _java_number(text: str, lo: int, hi: int) -> int | None:
    """``Integer.parseInt`` / ``Long.parseLong``: an optional sign then ASCII digits, no spaces, in range."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all("0" <= c <= "9" for c in digits):
        return None
    v = int(text)
    return v if lo <= v <= hi else None


def _java_int(text: str) -> int | None:
    return _java_number(text, INT_MIN, INT_MAX)


def _java_long(text: str) -> int | None:
    return _java_number(text, -(1 << 63), LONG_MAX)


def parse_epoch_file(data: bytes) -> EpochFileParse:
    """Parse the bytes of an ``epochFileCheckpoint`` the way ``CheckpointFile.read(path)`` does."""
    text = data.decode("utf-8", errors="replace")
    # BufferedReader.readLine: \n, \r\n or \r end a line; the last line needs no terminator
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        # readLine() returns null: Integer.parseInt(null) throws NumberFormatException
        return EpochFileParse(None, None, None, error="the file is empty", fatal=True)
    count = _java_int(lines[0])
    if count is None:
        return EpochFileParse(None, None, None, error=f"line 1 {lines[0][:40]!r} is not an int entry count",
                              fatal=True)
    if len(lines) < 2:
        return EpochFileParse(count, None, None, error="no CRC line", fatal=True)
    stored = _java_int(lines[1])
    if stored is None:
        return EpochFileParse(count, None, None, error=f"line 2 {lines[1][:40]!r} is not an int CRC", fatal=True)
    body = lines[2:]
    entries: list[EpochEntry] = []
    for i, line in enumerate(body, start=3):
        parts = line.split("-")
        # String.split drops trailing empty strings: "7-" is one part, like "7"
        while len(parts) > 1 and parts[-1] == "":
            parts.pop()
        if len(parts) != 2:
            continue
        epoch, start = _java_int(parts[0]), _java_long(parts[1])
        if epoch is None or start is None:
            return EpochFileParse(count, stored, None, error=f"line {i} {line[:40]!r} is not epoch-startOffset",
                                  fatal=True)
        entries.append(EpochEntry(epoch, start))
    computed = crc32_of_lines(body)
    res = EpochFileParse(count, stored, computed, entries, crc_checked=stored != NOT_CHECK_CRC)
    if len(entries) != count:
        res.error = f"the count line says {count} entries, {len(entries)} were read"
    elif stored != NOT_CHECK_CRC and stored != computed:
        res.error = f"entries CRC {computed} does not match the stored {stored}"
    derive_end_offsets(res.entries)
    return res


def derive_end_offsets(entries: list[EpochEntry], last_end: int | None = None) -> None:
    """``initEntries`` (each entry ends where the next one in the list starts) and, with ``last_end``,
    ``setLastEpochEntryEndOffset`` (the entry with the highest epoch ends there when it starts at or before it)."""
    for a, b in zip(entries, entries[1:]):
        a.end_offset = b.start_offset
    if entries:
        entries[-1].end_offset = LONG_MAX
    if last_end is not None and entries:
        top = max(entries, key=lambda e: e.epoch)
        if top.start_offset <= last_end:
            top.end_offset = last_end


def epoch_map(entries: list[EpochEntry]) -> dict[int, EpochEntry]:
    """The TreeMap<epoch, entry> the cache keeps: a later line with the same epoch replaces the earlier."""
    out: dict[int, EpochEntry] = {}
    for e in entries:
        out[e.epoch] = e
    return dict(sorted(out.items()))


def find_consistent_point(local: list[EpochEntry], master: list[EpochEntry]) -> int:
    """``EpochFileCache.findConsistentPoint``: the local epochs newest first, the first one the master has with the
    same start offset; the point is the smaller of the two end offsets. -1 when no epoch agrees."""
    theirs = epoch_map(master)
    for epoch, mine in sorted(epoch_map(local).items(), reverse=True):
        other = theirs.get(epoch)
        if other is not None and other.start_offset == mine.start_offset:
            return min(mine.end_offset, other.end_offset)
    return -1


def encode_epoch_file(entries: list[tuple[int, int]], crc: int | None = None) -> bytes:
    """What ``CheckpointFile.write`` writes for ``entries`` ((epoch, startOffset) pairs); ``crc`` overrides the
    computed CRC (0: unchecked; anything else: a damaged file for tests)."""
    lines = [f"{e}-{s}" for e, s in entries]
    c = crc32_of_lines(lines) if crc is None else crc
    return (f"{len(lines)}\n{c}\n" + "".join(line + "\n" for line in lines)).encode("utf-8")
