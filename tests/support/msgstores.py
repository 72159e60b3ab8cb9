"""Stores written with the project's CommitLogWriter for the export / Spark tests (small files so that a
store has several commitlog files = several Spark tasks)."""

from __future__ import annotations

import os

from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties

FILE_SIZE = 2048
T0 = 1_763_700_000_000  # 2025-11-21T04:40:00Z


def spec(i: int, topic: str = "OrderTopic", queue: int = 0, tag: str = "t", lag: int = 0, prefix: str = "m",
         extra_keys: str = "") -> MessageSpec:
    keys = f"{prefix}-key-{i}" + (" " + extra_keys if extra_keys else "")
    props = encode_properties({"TAGS": tag, "KEYS": keys, "UNIQ_KEY": f"{prefix.upper()}UNIQ{i:08d}"})
    born = T0 + i * 600_000  # every 10 minutes: several hours
    return MessageSpec(topic=topic, queue_id=queue, body=(f"{prefix} body {i} " * (1 + i % 5)).encode(),
                       properties=props, born_timestamp=born, store_timestamp=born + lag, born_port=40000 + i)


def common_specs(n: int = 30) -> list[MessageSpec]:
    return [spec(i, topic=("OrderTopic", "PayTopic")[i % 2], queue=i % 3, lag=(i * 37) % 500) for i in range(n)]


def write_store(root: str, specs, file_size: int = FILE_SIZE):
    """Write ``specs`` into ROOT/commitlog; returns the AppendResults."""
    with CommitLogWriter(os.path.join(root, "commitlog"), file_size=file_size) as w:
        return [w.append(s) for s in specs]


def replicas(tmp: str):
    """Two replicas of one broker: the same 30 messages, then A has its own 3-message tail and B a different
    2-message tail followed by a torn record (second half zeroed, as after a crash mid-write).

    Returns (a_root, b_root, a_results, b_results, torn_result)."""
    a, b = os.path.join(tmp, "replica-a"), os.path.join(tmp, "replica-b")
    common = common_specs()
    tail_a = [spec(100 + i, topic="OrderTopic", prefix="a") for i in range(3)]
    tail_b = [spec(200 + i, topic="OrderTopic", prefix="b", queue=1) for i in range(3)]
    ra = write_store(a, common + tail_a)
    rb = write_store(b, common + tail_b)
    torn = rb.pop()
    fstart = torn.physical_offset - torn.physical_offset % FILE_SIZE
    path = os.path.join(b, "commitlog", "%020d" % fstart)
    with open(path, "r+b") as f:
        half = torn.total_size // 2
        f.seek(torn.physical_offset - fstart + half)
        f.write(b"\0" * (torn.total_size - half))
    return a, b, ra, rb, torn


def writer_index_files(root: str, slots: int, items: int, n: int = 120) -> list[str]:
    """The index files the project's writer makes for ``n`` messages (two topics, three queues, one key each) with
    the index geometry (slots, items), in order."""
    from rmqinspect.fixtures.store import StoreWriter

    with StoreWriter(root, commitlog_file_size=1 << 20, index_slots=slots, index_max=items) as w:
        for i in range(n):
            w.append(spec(i, topic=("OrderTopic", "PayTopic")[i % 2], queue=i % 3))
    idir = os.path.join(root, "index")
    return [os.path.join(idir, name) for name in sorted(os.listdir(idir))]


def write_ambiguous_index(path: str) -> None:
    """An index file of 10 slots and 40 items holding one all-zero item (key hash 0 at commit-log offset 0, in its
    first second, the head of slot 0 under every slot count): consistent with every geometry that fits, so its
    proof is 'ambiguous'."""
    from rmqinspect.formats.indexfile import INDEX_HEADER, index_file_size, item_position, slot_position

    with open(path, "wb") as f:
        f.truncate(index_file_size(10, 40))
        f.seek(item_position(10, 1))
        f.write(bytes(20))
        f.seek(slot_position(0))
        f.write((1).to_bytes(4, "big"))
        f.seek(0)
        f.write(INDEX_HEADER.pack(1, 2, 0, 0, 1, 2))


def write_crc_property_log(root, crc_at: int | None) -> None:
    """A commit log of 60 records of topic T in ``root``/commitlog, the 5.2.0+ ``__CRC32#`` trailer on record
    ``crc_at`` only (None: on none)."""
    with CommitLogWriter(str(root / "commitlog"), 1 << 16) as w:
        for i in range(60):
            w.append(MessageSpec(topic="T", queue_id=0, body=b"x" * 50, store_timestamp=1_795_000_000_000 + i,
                                 properties=encode_properties({"TAGS": "a", "UNIQ_KEY": "%032X" % i}),
                                 append_property_crc=i == crc_at))
