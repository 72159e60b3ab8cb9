"""Property-based tests: what the project's writers write, the readers read back; and any
bit flip or truncation of it yields a decode or a typed RmqInspectError, never another exception.

Records cover every sysflag combination the broker writes (transaction types, MULTI_TAGS, NEED_UNWRAP,
IPv4/IPv6 born and store hosts, the four compression codes with a really compressed body), V1 and V2 topics,
empty bodies and unicode properties up to the 32767-byte properties limit. The other readers: consume queue,
index file (chain walk), checkpoint, config JSON, RocksDB keys/values, timer log, tiered index, BatchCQ.
Kept fast: a few dozen examples per property, no deadline flakiness (deadline=None, bounded sizes).
"""

from __future__ import annotations

import base64
import json
import os
import struct
import tempfile
import zlib

import lz4.frame
import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rmqinspect.errors import RmqInspectError
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.fixtures.tiered_index import TieredIndexWriter
from rmqinspect.fixtures.timer import TimerStoreWriter
from rmqinspect.formats import rocksdb_cq as rcq
from rmqinspect.formats.batch import encode_inner_item
from rmqinspect.formats.checkpoint import CHECKPOINT
from rmqinspect.formats.constants import CompressionType, SysFlag
from rmqinspect.formats.javahash import index_key_hash
from rmqinspect.formats.properties import encode_properties
from rmqinspect.sinks.indexfile import IndexFileSet
from rmqinspect.store import scanner
from rmqinspect.store.batch import BatchConsumeQueue, decode_inner_batch
from rmqinspect.store.checkpoint import read_checkpoint
from rmqinspect.store.commitlog import CommitLog, open_commitlog
from rmqinspect.store.config_files import read_config_files
from rmqinspect.store.consumequeue import ConsumeQueue
from rmqinspect.store.indexfile import IndexFile, lookup_key_string
from rmqinspect.store.mapped import MappedFile
from rmqinspect.store.tiered_index import TieredIndexFile
from rmqinspect.store.timer import TimerLog
from rmqinspect.store.walk.file import walk_file
from rmqinspect.store.walk.records import RecordRun, decode_slot

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.data_too_large])
MANY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

i32 = st.integers(-(1 << 31), (1 << 31) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
ports = st.integers(0, (1 << 31) - 1)
# property names and values: any text without the two separators (and no NUL: the broker's strings)
prop_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), max_size=40)
CODECS = {0: zlib.compress, int(CompressionType.ZLIB): zlib.compress, int(CompressionType.ZSTD):
          lambda b: zstandard.ZstdCompressor().compress(b), int(CompressionType.LZ4): lz4.frame.compress}


