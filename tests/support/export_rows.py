"""Exported rows (local engine or Spark) checked against RocketMQ's own reading of each message."""

from __future__ import annotations

import hashlib

import pytest

from rmqinspect.analyses.rows import topic_partition

EXPECTED_FIELDS = {
    "physicalOffset": "physical_offset", "storeSize": "total_size", "bodyCRC": "body_crc", "queueId": "queue_id",
    "flag": "flag", "queueOffset": "queue_offset", "sysFlag": "sys_flag", "bornTimestamp": "born_timestamp_ms",
    "bornHost": "born_host", "storeTimestamp": "store_timestamp_ms", "storeHost": "store_host",
    "reconsumeTimes": "reconsume_times", "preparedTransactionOffset": "prepared_transaction_offset",
    "bodyLength": "body_size", "topic": "topic", "tags": "tags", "uniqKey": "uniq_key",
    "offsetMsgId": "offset_msg_id", "physicalOffsetField": "physical_offset_field", "dispatchTagsCode": "tags_code",
}
TX = {0: "NOT_TYPE", 4: "PREPARED", 8: "COMMIT", 12: "ROLLBACK"}


def assert_rows_equal_expected(rows: list[dict], exp: dict) -> None:
    """Every exported row against RocketMQ's own reading of the message (expected.json ``messages``)."""
    assert [r["physical_offset"] for r in rows] == [e["physicalOffset"] for e in exp["messages"]]
    for r, e in zip(rows, exp["messages"]):
        for ek, rk in EXPECTED_FIELDS.items():
            assert r[rk] == e[ek], (e["physicalOffset"], ek, r[rk], e[ek])
        props = dict(r["properties"])
        assert props == e["properties"]
        assert r["keys"] == ([k for k in e["keys"].split(" ") if k] if e["keys"] else [])
        assert r["transaction_type"] == TX[e["transactionType"]]
        assert r["magic_version"] == (1 if e.get("magicCode", "0xDAA320A7") == "0xDAA320A7" else 2)
        if e["bodyLength"] > 0:
            assert r["crc_ok"] == e["bodyCrcCheckPassed"]
        if "body" in r:
            assert hashlib.sha256(r["body"]).hexdigest() == e["bodySha256"]
        assert r["store_timestamp"].timestamp() * 1000 == pytest.approx(e["storeTimestamp"], abs=0.5)
        assert r["topic_partition"] == topic_partition(e["topic"])


def sorted_rows(table) -> list[dict]:
    rows = table.to_pylist()
    rows.sort(key=lambda r: (r["source"], r["physical_offset"]))
    return rows
