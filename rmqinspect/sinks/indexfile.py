"""IndexFile output: what ``IndexService.buildIndex`` / ``IndexFile.putKey`` write (FORMATS.md §5).

Puts arrive in batches of precomputed key hashes (numpy), so the chain insertion is vectorised: within a
batch that fits the current file, an item's prevIndex is the previous item of the batch with the same slot,
or the slot's value before the batch. This is exactly the sequential ``putKey`` result.

Rules reproduced (checked file by file against the broker's rebuilt index in the oracle):

* header: beginTimestamp/beginPhyOffset from the first put (``indexCount <= 1``), end* from every put,
  ``hashSlotCount`` counts puts into an empty slot (4.9.x/5.x; ``count_every_put`` for 4.4.0, which
  incremented it on every put), ``indexCount`` starts at 1; a file takes ``maxIndexNum - 1`` items;
* a new file starts with begin/end timestamp and phy offset copied from the previous file's end values, and
  its first item's timeDiff is computed against that copied beginTimestamp before it is overwritten (the
  broker's quirk);
* timeDiff = (storeTimestamp - beginTimestamp) / 1000 truncated, 0 if beginTimestamp <= 0, clamped to
  [0, Integer.MAX_VALUE];
* when the last file is full (or there is none) and another record is dispatched, the broker creates a new,
  possibly empty, file (``retryGetAndCreateIndexFile``); ``IndexFileSet.close`` reproduces that at the end.

File names: the broker uses the wall-clock creation time, which is not in the data. We name each file from
its header's beginTimestamp (UTC, ``yyyyMMddHHmmssSSS``), bumped by 1 ms when needed so names strictly
increase in creation order. Only content and order are comparable with a broker's index (see docs/rebuild.md).

Memory: the slot table (``maxHashSlotNum`` int32) plus one batch; items are written as they are produced.
"""

from __future__ import annotations

import os

import numpy as np

from ..formats.indexfile import INDEX_HEADER, INDEX_HEADER_SIZE, INDEX_ITEM_DTYPE, INDEX_ITEM_SIZE, index_file_size

INT_MAX = 0x7FFFFFFF


def index_file_name(ts_millis: int) -> str:
    """UtilAll.timeMillisToHumanString layout ("%04d%02d%02d%02d%02d%02d%03d"), in UTC, for every Java long: a
    store time past year 9999 (one flipped bit) gives a 5-digit year as Java's Calendar does, never an
    OverflowError from datetime."""
    ts_millis = min(max(ts_millis, 0), (1 << 63) - 1)
    days, ms = divmod(ts_millis, 86_400_000)
    year, month, day = _civil_from_days(days)
    hh, rem = divmod(ms, 3_600_000)
    mm, rem = divmod(rem, 60_000)
    ss, milli = divmod(rem, 1000)
    return "%04d%02d%02d%02d%02d%02d%03d" % (year, month, day, hh, mm, ss, milli)


def _civil_from_days(z: int) -> tuple[int, int, int]:
    """Proleptic Gregorian (year, month, day) of ``z`` days after 1970-01-01 (H. Hinnant's algorithm)."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def slot_links(key_hash: np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The hash-slot chains inside one batch of puts: (used slots, prev, heads, lasts) where ``prev[i]`` is the
    batch position of the previous put into the same slot (-1: none in the batch), and for each slot the batch
    uses, in ascending slot order (the slot table is then read and written in ascending addresses: half the cost
    of put order on a 20 MB table), the slot (intp: a table index needs no cast), the position of its first put
    (``heads``) and of its last one (``lasts``). Computed where the puts are made (a worker of the parallel
    rebuild), they spare the in-order join a sort (``IndexFileWriter.put_linked``).

    One sort of ``slot << bits | position`` (every key distinct, so any sort gives the stable order: the
    position is the tie-break) instead of a stable argsort; ``h - h // n * n`` is Python's ``%`` (numpy divides
    by a scalar faster than it takes the remainder)."""
    m = len(key_hash)
    h = np.asarray(key_hash, dtype=np.int64)
    slot = h - h // slots * slots
    bits = max(int(m - 1).bit_length(), 1)
    key = slot << bits
    key |= np.arange(m, dtype=np.int64)
    key.sort()
    order = (key & ((1 << bits) - 1)).astype(np.int32)
    s_sorted = key >> bits
    same = s_sorted[1:] == s_sorted[:-1]
    prev = np.full(m, -1, dtype=np.int32)
    prev[order[1:][same]] = order[:-1][same]
    new_slot = np.ones(m, dtype=bool)
    new_slot[1:] = ~same
    last_of_slot = np.ones(m, dtype=bool)
    last_of_slot[:-1] = ~same
    return s_sorted[new_slot].astype(np.intp), prev, order[new_slot], order[last_of_slot]