@st.composite
def message_specs(draw):
    v6_born, v6_store = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(st.sampled_from([0, 0x4, 0x8, 0xC]))  # transaction type
    sys_flag |= SysFlag.MULTI_TAGS * draw(st.booleans()) | SysFlag.NEED_UNWRAP * draw(st.booleans())
    sys_flag |= SysFlag.BORNHOST_V6 * v6_born | SysFlag.STOREHOSTADDRESS_V6 * v6_store
    payload = draw(st.binary(max_size=600))
    body = payload
    if draw(st.booleans()):
        code = draw(st.sampled_from(sorted(CODECS)))
        sys_flag |= SysFlag.COMPRESSED | (code << 8)
        body = CODECS[code](payload)
    if draw(st.booleans()):  # V2: a topic longer than 127 characters (5.x autoMessageVersionOnTopicLen)
        topic = draw(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=128, max_size=300))
    else:
        topic = draw(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=127))
    # non-empty values: MessageDecoder.string2messageProperties drops a pair whose value is empty (broker rule)
    # (__CRC32# is the broker's own whole-record CRC property, checked when present: not a user property)
    props = draw(st.dictionaries(prop_text.filter(lambda k: k and k != "__CRC32#"), prop_text.filter(bool),
                                 max_size=5))
    limit = draw(st.sampled_from([None, None, None, 32767]))
    if limit is not None:  # the properties length is a Java short: fill to the limit with a unicode value
        base = encode_properties(props)
        room = limit - len(base) - len(b"BIG\x01\x02")
        unit = "\u00e9"  # 2 bytes in UTF-8; an odd room gets one ASCII byte
        props["BIG"] = unit * (room // 2) + "x" * (room % 2)
        assert len(encode_properties(props)) == limit
    return MessageSpec(
        topic=topic, queue_id=draw(i32), body=body, properties=encode_properties(props), flag=draw(i32),
        sys_flag=int(sys_flag), born_timestamp=draw(i64), born_ip=draw(st.binary(min_size=16 if v6_born else 4,
                                                                                  max_size=16 if v6_born else 4)),
        born_port=draw(ports), store_timestamp=draw(i64),
        store_ip=draw(st.binary(min_size=16 if v6_store else 4, max_size=16 if v6_store else 4)),
        store_port=draw(ports), reconsume_times=draw(i32), prepared_transaction_offset=draw(i64),
    ), payload, props


def _write(specs, tmp, file_size=1 << 17):
    with CommitLogWriter(os.path.join(tmp, "commitlog"), file_size=file_size) as w:
        return [w.append(s) for s in specs]


def _check(msg, spec, payload, props, appended):
    assert (msg.topic, msg.queue_id, msg.body, msg.properties_raw, msg.flag, msg.sys_flag) == \
        (spec.topic, spec.queue_id, spec.body, spec.properties, spec.flag, spec.sys_flag)
    assert (msg.born_ip, msg.born_port, msg.store_ip, msg.store_port) == \
        (spec.born_ip, spec.born_port, spec.store_ip, spec.store_port)
    assert (msg.born_timestamp, msg.store_timestamp, msg.reconsume_times, msg.prepared_transaction_offset) == \
        (spec.born_timestamp, spec.store_timestamp, spec.reconsume_times, spec.prepared_transaction_offset)
    assert msg.magic_version == (2 if len(spec.topic) > 127 else 1)
    assert (msg.physical_offset, msg.total_size, msg.queue_offset) == \
        (appended.physical_offset, appended.total_size, appended.queue_offset)
    assert msg.properties == props
    assert msg.crc_ok in (True, None) and not msg.problems
    assert msg.decompressed_body() == payload
    row = msg.to_dict("base64")  # decode-commitlog's row (cli/commitlog.py renders msg.to_dict)
    assert base64.b64decode(row["body"]) == payload and row["topic"] == spec.topic
    json.dumps(row)


@FAST
@given(st.lists(message_specs(), min_size=1, max_size=4))
def test_records_written_decode_back_through_walk_read_message_and_rows(items):
    with tempfile.TemporaryDirectory() as tmp:
        appended = _write([s for s, _, _ in items], tmp)
        cl = open_commitlog(tmp)
        try:
            for (spec, payload, props), a in zip(items, appended):
                _check(cl.read_message(a.physical_offset), spec, payload, props, a)
            for compiled in (True, False):
                with scanner.selected(compiled):
                    got = [m for m in cl.messages()]
                    assert len(got) == len(items)
                    for m, (spec, payload, props), a in zip(got, items, appended):
                        _check(m, spec, payload, props, a)
                    positions = []
                    for ev in cl.walk(check_crc=True):
                        if type(ev) is RecordRun:
                            positions += (ev.base + ev.records["position"]).tolist()
                            assert (ev.records["crc_ok"] != 0).all()
                    assert positions == [a.physical_offset for a in appended]
        finally:
            cl.close()


def _decode_everything(data: bytes) -> None:
    """What the commands do with one buffer: read_message at 0, walk_file with both scanners, the rows."""
    cl = CommitLog([MappedFile.of_buffer(data, 0, "mutated")], max(len(data), 1), [], [])
    try:
        cl.read_message(0).to_dict("text")
    except RmqInspectError:
        pass
    mf = MappedFile.of_buffer(data, 0, "mutated")
    for compiled in (True, False):
        with scanner.selected(compiled):
            for crc_continue in (False, True):
                for ev in walk_file(mf, check_crc=True, crc_continue=crc_continue):
                    if type(ev) is RecordRun:
                        for r in ev.records:
                            decode_slot(data, 0, int(r["position"]), None, int(r["body_pos"]), None).to_dict("hex")


@MANY
@given(message_specs(), st.data())
def test_any_bit_flip_or_truncation_of_a_record_decodes_or_raises_typed(item, data):
    spec, _, _ = item
    with tempfile.TemporaryDirectory() as tmp:
        rec = _write([spec], tmp)[0].record
    buf = bytearray(rec + b"\0" * 64)
    for _ in range(data.draw(st.integers(1, 3), "flips")):
        i = data.draw(st.integers(0, len(rec) - 1), "byte")
        buf[i] ^= 1 << data.draw(st.integers(0, 7), "bit")
    cut = data.draw(st.integers(0, len(buf)), "cut")
    _decode_everything(bytes(buf))
    _decode_everything(bytes(buf[:cut]))


# --- consume queue ----------------------------------------------------------------------------------------------
cq_entries = st.lists(st.tuples(st.integers(0, (1 << 62)), st.integers(1, (1 << 31) - 1), i64), max_size=60)


def _cq_file(tmp, data: bytes) -> ConsumeQueue:
    d = os.path.join(tmp, "consumequeue", "T", "0")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "%020d" % 0), "wb") as f:
        f.write(data)
    return ConsumeQueue.open(os.path.join(tmp, "consumequeue"), "T", 0)


