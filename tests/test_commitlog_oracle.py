"""Every message of every oracle scenario, every field, against what RocketMQ's own APIs read back."""

import hashlib

import pytest

from rmqinspect.store import Store
from rmqinspect.store.walk.kinds import BLANK, MESSAGE
from support.dledger_ref import expected_walk

FIELD_MAP = {
    "physicalOffset": "physical_offset", "storeSize": "total_size", "bodyCRC": "body_crc", "queueId": "queue_id",
    "flag": "flag", "queueOffset": "queue_offset", "sysFlag": "sys_flag", "bornTimestamp": "born_timestamp",
    "bornHost": "born_host", "storeTimestamp": "store_timestamp", "storeHost": "store_host",
    "reconsumeTimes": "reconsume_times", "preparedTransactionOffset": "prepared_transaction_offset",
    "bodyLength": "body_size", "bodySha256": "body_sha256", "topic": "topic", "tags": "tags", "uniqKey": "uniq_key",
    "properties": "properties", "offsetMsgId": "offset_msg_id", "physicalOffsetField": "physical_offset_field",
}


def test_every_message_matches_expected(scenario):
    path, exp = scenario
    if "messages" not in exp:
        assert exp["scenario"] == "rebuild", "only the rebuild scenarios may come without messages"
        pytest.skip("rebuild scenario: expected.json carries no messages (its commitlog is the clean scenario's)")
    with Store.open(path / "store") as st:
        decoded = {m.physical_offset: m for m in st.commitlog.messages(keep_going=True)}
    assert len(exp["messages"]) > 0
    for e in exp["messages"]:
        m = decoded[e["physicalOffset"]]
        d = m.to_dict()
        for ek, ok in FIELD_MAP.items():
            assert d[ok] == e[ek], (e["physicalOffset"], ek)
        assert m.keys_string == e["keys"]
        assert m.properties_raw == e["propertiesRaw"].encode("utf-8")
        assert m.transaction_type.value == e["transactionType"]
        if e["bodyLength"] > 0:
            assert m.crc_ok == e["bodyCrcCheckPassed"]
        if "magicCode" in e:
            assert m.magic_version == (1 if e["magicCode"] == "0xDAA320A7" else 2)
        if e.get("compressionType"):
            assert m.compression.name == e["compressionType"]
            body = m.decompressed_body()
            assert len(body) == e["bodyDecompressedLength"]
            assert hashlib.sha256(body).hexdigest() == e["bodyDecompressedSha256"]
        rec = st.commitlog.locate(m.physical_offset)
        f, pos = rec
        assert hashlib.sha256(f.buffer[pos:pos + m.total_size]).hexdigest() == e["recordSha256"]


def test_walk_matches_broker_records(scenario):
    """The scan finds the same messages and blank records, at the same offsets, as ReputMessageService."""
    path, exp = scenario
    if "records" not in exp:
        assert exp["scenario"] == "rebuild", "only the rebuild scenarios may come without records"
        pytest.skip("rebuild scenario: expected.json carries no record walk (its commitlog is the clean scenario's)")
    with Store.open(path / "store") as st:
        walk = [(s.kind, s.offset, s.size) for s in st.commitlog.scan(check_crc=False) if s.kind in (MESSAGE, BLANK)]
    max_off = exp["stateAfterStart"]["commitLogMaxOffset"]
    walk = [w for w in walk if w[1] < max_off]
    assert walk == expected_walk(exp)
