"""Test vectors of FORMATS.md §12 (checked against the JDK by the spec's authors), and proof that each layout
is declared once: the construct schema, the struct format, the numpy dtype and the named byte positions all
derived from one ``FieldTable`` agree field by field on every oracle record/entry and on random bytes; the
properties, ``__CRC32#`` and Java hash rules agree with independent references."""

import glob
import os
import struct
import zlib

import numpy as np
import pytest
from construct import ConstructError
from hypothesis import given, settings
from hypothesis import strategies as st

from support import ORACLE
from rmqinspect.formats import (
    batch as FB,
)
from rmqinspect.formats import (
    checkpoint as FCK,
)
from rmqinspect.formats import (
    commitlog as FC,
)
from rmqinspect.formats import (
    consumequeue as FCQ,
)
from rmqinspect.formats import (
    indexfile as FI,
)
from rmqinspect.formats import (
    properties as FP,
)
from rmqinspect.formats import (
    rocksdb_cq as FR,
)
from rmqinspect.formats import (
    tiered_index as FT,
)
from rmqinspect.formats import (
    timer as FTM,
)
from rmqinspect.formats.commitlog import (
    body_crc,
    crc32_trailer,
    decode_crc32_property,
    encode_crc32_property,
    encode_properties,
    encode_record,
    parse_properties,
    record_length,
)
from rmqinspect.formats.constants import BLANK_MAGIC_CODE, MESSAGE_MAGICS, PROPERTY_CRC32
from rmqinspect.formats.fields import FieldTable
from rmqinspect.formats.javahash import (
    index_key_hash,
    index_key_hashes,
    java_string_hash,
    java_string_hashes,
    tags_code,
    tiered_index_key_hash,
)
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
    raw = b"A\x011\x02B\x01\x02\x01x\x02junk\x02A\x012\x02C\x01v\x01w"
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


# --- one declaration per layout: construct, struct, numpy and positions agree ----------------------

MODULES = (FB, FCK, FC, FCQ, FI, FR, FT, FTM)
# every field table the package declares, by "module.NAME" (the same table may be exported twice)
TABLES = {f"{m.__name__.rsplit('.', 1)[1]}.{n}": t for m in MODULES for n, t in vars(m).items()
          if isinstance(t, FieldTable)}
TABLES.update({f"commitlog.RECORD_HEADERS[{bits:#x}]": t for bits, t in FC.RECORD_HEADERS.items()})


def test_every_layout_is_a_field_table():
    names = set(TABLES)
    for want in ("commitlog.BLANK_RECORD", "consumequeue.CQ_ENTRY_TABLE", "consumequeue.BCQ_ENTRY_TABLE",
                 "batch.CQ_EXT_HEAD_TABLE", "batch.INNER_HEAD_TABLE", "checkpoint.CHECKPOINT_TABLE",
                 "indexfile.INDEX_HEADER_TABLE", "indexfile.HASH_SLOT_TABLE", "indexfile.INDEX_ITEM_TABLE",
                 "rocksdb_cq.CQ_KEY_TAIL", "rocksdb_cq.OFFSET_KEY_TAIL", "rocksdb_cq.CQ_VALUE_TABLE",
                 "rocksdb_cq.OFFSET_VALUE_TABLE", "timer.UNIT_TABLE", "timer.BLANK_TABLE", "timer.SLOT_TABLE",
                 "timer.TIMERCHECK_TABLE", "tiered_index.HEADER_TABLE", "tiered_index.ITEM_TABLE",
                 "tiered_index.COMPACT_ITEM_TABLE", "commitlog.RECORD_HEADERS[0x30]"):
        assert want in names
    # the public struct / dtype names are the tables' own objects, not re-declarations
    assert FC.HEADER_STRUCTS[0x30] is FC.RECORD_HEADERS[0x30].struct and FC.PREFIX is FC.BLANK_RECORD.struct
    assert FCQ.CQ_DTYPE is FCQ.CQ_ENTRY_TABLE.dtype and FB.BCQ_DTYPE is FCQ.BCQ_ENTRY_TABLE.dtype
    assert FB.BatchConsumeQueueEntry is FCQ.BatchConsumeQueueEntry and FB.BCQ_ENTRY is FCQ.BCQ_ENTRY
    assert FTM.SLOT_DTYPE is FTM.SLOT_TABLE.dtype and FI.INDEX_ITEM_DTYPE is FI.INDEX_ITEM_TABLE.dtype


