"""Parser entry points as fuzz targets: ``TARGETS[name](data: bytes)``.

A target feeds arbitrary bytes to one reader the way a store would (a file in a private temp directory when the
reader takes a path) and exercises what the commands then do with the result. It may raise ``RmqInspectError``
(the typed error contract, errors.py); any other exception is a finding. Used by the atheris harnesses
(fuzz/run.py) and by the bounded smoke run in CI (tests/test_fuzz_smoke.py). Seeds come from the sample store
and from stores the project's writer makes (``seed_corpus``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from rmqinspect.errors import RmqInspectError

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "fixtures" / "sample-store"

# A private scratch directory per process (tmpfs when there is one): files the path-taking readers open.
_SCRATCH: str | None = None


def scratch() -> str:
    global _SCRATCH
    if _SCRATCH is None or not os.path.isdir(_SCRATCH):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _SCRATCH = tempfile.mkdtemp(prefix="rmq-fuzz-", dir=base)
    return _SCRATCH


_MADE: set[str] = set()


def _write(rel: str, data: bytes) -> str:
    path = os.path.join(scratch(), rel)
    # every target writes one fixed name per directory, so truncating it is enough for the previous input not to
    # linger (no listdir/unlink per case: that setup was a fifth of a small case's time)
    d = os.path.dirname(path)
    if d not in _MADE:
        os.makedirs(d, exist_ok=True)
        _MADE.add(d)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ----------------------------------------------------------------------------------------------------------------
# targets
# ----------------------------------------------------------------------------------------------------------------

def t_record(data: bytes) -> None:
    """CommitLog.read_message at 0 and decode-commitlog's row rendering (every body mode)."""
    from rmqinspect.store.commitlog import CommitLog
    from rmqinspect.store.mapped import MappedFile

    if not data:
        return
    cl = CommitLog([MappedFile.of_buffer(data, 0, "fuzz")], len(data), [], [])
    msg = cl.read_message(0)
    for mode in ("text", "hex", "base64", "none"):
        msg.to_dict(mode)
    _ = (msg.born_host, msg.store_host, msg.offset_msg_id, msg.tags, msg.keys_string)


def t_walk(data: bytes) -> None:
    """walk_file over a whole buffer with both scanners, decoding every record the walk accepted."""
    from rmqinspect.store import scanner
    from rmqinspect.store.mapped import MappedFile
    from rmqinspect.store.walk.file import walk_file
    from rmqinspect.store.walk.records import RecordRun, decode_slot

    mf = MappedFile.of_buffer(data, 0, "fuzz")
    for compiled in (True, False):
        with scanner.selected(compiled):
            for crc_continue in (False, True):
                n = 0
                # records are decoded in one pass only: the four walks accept the same records when they agree,
                # and decoding them four times made this the slowest harness (190 cases/s before instrumentation)
                decode = not compiled and not crc_continue
                for ev in walk_file(mf, check_crc=True, crc_continue=crc_continue):
                    if decode and type(ev) is RecordRun:
                        for r in ev.records[:64]:
                            msg = decode_slot(data, 0, int(r["position"]), None, int(r["body_pos"]), None, "fuzz")
                            msg.to_dict("hex")
                    n += 1
                    if n > 100_000:
                        raise AssertionError("walk_file does not advance")


def t_cq(data: bytes) -> None:
    """A consume-queue file: entries, bounds, min offset."""
    from rmqinspect.store.consumequeue import ConsumeQueue

    _write("cq/consumequeue/T/0/00000000000000000000", data)
    cq = ConsumeQueue.open(os.path.join(scratch(), "cq", "consumequeue"), "T", 0)
    try:
        for _ in cq.entries():
            pass
        cq.bounds()
        cq.min_offset_for(0)
    finally:
        cq.close()


def t_index(data: bytes) -> None:
    """An IndexFile: geometry inference, header, and the chain walk of queryMessage for a few keys."""
    from rmqinspect.store.indexfile import IndexFile, infer_geometry, lookup_key_string

    path = _write("index/index/20240101000000000", data)
    idx = IndexFile(path)
    try:
        infer_geometry(idx)
        for key in ("k1", "key-0", "a", ""):
            idx.select_phy_offset(lookup_key_string("TopicTest", key), 64, 0, (1 << 63) - 1)
    finally:
        idx.close()