class IndexFileWriter:
    """One index file being filled."""

    def __init__(self, path: str, slots: int, max_items: int, prev_end_phy: int = 0, prev_end_ts: int = 0,
                 count_every_put: bool = False):
        self.path = path
        self.slots = slots
        self.max_items = max_items
        self.count_every_put = count_every_put
        self.begin_ts = self.end_ts = prev_end_ts if prev_end_ts > 0 else 0
        self.begin_phy = self.end_phy = prev_end_phy if prev_end_phy > 0 else 0
        self.hash_slot_count = 0
        self.index_count = 1
        # item numbers are Java ints: an int32 table is half the cache misses of the random slot look-ups; kept
        # big-endian, as the file holds it, so closing writes it as it is (no 20 MB byte-swapped copy at the end)
        self.table = np.zeros(slots, dtype=">i4")
        self.items_base = INDEX_HEADER_SIZE + slots * 4
        self._open()

    # --- output (overridden by the dry-run comparison) ---------------------------------------------
    def _open(self) -> None:
        self._fh = open(self.path, "wb")
        self._fh.truncate(index_file_size(self.slots, self.max_items))

    def _write(self, pos: int, data: bytes) -> None:
        self._fh.seek(pos)
        self._fh.write(data)

    def _finish(self) -> None:
        self._fh.close()

    # --- building ----------------------------------------------------------------------------------
    @property
    def full(self) -> bool:
        return self.index_count >= self.max_items

    @property
    def room(self) -> int:
        return max(self.max_items - self.index_count, 0)

    def put_batch(self, key_hash: np.ndarray, phys: np.ndarray, ts: np.ndarray) -> None:
        """Insert puts that all fit (caller splits at ``room``). Arrays are int64."""
        if len(key_hash) == 0:
            return
        self.put_linked(key_hash, phys, ts, *slot_links(key_hash, self.slots))

    def put_linked(self, key_hash: np.ndarray, phys: np.ndarray, ts: np.ndarray, used_slots: np.ndarray,
                   prev_in_batch: np.ndarray, heads: np.ndarray, lasts: np.ndarray) -> None:
        """``put_batch`` with the slot chains inside the batch already known (``slot_links``, computed where the
        puts were made): ``prev_in_batch`` is the batch position of the previous put into the same slot (-1:
        none in this batch); per slot used (``used_slots``, ascending), ``heads``/``lasts`` the positions of its
        first and last put."""
        m = len(key_hash)
        if m == 0:
            return
        n0 = self.index_count
        rec = np.empty(m, dtype=INDEX_ITEM_DTYPE)
        # timeDiff, including the quirk for the first item of a file
        td = rec["time_diff"]
        first = 0
        if n0 <= 1:
            td[0] = self._time_diff(int(ts[0]), self.begin_ts)
            self.begin_ts = int(ts[0])
            self.begin_phy = int(phys[0])
            first = 1
        if first < m:
            if self.begin_ts <= 0:
                td[first:] = 0
            else:
                # Java's long division truncates toward zero: a negative difference gives <= 0, clamped to 0
                d = ts[first:] - self.begin_ts
                np.maximum(d, 0, out=d)
                d //= 1000
                np.minimum(d, INT_MAX, out=d)
                td[first:] = d
        # prevIndex chains: the previous item of the batch with the same slot, else the slot's value before the
        # batch. IndexFile.putKey treats a slot value <= 0 or > indexCount as empty; this table only ever holds 0 or
        # item numbers already written (1 .. indexCount - 1), so the slot's value is the link as it is.
        old = self.table.take(used_slots)  # one pass of look-ups in ascending addresses (take: no index checks)
        if self.count_every_put:
            self.hash_slot_count += m
        else:
            self.hash_slot_count += len(old) - int(np.count_nonzero(old))
        self.table[used_slots] = lasts + n0  # the same cache lines again, just read
        prev = prev_in_batch + n0
        prev[heads] = old
        rec["prev_index"] = prev
        rec["key_hash"] = key_hash
        rec["phy_offset"] = phys
        self._write(self.items_base + n0 * INDEX_ITEM_SIZE, rec.tobytes())
        self.index_count = n0 + m
        self.end_phy = int(phys[-1])
        self.end_ts = int(ts[-1])

    @staticmethod
    def _time_diff(ts: int, begin: int) -> int:
        if begin <= 0:
            return 0
        d = ts - begin
        q = abs(d) // 1000 * (1 if d >= 0 else -1)
        return 0 if q < 0 else min(q, INT_MAX)

    def header_bytes(self) -> bytes:
        return INDEX_HEADER.pack(self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, self.hash_slot_count,
                                 self.index_count)

    def close(self) -> None:
        self._write(0, self.header_bytes())
        self._write(INDEX_HEADER_SIZE, self.table.view(np.uint8))  # bytes-like, not copied
        self._finish()
        self.table = None