@pytest.mark.parametrize("name", sorted(TABLES))
def test_positions_equal_numpy_offsets_and_struct_sizes(name):
    t = TABLES[name]
    pos = 0
    for (n, code), idx in zip(t.fields, range(len(t))):
        assert t.position(n) == pos == t.dtype.fields[n][1], n
        assert t.index(n) == idx
        pos += struct.calcsize(">" + code)
    assert pos == t.size == t.struct.size == t.dtype.itemsize == t.construct().sizeof()


def _values_equal(name, a, b):
    if isinstance(a, np.void):
        a = bytes(a)
    if isinstance(b, np.void):
        b = bytes(b)
    if isinstance(a, np.integer):
        a = int(a)
    if isinstance(b, np.integer):
        b = int(b)
    assert a == b, name


def assert_forms_agree(t: FieldTable, raw: bytes, offset: int = 0):
    """construct parse, struct unpack, numpy view and the named positions give the same value per field."""
    c = t.construct().parse(bytes(raw[offset:offset + t.size]))
    s = t.struct.unpack_from(raw, offset)
    row = np.frombuffer(raw, dtype=t.dtype, count=1, offset=offset)[0]
    for i, (n, code) in enumerate(t.fields):
        at = struct.unpack_from(">" + code, raw, offset + t.position(n))[0]
        for other in (s[i], row[n], at):
            _values_equal(n, c[n], other)
    assert t.construct().build(c) == t.struct.pack(*s) == bytes(raw[offset:offset + t.size])
    return s


@pytest.mark.parametrize("name", sorted(TABLES))
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_forms_agree_on_random_values(name, data):
    t = TABLES[name]
    raw = data.draw(st.binary(min_size=t.size, max_size=t.size))
    assert_forms_agree(t, raw)


def _store_dirs(sub: str) -> list[str]:
    return sorted(glob.glob(str(ORACLE / "*" / "*" / "store" / sub)))


def _oracle_required(paths):
    if not ORACLE.is_dir():
        pytest.skip(f"oracle stores not found at {ORACLE} (../shared absent)")
    assert paths, "the oracle holds no such files"


