"""Crash stories made with the project's writer (rmqinspect/writer) into a directory the test names.

- ``dispatcher_behind``: the ReputMessageService had dispatched only part of the commit log when the broker
  died (abort file present, the checkpoint as of the last dispatched record, the index's first file full so
  indexMsgTimestamp is its end, the second one newer); delayed messages among the records;
- ``dledger_torn``: a DLedger store whose member lost its checkpoint and whose last entry's tail is zeroed
  (header intact);
- ``rocksdb_no_rows``: a RocksDB consume queue with no row at all (the WAL is off: a crash can lose them);
- ``clean``: a clean shutdown.

Each returns a ``Story``: the store root and the records written (offset, size, topic, queue, keys, ...).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.constants import RMQ_SYS_SCHEDULE_TOPIC

BASE_TS = 1_795_100_000_000
TOPICS = (("OrderTopic", 0), ("OrderTopic", 1), ("PayTopic", 0))


@dataclass
class Written:
    offset: int
    size: int
    topic: str
    queue_id: int
    keys: list[str]
    uniq_key: str
    store_ts: int
    real_topic: str | None = None
    delay_level: int | None = None

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass
class Story:
    name: str
    root: str
    records: list[Written] = field(default_factory=list)
    dispatched_to: int | None = None  # dispatcher_behind: where the dispatcher stood

    def tail(self) -> list[Written]:
        """Records the dispatcher had not reached."""
        return [r for r in self.records if self.dispatched_to is not None and r.offset >= self.dispatched_to]


def _specs(n: int):
    for i in range(n):
        topic, qid = TOPICS[i % len(TOPICS)]
        keys = [f"ord-{i % 40}"] + ([f"only-{i}"] if i % 5 == 0 else [])
        uniq = "%032X" % (0xC0A8 << 100 | 0x5EED << 60 | i)
        props = [("UNIQ_KEY", uniq), ("KEYS", " ".join(keys)), ("CLUSTER", "DefaultCluster"), ("TAGS", "TagA")]
        real = level = None
        if i % 17 == 16:  # a delayed message: stored under SCHEDULE_TOPIC_XXXX, queue = level - 1
            real, level = topic, 3
            props += [("REAL_TOPIC", topic), ("REAL_QID", str(qid)), ("DELAY", str(level))]
            topic, qid = RMQ_SYS_SCHEDULE_TOPIC, level - 1
        ts = BASE_TS + i * 1000
        yield (MessageSpec(topic=topic, queue_id=qid, body=(f"body {i} " * 12).encode(),
                           properties=encode_properties(props), born_timestamp=ts - 3, store_timestamp=ts),
               Written(0, 0, topic, qid, keys, uniq, ts, real, level))


def _write(root: str, n: int, **kw) -> tuple[StoreWriter, list[Written]]:
    out = []
    w = StoreWriter(root, **kw)
    for spec, rec in _specs(n):
        res = w.append(spec)
        rec.offset, rec.size = res.physical_offset, res.total_size
        out.append(rec)
    w.close()
    return w, out


def dispatcher_behind(root: str, n: int = 240, behind: int = 57) -> Story:
    """The dispatcher stopped ``behind`` records before the end; the first index file (64 items) is full."""
    # the offset of record n - behind: every record is the same size but for its keys, so write once to learn it
    probe = root + ".probe"
    _, recs = _write(probe, n, commitlog_file_size=1 << 15, build_cq=False, build_index=False)
    shutil.rmtree(probe)
    stop = recs[n - behind].offset
    _, recs = _write(root, n, commitlog_file_size=1 << 15, index_slots=16, index_max=64, abort=True,
                     dispatch_to=stop)
    return Story("dispatcher_behind", root, recs, stop)


def clean(root: str, n: int = 120) -> Story:
    _, recs = _write(root, n, commitlog_file_size=1 << 15)
    return Story("clean", root, recs)


def rocksdb_no_rows(root: str, n: int = 120) -> Story:
    """A 5.x store (checkpoint with 5 fields) whose consume queue is a RocksDB database without a row."""
    from rmqinspect.sinks.rocksdb_cq import write_rocksdb_consume_queue

    _, recs = _write(root, n, commitlog_file_size=1 << 15, checkpoint_fields=5)
    cq = os.path.join(root, "consumequeue")
    shutil.rmtree(cq)
    write_rocksdb_consume_queue(cq, [])
    return Story("rocksdb_no_rows", root, recs)


def dledger_torn(root: str, n: int = 60) -> Story:
    """DLedger (4.9.8): the member's checkpoint (and .bak) deleted, the last entry's tail zeroed: its header is
    intact, its body is not."""
    from rmqinspect.fixtures.dledger import DLedgerStoreWriter

    out = []
    w = DLedgerStoreWriter(root, data_file_size=1 << 16)
    for spec, rec in _specs(n):
        res = w.append(spec)
        rec.offset, rec.size = res.physical_offset, res.total_size
        out.append(rec)
    w.close()
    member = os.path.join(root, "dledger-n0")
    for name in ("checkpoint", "checkpoint.bak"):
        p = os.path.join(member, name)
        if os.path.exists(p):
            os.remove(p)
    last = out[-1]
    data = os.path.join(member, "data")
    fsize = 1 << 16
    # the record (48 bytes into its entry, after the DLedger header) keeps its fixed header and BODYLENGTH (88
    # bytes for IPv4 hosts); its body, topic and properties are zeroed, as a page that never reached the disk
    zero_from, zero_to = last.offset + 88, last.end
    base = zero_from - zero_from % fsize
    with open(os.path.join(data, "%020d" % base), "r+b") as f:
        f.seek(zero_from - base)
        f.write(b"\0" * (zero_to - zero_from))
    return Story("dledger_torn", root, out)


STORIES = {"dispatcher_behind": dispatcher_behind, "dledger_torn": dledger_torn, "rocksdb_no_rows": rocksdb_no_rows,
           "clean": clean}


def make(name: str, root) -> Story:
    return STORIES[name](str(root))
