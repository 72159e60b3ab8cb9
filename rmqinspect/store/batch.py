"""BatchConsumeQueue files (``batchconsumequeue/<topic>/<queueId>/``), ConsumeQueueExt files and
inner-batch record bodies (FORMATS.md §1.9, §4.3, §4.4)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import CorruptDataError, StoreNotFoundError
from ..formats.batch import (
    BCQ_DTYPE,
    BCQ_FIELDS,
    BCQ_STORE_UNIT_SIZE,
    CQ_EXT_HEAD,
    CQ_EXT_MIN_UNIT_SIZE,
    DEFAULT_BCQ_FILE_SIZE,
    INNER_FIXED_SIZE,
    INNER_HEAD,
    INNER_PROPERTIES_LENGTH,
)
from ..formats.consumequeue import CQ_EXT_MAX_ADDR, ext_real_offset
from ..formats.properties import parse_properties
from .broker_conf import BrokerConf, Setting, configured
from .consumequeue import first_failing
from .layout import is_offset_file_name, is_queue_dir_name
from .mapped import MappedFile


def list_batch_queues(root: str) -> list[tuple[str, int, str]]:
    d = os.path.join(root, "batchconsumequeue")
    out: list[tuple[str, int, str]] = []
    if not os.path.isdir(d):
        return out
    for topic in sorted(os.listdir(d)):
        td = os.path.join(d, topic)
        if not os.path.isdir(td):
            continue
        for q in os.listdir(td):
            if is_queue_dir_name(q) and os.path.isdir(os.path.join(td, q)):
                out.append((topic, int(q), os.path.join(td, q)))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


_ENTRY_COLUMNS = tuple(n for n, _ in BCQ_FIELDS if n != "reserved")


def batch_file_size(files: list[MappedFile], conf: BrokerConf | None = None) -> Setting:
    """mapperFileSizeBatchConsumeQueue of one queue's files: the broker.conf's (--broker-config); else the files'
    common length (the broker creates every mapped file at its full size, so a copied queue's files all have
    it); else ambiguous, with the lengths seen and the key that settles it."""
    given = configured(conf, "mapperFileSizeBatchConsumeQueue")
    if given is not None:
        return given
    sizes = sorted({f.size for f in files})
    if len(sizes) == 1 and sizes[0] > 0 and sizes[0] % BCQ_STORE_UNIT_SIZE == 0:
        return Setting(sizes[0], "inferred", f"the common length of {len(files)} file(s)")
    if not files:
        return Setting(DEFAULT_BCQ_FILE_SIZE, "default", "broker default for mapperFileSizeBatchConsumeQueue")
    return Setting(None, "ambiguous", f"files of {len(sizes)} different lengths; give mapperFileSizeBatchConsumeQueue "
                                      "in --broker-config", tuple(sizes))


def batch_file_notes(files: list[MappedFile], size: Setting) -> list[str]:
    """Where a queue's files disagree with its mapped file size: a name not a multiple of it, a length that
    differs from it, a range of units no file covers (one line each, naming the file)."""
    if size.value is None:
        return [f"{files[0].path if files else '?'}: BatchConsumeQueue file size ambiguous: {size.detail}"]
    s = size.value
    how = f"mapperFileSizeBatchConsumeQueue {s} ({size.source})"
    out = []
    for f in files:
        if f.start % s:
            out.append(f"{f.path}: file name {f.name} is not a multiple of {how}")
        if f.size != s:
            out.append(f"{f.path}: length {f.size} differs from {how}")
    for a, b in zip(files, files[1:]):
        if a.start + s < b.start:
            out.append(f"{a.path}: units [{(a.start + s) // BCQ_STORE_UNIT_SIZE}, {b.start // BCQ_STORE_UNIT_SIZE}) "
                       f"are in no file (bytes [{a.start + s}, {b.start}) missing before {b.name})")
    return out


class BatchConsumeQueue:
    """One BatchConsumeQueue: 46-byte entries, each covering ``batch_size`` logical messages."""

    kind = "batch"

    def __init__(self, topic: str, queue_id: int, directory: str, conf: BrokerConf | None = None):
        self.conf = conf  # the broker.conf given (mapperFileSizeBatchConsumeQueue), or None
        if not os.path.isdir(directory):
            raise StoreNotFoundError(f"no batch consume queue for {topic!r} queue {queue_id}", directory)
        self.topic, self.queue_id, self.directory = topic, queue_id, directory
        names = sorted(n for n in os.listdir(directory) if is_offset_file_name(n))
        self.files = [MappedFile(os.path.join(directory, n), int(n)) for n in names]

    @property
    def file_size(self) -> Setting:
        """mapperFileSizeBatchConsumeQueue (``batch_file_size``)."""
        return batch_file_size(self.files, self.conf)

    def file_notes(self) -> list[str]:
        """``batch_file_notes`` under ``file_size``."""
        return batch_file_notes(self.files, self.file_size)

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(entry index of the first row, rows) per file, up to the first invalid entry
        (``offset >= 0 && size > 0 && msgBaseOffset >= 0 && batchSize > 0``)."""
        for f in self.files:
            if f.start % BCQ_STORE_UNIT_SIZE:
                raise CorruptDataError(f"file name {f.name} is not a multiple of {BCQ_STORE_UNIT_SIZE}", f.path)
            n = f.size // BCQ_STORE_UNIT_SIZE
            arr = np.frombuffer(f.buffer, dtype=BCQ_DTYPE, count=n) if n else np.zeros(0, BCQ_DTYPE)
            end = first_failing(arr, lambda e: (e["physical_offset"] < 0) | (e["size"] <= 0)
                                | (e["msg_base_offset"] < 0) | (e["batch_size"] <= 0))
            yield f.start // BCQ_STORE_UNIT_SIZE, arr[:end]

    def entries(self) -> Iterator[dict]:
        for base, arr in self.chunks():
            cols = {n: arr[n].tolist() for n in _ENTRY_COLUMNS}
            for i in range(len(arr)):
                d = {k: v[i] for k, v in cols.items()}
                d["entry_index"] = base + i
                yield d

    def bounds(self) -> tuple[int, int, int]:
        """(min logical offset, max logical offset exclusive, entries): logical offsets count messages."""
        lo = hi = None
        n = 0
        for _, arr in self.chunks():
            if len(arr):
                if lo is None:
                    lo = int(arr["msg_base_offset"][0])
                hi = int(arr["msg_base_offset"][-1]) + int(arr["batch_size"][-1])
                n += len(arr)
        return (lo or 0), (hi if hi is not None else 0), n

    def min_offset_for(self, commitlog_min_offset: int) -> int:
        """BatchConsumeQueue's correctMinOffset: the base of the first unit whose record is still in the commit
        log (the max offset when none is)."""
        for _, arr in self.chunks():
            alive = np.flatnonzero(arr["physical_offset"] >= commitlog_min_offset)
            if alive.size:
                return int(arr["msg_base_offset"][alive[0]])
        return self.bounds()[1]

    def close(self) -> None:
        for f in self.files:
            f.close()