def test_commitlog_record_forms_agree_on_every_oracle_record():
    """Every record of every oracle commit log: the construct schema, the HEADER_STRUCTS tuple, the per-host
    FieldTable's numpy view and named positions, record_length and body_position say the same thing."""
    dirs = _store_dirs("commitlog")
    _oracle_required(dirs)
    n = half = 0
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "[0-9]" * 20))):
            raw = open(path, "rb").read()
            pos = 0
            while pos + FC.PREFIX.size <= len(raw):
                total, magic = FC.PREFIX.unpack_from(raw, pos)
                if magic == BLANK_MAGIC_CODE or magic not in MESSAGE_MAGICS or total > len(raw) - pos:
                    break  # end of the file's records (blank, zeros, or a torn tail)
                try:
                    rec = FC.CommitLogRecord.parse(raw[pos:pos + total])
                except ConstructError:
                    break  # a torn record at the end of a crashed store
                t = FC.RECORD_HEADERS[rec.sys_flag & FC.HOST_V6_BITS]
                hdr = assert_forms_agree(t, raw, pos)
                assert tuple(hdr) == FC.HEADER_STRUCTS[rec.sys_flag & FC.HOST_V6_BITS].unpack_from(raw, pos)
                for name in FC.HEADER_STRUCT_NAMES:
                    if name.startswith(("born_", "store_")) and name not in ("born_timestamp", "store_timestamp"):
                        continue
                    assert hdr[FC.HEADER_INDEX[name]] == rec[name], name
                assert (hdr[FC.HEADER_INDEX["born_ip"]], hdr[FC.HEADER_INDEX["born_port"]]) == \
                    (rec.born_host.ip, rec.born_host.port)
                assert (hdr[FC.HEADER_INDEX["store_ip"]], hdr[FC.HEADER_INDEX["store_port"]]) == \
                    (rec.store_host.ip, rec.store_host.port)
                sf = rec.sys_flag
                assert FC.body_position(sf) == t.size
                assert FC.store_timestamp_position(sf) == t.position("store_timestamp")
                assert FC.store_host_position(sf) == t.position("store_ip")
                assert struct.unpack_from(">i", raw, pos + FC.SYSFLAG_POSITION)[0] == sf
                assert struct.unpack_from(">q", raw, pos + FC.PHYSICAL_OFFSET_POSITION)[0] == rec.physical_offset
                bpos = pos + t.size
                assert struct.unpack_from(">i", raw, bpos - FC.RECONSUME_TIMES_BEFORE_BODY)[0] == rec.reconsume_times
                assert struct.unpack_from(">q", raw, bpos - FC.PREPARED_TRANSACTION_OFFSET_BEFORE_BODY)[0] == \
                    rec.prepared_transaction_offset
                # calMsgLength of the parsed lengths is TOTALSIZE, except in the torn (HALF) records of crashes
                if FC.record_length(sf, rec.body_length, rec.topic_length, rec.properties_length,
                                    rec.magic_version) != total:
                    half += 1
                n += 1
                pos += total
    assert n > 1000 and half < 10
    # the vectorised positions agree with the scalar ones for every host combination
    sfs = np.array([0x00, 0x10, 0x20, 0x30], dtype=np.int64)
    assert FC.store_timestamp_position(sfs).tolist() == [FC.RECORD_HEADERS[b].position("store_timestamp")
                                                         for b in (0, 0x10, 0x20, 0x30)]
    assert FC.body_position(sfs).tolist() == [FC.RECORD_HEADERS[b].size for b in (0, 0x10, 0x20, 0x30)]
    assert FC.BLANK_RECORD.construct is not None and FC.BlankRecord.parse(FC.encode_blank(99)).total_size == 99


