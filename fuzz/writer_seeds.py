"""Seed inputs made by the project's writer (rmqinspect/writer) in a private temp directory."""

from __future__ import annotations

import os
import tempfile

from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec


def commitlog_bytes(specs: list[MessageSpec], file_size: int = 1 << 16) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        with CommitLogWriter(os.path.join(d, "commitlog"), file_size=file_size) as w:
            for s in specs:
                w.append(s)
        with open(os.path.join(d, "commitlog", "%020d" % 0), "rb") as f:
            return f.read()


def timerlog_bytes() -> bytes:
    from rmqinspect.fixtures.timer import TimerStoreWriter

    with tempfile.TemporaryDirectory() as d:
        with TimerStoreWriter(d, timerlog_file_size=4096, slots_total=64) as w:
            for i in range(30):
                w.enqueue(i * 100, 100, "TopicTest" if i % 2 else None, 1_700_000_000_000 + i,
                          1_700_000_000_000 + 1000 * (i % 7))
        with open(os.path.join(d, "timerlog", "%020d" % 0), "rb") as f:
            return f.read().rstrip(b"\0")[:4096] or b"\0"


def tiered_bytes() -> list[bytes]:
    from rmqinspect.fixtures.tiered_index import TieredIndexWriter

    with tempfile.TemporaryDirectory() as d:
        w = TieredIndexWriter(d, 1_700_000_000_000, 16, 64)
        for i in range(40):
            w.put_key("TopicTest", 1, i % 4, {f"k{i}", "key-0"}, i * 100, 100, 1_700_000_000_000 + i)
        w.close()
        with open(w.path, "rb") as f:
            return [f.read()]


def batch_bytes() -> list[bytes]:
    from rmqinspect.fixtures.batch import BatchQueueWriter

    with tempfile.TemporaryDirectory() as d:
        with CommitLogWriter(os.path.join(d, "commitlog"), file_size=1 << 16) as cl:
            bw = BatchQueueWriter(d, cl, "T", 0, entries_per_file=64)
            for i in range(10):
                bw.append_batch([(b"body%d" % j, {"KEYS": f"k{j}"}) for j in range(3)], tags="t", uniq_key=f"u{i}")
        with open(os.path.join(bw.dir, "%020d" % 0), "rb") as f:
            entries = f.read().rstrip(b"\0")
        from rmqinspect.formats.batch import encode_inner_item
        from rmqinspect.formats.properties import encode_properties

        body = b"".join(encode_inner_item(b"x" * j, encode_properties({"KEYS": f"k{j}"})) for j in range(4))
        return [entries, body]
