"""Deterministic message mixes for fixtures and benchmarks, shaped like the oracle's "mix A".

``mixed_messages`` covers what the decoders must handle: V1 and V2 (a 200-char topic), IPv6 born/store
hosts, zlib/zstd/lz4 and legacy-zlib compressed bodies, empty and binary bodies, non-ASCII tags and keys,
transaction PREPARED/COMMIT, delay-level messages rewritten to SCHEDULE_TOPIC_XXXX, property CRC.
``benchmark_messages`` is the uniform ~1 KiB workload of the benchmarks.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator

from ..analyses.dispatch import DEFAULT_DELAY_TABLE
from ..formats.commitlog import encode_properties
from ..formats.constants import RMQ_SYS_SCHEDULE_TOPIC, SysFlag
from .commitlog import MessageSpec

LONG_TOPIC = "V2Topic_longer_than_127_chars_" + "".join(chr(ord("a") + i % 26) for i in range(170))
TOPICS = ("OrderTopic", "PayTopic", "LogTopic")
TAGS = (None, "TagA", "TagB", "TagC", "create", "paid", "refund", "标签A", "タグ", "🏷️")
NON_ASCII_KEYS = ("订单-3", "用户🙂7", "ключ-5", "café-1", "キー2", "주문-4")
STORE_IP = bytes([10, 10, 0, 5])
STORE_IP6 = bytes.fromhex("20010db8000000000000000000000005")


def _uniq_key(rng: random.Random, counter: int) -> str:
    return "C0A80A0B3E8F1B6D3586" + "%08X" % rng.getrandbits(32) + "%04X" % (counter & 0xFFFF)


def mixed_messages(n: int, seed: int = 1, start_ts: int = 1_795_296_980_000) -> Iterator[MessageSpec]:
    rng = random.Random(seed)
    ts = start_ts
    for i in range(n):
        ts += rng.randint(0, 25)
        topic = LONG_TOPIC if rng.random() < 0.1 else rng.choice(TOPICS)
        queue = rng.randrange(2 if topic == LONG_TOPIC else 4)
        props: list[tuple[str, str]] = []
        tag = rng.choice(TAGS)
        r = rng.random()
        keys = None
        if r < 0.4:
            keys = f"ord-{rng.randrange(150)}"
        elif r < 0.6:
            keys = " ".join(rng.choice((f"ord-{rng.randrange(150)}", f"user-{rng.randrange(40)}",
                                        f"sku-{rng.randrange(300)}")) for _ in range(rng.randint(2, 3)))
        elif r < 0.72:
            keys = rng.choice(NON_ASCII_KEYS) + (f" ord-{rng.randrange(150)}" if rng.random() < 0.3 else "")
        elif r < 0.8:
            keys = f"uk-{i}"
        if keys:
            props.append(("KEYS", keys))
        if rng.random() < 0.9:
            props.append(("UNIQ_KEY", _uniq_key(rng, i)))
        props.append(("CLUSTER", "DefaultCluster"))
        if tag:
            props.append(("TAGS", tag))
        if rng.random() < 0.3:
            props.append(("WAIT", "true"))
        if rng.random() < 0.2:
            props.append(("note", "备注🙂 with spaces & symbols =:;"))
        sys_flag = 0
        kind = rng.random()
        if kind < 0.01:
            body = b""
        elif kind < 0.05:
            body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
        elif kind < 0.12:
            body = ("".join('{"seq":%d,"item":"sku-%d"}' % (j, rng.randrange(999)) for j in range(200))).encode()
        else:
            body = ('{"order":%d,"text":"%s"}' % (i, "订单内容" * rng.randint(1, 40))).encode()
        if len(body) >= 4096:
            codec = rng.choice(("zlib", "zlib-legacy", "zstd", "lz4"))
            if codec == "zlib":
                body, sys_flag = zlib.compress(body, 5), SysFlag.COMPRESSED | 0x300
            elif codec == "zlib-legacy":
                body, sys_flag = zlib.compress(body, 5), SysFlag.COMPRESSED
            elif codec == "zstd":
                import zstandard

                body, sys_flag = zstandard.ZstdCompressor(level=3).compress(body), SysFlag.COMPRESSED | 0x200
            else:
                import lz4.frame

                body, sys_flag = lz4.frame.compress(body), SysFlag.COMPRESSED | 0x100
        born_ip, store_ip = bytes([192, 168, rng.randrange(4), rng.randrange(1, 255)]), STORE_IP
        if rng.random() < 0.05:
            born_ip = bytes.fromhex("20010db800000000000000004900") + bytes([rng.randrange(256), rng.randrange(256)])
            sys_flag |= SysFlag.BORNHOST_V6
        if rng.random() < 0.02:
            store_ip = STORE_IP6
            sys_flag |= SysFlag.STOREHOSTADDRESS_V6
        prepared = 0
        t = rng.random()
        if t < 0.01:
            sys_flag |= SysFlag.TRANSACTION_PREPARED
            props += [("TRAN_MSG", "true"), ("PGROUP", "pg-tx")]
        elif t < 0.015:
            sys_flag |= SysFlag.TRANSACTION_COMMIT
            prepared = rng.randrange(1, 1 << 20)
        elif t < 0.03 and topic != LONG_TOPIC:
            level = rng.randint(10, DEFAULT_DELAY_TABLE.max_level)
            props += [("REAL_TOPIC", topic), ("REAL_QID", str(queue)), ("DELAY", str(level))]
            topic, queue = RMQ_SYS_SCHEDULE_TOPIC, level - 1
        yield MessageSpec(
            topic=topic, queue_id=queue, body=body, properties=encode_properties(props),
            flag=rng.getrandbits(31) if rng.random() < 0.1 else 0, sys_flag=sys_flag,
            born_timestamp=ts - rng.randint(0, 3000), born_ip=born_ip, born_port=rng.randint(30000, 60000),
            store_timestamp=ts, store_ip=store_ip, store_port=10911, prepared_transaction_offset=prepared,
        )


def benchmark_messages(n: int, body_size: int = 1024, seed: int = 7,
                       start_ts: int = 1_795_296_980_000) -> Iterator[MessageSpec]:
    """Uniform workload: ~1 KiB text bodies, a tag, 1-2 keys and a UNIQ_KEY on every message (deterministic:
    ``seed`` is kept for the callers' signature, nothing here is random)."""
    filler = (b"rocketmq-benchmark-payload-" * (body_size // 27 + 1))
    for i in range(n):
        body = b"%010d" % i + filler[: body_size - 10]
        keys = f"ord-{i % 100000}" if i % 3 else f"ord-{i % 100000} user-{i % 997}"
        props = encode_properties([("KEYS", keys), ("UNIQ_KEY", "C0A80A0B3E8F1B6D358600A1%08X" % i),
                                   ("CLUSTER", "DefaultCluster"), ("TAGS", TAGS[1 + i % 9]), ("WAIT", "true")])
        yield MessageSpec(topic=TOPICS[i % 3], queue_id=i % 8, body=body, properties=props,
                          born_timestamp=start_ts + i // 50, born_ip=bytes([192, 168, 0, 1 + i % 200]),
                          born_port=40000 + i % 1000, store_timestamp=start_ts + i // 50 + 2, store_ip=STORE_IP)