def test_consume_queue_entry_forms_agree_on_every_oracle_entry():
    files = [p for d in _store_dirs("consumequeue") for p in glob.glob(os.path.join(d, "*", "*", "[0-9]" * 20))]
    _oracle_required(files)
    n = 0
    for path in files:
        raw = open(path, "rb").read()
        arr = np.frombuffer(raw, dtype=FCQ.CQ_DTYPE, count=len(raw) // FCQ.CQ_STORE_UNIT_SIZE)
        end = np.flatnonzero((arr["physical_offset"] < 0) | (arr["size"] <= 0))
        used = int(end[0]) + 1 if end.size else len(arr)  # every entry, and the first one after them
        for i in range(min(used, len(arr))):
            assert_forms_agree(FCQ.CQ_ENTRY_TABLE, raw, i * FCQ.CQ_STORE_UNIT_SIZE)
            n += 1
    assert n > 1000


def test_batch_consume_queue_entry_forms_agree_on_every_oracle_entry():
    files = [p for d in _store_dirs("batchconsumequeue") for p in glob.glob(os.path.join(d, "*", "*", "[0-9]" * 20))]
    _oracle_required(files)
    n = 0
    for path in files:
        raw = open(path, "rb").read()
        for off in range(0, len(raw) - FCQ.BCQ_STORE_UNIT_SIZE + 1, FCQ.BCQ_STORE_UNIT_SIZE):
            s = assert_forms_agree(FCQ.BCQ_ENTRY_TABLE, raw, off)
            d = dict(zip(FCQ.BCQ_ENTRY_TABLE.names, s))
            if d["size"] > 0:
                # FORMATS.md §4.4: compactedOffset written as INVALID_POS, the last 4 bytes as 0
                assert d["compacted_offset"] == FB.BCQ_INVALID_POS and d["reserved"] == 0
                n += 1
    assert n == 110  # README of the batchcq scenario: 110 inner-batch records


def test_index_file_forms_agree_on_every_oracle_index_file():
    from rmqinspect.store.indexfile import IndexFile

    files = [p for d in _store_dirs("index") for p in glob.glob(os.path.join(d, "[0-9]*"))]
    _oracle_required(files)
    items = 0
    for path in files:
        idx = IndexFile(path)
        raw = open(path, "rb").read()
        whole = FI.index_file_schema(idx.slots, idx.max_items).parse(raw[:FI.index_file_size(idx.slots,
                                                                                              idx.max_items)])
        assert_forms_agree(FI.INDEX_HEADER_TABLE, raw, 0)
        for n_ in FI.INDEX_HEADER_TABLE.names:
            assert whole.header[n_] == getattr(idx.header, n_)
        slots = np.frombuffer(raw, dtype=FI.HASH_SLOT_DTYPE, count=idx.slots, offset=FI.slot_position(0))
        assert slots.tolist() == list(whole.slots) == idx.slot_table().tolist()
        used = idx.header.index_count
        for k in range(1, used):
            s = assert_forms_agree(FI.INDEX_ITEM_TABLE, raw, FI.item_position(idx.slots, k))
            assert tuple(whole["items"][k][n_] for n_ in FI.INDEX_ITEM_TABLE.names) == s == idx.item(k)
            items += 1
    assert items > 100


def test_checkpoint_forms_agree_on_every_oracle_checkpoint():
    from rmqinspect.store.checkpoint import read_checkpoint

    files = _store_dirs("checkpoint")
    _oracle_required(files)
    for path in files:
        raw = open(path, "rb").read()
        assert len(raw) == FCK.CHECKPOINT_FILE_SIZE
        s = assert_forms_agree(FCK.CHECKPOINT_TABLE, raw, 0)
        cp = read_checkpoint(path)
        assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == s[:3]
        assert cp.used_length in (FCK.CHECKPOINT_SIZE_4X, FCK.CHECKPOINT_SIZE_50, FCK.CHECKPOINT_SIZE_511)


def test_timer_forms_agree_on_the_oracle_timer_store():
    logs = sorted(p for d in _store_dirs("timerlog") for p in glob.glob(os.path.join(d, "[0-9]" * 20)))
    _oracle_required(logs)
    units = 0
    for path in logs:
        raw = open(path, "rb").read()
        pos = 0
        while pos + FTM.BLANK.size <= len(raw):
            size, _, magic = FTM.BLANK.unpack_from(raw, pos)
            assert struct.unpack_from(">i", raw, pos + FTM.MAGIC_POSITION)[0] == magic
            if magic == FTM.BLANK_MAGIC_CODE or (size == 0 and magic == 0):
                break
            assert_forms_agree(FTM.UNIT_TABLE, raw, pos)
            units += 1
            pos += FTM.UNIT_SIZE
    assert units > 100
    (wheel,) = _store_dirs("timerwheel")
    raw = open(wheel, "rb").read()
    slots = np.frombuffer(raw, dtype=FTM.SLOT_DTYPE)
    used = np.flatnonzero(slots["num"] != 0)
    assert used.size > 0
    for i in used.tolist():
        assert_forms_agree(FTM.SLOT_TABLE, raw, i * FTM.WHEEL_SLOT_SIZE)
    (check,) = _store_dirs("config/timercheck")
    assert_forms_agree(FTM.TIMERCHECK_TABLE, open(check, "rb").read(), 0)


def test_rocksdb_keys_from_the_field_tables():
    key = FR.cq_key("Tö", 3, 77)
    assert len(key) == FR.CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES + len("Tö".encode())
    c = FR.RocksDBCQKey.parse(key)
    assert (c.topic, c.queue_id, c.cq_offset) == FR.parse_cq_key(key) == ("Tö", 3, 77)
    assert FR.queue_prefix("Tö", 3) == key[:-8] and key.endswith(struct.pack(">q", 77))
    o = FR.offset_key("T", FR.MAX, 2)
    assert FR.parse_offset_key(o) == ("T", "max", 2) and FR.RocksDBOffsetKey.parse(o).kind == b"max"
    for bad in (key[:-1], key[:4] + b"\x02" + key[5:], key[:-9] + b"\x00" + key[-8:]):
        with pytest.raises(ValueError):
            FR.parse_cq_key(bad)


# --- properties, __CRC32# and the Java hash: one rule each, checked against independent references -----------

_PIECES = st.lists(st.one_of(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XTAGS", "", "a"]),
    st.text(alphabet=st.sampled_from("ab \x01\x02中😀"), max_size=6)), max_size=8)


def _reference_well_formed(raw: bytes) -> bool:
    return all(b"\x01" in piece for piece in raw.split(b"\x02") if piece)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.tuples(_PIECES, st.sampled_from(["\x01", "\x02", "", "\x01\x01"])), max_size=8),
       junk=st.binary(max_size=4))
