"""Test vectors of FORMATS.md §12, checked against the JDK by the spec's authors."""

import pytest

from rmqinspect.formats.commitlog import (
    body_crc, crc32_trailer, decode_crc32_property, encode_crc32_property, encode_properties, encode_record,
    parse_properties, record_length,
)
from rmqinspect.formats.javahash import index_key_hash, java_string_hash, tags_code, tiered_index_key_hash
from rmqinspect.formats.msgid import decode_offset_msg_id, decode_uniq_key, host_string, offset_msg_id


@pytest.mark.parametrize("s,h", [("TagA", 2598919), ("a||b", 3012833), ("中文", 646394), ("😀tag", 1276941143),
                                 ("polygenelubricants", -2147483648), ("", 0)])
def test_java_string_hash(s, h):
    assert java_string_hash(s) == h


def test_index_key_hash_vectors():
    assert java_string_hash("TopicTest#OrderID001") == -1231272886
    assert index_key_hash("TopicTest#OrderID001") == 1231272886
    assert index_key_hash("TopicTest#OrderID001") % 5_000_000 == 1272886
    assert index_key_hash("polygenelubricants") == 0
    assert tiered_index_key_hash("polygenelubricants") == -2147483648
    assert index_key_hash("TopicTest#7F0000010A5C18B4AAC2117B7EEE0000") % 5_000_000 == 3799854


def test_tags_code():
    assert tags_code(None) == 0 and tags_code("") == 0
    assert tags_code("a||b") == 3012833


def test_body_crc_and_property_crc():
    assert body_crc(b"Hello RocketMQ") == 1774740973
    assert encode_crc32_property(1774740973) == "3790474771"
    assert encode_crc32_property(0) == "0000000000"
    assert decode_crc32_property("3790474771") == 1774740973
    assert len(crc32_trailer(b"x")) == 20


def test_minimal_record_sizes():
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
    assert record_length(0, 14, 9, len(props), 1) == 135
    assert record_length(0, 14, 9, len(props), 2) == 136
    assert record_length(0x30, 14, 9, len(props), 1) == 135 + 24
    rec = encode_record(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=0,
                        born_ip=b"\0" * 4, born_port=0, store_timestamp=0, store_ip=b"\0" * 4, store_port=0,
                        reconsume_times=0, prepared_transaction_offset=0, body=b"Hello RocketMQ", topic=b"TopicTest",
                        properties=props)
    assert len(rec) == 135


def test_properties_rule():
    # later duplicates win, empty values and pieces without \x01 are dropped, values may hold \x01
    raw = "A\x011\x02B\x01\x02\x01x\x02junk\x02A\x012\x02C\x01v\x01w".encode()
    assert parse_properties(raw) == {"A": "2", "C": "v\x01w"}
    assert parse_properties(encode_properties({"TAGS": "t", "KEYS": "a b"})) == {"TAGS": "t", "KEYS": "a b"}


def test_msg_ids():
    assert offset_msg_id(bytes([192, 168, 1, 10]), 10911, 4660) == "C0A8010A00002A9F0000000000001234"
    d = decode_offset_msg_id("C0A8010A00002A9F0000000000001234")
    assert (d.store_host, d.physical_offset) == ("192.168.1.10:10911", 4660)
    u = decode_uniq_key("7F0000010A5C18B4AAC2117B7EEE0000")
    assert (u.ip, u.pid, u.class_loader_hash, u.millis_since_month_start, u.counter) == \
        ("127.0.0.1", 2652, 0x18B4AAC2, 293306094, 0)
    ip6 = bytes.fromhex("20010db8000000000000000049003686")
    assert host_string(ip6, 42544) == "[2001:db8:0:0:0:0:4900:3686]:42544"
    mid = offset_msg_id(ip6, 10911, 77)
    assert len(mid) == 56 and decode_offset_msg_id(mid).physical_offset == 77
