"""`rebuild --dry-run`: the "ConsumeQueue / IndexFile vs CommitLog" reconciliation.

The dispatcher (``analyses.dispatcher.dispatch_commitlog``) runs exactly as for a real rebuild, but into sinks
that compare every would-be write with the files present in the store instead of writing: per queue the
missing, extra and wrong entries; per index file (in creation order) the header fields, slot table and
items that differ. Nothing is written anywhere; memory stays bounded (only counts and the first
``detail_limit`` differences are kept).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

import numpy as np

from ...formats.consumequeue import CQ_DTYPE, CQ_STORE_UNIT_SIZE
from ...formats.indexfile import INDEX_HEADER, INDEX_HEADER_FIELDS, INDEX_HEADER_SIZE, INDEX_ITEM_DTYPE, INDEX_ITEM_SIZE
from ...sinks.consumequeue import ConsumeQueueSet, ConsumeQueueWriter
from ...sinks.indexfile import IndexFileSet, IndexFileWriter
from ...store.consumequeue import list_queues, pre_blank_mask
from ...store.layout import is_offset_file_name
from ...store.mapped import MappedFile


@dataclass
class QueueReconciliation:
    topic: str
    queue_id: int
    rebuilt_entries: int = 0
    store_entries: int = 0  # valid, non-pre-blank entries present in the store's files
    matching: int = 0
    missing: int = 0  # the CommitLog says there should be an entry, the store has none
    extra: int = 0  # the store has an entry beyond what the CommitLog produces
    wrong: int = 0  # both have an entry at this queue offset, with different values
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0 and self.wrong == 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = "ok" if self.ok else "DIFFERS"
        return d


@dataclass
class IndexReconciliation:
    ordinal: int
    store_file: str | None
    rebuilt_items: int = 0
    header_diffs: dict = field(default_factory=dict)  # field -> [rebuilt, store]
    slot_diffs: int = 0
    item_diffs: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.store_file is not None and not self.header_diffs and not self.slot_diffs and not self.item_diffs

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = "ok" if self.ok else "DIFFERS"
        return d


@dataclass
class Reconciliation:
    queues: list[QueueReconciliation] = field(default_factory=list)
    index_files: list[IndexReconciliation] = field(default_factory=list)
    differences: list[dict] = field(default_factory=list)  # the first detail_limit entry/item differences
    differences_total: int = 0

    @property
    def ok(self) -> bool:
        return all(q.ok for q in self.queues) and all(i.ok for i in self.index_files)

    def add(self, limit: int, **d) -> None:
        self.differences_total += 1
        if len(self.differences) < limit:
            self.differences.append(d)


def _existing_files(directory: str) -> list[MappedFile]:
    if not os.path.isdir(directory):
        return []
    names = sorted(n for n in os.listdir(directory) if is_offset_file_name(n))
    return [MappedFile(os.path.join(directory, n), int(n)) for n in names]


def _read_global(files: list[MappedFile], gpos: int, n: int) -> bytes:
    """Bytes [gpos, gpos+n) of a queue's logical byte stream; zeros where no file covers it."""
    out = bytearray(n)
    for f in files:
        lo = max(gpos, f.start)
        hi = min(gpos + n, f.start + f.size)
        if lo < hi:
            out[lo - gpos:hi - gpos] = f.buffer[lo - f.start:hi - f.start]
    return bytes(out)


def _row(a) -> list[int]:
    return [int(a["physical_offset"]), int(a["size"]), int(a["tags_code"])]


