"""The hot paths (struct layouts derived from the schema, and the compiled scanner) decode every oracle
record exactly as the construct schema does, and report damage exactly as the pure-Python scan does."""

import random

import pytest

from rmqinspect.formats.commitlog import CommitLogRecord, HEADER_STRUCT_NAMES
from rmqinspect.store import Store
from rmqinspect.store.commitlog import (
    MESSAGE, _topic_and_properties, fast_available, scan_buffer, scan_buffer_fast, scan_records_array, unpack_header,
)


def _resolved(buf, tuples):
    out = []
    for kind, pos, size, hdr, bpos, crc_ok, reason in tuples:
        if hdr is None and kind == MESSAGE:
            hdr = unpack_header(buf, pos)
        out.append((kind, pos, size, hdr, bpos, crc_ok, reason))
    return out


def test_struct_fast_path_equals_construct_schema(scenario):
    path, exp = scenario
    n = 0
    with Store.open(path / "store") as st:
        for slot in st.commitlog.scan(check_crc=False):
            if slot.kind != MESSAGE:
                continue
            buf = slot.file.buffer
            rec = CommitLogRecord.parse(bytes(buf[slot.position:slot.position + slot.size]))
            hdr = dict(zip(HEADER_STRUCT_NAMES, slot.header))
            for name in ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset",
                         "physical_offset", "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times",
                         "prepared_transaction_offset", "body_length"):
                assert rec[name] == hdr[name], name
            assert (rec.born_host.ip, rec.born_host.port) == (hdr["born_ip"], hdr["born_port"])
            assert (rec.store_host.ip, rec.store_host.port) == (hdr["store_ip"], hdr["store_port"])
            topic, props, _ = _topic_and_properties(buf, slot.header, slot.body_pos)
            assert rec.topic.decode("utf-8") == topic and rec.properties == props
            assert bytes(buf[slot.body_pos:slot.body_pos + max(hdr["body_length"], 0)]) == rec.body
            n += 1
    assert n > 0


@pytest.mark.skipif(not fast_available(), reason="compiled scanner not built (no C compiler / zlib headers)")
def test_compiled_scanner_equals_python_scanner_on_oracle(scenario):
    path, exp = scenario
    with Store.open(path / "store") as st:
        for f in st.commitlog.files:
            for crc in (True, False):
                a = list(scan_buffer(f.buffer, 0, f.size, crc))
                b = _resolved(f.buffer, scan_buffer_fast(f.buffer, 0, f.size, crc))
                assert a == b
                rows = [r for arr, _ in scan_records_array(f.buffer, 0, f.size, crc) if arr is not None for r in arr]
                assert [int(r[0]) for r in rows] == [t[1] for t in a if t[0] == MESSAGE]


@pytest.mark.skipif(not fast_available(), reason="compiled scanner not built")
def test_compiled_scanner_equals_python_scanner_on_damage():
    """Random corruption (bit flips, zeroed ranges, garbage lengths) of a real commitlog file: both
    scanners must stop at the same place for the same reason."""
    from support import ORACLE, require_oracle

    require_oracle("rocketmq-all-5.3.3/clean")
    data = (ORACLE / "rocketmq-all-5.3.3/clean/store/commitlog/00000000000000000000").read_bytes()
    rng = random.Random(42)
    for _ in range(60):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(buf) - 64)
            what = rng.random()
            if what < 0.4:
                buf[at] ^= 1 << rng.randrange(8)
            elif what < 0.7:
                buf[at:at + rng.randint(1, 600)] = b"\0" * len(buf[at:at + rng.randint(1, 600)])
            else:
                buf[at:at + 4] = rng.getrandbits(32).to_bytes(4, "big")
        buf = bytes(buf)
        for crc in (True, False):
            assert list(scan_buffer(buf, 0, len(buf), crc)) == _resolved(buf, scan_buffer_fast(buf, 0, len(buf), crc))
