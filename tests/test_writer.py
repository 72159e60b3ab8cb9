"""The project's writer is broker-faithful: re-encoding every message of an oracle store reproduces the
broker's commitlog files byte for byte (records, blank records, zero tails)."""

import random

import pytest

from rmqinspect.fixtures.commitlog import CommitLogWriter, spec_from_message
from rmqinspect.fixtures.sample import mixed_messages
from rmqinspect.store import Store


def test_reencoding_reproduces_clean_commitlogs(scenario, tmp_path):
    path, exp = scenario
    if exp["scenario"] != "clean":
        pytest.skip(f"the byte-for-byte re-encoding is checked on the 'clean' scenarios; this is {exp['scenario']!r}")
    with Store.open(path / "store") as st:
        cl = st.commitlog
        with CommitLogWriter(str(tmp_path / "commitlog"), cl.file_size) as w:
            for m in cl.messages():
                r = w.append(spec_from_message(m))
                assert r.physical_offset == m.physical_offset
        for f in cl.files:
            assert (tmp_path / "commitlog" / f.name).read_bytes() == bytes(f.buffer), f.name


def test_mixed_store_round_trips(tmp_path):
    specs = list(mixed_messages(400, seed=5))
    with CommitLogWriter(str(tmp_path / "commitlog"), 64 * 1024) as w:
        results = [w.append(s) for s in specs]
    with Store.open(tmp_path) as st:
        msgs = list(st.commitlog.messages())
    assert len(msgs) == len(specs)
    seen_codecs = set()
    for spec, res, m in zip(specs, results, msgs):
        assert m.physical_offset == res.physical_offset and m.crc_ok in (True, None)
        assert (m.topic, m.queue_id, m.body, m.properties_raw, m.sys_flag) == \
            (spec.topic, spec.queue_id, spec.body, spec.properties, spec.sys_flag)
        if m.compression:
            seen_codecs.add(m.compression.name)
            assert len(m.decompressed_body()) > len(m.body)
        assert m.magic_version == (2 if len(spec.topic) > 127 else 1)
    assert seen_codecs == {"ZLIB", "ZSTD", "LZ4"}
    # queue offsets are consecutive per queue, PREPARED records carry 0
    nxt = {}
    for m in msgs:
        if m.sys_flag & 0xC == 0x4:
            assert m.queue_offset == 0
            continue
        k = (m.topic, m.queue_id)
        assert m.queue_offset == nxt.get(k, 0)
        nxt[k] = m.queue_offset + 1


def test_property_crc_trailer(tmp_path):
    from rmqinspect.fixtures.commitlog import MessageSpec

    rng = random.Random(3)
    with CommitLogWriter(str(tmp_path / "commitlog"), 1 << 16) as w:
        for i in range(20):
            w.append(MessageSpec(topic="T", queue_id=0, body=bytes(rng.getrandbits(8) for _ in range(50)),
                                 properties=b"KEYS\x01k%d" % i, append_property_crc=True))
    with Store.open(tmp_path) as st:
        msgs = list(st.commitlog.messages())
    assert all(m.property_crc_ok is True for m in msgs)
    assert all(m.properties_raw.endswith(b"\x02") and b"__CRC32#\x01" in m.properties_raw for m in msgs)
