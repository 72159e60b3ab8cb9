"""The rebuild hot path's shortcuts equal the reference implementations on every oracle record."""

from __future__ import annotations

import pytest

from rmqinspect.analyses.dispatch_rules import index_keys
from rmqinspect.analyses.dispatcher import topic_is_safe
from rmqinspect.formats.javahash import build_index_key, index_key_hash, index_key_hashes
from rmqinspect.formats.properties import dispatch_properties, parse_properties
from rmqinspect.store import Store
from support import ALL_SCENARIOS, require_oracle
from support.dispatch import RecordingSink, reference_dispatch_rows

NAMES = ("TAGS", "KEYS", "UNIQ_KEY", "DELAY")


def _fast(raw: bytes) -> dict:
    vals = dispatch_properties(raw)
    return {n: v.decode("utf-8", "replace") for n, v in zip(NAMES, vals) if v is not None}


def _ref(raw: bytes) -> dict:
    p = parse_properties(raw)
    return {n: p[n] for n in NAMES if n in p}


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_properties_and_key_hashes_equal_reference_on_every_oracle_record(name):
    p = require_oracle(name)
    n = 0
    keys, want = [], []
    with Store.open(p / "store") as st:
        for m in st.commitlog.messages(keep_going=True):
            assert _fast(m.properties_raw) == _ref(m.properties_raw), m.physical_offset
            for k in index_keys(m.properties):
                ks = build_index_key(m.topic, k)
                keys.append(ks.encode("utf-8"))
                want.append(index_key_hash(ks))
            n += 1
    assert n > 0
    assert index_key_hashes(keys).tolist() == want


@pytest.mark.parametrize("raw", [
    b"",
    b"TAGS\x01a\x02TAGS\x01b\x02",  # later duplicate wins
    b"TAGS\x01a\x02TAGS\x01\x02",  # an empty value is ignored, the earlier one stays
    b"TAGS\x01\x02",
    b"XTAGS\x01a\x02KEYS\x01k1  k2\x02",  # a name that merely ends in TAGS
    b"A\x01TAGS\x01v\x02",  # TAGS inside a value
    b"TAGS\x01v\x01w\x02UNIQ_KEY\x01u",  # value with \x01, last piece without a separator at the end
    b"TAGS\x02KEYS\x01x\x02",  # piece without a name/value separator
    "TAGS\x01中文\x02KEYS\x01\U0001F600 k\x02".encode(),
    b"TAGS\x01\xff\xfe\x02DELAY\x013\x02",  # invalid UTF-8
    b"\x01x\x02TAGS\x01y",  # empty name
])
def test_properties_edge_cases_equal_reference(raw):
    assert _fast(raw) == _ref(raw)


def test_key_hashes_non_ascii_and_min_value():
    keys = ["TopicTest#OrderID001", "polygenelubricants", "T#中文", "T#😀", "T#" + "x" * 5000]
    got = index_key_hashes([k.encode() for k in keys]).tolist()
    assert got == [index_key_hash(k) for k in keys]
    assert got[0] == 1231272886 and got[1] == 0  # FORMATS.md §5.4 vectors


@pytest.mark.parametrize("topic,ok", [
    ("TopicTest", True), ("%RETRY%group", True), ("%DLQ%g", True), ("rmq_sys_wheel_timer", True), ("a|b", True),
    ("../etc", False), ("a/b", False), ("a\\b", False), ("..", False), (".", False), ("a\0b", False), ("", False),
    ("x" * 255, True), ("x" * 256, False), ("top ic", False), ("中文", False),
])
def test_topic_rule(topic, ok):
    assert topic_is_safe(topic) is ok


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_inline_walk_equals_record_scan_on_every_oracle_store(name):
    """The dispatcher's inline fast walk accepts exactly the records scan_buffer accepts (all four host
    layouts, V1 and V2 records, the torn tail) and derives the same CQ entries as the full decode path."""
    from rmqinspect.analyses.dispatcher import dispatch_commitlog

    p = require_oracle(name)
    with Store.open(p / "store") as st:
        rec = RecordingSink()
        rep = dispatch_commitlog(st.commitlog, rec, None)
        want, halves = reference_dispatch_rows(st.commitlog)
    assert rec.rows == want
    assert [h["offset"] for h in rep.half_records] == halves