def test_properties_rules_agree(parts, junk):
    raw = "".join("".join(p) + sep for p, sep in parts).encode() + junk
    props, ok = FP.parse_properties_checked(raw)
    assert props == FP.parse_properties(raw) == FP.parse_properties(raw.decode("utf-8", "replace"))
    assert ok == FP.properties_well_formed(raw) == _reference_well_formed(raw)
    want = tuple(props.get(n) for n in FP.DISPATCH_PROPERTIES)
    got = tuple(None if v is None else v.decode("utf-8", "replace") for v in FP.dispatch_properties(raw))
    assert got == want


def test_property_crc_rule():
    body = FC.encode_properties({"TAGS": "t"})
    rec = FC.encode_record(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=0,
                           born_ip=b"\0" * 4, born_port=0, store_timestamp=0, store_ip=b"\0" * 4, store_port=0,
                           reconsume_times=0, prepared_transaction_offset=0, body=b"x", topic=b"T",
                           properties=body + b"\0" * FC.CRC32_RESERVED_LEN)
    rec = rec[:-FC.CRC32_RESERVED_LEN] + FP.crc32_trailer(rec[:-FC.CRC32_RESERVED_LEN])
    buf = b"\0" * 8 + rec + b"\0" * 8
    u8 = np.frombuffer(buf, dtype=np.uint8)
    ends = np.array([8 + len(rec), 8 + len(rec) - 1], dtype=np.int64)
    assert FP.crc32_trailer_rows(u8, ends).tolist() == [0]
    value = FP.crc32_trailer_value(buf, 8 + len(rec))
    props = FP.parse_properties(rec[-len(body) - FC.CRC32_RESERVED_LEN:])
    assert props[PROPERTY_CRC32] == value
    ok, stored, actual = FP.check_property_crc(buf, 8, len(rec), value)
    assert ok and stored == actual == zlib.crc32(rec[:-FC.CRC32_RESERVED_LEN]) & 0x7FFFFFFF
    bad = bytearray(buf)
    bad[8 + FC.FLAG_POSITION] ^= 1
    ok, stored, actual = FP.check_property_crc(bytes(bad), 8, len(rec), value)
    assert not ok and FP.property_crc_problem(stored, actual) == \
        f"__CRC32# property {stored} != crc of record {actual}"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # text a producer can send
                | st.text(alphabet="ab#", max_size=300), max_size=12))
def test_vectorised_java_hashes_equal_scalar(keys):
    raw = [k.encode("utf-8") for k in keys]
    assert java_string_hashes(raw).tolist() == [java_string_hash(k) for k in keys]
    assert index_key_hashes(raw).tolist() == [index_key_hash(k) for k in keys]
