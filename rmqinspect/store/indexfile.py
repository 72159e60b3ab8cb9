"""IndexFile reader (FORMATS.md §5): header, slot table, items, and the broker's per-file lookup.

The slot count (maxHashSlotNum) and item count (maxIndexNum) are not stored in the file. They come from
the caller (a flag), else the broker.conf given (``conf``, ``store.broker_conf``), else they are proven from the
data: every geometry the file length allows is tested against rules the broker's putKey guarantees, and
the answer is used only when exactly one survives (``prove_index_geometry``); otherwise the file cannot be
read without the user settling it (``IndexGeometryError``, naming the flag and config key).
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CorruptDataError, IndexGeometryError
from ..formats.constants import DEFAULT_INDEX_MAX, DEFAULT_INDEX_SLOTS
from ..formats.distinct import has_repeats
from ..formats.indexfile import (
    HASH_SLOT_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_ITEM,
    INDEX_ITEM_SIZE,
    index_file_size,
    slot_position,
)
from ..formats.javahash import build_index_key, index_key_hash
from .broker_conf import BrokerConf, configured
from .mapped import MappedFile

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where a whole table is viewed as an array (slot_table, items, the proof of a large file's
# geometry): a one-key look-up on a small index file reads a slot and a few items and should not pay its
# ~60 ms start-up.


@dataclass
class IndexHeaderData:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


@dataclass
class ChainStep:
    """One item visited while walking a slot chain (for --explain)."""

    item: int
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int
    time_read: int
    matched: bool
    reason: str


@dataclass
class FileLookup:
    file: str
    slot: int
    slot_value: int
    offsets: list[int] = field(default_factory=list)
    steps: list[ChainStep] = field(default_factory=list)
    stopped: str = ""


class IndexFile:
    def __init__(self, path: str, slots: int | None = None, max_items: int | None = None,
                 conf: BrokerConf | None = None, proven: IndexGeometry | None = None):
        """``proven``: this file's geometry as ``prove_index_geometry`` found it earlier in the same command (the
        report takes verify's): used where the proof would run, instead of running it again."""
        self.mapped = MappedFile(path)
        self.path = path
        self.name = os.path.basename(path)
        if self.mapped.size < INDEX_HEADER_SIZE:
            raise CorruptDataError(f"index file is {self.mapped.size} bytes, shorter than its {INDEX_HEADER_SIZE}-byte "
                                   "header", path, 0)
        self.header = IndexHeaderData(*INDEX_HEADER.unpack_from(self.mapped.buffer, 0))
        self.geometry_note = ""
        self.geometry: IndexGeometry
        source, detail = "flag", ""
        if slots is None and max_items is None:
            # flag > broker.conf > proof from the data. A broker.conf naming one of the two keys leaves the
            # other at the broker's default, as the broker itself would.
            cs, cm = configured(conf, "maxHashSlotNum"), configured(conf, "maxIndexNum")
            if cs is not None or cm is not None:
                slots = cs.value if cs is not None else DEFAULT_INDEX_SLOTS
                max_items = cm.value if cm is not None else DEFAULT_INDEX_MAX
                source, detail = "config", "; ".join(c.detail for c in (cs, cm) if c is not None)
        if slots is None:
            slots, max_items, self.geometry_note = infer_geometry(self, proven)
            source, detail = "inferred", self.geometry_note
        elif max_items is None:
            max_items = (self.mapped.size - INDEX_HEADER_SIZE - slots * HASH_SLOT_SIZE) // INDEX_ITEM_SIZE
        if source != "inferred":
            self.geometry = IndexGeometry(slots, max_items, source, (), detail)
        self.slots = slots
        self.max_items = max_items
        self.expected_size = index_file_size(slots, max_items)
        self.truncated = self.mapped.size < self.expected_size

    @property
    def items_base(self) -> int:
        return INDEX_HEADER_SIZE + self.slots * HASH_SLOT_SIZE  # slot_position(slots), inlined: per chain item

    def slot_value(self, slot: int) -> int | None:
        pos = slot_position(slot)
        if pos + HASH_SLOT_SIZE > self.mapped.size:
            return None
        return int.from_bytes(self.mapped.buffer[pos:pos + HASH_SLOT_SIZE], "big", signed=True)

    def item(self, n: int) -> tuple[int, int, int, int] | None:
        """(key_hash, phy_offset, time_diff, prev_index) of item n, None when beyond the file."""
        pos = self.items_base + n * INDEX_ITEM_SIZE
        if n < 0 or pos + INDEX_ITEM_SIZE > self.mapped.size:
            return None
        return INDEX_ITEM.unpack_from(self.mapped.buffer, pos)

    def slot_table(self) -> np.ndarray:
        import numpy as np

        from ..formats.indexfile import HASH_SLOT_DTYPE

        n = min(self.slots, (self.mapped.size - INDEX_HEADER_SIZE) // HASH_SLOT_SIZE)
        return np.frombuffer(self.mapped.buffer, dtype=HASH_SLOT_DTYPE, count=n, offset=INDEX_HEADER_SIZE)

    def items(self) -> np.ndarray:
        """Used items 1..indexCount-1 (item 0 is never written), bounded by the file length."""
        import numpy as np

        from ..formats.indexfile import INDEX_ITEM_DTYPE

        used = max(self.header.index_count - 1, 0)
        avail = max((self.mapped.size - self.items_base) // INDEX_ITEM_SIZE - 1, 0)
        n = min(used, avail)
        return np.frombuffer(self.mapped.buffer, dtype=INDEX_ITEM_DTYPE, count=n,
                             offset=self.items_base + INDEX_ITEM_SIZE)

    def is_time_matched(self, begin: int, end: int) -> bool:
        """IndexFile.isTimeMatched."""
        fb, fe = self.header.begin_timestamp, self.header.end_timestamp
        return (begin < fb and end > fe) or (fb <= begin <= fe) or (fb <= end <= fe)

    def select_phy_offset(self, key_string: str, max_num: int, begin: int, end: int,
                          collected: int = 0, explain: bool = False) -> FileLookup:
        """IndexFile.selectPhyOffset for one file (FORMATS.md §5.5), cycle-safe.

        ``collected`` is how many results earlier files already produced (the broker shares one list).
        """
        key_hash = index_key_hash(key_string)
        slot = key_hash % self.slots
        sv = self.slot_value(slot)
        res = FileLookup(self.name, slot, sv if sv is not None else 0)
        ic = self.header.index_count
        if sv is None:
            res.stopped = "slot lies beyond the end of the (truncated) file"
            return res
        if sv <= 0 or sv > ic or ic <= 1:
            res.stopped = "empty slot" if sv == 0 else (f"slot value {sv} out of range (indexCount {ic})"
                                                        if sv != 0 else "empty slot")
            return res
        n = sv
        seen: set[int] = set()
        while True:
            if collected + len(res.offsets) >= max_num:
                res.stopped = f"max results ({max_num}) reached"
                break
            if n in seen:
                res.stopped = f"prevIndex cycle at item {n}: chain walked before (corrupt index)"
                break
            seen.add(n)
            it = self.item(n)
            if it is None:
                res.stopped = f"item {n} lies beyond the end of the (truncated) file"
                break
            h, phy, tdiff, prev = it
            if tdiff < 0:
                res.stopped = f"item {n} has negative timeDiff {tdiff} (corruption guard)"
                if explain:
                    res.steps.append(ChainStep(n, h, phy, tdiff, prev, 0, False, "negative timeDiff"))
                break
            time_read = self.header.begin_timestamp + tdiff * 1000
            time_ok = begin <= time_read <= end
            matched = h == key_hash and time_ok
            if matched:
                res.offsets.append(phy)
            if explain:
                why = ("hash and time match" if matched else
                       ("hash differs" if h != key_hash else f"time {time_read} outside [{begin}, {end}]"))
                res.steps.append(ChainStep(n, h, phy, tdiff, prev, time_read, matched, why))
            if prev <= 0 or prev > ic or prev == n or time_read < begin:
                res.stopped = ("end of chain" if prev == 0 else
                               "older than begin" if time_read < begin else
                               f"prevIndex {prev} out of range" if prev < 0 or prev > ic else
                               "prevIndex points to itself")
                break
            n = prev
        return res

    def close(self) -> None:
        self.mapped.close()


# A candidate geometry is kept only when the file is self-consistent under it. Each rule is something
# IndexFile.putKey guarantees, so a geometry that breaks one cannot be the broker's:
#   size      40 + 4*slots + 20*maxIndexNum == file size, and indexCount <= maxIndexNum (isWriteable)
#   slots     every non-zero slot word is an item number in [1, indexCount-1] (putKey writes nothing else there)
#   zeros     nothing non-zero lies past the last used item, and item 0 is all zero (the mapped file is
#             created zero-filled; indexCount starts at 1, so item 0 is never written)
#   heads     every used slot's head item hashes to that slot (keyHash % hashSlotNum)
#   chains    every used item's prevIndex points backwards (0 <= prev < n) and into the same slot, and each
#             item is either a slot head or exactly one later item's prev (a chain is a list, not a tree)
# The first two give, in one linear pass, bounds that leave a handful of slot counts (usually one or two);
# only those are checked in full. So inference costs O(file size), whatever the size.
INDEX_GEOMETRY_SETTLE = "--index-slots/--index-max (or maxHashSlotNum/maxIndexNum in --broker-config)"
_SCAN_CHUNK = 1 << 22  # words per pass: bounded memory on a 420 MB file
_SLOT_CHUNK = 1 << 18  # slots per pass of used_slots_sample: 2 MB of positions at most
MAX_GEOMETRY_CHECKS = 64  # a crafted file could leave many; past this the answer is "ambiguous"


@dataclass(frozen=True)
class IndexGeometry:
    """Proven (slots, maxIndexNum) of one index file - an IndexFile, or a 5.x tiered index file
    (``store.tiered_index``) - or the reason it could not be proven."""

    slots: int | None
    max_items: int | None
    source: str  # inferred | ambiguous | flag | config | compacted (a tiered file's layout check)
    candidates: tuple[tuple[int, int], ...] = ()
    detail: str = ""

    def to_dict(self) -> dict:
        value = None if self.slots is None else {"slots": self.slots, "max_items": self.max_items}
        return {"value": value, "source": self.source,
                "candidates": [{"slots": s, "max_items": m} for s, m in self.candidates], "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict) -> IndexGeometry:
        """The geometry ``to_dict`` gave."""
        v = d["value"]
        return cls(None if v is None else v["slots"], None if v is None else v["max_items"], d["source"],
                   tuple((c["slots"], c["max_items"]) for c in d["candidates"]), d["detail"])


# The steps every geometry proof ends with, whatever the file's rules (IndexFile here, the tiered index in
# store.tiered_index): an empty file needs no geometry, the candidates are checked up to a bound, and exactly one
# self-consistent survivor is the answer.

def empty_file_geometry(cands: range, default_slots: int, items_of: Callable[[int], int], settle: str,
                        what: str) -> IndexGeometry:
    """A file without items: no item proves anything and none is needed to read it (every lookup is empty); the
    broker's default slot count when it fits, else the smallest that does."""
    pick = default_slots if default_slots in cands else (cands[0] if cands else None)
    if pick is None:
        return IndexGeometry(None, None, "ambiguous", (), f"no geometry fits; pass {settle}")
    return IndexGeometry(pick, items_of(pick), "inferred", (),
                         f"{what}: {len(cands)} geometries fit, none is needed to read it")


def consistent_candidates(cands: range, check: Callable[[int], bool], items_of: Callable[[int], int],
                          settle: str) -> tuple[list[tuple[int, int]], IndexGeometry | None]:
    """The (slots, items) of the candidate slot counts ``check`` keeps, in order; past MAX_GEOMETRY_CHECKS
    candidates, the "ambiguous" answer instead (second item)."""
    survivors: list[tuple[int, int]] = []
    for checked, s in enumerate(cands):
        if checked >= MAX_GEOMETRY_CHECKS:
            return survivors, IndexGeometry(None, None, "ambiguous", tuple(survivors),
                                            f"more than {MAX_GEOMETRY_CHECKS} slot counts fit; pass {settle}")
        if check(s):
            survivors.append((s, items_of(s)))
    return survivors, None


def geometry_verdict(survivors: list[tuple[int, int]], none_detail: str, settle: str) -> IndexGeometry:
    """The geometry when exactly one candidate is self-consistent, else "ambiguous" naming what settles it."""
    if len(survivors) == 1:
        s, m = survivors[0]
        return IndexGeometry(s, m, "inferred", tuple(survivors),
                             f"{s} slots / {m} items: the only geometry under which the file is self-consistent")
    if not survivors:
        return IndexGeometry(None, None, "ambiguous", (), f"{none_detail}; pass {settle}")
    return IndexGeometry(None, None, "ambiguous", tuple(survivors),
                         f"{len(survivors)} geometries fit and are self-consistent "
                         f"({', '.join(f'{s}/{m}' for s, m in survivors[:5])}); pass {settle}")


_CHAIN_SAMPLE = 1 << 17  # items at each end whose prev links are followed (the rest: cheap whole-table rules)
# up to this many items the sampled chains cover every item and the whole-table rule costs next to nothing: it
# always runs; above it, only when the sampled rules leave more than one geometry
_WHOLE_TABLE_ITEMS = 2 * _CHAIN_SAMPLE


# heads and prev links checked by the first, sampled stage: a wrong geometry passes each head with p ~ 1/slots,
# and fewer random reads keep a cold 420 MB file from being paged in for them
_SETTLED_SAMPLE = 256

# Files up to this size are proven with plain Python over an array of the file's words (the whole proof of a
# 1 MiB file stays within a few tens of ms even when every rule runs, about what importing numpy costs); larger
# ones with numpy views of the map. Both engines apply the same rules to the same words: the verdict is one
# (tests/test_index_geometry_paths.py compares them field by field on the oracle's files, writer-made files of
# several geometries and damaged copies).
SMALL_INDEX_FILE_BYTES = 1 << 20
GEOMETRY_ENGINES = ("python", "numpy")


def used_slots_sample(table: np.ndarray, sample: int) -> np.ndarray:
    """The positions of the non-zero slots of ``table``, evenly thinned to every ``used // sample``-th when more
    than ``sample`` are used (the geometry proof's heads: random reads over the whole file otherwise). Found a
    chunk at a time, so a full 5 M-slot table costs no 40 MB list of every used slot (the look-ups' memory grew
    with the index's fill)."""
    import numpy as np

    used = int(np.count_nonzero(table))
    if used <= sample:
        return np.flatnonzero(table)
    step = used // sample
    picked, seen = [], 0
    for a in range(0, len(table), _SLOT_CHUNK):
        nz = np.flatnonzero(table[a:a + _SLOT_CHUNK])
        picked.append(nz[(-seen) % step::step] + a)
        seen += nz.size
    return np.concatenate(picked)


class _NumpyWords:
    """The file after its header as big-endian int32 words, viewed with numpy (no copy of the map)."""

    def __init__(self, buf, size: int):
        import numpy as np

        from ..formats.indexfile import HASH_SLOT_DTYPE

        self.np = np
        self.w = np.frombuffer(buf, dtype=HASH_SLOT_DTYPE,
                               count=max(size - INDEX_HEADER_SIZE, 0) // HASH_SLOT_SIZE, offset=INDEX_HEADER_SIZE)

    def first_bad_slot_word(self, ic: int) -> int:
        """Index of the first word that cannot be a slot value (outside [0, indexCount-1]); len(w) if none."""
        np, w = self.np, self.w
        hi = max(ic - 1, 0)
        for a in range(0, len(w), _SCAN_CHUNK):
            c = w[a:a + _SCAN_CHUNK]
            bad = np.flatnonzero((c < 0) | (c > hi))
            if bad.size:
                return a + int(bad[0])
        return len(w)

    def last_nonzero_word(self, data: list[tuple[int, int]] | None = None) -> int:
        """Index of the last non-zero word, -1 if none. ``data``: the file's byte ranges that are not holes
        (``MappedFile.data_ranges``), the only ones read: the pages of a preallocated file's unwritten rest cost
        more to map than to scan (~0.06 s of a full default file's 0.1 s proof)."""
        np, w = self.np, self.w
        spans = [(0, len(w))] if data is None else [
            (max(a - INDEX_HEADER_SIZE, 0) // HASH_SLOT_SIZE, -(-(b - INDEX_HEADER_SIZE) // HASH_SLOT_SIZE))
            for a, b in data if b > INDEX_HEADER_SIZE]
        for lo, hi in reversed(spans):
            for b in range(min(hi, len(w)), lo, -_SCAN_CHUNK):
                c = w[max(b - _SCAN_CHUNK, lo):b]
                nz = np.flatnonzero(c)
                if nz.size:
                    return max(b - _SCAN_CHUNK, lo) + int(nz[-1])
        return -1

    def consistent(self, s: int, ic: int, sample: int = _CHAIN_SAMPLE, whole_table: bool = True) -> bool:
        """The check of one candidate slot count (rules heads and chains; zeros for item 0). Strided views of the
        mapped words, no copy of the item table. ``whole_table=False`` leaves out the one rule that reads every
        item (heads + links == used items); ``sample`` bounds the heads checked and the items at each end whose
        prev links are followed (each a random read into the item area)."""
        np, w = self.np, self.w
        used = max(ic - 1, 0)
        if (w[s:s + 5] != 0).any():
            return False
        items = w[s:s + 5 * ic].reshape(ic, 5) if ic else w[s:s].reshape(0, 5)
        if used:
            # prev links followed at both ends of the table (backwards, same slot, each item the prev of at most one)
            for a in sorted({1, max(1, ic - sample)}):
                b = min(ic, a + sample)
                part = items[a:b]
                if (part[:, 0] < 0).any() or (part[:, 3] < 0).any():
                    return False
                n = np.arange(a, b)
                p = items[a:b, 4].astype(np.int64)
                if (p >= n).any():
                    return False
                linked = p > 0
                pl = p[linked]
                if (items[pl, 0].astype(np.int64) % s != items[a:b, 0][linked].astype(np.int64) % s).any():
                    return False
                if has_repeats(pl):
                    return False
        table = w[:s]
        nz = used_slots_sample(table, sample)
        heads = table[nz].astype(np.int64)
        if (items[heads, 0].astype(np.int64) % s != nz).any():
            return False
        if not whole_table:
            return True
        # every item is either a slot head or one later item's prev: heads + links == used items (prev < 0 was
        # ruled out above for the sampled items; here it would only make the count disagree)
        links = items[1:, 4]
        return int(np.count_nonzero(table)) + int(np.count_nonzero(links > 0)) == used and not (links < 0).any()


_WORD = "i" if array("i").itemsize == 4 else "l"
_PY_CHUNK = 4096  # words whose min and max are taken at C speed before a slot word is looked for in them


class _PythonWords:
    """The same words as ``_NumpyWords``, copied into an ``array`` of native int32 (a small file: at most
    SMALL_INDEX_FILE_BYTES), and the same rules in plain Python, statement for statement."""

    def __init__(self, buf, size: int):
        n = max(size - INDEX_HEADER_SIZE, 0) // HASH_SLOT_SIZE
        self.w = w = array(_WORD)
        w.frombytes(buf[INDEX_HEADER_SIZE:INDEX_HEADER_SIZE + n * HASH_SLOT_SIZE])
        if sys.byteorder == "little":
            w.byteswap()
        self._nonzero: list[int] = []  # positions of the non-zero words below _nonzero_limit
        self._nonzero_limit = 0

    def first_bad_slot_word(self, ic: int) -> int:
        w = self.w
        hi = max(ic - 1, 0)
        for a in range(0, len(w), _PY_CHUNK):
            c = w[a:a + _PY_CHUNK]
            if min(c) >= 0 and max(c) <= hi:
                continue
            for i, v in enumerate(c):
                if v < 0 or v > hi:
                    return a + i
        return len(w)

    def last_nonzero_word(self, data: list[tuple[int, int]] | None = None) -> int:
        n = len(self.w.tobytes().rstrip(b"\0"))  # zero words are zero bytes in either byte order
        return (n - 1) // HASH_SLOT_SIZE if n else -1

    def _nonzero_below(self, s: int) -> list[int]:
        """Positions of the non-zero words of w[:s] (numpy's flatnonzero(w[:s])); every candidate slot count asks,
        so they are found once, for the largest s asked, and cut for each."""
        if s > self._nonzero_limit:
            w, lo = self.w, self._nonzero_limit
            self._nonzero.extend(i for i in range(lo, s) if w[i])
            self._nonzero_limit = s
        return self._nonzero[:bisect_left(self._nonzero, s)]

    def consistent(self, s: int, ic: int, sample: int = _CHAIN_SAMPLE, whole_table: bool = True) -> bool:
        w = self.w
        used = max(ic - 1, 0)
        if any(w[s:s + 5]):
            return False
        # item k's words: key_hash w[s+5k], phy_offset w[s+5k+1:s+5k+3], time_diff w[s+5k+3], prev_index w[s+5k+4]
        if used:
            for a in sorted({1, max(1, ic - sample)}):
                b = min(ic, a + sample)
                linked: set[int] = set()
                for k in range(a, b):
                    row = s + 5 * k
                    h, p = w[row], w[row + 4]
                    if h < 0 or w[row + 3] < 0 or p >= k:
                        return False
                    if p > 0:
                        if w[s + 5 * p] % s != h % s or p in linked:
                            return False
                        linked.add(p)
        nz = self._nonzero_below(s)
        used_slots = len(nz)
        if len(nz) > sample:
            nz = nz[::len(nz) // sample]
        for slot in nz:
            if w[s + 5 * w[slot]] % s != slot:
                return False
        if not whole_table:
            return True
        links = w[s + 9:s + 5 * ic:5]  # prev_index of items 1 .. indexCount-1
        if links and min(links) < 0:
            return False
        return used_slots + len(links) - links.count(0) == used


def index_words(buf, size: int, engine: str | None = None) -> _NumpyWords | _PythonWords:
    """The words after the header with the proof's scans (first_bad_slot_word, last_nonzero_word, consistent),
    by ``engine``; None: plain Python up to SMALL_INDEX_FILE_BYTES, numpy above."""
    if engine is None:
        engine = "python" if size <= SMALL_INDEX_FILE_BYTES else "numpy"
    if engine == "python":
        return _PythonWords(buf, size)
    if engine == "numpy":
        return _NumpyWords(buf, size)
    raise ValueError(f"unknown geometry engine {engine!r} (one of {GEOMETRY_ENGINES})")


def prove_index_geometry(buf, size: int, index_count: int, whole_table: bool = False,
                          engine: str | None = None, data: list[tuple[int, int]] | None = None) -> IndexGeometry:
    """Every (slots, maxIndexNum) the file's size and header allow, kept only if the data is self-consistent
    under it (rules above); the answer when exactly one survives, else ``source="ambiguous"``.
    ``whole_table=True`` applies the whole-table rule even when the sampled rules already settled a large file
    (it reads every item: 0.2-0.6 s on a full default file). ``engine`` (``GEOMETRY_ENGINES``) forces how the
    words are scanned; by default plain Python up to SMALL_INDEX_FILE_BYTES, numpy above (the same verdict).
    ``data``: the byte ranges of the file that are not holes (``MappedFile.data_ranges``; None: all of it)."""
    ic = index_count
    rest = size - INDEX_HEADER_SIZE
    if rest <= 0 or rest % HASH_SLOT_SIZE or ic < 0:
        return IndexGeometry(None, None, "ambiguous", (),
                             f"a {size}-byte file fits no geometry (40 + 4*slots + 20*maxIndexNum); "
                             f"pass {INDEX_GEOMETRY_SETTLE}")
    r = rest // HASH_SLOT_SIZE  # = slots + 5 * maxIndexNum
    w = index_words(buf, size, engine)
    hi = min(w.first_bad_slot_word(ic), r - 5 * max(ic, 1))  # rules slots and size
    lo = max(1, w.last_nonzero_word(data) - 5 * ic + 1)  # rule zeros: the used items reach the last non-zero word
    first = lo + (r - lo) % 5  # slots = r - 5*maxIndexNum
    cands = range(first, hi + 1, 5)
    items_of = lambda s: (r - s) // 5  # noqa: E731
    if ic <= 1:
        return empty_file_geometry(cands, DEFAULT_INDEX_SLOTS, items_of, INDEX_GEOMETRY_SETTLE,
                                   f"empty index file (indexCount {ic})")
    survivors, too_many = consistent_candidates(
        cands, lambda s: w.consistent(s, ic, _SETTLED_SAMPLE, whole_table=False), items_of, INDEX_GEOMETRY_SETTLE)
    if too_many is not None:
        return too_many
    if len(survivors) == 1 and ic > _WHOLE_TABLE_ITEMS and not whole_table:
        # Settled without reading the item area: no other geometry fits the size, the slot words and the zeros,
        # and this one passes the head and chain rules where they were sampled. The whole-table rule could only
        # turn the answer into "damaged", never into another geometry; verify reads every item anyway.
        s, m = survivors[0]
        return IndexGeometry(s, m, "inferred", tuple(survivors),
                             f"{s} slots / {m} items: the only geometry that fits the size, the slot table and the "
                             "sampled chains (settled without the whole-table chain count)")
    return geometry_verdict([(s, m) for s, m in survivors if w.consistent(s, ic)],
                            f"no geometry fitting {size} bytes is self-consistent (damaged or truncated file)",
                            INDEX_GEOMETRY_SETTLE)


def prove_geometry_of(path: str, whole_table: bool = False, engine: str | None = None) -> IndexGeometry:
    """``prove_index_geometry`` of the index file at ``path`` (the header read, the body mapped read-only)."""
    m = MappedFile(path)
    try:
        if m.size < INDEX_HEADER_SIZE:
            return IndexGeometry(None, None, "ambiguous", (), f"{m.size} bytes: shorter than the header")
        ic = IndexHeaderData(*INDEX_HEADER.unpack_from(m.buffer, 0)).index_count
        return prove_index_geometry(m.buffer, m.size, ic, whole_table, engine, m.data_ranges(0, m.size))
    finally:
        m.close()


def infer_geometry(idx: IndexFile, proven: IndexGeometry | None = None) -> tuple[int, int, str]:
    g = proven if proven is not None else prove_index_geometry(
        idx.mapped.buffer, idx.mapped.size, idx.header.index_count, data=idx.mapped.data_ranges(0, idx.mapped.size))
    idx.geometry = g
    if g.slots is None or g.max_items is None:
        raise IndexGeometryError(g.detail, idx.path, 0)
    return g.slots, g.max_items, g.detail


def lookup_key_string(topic: str, key: str) -> str:
    return build_index_key(topic, key)
