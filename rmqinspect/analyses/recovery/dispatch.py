"""Records the recovery hands to the dispatchers: DispatchRequests built in bulk from scanned record rows.

The rows are the compiled scanner's (store.commitlog FAST_FIELDS order); TAGS tagsCode and topic interning
come from the rebuild dispatcher's ``dispatch_fields``, so recovery and rebuild compute one tagsCode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...formats.commitlog import parse_properties
from ...formats.constants import CRC32_RESERVED_LEN, PROPERTY_CRC32, PROPERTY_DELAY_TIME_LEVEL, RMQ_SYS_SCHEDULE_TOPIC
from ..dispatch import DelayLevelError, DelayTable, dispatch_tags_code, goes_to_consume_queue
from ..rebuild import dispatch_fields


@dataclass
class Redispatch:
    """A DispatchRequest the recovery hands to the dispatchers (same order as the oracle's dispatchRecorded)."""

    commit_log_offset: int
    msg_size: int
    topic: str
    queue_id: int
    consume_queue_offset: int
    tags_code: int
    sys_flag: int
    store_timestamp: int

    def as_list(self) -> list:
        return [self.commit_log_offset, self.msg_size, self.topic, self.queue_id, self.consume_queue_offset,
                self.tags_code, self.sys_flag, self.store_timestamp]


SCHEDULE_TOPIC_BYTES = np.frombuffer(RMQ_SYS_SCHEDULE_TOPIC.encode(), dtype=np.uint8)

# goes_to_consume_queue by the low sysFlag bits (it only looks at the transaction type)
GOES_TO_CONSUME_QUEUE = np.array([goes_to_consume_queue(f) for f in range(16)], dtype=bool)


def rows_with_topic(u8: np.ndarray, rows: np.ndarray, name: np.ndarray) -> np.ndarray:
    """Rows whose topic bytes are ``name`` (a uint8 array)."""
    out = rows[:, 12] == name.size
    cand = np.flatnonzero(out)
    if cand.size:
        out[cand] = (u8[rows[cand, 11][:, None] + np.arange(name.size)] == name).all(axis=1)
    return out


class RecordBatch:
    """What dispatch needs of a batch of scanned records: topic (interned in ``names``, shared by every batch)
    and tagsCode per row; only SCHEDULE_TOPIC_XXXX records go through ``dispatch_tags_code`` one by one."""

    def __init__(self, buf, rows: np.ndarray, names: dict[bytes, str]):
        self.buf = buf
        self.rows = rows
        fields, _, topics = dispatch_fields(buf, rows, want_keys=False)
        self.tid = fields[:, 0]
        self.codes = fields[:, 1].copy()
        self.topics = []
        for tb in topics:
            name = names.get(tb)
            if name is None:
                name = names[tb] = tb.decode("utf-8", "replace")
            self.topics.append(name)

    def schedule_codes(self, delay_table: DelayTable):
        """tagsCode of SCHEDULE_TOPIC_XXXX records with a DELAY property (delivery time with the table's
        levels). Returns (index, DelayLevelError) for the first record whose DELAY Integer.parseInt rejects
        (codes after it are not computed), else None."""
        sched = [i for i, t in enumerate(self.topics) if t == RMQ_SYS_SCHEDULE_TOPIC]
        if not sched:
            return None
        buf = self.buf
        for j in np.flatnonzero(np.isin(self.tid, sched)).tolist():
            r = self.rows[j]
            pp, pl = int(r[13]), int(r[14])
            props = parse_properties(bytes(buf[pp:pp + pl]) if pl > 0 else b"")
            if PROPERTY_DELAY_TIME_LEVEL in props:
                try:
                    self.codes[j], _ = dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, int(r[9]), delay_table)
                except DelayLevelError as e:
                    return j, e
        return None

    def redispatch_records(self, idx: np.ndarray, base: int) -> list[Redispatch]:
        r = self.rows[idx]
        topics = self.topics
        return [Redispatch(p + base, size, topics[t], qid, qoff, code, sf, ts)
                for p, size, t, qid, qoff, code, sf, ts in
                zip(r[:, 0].tolist(), r[:, 1].tolist(), self.tid[idx].tolist(), r[:, 6].tolist(), r[:, 7].tolist(),
                    self.codes[idx].tolist(), r[:, 5].tolist(), r[:, 9].tolist(), strict=True)]

    def dispatch_to_queues(self, idx: np.ndarray, base: int, queue: Callable[[str, int], object],
                           count: bool = True) -> None:
        """CommitLogDispatcherBuildConsumeQueue for the records ``idx`` (in order): per queue in bulk;
        queues are touched (and created, ``queue(topic, queue_id)``) in order of their first record, as
        record-by-record dispatch does. ``count``: the entries are the recovery's re-dispatch (not the
        ReputMessageService's after start())."""
        sel = idx[GOES_TO_CONSUME_QUEUE[self.rows[idx, 5] & 0xF]]
        if not sel.size:
            return
        r = self.rows[sel]
        tid = self.tid[sel]
        qid = r[:, 6]
        key = (tid << 32) + (qid & 0xFFFFFFFF)
        order = np.argsort(key, kind="stable")
        ks = key[order]
        cuts = (np.flatnonzero(ks[1:] != ks[:-1]) + 1).tolist()
        bounds = list(zip([0] + cuts, cuts + [len(sel)], strict=True))
        bounds.sort(key=lambda ab: int(order[ab[0]]))
        phys = r[:, 0] + base
        size = r[:, 1]
        qoff = r[:, 7]
        codes = self.codes[sel]
        for a, b in bounds:
            o = order[a:b]
            first = int(o[0])
            st = queue(self.topics[int(tid[first])], int(qid[first]))
            n = st.dispatch_many(phys[o], size[o], qoff[o], codes[o])
            if count:
                st.rec.redispatched += n


_CRC_TRAILER = np.frombuffer((PROPERTY_CRC32 + "\x01").encode(), dtype=np.uint8)
_CRC_TRAILER_AT = np.arange(-CRC32_RESERVED_LEN, -CRC32_RESERVED_LEN + _CRC_TRAILER.size)


def has_crc32_property(buf, rows: np.ndarray) -> bool:
    """Whether a record carries the 5.2.0+ ``__CRC32#`` property. The broker writes it only as the
    record's last CRC32_RESERVED_LEN bytes (FORMATS.md §1.8, as verify reads it): records with that
    trailer are candidates, confirmed with ``parse_properties``."""
    u8 = np.frombuffer(buf, dtype=np.uint8)
    ends = rows[:, 0] + rows[:, 1]
    cand = np.flatnonzero((u8[ends[:, None] + _CRC_TRAILER_AT] == _CRC_TRAILER).all(axis=1))
    for j in cand.tolist():
        pp, pl = int(rows[j, 13]), int(rows[j, 14])
        if pl > 0 and PROPERTY_CRC32 in parse_properties(bytes(buf[pp:pp + pl])):
            return True
    return False


__all__ = ["GOES_TO_CONSUME_QUEUE", "RecordBatch", "Redispatch", "SCHEDULE_TOPIC_BYTES", "has_crc32_property",
           "rows_with_topic"]