@FAST
@given(cq_entries)
def test_cq_entries_read_back(entries):
    data = b"".join(struct.pack(">qiq", *e) for e in entries) + b"\0" * 20 * 3
    with tempfile.TemporaryDirectory() as tmp:
        cq = _cq_file(tmp, data)
        try:
            got = [(int(r["physical_offset"]), int(r["size"]), int(r["tags_code"])) for r in _cq_rows(cq)]
            assert got == [tuple(e) for e in entries]
            assert cq.bounds()[2] == len(entries)
        finally:
            cq.close()


def _cq_rows(cq):
    rows = []
    for _, arr in cq.chunks():
        rows += list(arr)
    return rows


@MANY
@given(cq_entries, st.data())
def test_cq_flips_and_odd_lengths_never_crash(entries, data):
    buf = bytearray(b"".join(struct.pack(">qiq", *e) for e in entries) + b"\0" * 40)
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= 1 << data.draw(st.integers(0, 7))
    buf = buf[:data.draw(st.integers(0, len(buf)))]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            cq = _cq_file(tmp, bytes(buf))
            try:
                list(cq.entries())
                cq.bounds()
                cq.min_offset_for(0)
            finally:
                cq.close()
        except RmqInspectError:
            pass


# --- index file: write keys with the rebuild sink, walk the chains back ---------------------------------------
@FAST
@given(st.lists(st.tuples(st.text(min_size=1, max_size=12), st.integers(0, 1 << 40)), min_size=1, max_size=40),
       st.integers(1, 17))
def test_index_chain_walk_finds_every_key_written(puts, slots):
    base_ts = 1_700_000_000_000
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "index")
        os.makedirs(d)
        s = IndexFileSet(d, slots, len(puts) + 2)
        keys = [lookup_key_string("T", k) for k, _ in puts]
        s.put_batch(np.array([index_key_hash(k) for k in keys], dtype=np.int64),
                    np.array([p for _, p in puts], dtype=np.int64),
                    np.array([base_ts + i for i in range(len(puts))], dtype=np.int64))
        s.close()
        (name,) = os.listdir(d)
        idx = IndexFile(os.path.join(d, name), slots, len(puts) + 2)
        try:
            for (_k, phys), key in zip(puts, keys):
                found = idx.select_phy_offset(key, 1 << 20, 0, (1 << 63) - 1)
                assert phys in found.offsets
        finally:
            idx.close()


# --- checkpoint --------------------------------------------------------------------------------------------------
@FAST
@given(st.tuples(i64, i64, i64, i64, i64), st.binary(max_size=5000))
def test_checkpoint_reads_back_and_any_bytes_are_typed(fields, junk):
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "checkpoint")
        with open(p, "wb") as f:
            f.write(CHECKPOINT.pack(*fields).ljust(4096, b"\0"))
        cp = read_checkpoint(p)
        assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == fields[:3]
        cp.to_dict()
        with open(p, "wb") as f:
            f.write(junk)
        try:
            cp = read_checkpoint(p)
            cp.to_dict()
        except RmqInspectError:
            pass


# --- config JSON -------------------------------------------------------------------------------------------------
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                           max_leaves=20)


@FAST
@given(st.dictionaries(st.text(min_size=1).map(lambda t: t.replace("@", "") + "@g"),
                       st.dictionaries(st.integers(0, 1 << 20), st.integers(0, (1 << 63) - 1), max_size=4),
                       max_size=4), json_values)
def test_config_offsets_read_back_and_any_json_is_typed(table, garbage):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "consumerOffset.json"), "w", encoding="utf-8") as f:
            json.dump({"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in table.items()}}, f)
        rows = read_config_files(tmp).consumer_offsets
        want = sorted((k, q, o) for k, v in table.items() for q, o in v.items())
        got = sorted((r["topic"] + "@" + r["group"], int(r["queue_id"]), int(r["offset"])) for r in rows)
        assert got == want
        for name in ("consumerOffset.json", "topics.json", "subscriptionGroup.json", "delayOffset.json"):
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                json.dump(garbage if name != "topics.json" else {"topicConfigTable": garbage}, f)
        try:
            read_config_files(tmp)
        except RmqInspectError:
            pass


# --- RocksDB keys and values -------------------------------------------------------------------------------------
@MANY
@given(st.text(min_size=1, max_size=80), i32, i64, st.tuples(i64, i32, i64, i64), st.binary(max_size=120))
def test_rocksdb_keys_and_values_round_trip_and_junk_is_rejected(topic, queue_id, cq_offset, value, junk):
    assume("\ud800" not in topic)
    assert rcq.parse_cq_key(rcq.cq_key(topic, queue_id, cq_offset)) == (topic, queue_id, cq_offset)
    assert rcq.parse_offset_key(rcq.offset_key(topic, b"max", queue_id)) == (topic, "max", queue_id)
    assert rcq.CQ_VALUE.unpack(rcq.encode_cq_value(*value)) == value
    assert rcq.cq_key(topic, queue_id, 0).startswith(rcq.queue_prefix(topic, queue_id))
    for parse in (rcq.parse_cq_key, rcq.parse_offset_key):
        try:
            parse(junk)
        except ValueError:  # their documented contract for a key of another table
            pass


# --- timer log -----------------------------------------------------------------------------------------------------
@FAST
@given(st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(1, 1 << 20), st.integers(0, 10 ** 7)),
                min_size=1, max_size=40), st.data())
