"""summary's count of records with a ``__CRC32#`` property (the 5.2.0+ hint) against its definition: a substring
of the record's properties, read record by record here. Writer-made stores where the string sits in the broker's
trailer, in another property's value, in a body, in a topic, across a record boundary, in a record too short for
a trailer, and in runs where such records are few or most of them."""

from __future__ import annotations

import os
import re
import tempfile

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.summary import summarize
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.store import Store, scanner
from rmqinspect.store.walk.records import RecordRun

NEEDLE = "__CRC32#"
SHAM_TRAILER = b"body" + NEEDLE.encode() + b"\x01" + b"1234567"

MESSAGE = st.fixed_dictionaries({
    "trailer": st.booleans(),  # the broker's __CRC32# trailer (5.2.0+ enabledAppendPropCRC)
    "in_value": st.sampled_from(["", NEEDLE, "x" + NEEDLE + "y", "__CRC32", "CRC32#"]),  # in a KEYS value
    # the last: the trailer's prefix 20 bytes before the record's end, in the body (topic "T", no properties)
    "body": st.sampled_from([b"", b"plain", NEEDLE.encode(), b"a" * 100 + NEEDLE.encode(), SHAM_TRAILER]),
    "topic": st.sampled_from(["T", "T" + NEEDLE, "Other"]),
    "no_props": st.booleans(),
})


def _naive(root: str) -> int:
    st_ = Store.open(root)
    n = 0
    try:
        for ev in st_.commitlog.walk(check_crc=False, stop_at_end=False):
            if type(ev) is not RecordRun:
                continue
            buf = ev.file.buffer
            for row in ev.row_tuples():
                pp, pl = row[13], row[14]
                n += NEEDLE.encode() in bytes(buf[pp:pp + pl])
    finally:
        st_.close()
    return n


@settings(max_examples=60, deadline=None)
@given(messages=st.lists(MESSAGE, min_size=1, max_size=60), file_size=st.sampled_from([4096, 1 << 16]),
       compiled=st.booleans())
@example(messages=[{"trailer": False, "in_value": "", "body": SHAM_TRAILER, "topic": "T", "no_props": True}] * 3
         + [{"trailer": True, "in_value": "", "body": b"", "topic": "T", "no_props": False}] * 30, file_size=1 << 16,
         compiled=False)
def test_crc32_property_count_is_the_substring_count(messages, file_size, compiled):
    """Both counters: the compiled scanner's and the numpy one it falls back to."""
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "store")
        with CommitLogWriter(os.path.join(root, "commitlog"), file_size) as w:
            for i, m in enumerate(messages):
                props = {} if m["no_props"] else {"KEYS": f"k{i}{m['in_value']}"}
                w.append(MessageSpec(topic=m["topic"], queue_id=0, body=m["body"],
                                     properties=encode_properties(props) if props else b"",
                                     store_timestamp=1_795_000_000_000 + i, append_property_crc=m["trailer"]))
        want = _naive(root)
        with scanner.selected(compiled):
            s = summarize(Store.open(root))
        hint = [h for h in s.version_hints if NEEDLE in h]
        got = int(re.match(r"(\d+) records with __CRC32#", hint[0]).group(1)) if hint else 0
        assert got == want
        assert want >= sum(m["trailer"] for m in messages)  # the broker's trailer counts
