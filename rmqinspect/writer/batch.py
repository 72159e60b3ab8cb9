"""Write inner-batch records and their BatchConsumeQueue (FORMATS.md §1.9, §4.4) into a NEW store, and
ConsumeQueueExt units (§4.3). Fixtures only."""

from __future__ import annotations

import os

from ..formats.batch import BCQ_ENTRY, BCQ_INVALID_POS, CQ_EXT_HEAD, encode_inner_item
from ..formats.constants import SysFlag
from ..formats.consumequeue import ext_address
from ..formats.javahash import tags_code
from ..formats.properties import encode_properties
from .commitlog import CommitLogWriter, MessageSpec

INNER_BATCH_SYSFLAG = SysFlag.NEED_UNWRAP | SysFlag.INNER_BATCH


class BatchQueueWriter:
    """Appends inner-batch records for one (topic, queue) to a CommitLogWriter and the matching 46-byte
    BatchConsumeQueue entries (BatchConsumeQueue.putBatchMessagePositionInfo)."""

    def __init__(self, root: str, commitlog: CommitLogWriter, topic: str, queue_id: int,
                 entries_per_file: int = 300_000):
        self.dir = os.path.join(root, "batchconsumequeue", topic, str(queue_id))
        os.makedirs(self.dir, exist_ok=True)
        self.cl, self.topic, self.queue_id = commitlog, topic, queue_id
        self.file_size = entries_per_file * BCQ_ENTRY.size
        self.next_offset = 0  # next logical (message) offset
        self.entries = 0

    def _put(self, entry: bytes) -> None:
        pos = self.entries * BCQ_ENTRY.size
        start = pos - pos % self.file_size
        p = os.path.join(self.dir, f"{start:020d}")
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.truncate(self.file_size)
        with open(p, "r+b") as f:
            f.seek(pos - start)
            f.write(entry)
        self.entries += 1

    def append_batch(self, messages: list[tuple[bytes, dict]], tags: str | None = None, uniq_key: str = "",
                     store_timestamp: int = 0, inner: bool = True):
        """One INNER_BATCH record holding ``messages`` (body, properties) or, with ``inner=False``, one plain
        record (batchSize 1)."""
        base = self.next_offset
        if inner:
            body = b"".join(encode_inner_item(b, encode_properties(p)) for b, p in messages)
            props = {"INNER_NUM": str(len(messages)), "INNER_BASE": str(base), "UNIQ_KEY": uniq_key}
            n, sysflag = len(messages), int(INNER_BATCH_SYSFLAG)
        else:
            (body, props), n, sysflag = messages[0], 1, 0
        if tags:
            props = {"TAGS": tags, **props}
        r = self.cl.append(MessageSpec(self.topic, self.queue_id, body, encode_properties(props), sys_flag=sysflag,
                                       store_timestamp=store_timestamp, queue_offset=base))
        self._put(BCQ_ENTRY.pack(r.physical_offset, r.total_size, tags_code(tags), store_timestamp, base, n,
                                 BCQ_INVALID_POS, 0))
        self.next_offset = base + n
        return r


def write_cq_ext_unit(path: str, position: int, tags: int, store_time: int, bitmap: bytes) -> int:
    """Write one ext unit at ``position`` of the file ``path``; returns the CQ tagsCode address."""
    with open(path, "r+b" if os.path.exists(path) else "w+b") as f:
        f.seek(position)
        f.write(CQ_EXT_HEAD.pack(CQ_EXT_HEAD.size + len(bitmap), tags, store_time, len(bitmap)) + bitmap)
    start = int(os.path.basename(path))
    return ext_address(start + position)