def test_timer_units_read_back_and_flips_are_typed(units, data):
    now = 1_700_000_000_000
    with tempfile.TemporaryDirectory() as tmp:
        with TimerStoreWriter(tmp, timerlog_file_size=52 * 16, slots_total=64) as w:
            for off, size, delay in units:
                w.enqueue(off, size, "T", now, now + delay)
        log = TimerLog(os.path.join(tmp, "timerlog"))
        try:
            got = [(u.commitlog_offset, u.commitlog_size) for u in log.scan().units]
        finally:
            log.close()
        assert got == [(o, s) for o, s, _ in units]
        for name in sorted(os.listdir(os.path.join(tmp, "timerlog")))[:1]:
            p = os.path.join(tmp, "timerlog", name)
            buf = bytearray(open(p, "rb").read())
            for _ in range(data.draw(st.integers(1, 6))):
                i = data.draw(st.integers(0, len(buf) - 1))
                buf[i] ^= 1 << data.draw(st.integers(0, 7))
            with open(p, "wb") as f:
                f.write(buf[:data.draw(st.integers(0, len(buf)))])
        log = TimerLog(os.path.join(tmp, "timerlog"))
        try:
            log.scan()
        except RmqInspectError:
            pass
        finally:
            log.close()


# --- tiered index --------------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 1 << 40)), min_size=1, max_size=30),
       st.sampled_from([4, 16, 64]), st.data())
def test_tiered_index_lookup_finds_keys_and_flips_are_typed(puts, slots, data):
    begin = 1_700_000_000_000
    with tempfile.TemporaryDirectory() as tmp:
        max_items = 4 * slots + len(puts) + 1
        w = TieredIndexWriter(tmp, begin, slots, max_items)
        for i, (k, off) in enumerate(puts):
            w.put_key("T", 1, 0, {k}, off, 100, begin + i)
        w.close()
        # the geometry the broker was configured with (a non-default one cannot always be inferred: H-findings.md)
        tf = TieredIndexFile(w.path, slots, max_items)
        try:
            for k, off in puts:
                assert off in [it.offset for it in tf.lookup("T", k)]
        finally:
            tf.close()
        buf = bytearray(open(w.path, "rb").read())
        for _ in range(data.draw(st.integers(1, 6))):
            i = data.draw(st.integers(0, min(len(buf), 4096) - 1))
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        with open(w.path, "wb") as f:
            f.write(buf[:data.draw(st.integers(0, len(buf)))])
        try:
            tf = TieredIndexFile(w.path) if data.draw(st.booleans()) else TieredIndexFile(w.path, slots, max_items)
            try:
                tf.header_dict()
                tf.lookup("T", puts[0][0])
                list(tf.all_items())
            finally:
                tf.close()
        except RmqInspectError:
            pass


# --- BatchCQ / inner batch -------------------------------------------------------------------------------------------
@MANY
@given(st.lists(st.tuples(st.binary(max_size=60), st.dictionaries(prop_text.filter(bool), prop_text.filter(bool),
                                                                  max_size=3),
                          i32), max_size=8), st.data())
def test_inner_batch_splits_back_and_flips_are_typed(items, data):
    body = b"".join(encode_inner_item(b, encode_properties(p), flag) for b, p, flag in items)
    got = decode_inner_batch(body, 7)
    assert [(m.body, m.properties, m.flag, m.queue_offset) for m in got] == \
        [(b, p, f, 7 + i) for i, (b, p, f) in enumerate(items)]
    if body:
        buf = bytearray(body)
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        for b in (bytes(buf), bytes(buf[:data.draw(st.integers(0, len(buf)))])):
            try:
                decode_inner_batch(b, 0)
            except RmqInspectError:
                pass


@MANY
@given(st.binary(max_size=46 * 6))
def test_batch_cq_file_of_any_bytes_is_typed(data):
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "T", "0")
        os.makedirs(d)
        with open(os.path.join(d, "%020d" % 0), "wb") as f:
            f.write(data)
        q = BatchConsumeQueue("T", 0, d)
        try:
            list(q.entries())
            q.bounds()
        except RmqInspectError:
            pass
        finally:
            q.close()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