def t_checkpoint(data: bytes) -> None:
    from rmqinspect.store.checkpoint import read_checkpoint

    cp = read_checkpoint(_write("checkpoint/checkpoint", data))
    if cp is not None:
        cp.to_dict() if hasattr(cp, "to_dict") else None
        _ = (cp.min_timestamp, cp.min_timestamp_index)


def t_config(data: bytes) -> None:
    """config/*.json: each file name the config command reads, with its row decoders."""
    from rmqinspect.store.config_files import read_config_files

    d = os.path.join(scratch(), "config")
    for name in ("consumerOffset.json", "topics.json", "subscriptionGroup.json", "delayOffset.json"):
        _write(os.path.join("config", name), data)  # the same four names every case: overwritten, not re-made
    cfg = read_config_files(d)
    for attr in ("topics", "subscription_groups", "consumer_offsets", "delay_offsets"):
        getattr(cfg, attr, None)


def t_rocksdb(data: bytes) -> None:
    """RocksDB consume-queue keys and values: parse_cq_key / parse_offset_key (ValueError is their contract for
    a key of another table) and the value codecs, as the store reader applies them."""
    import numpy as np

    from rmqinspect.formats import rocksdb_cq as f

    for parse in (f.parse_cq_key, f.parse_offset_key):
        try:
            parse(data)
        except ValueError:
            pass
    n = len(data) // f.CQ_UNIT_SIZE
    if n:
        np.frombuffer(data, dtype=f.CQ_VALUE_DTYPE, count=n)
    if len(data) == f.OFFSET_VALUE_SIZE:
        f.OFFSET_VALUE.unpack(data)


def t_timer(data: bytes) -> None:
    """timerlog/ file scan and timerwheel slots, with the chain walk of one slot."""
    from rmqinspect.store.timer import TimerLog, TimerWheel, walk_slot

    _write("timer/timerlog/00000000000000000000", data)
    wheel_path = _write("timer/timerwheel", data[::-1])
    log = TimerLog(os.path.join(scratch(), "timer", "timerlog"))
    try:
        log.scan()
        wheel = TimerWheel(wheel_path)
        try:
            for slot in wheel.used_slots()[:8]:
                walk_slot(log, slot, limit=1000)
        finally:
            wheel.close()
    finally:
        log.close()


def t_tiered(data: bytes) -> None:
    """A tiered-store index file (either layout): geometry, header, lookups, every item."""
    from rmqinspect.store.tiered_index import TieredIndexFile

    path = _write("tiered/tiered_index_file/00000000000000000000", data)
    tf = TieredIndexFile(path)
    try:
        tf.header_dict()
        for key in ("k1", "key-0"):
            tf.lookup("TopicTest", key)
        for i, _ in enumerate(tf.all_items()):
            if i > 64:  # the same per-item code; a longer walk only slowed the instrumented harness (600 cases/s)
                break
    finally:
        tf.close()


def t_batchcq(data: bytes) -> None:
    """A BatchConsumeQueue file (entries, bounds) and an INNER_BATCH body split."""
    from rmqinspect.store.batch import BatchConsumeQueue, decode_inner_batch

    _write("bcq/batchconsumequeue/T/0/00000000000000000000", data)
    q = BatchConsumeQueue("T", 0, os.path.join(scratch(), "bcq", "batchconsumequeue", "T", "0"))
    try:
        for _ in q.entries():
            pass
        q.bounds()
    finally:
        q.close()
    decode_inner_batch(data, 0, "fuzz", 0)