class IndexFileSet:
    """The ``index/`` directory being built: rolls files when full, names them from the data."""

    writer_class = IndexFileWriter

    def __init__(self, directory: str, slots: int, max_items: int, count_every_put: bool = False):
        if slots <= 0 or max_items <= 1:
            raise ValueError("index geometry needs slots >= 1 and maxIndexNum >= 2")
        self.directory = directory
        self.slots = slots
        self.max_items = max_items
        self.count_every_put = count_every_put
        self.current: IndexFileWriter | None = None
        self.names: list[str] = []
        self.headers: list[tuple] = []
        self.puts = 0
        self._last_name = ""
        self._last_ts: int | None = None

    def _name_for(self, ts: int) -> str:
        # names must grow: a file whose first time is not after the previous file's name takes that name's
        # time + 1 ms. Jump there at once: one record with a store time in year 2584 (a flipped bit) must not
        # make the next name a loop of millions of 1 ms steps. Names are ordered like their times while the
        # year has 4 digits; a 5-digit year sorts first, and the names are compared as times.
        if self._last_ts is not None and ts <= self._last_ts:
            ts = self._last_ts + 1
        self._last_ts = ts
        return index_file_name(ts)

    def _roll(self, first_ts: int) -> None:
        prev_phy = prev_ts = 0
        if self.current is not None:
            prev_phy, prev_ts = self.current.end_phy, self.current.end_ts
            self._close_current()
        self.current = self._make_writer(len(self.names), prev_phy, prev_ts)
        self._pending_first_ts = first_ts

    def _make_writer(self, ordinal: int, prev_phy: int, prev_ts: int) -> IndexFileWriter:
        # provisional name; the final one comes from the header at close (see module docstring)
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, ".building-%d" % ordinal)
        return self.writer_class(path, self.slots, self.max_items, prev_phy, prev_ts, self.count_every_put)

    def _close_current(self) -> None:
        cur = self.current
        cur.close()
        name = self._name_for(cur.begin_ts if cur.index_count > 1 else (cur.begin_ts or self._pending_first_ts))
        self._last_name = name
        final = os.path.join(self.directory, name)
        self._rename(cur.path, final)
        self.names.append(name)
        self.headers.append((cur.begin_ts, cur.end_ts, cur.begin_phy, cur.end_phy, cur.hash_slot_count,
                             cur.index_count))
        self.current = None

    def _rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    @property
    def end_phy_offset(self) -> int:
        return self.current.end_phy if self.current is not None else 0

    def put_batch(self, key_hash: np.ndarray, phys: np.ndarray, ts: np.ndarray) -> None:
        i = 0
        m = len(key_hash)
        self.puts += m
        while i < m:
            if self.current is None or self.current.full:
                self._roll(int(ts[i]))
            n = min(self.current.room, m - i)
            self.current.put_batch(key_hash[i:i + n], phys[i:i + n], ts[i:i + n])
            i += n

    def put_linked(self, key_hash: np.ndarray, phys: np.ndarray, ts: np.ndarray, used_slots: np.ndarray,
                   prev: np.ndarray, heads: np.ndarray, lasts: np.ndarray) -> None:
        """``put_batch`` of one batch whose chains ``slot_links`` computed beforehand. A batch that would cross
        into a new file goes through ``put_batch`` (its chains are cut there: rare, once per ``maxIndexNum``)."""
        m = len(key_hash)
        if m == 0:
            return
        if self.current is None or self.current.full:
            self._roll(int(ts[0]))
        if m > self.current.room:
            self.put_batch(key_hash, phys, ts)
            return
        self.puts += m
        self.current.put_linked(key_hash, phys, ts, used_slots, prev, heads, lasts)

    def close(self, record_after_last_put_ts: int | None = None) -> None:
        """``record_after_last_put_ts``: store time of the first record dispatched after the last put, if any.
        buildIndex then found the last file full (or no file at all) and created a new, empty one."""
        if record_after_last_put_ts is not None and (self.current is None or self.current.full):
            self._roll(record_after_last_put_ts)
        if self.current is not None:
            self._close_current()