class _CompareQueue(ConsumeQueueWriter):
    def __init__(self, directory: str, file_size: int, *, store_dir: str, result: QueueReconciliation,
                 recon: Reconciliation, limit: int):
        super().__init__(directory, file_size)
        self.existing = _existing_files(store_dir)
        self.result = result
        self.recon = recon
        self.limit = limit

    def put_packed(self, cq_offsets, packed, dense: bool = False) -> None:
        # differences are found (and listed) entry by entry, in put order: a block's density changes nothing here
        for qoff, entry in zip(cq_offsets.tolist(), np.frombuffer(packed, dtype=CQ_DTYPE).tolist()):
            self.put(qoff, *entry)

    def _create(self, fstart: int) -> None:
        pass

    def _write(self, fstart: int, pos: int, data) -> None:
        gpos = fstart + pos
        exp = np.frombuffer(bytes(data), dtype=CQ_DTYPE)
        act = np.frombuffer(_read_global(self.existing, gpos, len(data)), dtype=CQ_DTYPE)
        exp_real = ~pre_blank_mask(exp)
        act_valid = (act["physical_offset"] >= 0) & (act["size"] > 0)
        eq = exp.tobytes() == act.tobytes()
        r = self.result
        if eq:
            r.matching += int(exp_real.sum())
            return
        same = (exp == act)
        r.matching += int((same & exp_real).sum())
        for i in np.flatnonzero(~same):
            qoff = gpos // CQ_STORE_UNIT_SIZE + int(i)
            if not act_valid[i]:
                r.missing += 1
                kind = "missing"
            else:
                r.wrong += 1
                kind = "wrong"
            e, a = _row(exp[i]), _row(act[i])
            fields = [n for n, x, y in zip(("physical_offset", "size", "tags_code"), e, a) if x != y]
            self.recon.add(self.limit, topic=self.result.topic, queue_id=self.result.queue_id, queue_offset=qoff,
                           kind=kind, rebuilt=e, store=a if act_valid[i] else None, fields=fields)

    def close(self) -> None:
        self.flush()
        # entries the store has past the end of what the CommitLog produced
        end = max(self.write_pos, 0)
        for f in self.existing:
            if f.start + f.size <= end:
                continue
            lo = max(end - f.start, 0)
            lo -= lo % CQ_STORE_UNIT_SIZE
            arr = np.frombuffer(f.buffer, dtype=CQ_DTYPE, count=f.size // CQ_STORE_UNIT_SIZE)[lo // CQ_STORE_UNIT_SIZE:]
            valid = (arr["physical_offset"] >= 0) & (arr["size"] > 0) & ~pre_blank_mask(arr)
            for i in np.flatnonzero(valid):
                self.result.extra += 1
                self.recon.add(self.limit, topic=self.result.topic, queue_id=self.result.queue_id,
                               queue_offset=(f.start + lo) // CQ_STORE_UNIT_SIZE + int(i), kind="extra", rebuilt=None,
                               store=_row(arr[i]), fields=[])
        self.result.rebuilt_entries = self.entries
        for f in self.existing:
            f.close()


class CompareConsumeQueueSet(ConsumeQueueSet):
    # differences are reported in write order across queues: keep the dispatcher's record-by-record puts
    bulk_puts = False

    def __init__(self, store_consumequeue_dir: str, file_size: int, recon: Reconciliation, limit: int = 1000):
        super().__init__(store_consumequeue_dir, file_size)
        self.recon = recon
        self.limit = limit

    def queue(self, topic: str, queue_id: int):
        key = (topic, queue_id)
        q = self.queues.get(key)
        if q is None:
            res = QueueReconciliation(topic, queue_id)
            self.recon.queues.append(res)
            q = self.queues[key] = _CompareQueue(os.path.join(self.root, topic, str(queue_id)), self.file_size,
                                                 store_dir=os.path.join(self.root, topic, str(queue_id)),
                                                 result=res, recon=self.recon, limit=self.limit)
        return q

    def close(self, whole_commitlog: bool = True) -> None:
        super().close()
        seen = set(self.queues)
        for q in list_queues(self.root):
            if (q.topic, q.queue_id) in seen:
                continue
            res = QueueReconciliation(q.topic, q.queue_id)
            files = _existing_files(q.path)
            for f in files:
                arr = np.frombuffer(f.buffer, dtype=CQ_DTYPE, count=f.size // CQ_STORE_UNIT_SIZE)
                valid = (arr["physical_offset"] >= 0) & (arr["size"] > 0) & ~pre_blank_mask(arr)
                res.store_entries += int(valid.sum())
                f.close()
            if whole_commitlog:
                res.extra = res.store_entries
                res.note = "queue exists in the store but the CommitLog produces no entry for it"
            else:
                res.note = "not covered by --from/--to"
            self.recon.queues.append(res)
        # store entry counts for the rebuilt queues
        for res in self.recon.queues:
            if (res.topic, res.queue_id) in seen:
                for f in _existing_files(os.path.join(self.root, res.topic, str(res.queue_id))):
                    arr = np.frombuffer(f.buffer, dtype=CQ_DTYPE, count=f.size // CQ_STORE_UNIT_SIZE)
                    valid = (arr["physical_offset"] >= 0) & (arr["size"] > 0) & ~pre_blank_mask(arr)
                    res.store_entries += int(valid.sum())
                    f.close()
        self.recon.queues.sort(key=lambda r: (r.topic, r.queue_id))


class _CompareIndexFile(IndexFileWriter):
    def __init__(self, store_path: str | None, slots, max_items, prev_phy, prev_ts, count_every_put, *,
                 result: IndexReconciliation, recon: Reconciliation, limit: int):
        self.store = MappedFile(store_path) if store_path else None
        self.result = result
        self.recon = recon
        self.limit = limit
        super().__init__(store_path or "", slots, max_items, prev_phy, prev_ts, count_every_put)

    def _open(self) -> None:
        r = self.result
        if self.store is not None:
            from ...formats.indexfile import index_file_size

            want = index_file_size(self.slots, self.max_items)
            if self.store.size != want:
                r.note = f"store file is {self.store.size} bytes, the rebuild geometry gives {want}"

    def _store_bytes(self, pos: int, n: int) -> bytes:
        if self.store is None:
            return bytes(n)
        b = bytes(self.store.buffer[pos:pos + n])
        return b + bytes(n - len(b))

    def _write(self, pos: int, data: bytes) -> None:
        r = self.result
        act = self._store_bytes(pos, len(data))
        if pos == 0:
            e = INDEX_HEADER.unpack(data)
            a = INDEX_HEADER.unpack(act)
            for (name, _), x, y in zip(INDEX_HEADER_FIELDS, e, a):
                if x != y:
                    r.header_diffs[name] = [x, y]
            return
        if pos == INDEX_HEADER_SIZE and len(data) == self.slots * 4:
            e = np.frombuffer(data, dtype=">i4")
            a = np.frombuffer(act, dtype=">i4")
            r.slot_diffs += int((e != a).sum())
            return
        if data == act:
            r.rebuilt_items += len(data) // INDEX_ITEM_SIZE
            return
        e = np.frombuffer(data, dtype=INDEX_ITEM_DTYPE)
        a = np.frombuffer(act, dtype=INDEX_ITEM_DTYPE)
        r.rebuilt_items += len(e)
        first = (pos - self.items_base) // INDEX_ITEM_SIZE
        for i in np.flatnonzero(e != a):
            r.item_diffs += 1
            self.recon.add(self.limit, index_file=r.ordinal, store_file=r.store_file, item=first + int(i), kind="item",
                           rebuilt=[int(x) for x in e[i].tolist()], store=[int(x) for x in a[i].tolist()])

    def _finish(self) -> None:
        if self.store is None:
            return
        # items the store has beyond what the CommitLog produces (e.g. keys of a torn record)
        r = self.result
        if self.store.size >= INDEX_HEADER_SIZE:
            store_count = INDEX_HEADER.unpack_from(self.store.buffer, 0)[5]
            hi = min(store_count, self.max_items, (self.store.size - self.items_base) // INDEX_ITEM_SIZE)
            if hi > self.index_count:
                a = np.frombuffer(self.store.buffer, dtype=INDEX_ITEM_DTYPE, count=hi - self.index_count,
                                  offset=self.items_base + self.index_count * INDEX_ITEM_SIZE)
                for i in range(len(a)):
                    r.item_diffs += 1
                    self.recon.add(self.limit, index_file=r.ordinal, store_file=r.store_file,
                                   item=self.index_count + i, kind="extra item", rebuilt=None,
                                   store=[int(x) for x in a[i].tolist()])
        self.store.close()


class CompareIndexFileSet(IndexFileSet):
    def __init__(self, store_index_dir: str, slots: int, max_items: int, recon: Reconciliation,
                 count_every_put: bool = False, limit: int = 1000):
        super().__init__(store_index_dir, slots, max_items, count_every_put)
        self.recon = recon
        self.limit = limit
        self.store_names = sorted(n for n in os.listdir(store_index_dir)
                                  if os.path.isfile(os.path.join(store_index_dir, n))) \
            if os.path.isdir(store_index_dir) else []

    def _make_writer(self, ordinal: int, prev_phy: int, prev_ts: int):
        name = self.store_names[ordinal] if ordinal < len(self.store_names) else None
        res = IndexReconciliation(ordinal, name)
        if name is None:
            res.note = "the store has no index file in this position (missing)"
        self.recon.index_files.append(res)
        return _CompareIndexFile(os.path.join(self.directory, name) if name else None, self.slots, self.max_items,
                                 prev_phy, prev_ts, self.count_every_put, result=res, recon=self.recon,
                                 limit=self.limit)

    def _rename(self, src: str, dst: str) -> None:
        pass

    def close(self, record_after_last_put_ts=None) -> None:
        super().close(record_after_last_put_ts)
        for i in range(len(self.names), len(self.store_names)):
            res = IndexReconciliation(i, self.store_names[i], note="extra: the CommitLog produces no such file")
            res.header_diffs["file"] = [None, self.store_names[i]]
            self.recon.index_files.append(res)
