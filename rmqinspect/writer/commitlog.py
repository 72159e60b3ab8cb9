"""The project's own CommitLog writer: broker-faithful files for fixtures and benchmarks.

Follows CommitLog.DefaultAppendMessageCallback.doAppend (FORMATS.md §1.2, §1.4): records packed from
position 0, a blank record (8 bytes written, TOTALSIZE = rest of the file) when ``msgLen + 8`` does not
fit, queue offsets assigned per (topic, queueId) except for PREPARED/ROLLBACK records (stored as 0),
PHYSICALOFFSET and STORETIMESTAMP filled in at append. Files are created full-size and zero-filled,
like the broker's pre-allocated mapped files.

This writes only into a directory the caller names; it is never pointed at an inspected store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..formats.commitlog import encode_blank, encode_record, record_length
from ..formats.constants import (
    CRC32_RESERVED_LEN,
    DEFAULT_COMMITLOG_FILE_SIZE,
    END_FILE_MIN_BLANK_LENGTH,
    TRANSACTION_MASK,
    TransactionType,
)
from ..formats.properties import PROPERTY_SEPARATOR_B, crc32_trailer


@dataclass
class MessageSpec:
    """What a producer + broker hand to the append callback."""

    topic: str
    queue_id: int
    body: bytes = b""
    properties: bytes = b""  # encoded properties string (formats.commitlog.encode_properties)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_ip: bytes = b"\x7f\x00\x00\x01"
    born_port: int = 0
    store_timestamp: int = 0
    store_ip: bytes = b"\x7f\x00\x00\x01"
    store_port: int = 10911
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    version: int | None = None  # None: V2 when the topic is longer than 127 chars (5.x autoMessageVersionOnTopicLen)
    queue_offset: int | None = None  # None: assigned by the writer
    body_crc: int | None = None  # None: computed (tests may force a wrong one)
    append_property_crc: bool = False  # 5.2.0+ enabledAppendPropCRC: __CRC32# trailer


@dataclass
class AppendResult:
    physical_offset: int
    total_size: int
    queue_offset: int
    record: bytes = field(repr=False, default=b"")


@dataclass(frozen=True)
class RecordLayout:
    """What a message's record will hold before its offsets are known: the encoded topic, the properties (with the
    __CRC32# placeholder when asked for), the record version and its TOTALSIZE. Every writer (commit log, DLedger)
    sizes and encodes a ``MessageSpec`` through this one class."""

    spec: MessageSpec
    topic: bytes
    properties: bytes
    version: int
    size: int

    @classmethod
    def of(cls, spec: MessageSpec) -> RecordLayout:
        topic_b = spec.topic.encode("utf-8")
        version = spec.version or (2 if len(spec.topic) > 127 else 1)
        props = spec.properties
        if spec.append_property_crc:
            if props and not props.endswith(PROPERTY_SEPARATOR_B):
                props += PROPERTY_SEPARATOR_B
            props += b"\0" * CRC32_RESERVED_LEN  # placeholder, replaced in encode() once offsets are known
        return cls(spec, topic_b, props, version,
                   record_length(spec.sys_flag, len(spec.body), len(topic_b), len(props), version))

    def encode(self, queue_offset: int, physical_offset: int) -> bytes:
        spec = self.spec
        rec = encode_record(
            queue_id=spec.queue_id, flag=spec.flag, queue_offset=queue_offset, physical_offset=physical_offset,
            sys_flag=spec.sys_flag, born_timestamp=spec.born_timestamp, born_ip=spec.born_ip,
            born_port=spec.born_port, store_timestamp=spec.store_timestamp, store_ip=spec.store_ip,
            store_port=spec.store_port, reconsume_times=spec.reconsume_times,
            prepared_transaction_offset=spec.prepared_transaction_offset, body=spec.body, topic=self.topic,
            properties=self.properties, version=self.version, body_crc_value=spec.body_crc,
        )
        if spec.append_property_crc:
            rec = rec[:-CRC32_RESERVED_LEN] + crc32_trailer(rec[:-CRC32_RESERVED_LEN])
        return rec


def next_queue_offset(queue_offsets: dict[tuple[str, int], int], spec: MessageSpec) -> int:
    """The QUEUEOFFSET the broker gives ``spec`` (CommitLog's topicQueueTable): the queue's next offset, advanced
    by one; a prepared or rolled-back transaction message gets 0 and does not advance it. A spec that names its
    own queue offset keeps it and moves the queue on past it."""
    tx = spec.sys_flag & TRANSACTION_MASK
    key = (spec.topic, spec.queue_id)
    half = tx in (TransactionType.PREPARED, TransactionType.ROLLBACK)
    if spec.queue_offset is not None:
        if not half:
            queue_offsets[key] = spec.queue_offset + 1
        return spec.queue_offset
    if half:
        return 0
    qoff = queue_offsets.get(key, 0)
    queue_offsets[key] = qoff + 1
    return qoff


class CommitLogWriter:
    """Appends records to 20-digit-named files of ``file_size`` bytes in ``directory``."""

    def __init__(self, directory: str, file_size: int = DEFAULT_COMMITLOG_FILE_SIZE, start_offset: int = 0,
                 queue_offsets: dict[tuple[str, int], int] | None = None):
        if start_offset % file_size:
            raise ValueError("start_offset must be a multiple of file_size")
        self.directory = directory
        self.file_size = file_size
        os.makedirs(directory, exist_ok=True)
        self.queue_offsets: dict[tuple[str, int], int] = dict(queue_offsets or {})
        self._file_start = start_offset
        self._pos = 0
        self._fh = None
        self._open_file(start_offset)

    def _path(self, start: int) -> str:
        return os.path.join(self.directory, "%020d" % start)

    def _open_file(self, start: int) -> None:
        if self._fh is not None:
            self._fh.close()
        path = self._path(start)
        self._fh = open(path, "w+b")
        self._fh.truncate(self.file_size)  # sparse zeros, like a pre-allocated mapped file
        self._file_start = start
        self._pos = 0

    @property
    def write_offset(self) -> int:
        """Global offset of the next record (the broker's max physical offset)."""
        return self._file_start + self._pos

    def append(self, spec: MessageSpec) -> AppendResult:
        layout = RecordLayout.of(spec)
        size = layout.size
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise ValueError(f"message of {size} bytes can never fit a {self.file_size}-byte file")
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size - self._pos:
            self._fh.seek(self._pos)
            self._fh.write(encode_blank(self.file_size - self._pos))
            self._open_file(self._file_start + self.file_size)
        qoff = next_queue_offset(self.queue_offsets, spec)
        phys = self.write_offset
        rec = layout.encode(qoff, phys)
        self._fh.seek(self._pos)
        self._fh.write(rec)
        self._pos += len(rec)
        return AppendResult(phys, len(rec), qoff, rec)

    def preallocate_next(self) -> str:
        """Create the next, all-zero file, as AllocateMappedFileService does ahead of need."""
        path = self._path(self._file_start + self.file_size)
        with open(path, "wb") as f:
            f.truncate(self.file_size)
        return path

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> CommitLogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def spec_from_message(msg) -> MessageSpec:
    """A MessageSpec that re-encodes a decoded ``store.message.Message`` byte for byte."""
    return MessageSpec(
        topic=msg.topic, queue_id=msg.queue_id, body=msg.body, properties=msg.properties_raw, flag=msg.flag,
        sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_ip=msg.born_ip, born_port=msg.born_port,
        store_timestamp=msg.store_timestamp, store_ip=msg.store_ip, store_port=msg.store_port,
        reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
        version=msg.magic_version, queue_offset=msg.queue_offset, body_crc=msg.body_crc,
    )
