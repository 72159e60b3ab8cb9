"""A store that stresses a person's terminal and the report's layout, made by the project's writer (whose commit
log, consume queues and index files are checked against the oracle): the 200-character V2 topic spread over 100
queues (3 records each), East Asian tags and keys, one key ("AaAa") carried by 64 records plus its Java-hash twin
("BBBB": the index cannot tell them apart, so the look-up drops collisions), and a broker that crashed with its
dispatcher behind (abort file, consume queues and index stopping before the commit log's end)."""

from __future__ import annotations

import os

from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.sample import LONG_TOPIC
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.formats.commitlog import encode_properties

QUEUES = 100
KEY = "AaAa"  # "AaAa".hashCode() == "BBBB".hashCode(): TOPIC#AaAa and TOPIC#BBBB share every index slot
TWIN = "BBBB"
KEY_HITS = 64
CJK_TAG = "标签タグ"
CJK_KEY = "订单-三号"
START_TS = 1_795_296_980_000
MESSAGES = 400
DISPATCHED = 360  # the dispatcher had reached this record when the broker died


def build_wide_store(root: str) -> str:
    """Write the store under ``root`` (a new directory) and return its path."""
    specs = []
    long_seen = 0
    for i in range(MESSAGES):
        keys = KEY if i % 5 == 0 and i < 5 * KEY_HITS else TWIN if i % 5 == 1 and i < 40 else \
            CJK_KEY if i % 7 == 3 else f"k-{i}"
        props = [("KEYS", keys), ("UNIQ_KEY", "C0A80A0B3E8F1B6D3586%08X%04X" % (i * 7919, i)),
                 ("TAGS", CJK_TAG if i % 3 == 0 else "TagA")]
        topic = LONG_TOPIC if i % 4 else "OrderTopic"
        if topic == LONG_TOPIC:
            long_seen += 1
        specs.append(MessageSpec(topic=topic, queue_id=(long_seen - 1) % QUEUES if topic == LONG_TOPIC else i % 4,
                                 body=b'{"n":%d}' % i, properties=encode_properties(props),
                                 born_timestamp=START_TS + 10 * i - 3, store_timestamp=START_TS + 10 * i))
    with StoreWriter(root, commitlog_file_size=64 * 1024, abort=True) as w:
        offsets = []
        for s in specs:
            offsets.append(w.append(s).physical_offset)
        w.dispatch_to = offsets[DISPATCHED]
    return os.path.abspath(root)