@dataclass
class InnerMessage:
    index: int
    queue_offset: int
    flag: int
    body: bytes
    properties: dict
    position: int  # within the outer body


def decode_inner_batch(body: bytes, base_queue_offset: int, path: str | None = None,
                       record_offset: int | None = None) -> list[InnerMessage]:
    """Split an INNER_BATCH record body into its messages (MessageDecoder.decodeMessages)."""
    out: list[InnerMessage] = []
    pos = 0
    while pos < len(body):
        if pos + INNER_HEAD.size > len(body):
            raise CorruptDataError(f"inner item {len(out)} header truncated at body byte {pos}", path, record_offset)
        total, _m, _c, flag, blen = INNER_HEAD.unpack_from(body, pos)
        if total < INNER_FIXED_SIZE or pos + total > len(body) or blen < 0 or INNER_FIXED_SIZE + blen > total:
            raise CorruptDataError(f"inner item {len(out)} at body byte {pos}: absurd size {total}/{blen}", path,
                                   record_offset)
        bpos = pos + INNER_HEAD.size
        b = bytes(body[bpos:bpos + blen])
        plen = INNER_PROPERTIES_LENGTH.unpack_from(body, bpos + blen)[0]
        if plen < 0 or INNER_FIXED_SIZE + blen + plen != total:
            raise CorruptDataError(f"inner item {len(out)} at body byte {pos}: properties length {plen} does not "
                                   f"fit size {total}", path, record_offset)
        ppos = pos + INNER_FIXED_SIZE + blen
        props = parse_properties(bytes(body[ppos:ppos + plen]))
        out.append(InnerMessage(len(out), base_queue_offset + len(out), flag, b, props, pos))
        pos += total
    return out


def read_cq_ext_unit(root: str, topic: str, queue_id: int, address: int, file_size: int = 48 << 20):
    """Decode the ConsumeQueueExt unit a tagsCode address (<= MAX_ADDR) points to."""
    if address > CQ_EXT_MAX_ADDR:
        raise ValueError("not a CQ ext address")
    real = ext_real_offset(address)
    d = os.path.join(root, "consumequeue_ext", topic, str(queue_id))
    start = real - real % file_size
    p = os.path.join(d, f"{start:020d}")
    if not os.path.isfile(p):
        raise StoreNotFoundError("no consumequeue_ext file for this address", p, real % file_size)
    with open(p, "rb") as f:
        f.seek(real % file_size)
        head = f.read(CQ_EXT_HEAD.size)
        if len(head) < CQ_EXT_HEAD.size:
            raise CorruptDataError("ext unit truncated", p, real % file_size)
        size, tags, ts, bms = CQ_EXT_HEAD.unpack(head)
        if size < CQ_EXT_MIN_UNIT_SIZE or bms < 0 or size != CQ_EXT_HEAD.size + bms:
            raise CorruptDataError(f"bad ext unit size {size} / bitmap {bms}", p, real % file_size)
        bitmap = f.read(bms)
    return {"size": size, "tags_code": tags, "msg_store_time": ts, "bit_map_size": bms, "filter_bit_map": bitmap}
