"""Records the recovery hands to the dispatchers: DispatchRequests built in bulk from the walk's record runs.

TAGS tagsCode and topic interning come from the rebuild dispatcher's ``dispatch_fields``, so recovery and
rebuild compute one tagsCode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...formats.constants import PROPERTY_CRC32, PROPERTY_DELAY_TIME_LEVEL, RMQ_SYS_SCHEDULE_TOPIC
from ...formats.properties import parse_properties_at
from ...store.walk.records import RecordRun, crc32_trailer_records
from ..dispatch_rules import DelayLevelError, DelayTable, dispatch_tags_code, goes_to_consume_queue
from ..dispatcher import dispatch_fields, dispatch_topics, queue_groups
from .queues import ConsumeQueueModel


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


def records_with_topic(u8: np.ndarray, records: np.ndarray, name: np.ndarray) -> np.ndarray:
    """Mask of the records (RECORD_DTYPE) whose topic bytes are ``name`` (a uint8 array)."""
    out = records["topic_len"] == name.size
    cand = np.flatnonzero(out)
    if cand.size:
        out[cand] = (u8[records["topic_pos"][cand][:, None] + np.arange(name.size)] == name).all(axis=1)
    return out


class RecordBatch:
    """What dispatch needs of a run of records: topic (interned in ``names``, shared by every batch) and
    tagsCode per record; only SCHEDULE_TOPIC_XXXX records go through ``dispatch_tags_code`` one by one.
    ``tags=False``: every TAGS tagsCode is 0 (``RecoveryOptions.tags_codes``: the topics are numbered without
    parsing the properties); a SCHEDULE_TOPIC_XXXX record's delivery time is still computed, its DELAY deciding
    whether the record is legal."""

    def __init__(self, run: RecordRun, names: dict[bytes, str], tags: bool = True):
        self.buf = buf = run.file.buffer
        self.records = run.records
        if tags:
            fields, _, topics = dispatch_fields(buf, run.rows, want_keys=False)
            self.tid = fields[:, 0]
            self.codes = fields[:, 1].copy()
        else:
            self.tid, topics = dispatch_topics(buf, run.rows)
            self.codes = np.zeros(len(self.tid), dtype=np.int64)
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
            r = self.records[j]
            props = parse_properties_at(buf, int(r["properties_pos"]), int(r["properties_len"]))
            if PROPERTY_DELAY_TIME_LEVEL in props:
                try:
                    self.codes[j], _ = dispatch_tags_code(RMQ_SYS_SCHEDULE_TOPIC, props, int(r["store_timestamp"]),
                                                          delay_table)
                except DelayLevelError as e:
                    return j, e
        return None

    def redispatch_records(self, idx: np.ndarray, base: int) -> list[Redispatch]:
        r = self.records[idx]
        topics = self.topics
        return [Redispatch(p + base, size, topics[t], qid, qoff, code, sf, ts)
                for p, size, t, qid, qoff, code, sf, ts in
                zip(r["position"].tolist(), r["total_size"].tolist(), self.tid[idx].tolist(), r["queue_id"].tolist(),
                    r["queue_offset"].tolist(), self.codes[idx].tolist(), r["sys_flag"].tolist(),
                    r["store_timestamp"].tolist(), strict=True)]

    def dispatch_to_queues(self, idx: np.ndarray, base: int, queue: Callable[[str, int], object],
                           count: bool = True) -> None:
        """CommitLogDispatcherBuildConsumeQueue for the records ``idx`` (``dispatch_columns``)."""
        r = self.records
        dispatch_columns(QueueColumns(r["position"], r["total_size"], r["queue_id"], r["queue_offset"], r["sys_flag"],
                                      self.tid, self.topics, self.codes), idx, base, queue, count)


@dataclass
class QueueColumns:
    """What CommitLogDispatcherBuildConsumeQueue takes of each record of a run: position (in the file whose start
    is the ``base`` given with it), size, queue id, queue offset, sysFlag, topic id into ``topics``, tagsCode."""

    position: np.ndarray
    size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    tid: np.ndarray
    topics: list[str]
    codes: np.ndarray


def dispatch_columns(c: QueueColumns, idx: np.ndarray, base: int, queue: Callable[[str, int], object],
                     count: bool = True) -> None:
    """CommitLogDispatcherBuildConsumeQueue for the records ``idx`` (increasing: in commit-log order): per queue in
    bulk; queues are touched (and created, ``queue(topic, queue_id)``) in order of their first record, as
    record-by-record dispatch does. ``count``: the entries are the recovery's re-dispatch (not the
    ReputMessageService's after start())."""
    # an increasing idx as long as the batch is every record: the common case, read without gathers
    whole = len(idx) == len(c.position)
    goes = GOES_TO_CONSUME_QUEUE[(c.sys_flag if whole else c.sys_flag[idx]) & 0xF]
    if whole and goes.all():
        sel, tid, qid = idx, c.tid, c.queue_id
    else:
        sel = idx[goes]
        if not sel.size:
            return
        tid, qid = c.tid[sel], c.queue_id[sel]
    order, bounds, groups = queue_groups(tid, qid)
    # a queue's records come in commit-log order, so its last record ends furthest
    last = sel[order[bounds[1:] - 1]]
    last_end = (c.position[last] + c.size[last] + base).tolist()
    for g in groups:
        a, b = int(bounds[g]), int(bounds[g + 1])
        first = int(order[a])
        st = queue(c.topics[int(tid[first])], int(qid[first]))
        # an abnormal recovery re-dispatches every record the queues already hold: a ConsumeQueue's records
        # ending at or below its maxPhysicOffset change nothing ("build consume queue repeatedly"), so a queue
        # that holds them all is not gathered at all, and the others from their first new record on
        if type(st) is ConsumeQueueModel and last_end[g] <= st.max_phys:
            continue
        rows = sel[order[a:b]]
        phys = c.position[rows] + base
        size = c.size[rows].astype(np.int64, copy=False)
        k = st.first_past(phys + size) if type(st) is ConsumeQueueModel else 0
        if k:
            rows, phys, size = rows[k:], phys[k:], size[k:]
        n = st.dispatch_many(phys, size, c.queue_offset[rows], c.codes[rows])
        if count:
            st.rec.redispatched += n


def has_crc32_property(buf, records: np.ndarray) -> bool:
    """Whether a record carries the 5.2.0+ ``__CRC32#`` property: records with the broker's trailer
    (``records.crc32_trailer_records``) are candidates, each confirmed (``carries_crc32_property``)."""
    return any(carries_crc32_property(buf, records, j) for j in crc32_trailer_records(buf, records).tolist())


def carries_crc32_property(buf, records: np.ndarray, j: int) -> bool:
    """Whether record ``j`` of ``records`` (RECORD_DTYPE, positions in ``buf``) has a ``__CRC32#`` property."""
    return PROPERTY_CRC32 in parse_properties_at(buf, int(records["properties_pos"][j]),
                                                 int(records["properties_len"][j]))


__all__ = ["GOES_TO_CONSUME_QUEUE", "QueueColumns", "RecordBatch", "Redispatch", "SCHEDULE_TOPIC_BYTES",
           "carries_crc32_property", "dispatch_columns", "has_crc32_property", "records_with_topic"]