def t_recovery(data: bytes) -> None:
    """Differential: the small-store recovery scan (analyses.recovery.small, row tuples) against the plan's (numpy)
    on a one-file commit log of the input's bytes, with a consume queue cut from its tail. The first byte chooses
    the abort file (empty or a 5.x pid), the checkpoint (covering everything or nothing), where the queue starts,
    and the CRC check; both scans must agree on every field."""
    import dataclasses

    from rmqinspect.analyses.recovery import small
    from rmqinspect.analyses.recovery.plan import (
        RecoveryOptions,
        choose_start_file,
        load_consume_queues,
        scan_commitlog,
    )
    from rmqinspect.store import Store

    if len(data) < 2:
        return
    flags, body = data[0], data[1:]
    cut = len(body) - (len(body) // 4 // 20) * 20 if flags & 8 else len(body)  # the tail's whole 20-byte entries
    _write("recovery/commitlog/00000000000000000000", body[:cut])
    _write("recovery/consumequeue/T/0/00000000000000000000", body[cut:])
    root = os.path.join(scratch(), "recovery")
    ts = (1 << 62) if flags & 4 else 0
    _write("recovery/checkpoint", (ts.to_bytes(8, "big") * 3).ljust(4096, b"\0"))
    abort = os.path.join(root, "abort")
    if flags & 1:
        _write("recovery/abort", b"4242" if flags & 2 else b"")
    elif os.path.exists(abort):
        os.remove(abort)
    check_crc = not flags & 16
    got = small.small_recovery_scan(Store.open(root), check_crc)
    if got is None:
        raise AssertionError("a one-file store of a few KiB is small")
    options = RecoveryOptions(check_crc=check_crc, with_salvage=False, keep_redispatch=False, model_start=False,
                              dispatch=False)
    rec = load_consume_queues(Store.open(root), options)
    want = scan_commitlog(rec, choose_start_file(rec)[0])
    if dataclasses.asdict(got) != dataclasses.asdict(want):
        raise AssertionError(f"small scan {got} != plan scan {want}")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "record": t_record, "walk": t_walk, "cq": t_cq, "index": t_index, "checkpoint": t_checkpoint,
    "config": t_config, "rocksdb": t_rocksdb, "timer": t_timer, "tiered": t_tiered, "batchcq": t_batchcq,
    "recovery": t_recovery,
}


def run_one(name: str, data: bytes) -> None:
    """The harness body: a typed error is the contract; anything else propagates (a finding)."""
    try:
        TARGETS[name](data)
    except RmqInspectError:
        pass


# ----------------------------------------------------------------------------------------------------------------
# seeds
# ----------------------------------------------------------------------------------------------------------------

SEED_CAP = 1 << 16  # seeds are cut to this many bytes: the fuzzer's mutations matter near structure, not in fill


def _files(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.glob(pattern) if p.is_file())


def seed_corpus(name: str) -> list[bytes]:
    """Valid inputs for one target: from the sample store and from writer-made structures."""
    seeds: list[bytes] = []
    cap = SEED_CAP
    if name == "recovery":
        from rmqinspect.fixtures.sample import mixed_messages

        from .writer_seeds import commitlog_bytes

        for f in _files(SAMPLE, "commitlog/*")[:1]:
            seeds += [bytes([flags]) + f.read_bytes()[:8192] for flags in (0, 1, 3, 12, 13, 16)]
        seeds.append(b"\x05" + commitlog_bytes(list(mixed_messages(30, seed=5))))
    elif name in ("record", "walk"):
        from rmqinspect.fixtures.sample import mixed_messages

        from .writer_seeds import commitlog_bytes

        for f in _files(SAMPLE, "commitlog/*")[:1]:
            seeds.append(f.read_bytes()[:cap])
        seeds.append(commitlog_bytes(list(mixed_messages(40, seed=3))))
        seeds = [s[:4096 if name == "record" else 8192] for s in seeds]
    elif name == "cq":
        seeds += [f.read_bytes()[:cap] for f in _files(SAMPLE, "consumequeue/*/*/*")[:3]]
    elif name == "index":
        seeds += [f.read_bytes() for f in _files(SAMPLE, "index/*")[:2]]
    elif name == "checkpoint":
        seeds += [f.read_bytes() for f in _files(SAMPLE, "checkpoint")]
    elif name == "config":
        seeds += [f.read_bytes()[:cap] for f in _files(SAMPLE, "config/*.json")]
        seeds.append(b'{"offsetTable":{"T@g":{0:3,1:5}},"dataVersion":{"counter":1}}')
    elif name == "rocksdb":
        from rmqinspect.formats import rocksdb_cq as f

        seeds += [f.cq_key("TopicTest", 3, 17), f.offset_key("TopicTest", b"max", 1),
                  f.encode_cq_value(1 << 30, 200, -5, 1_700_000_000_000), f.encode_offset_value(5, 6)]
    elif name == "timer":
        from .writer_seeds import timerlog_bytes

        seeds.append(timerlog_bytes())
    elif name == "tiered":
        from .writer_seeds import tiered_bytes

        seeds += tiered_bytes()
    elif name == "batchcq":
        from .writer_seeds import batch_bytes

        seeds += batch_bytes()
    return [s for s in seeds if s] or [b"\0" * 64]
