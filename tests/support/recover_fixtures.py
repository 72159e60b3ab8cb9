"""Small stores written with the project's CommitLogWriter (+ consume queues and a checkpoint written
here with the CQ_ENTRY layout), then doctored, for the recovery / verify / salvage tests."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.consumequeue import CQ_ENTRY
from rmqinspect.formats.javahash import tags_code

BASE_TS = 1_795_000_000_000
QUEUES = (("OrderTopic", 0), ("OrderTopic", 1), ("PayTopic", 0))


@dataclass
class Rec:
    offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    store_ts: int
    body: bytes
    tags: str

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass
class Fixture:
    root: str
    file_size: int
    cq_file_size: int
    records: list[Rec] = field(default_factory=list)

    @property
    def commitlog(self) -> str:
        return os.path.join(self.root, "commitlog")

    def file_names(self) -> list[str]:
        return sorted(os.listdir(self.commitlog))

    def file_of(self, offset: int) -> str:
        return "%020d" % (offset - offset % self.file_size)

    def patch(self, offset: int, data: bytes) -> None:
        """Overwrite bytes at a physical offset (may not cross a file boundary)."""
        base = offset - offset % self.file_size
        with open(os.path.join(self.commitlog, "%020d" % base), "r+b") as f:
            f.seek(offset - base)
            f.write(data)

    def zero(self, start: int, end: int) -> None:
        self.patch(start, b"\0" * (end - start))

    def queue_counts(self, before: int | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            if before is None or r.offset < before:
                k = f"{r.topic}/{r.queue_id}"
                out[k] = max(out.get(k, 0), r.queue_offset + 1)
        return out

    def write_checkpoint(self, physic: int, logics: int | None = None, index: int = 0) -> None:
        logics = physic if logics is None else logics
        data = physic.to_bytes(8, "big") + logics.to_bytes(8, "big") + index.to_bytes(8, "big")
        with open(os.path.join(self.root, "checkpoint"), "wb") as f:
            f.write(data.ljust(4096, b"\0"))

    def set_abort(self, present: bool = True) -> None:
        p = os.path.join(self.root, "abort")
        if present:
            open(p, "wb").close()
        elif os.path.exists(p):
            os.remove(p)

    def write_consume_queues(self, records: list[Rec] | None = None) -> None:
        """ConsumeQueue files (FORMATS.md §4.1): full-size, zero-filled, 20-byte entries at queue offset * 20."""
        records = self.records if records is None else records
        per: dict[tuple[str, int], list[Rec]] = {}
        for r in records:
            per.setdefault((r.topic, r.queue_id), []).append(r)
        cq_root = os.path.join(self.root, "consumequeue")
        for (topic, qid), rs in per.items():
            d = os.path.join(cq_root, topic, str(qid))
            os.makedirs(d, exist_ok=True)
            for n in os.listdir(d):
                os.remove(os.path.join(d, n))
            files: dict[int, bytearray] = {}
            for r in rs:
                pos = r.queue_offset * 20
                fstart = pos - pos % self.cq_file_size
                buf = files.setdefault(fstart, bytearray(self.cq_file_size))
                CQ_ENTRY.pack_into(buf, pos - fstart, r.offset, r.size, tags_code(r.tags))
            for fstart, buf in files.items():
                with open(os.path.join(d, "%020d" % fstart), "wb") as f:
                    f.write(bytes(buf))


def build_store(root, n: int = 240, file_size: int = 16384, cq_file_size: int = 400, body_size: int = 120,
                preallocate: bool = False) -> Fixture:
    """n messages round-robin over QUEUES, store times 1 s apart, consume queues and a checkpoint that
    covers everything (a clean, normal store)."""
    root = str(root)
    fx = Fixture(root, file_size, cq_file_size)
    os.makedirs(os.path.join(root, "config"), exist_ok=True)
    with CommitLogWriter(fx.commitlog, file_size) as w:
        for i in range(n):
            topic, qid = QUEUES[i % len(QUEUES)]
            tags = ("TagA", "TagB", "")[i % 3]
            body = (f"message {i} " * 40).encode()[:body_size]
            props = {"UNIQ_KEY": "%032X" % (0xAC10 << 100 | i), "KEYS": f"k-{i}", "CLUSTER": "DefaultCluster"}
            if tags:
                props["TAGS"] = tags
            ts = BASE_TS + i * 1000
            res = w.append(MessageSpec(topic=topic, queue_id=qid, body=body, properties=encode_properties(props),
                                       born_timestamp=ts - 5, store_timestamp=ts))
            fx.records.append(Rec(res.physical_offset, res.total_size, topic, qid, res.queue_offset, ts, body, tags))
        if preallocate:
            w.preallocate_next()
    fx.write_consume_queues()
    last = fx.records[-1].store_ts
    fx.write_checkpoint(last)
    return fx
