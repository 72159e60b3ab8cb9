"""`msgid`: offsetMsgId (IPv4 and IPv6 store hosts) and UNIQ_KEY decoding, checked against the oracle's records."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rmqinspect.analyses.lookup.msgid import decode_msg_id
from rmqinspect.cli.main import cli
from support import load_expected, require_oracle, tree_hashes

NAME = "rocketmq-all-4.9.8/clean"


def _msgs():
    require_oracle(NAME)
    return load_expected(NAME)["messages"]


def test_decode_every_offset_msg_id_of_the_oracle():
    n6 = 0
    for m in _msgs():
        off = next(i for i in decode_msg_id(m["offsetMsgId"]) if i["kind"] == "offsetMsgId")
        assert off["physical_offset"] == m["physicalOffsetField"] and off["store_host"] == m["storeHost"]
        assert off["plausible"]
        n6 += len(m["offsetMsgId"]) == 56
        if m["uniqKey"]:
            u = next(i for i in decode_msg_id(m["uniqKey"]) if i["kind"] == "UNIQ_KEY")
            assert u["plausible"] and u["millis_since_month_start"] < 31 * 86400 * 1000
    assert n6 > 0  # IPv6 store hosts are among them


def test_cli_offset_msg_id_ipv6_decodes_record():
    m = next(m for m in _msgs() if len(m["offsetMsgId"]) == 56)
    store = require_oracle(NAME) / "store"
    before = tree_hashes(store)
    r = CliRunner().invoke(cli, ["msgid", m["offsetMsgId"], "--store", str(store), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    a = doc["as_offset_msg_id"]
    assert a["matches"] and a["message"]["physical_offset"] == m["physicalOffset"]
    assert a["message"]["store_host"] == m["storeHost"] and a["message"]["topic"] == m["topic"]
    assert tree_hashes(store) == before


def test_cli_uniq_key_found_through_index():
    m = next(m for m in _msgs() if m["uniqKey"] and m["topic"] == "PayTopic")
    store = require_oracle(NAME) / "store"
    r = CliRunner().invoke(cli, ["msgid", m["uniqKey"], "--store", str(store), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    hits = doc["as_uniq_key"]["hits"]
    assert [(h["topic"], h["physical_offset"]) for h in hits] == [("PayTopic", m["physicalOffset"])]
    assert hits[0]["uniq_key_time"]["implied_month_start"] == \
        m["bornTimestamp"] - doc["interpretations"][1]["millis_since_month_start"]
    r = CliRunner().invoke(cli, ["msgid", m["uniqKey"], "--store", str(store), "--topic", "PayTopic"])
    assert r.exit_code == 0 and str(m["physicalOffset"]) in r.stdout
    # without a store: decode only (table)
    r = CliRunner().invoke(cli, ["msgid", m["uniqKey"]])
    assert r.exit_code == 0 and "millis_since_month_start" in r.stdout


def test_cli_unknown_and_malformed_ids():
    store = require_oracle(NAME) / "store"
    r = CliRunner().invoke(cli, ["msgid", "C0A80A0B3E8F1B6D3586FFFFFFFF0000", "--store", str(store)])
    assert r.exit_code == 3
    r = CliRunner().invoke(cli, ["msgid", "XYZ"])
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_ipv6_uniq_key_layout():
    import ipaddress
    import struct
    ip = ipaddress.ip_address("2001:db8::7").packed
    uniq = (ip + struct.pack(">HiIH", 4242, -17, 123456, 9)).hex().upper()
    assert len(uniq) == 56
    u = next(i for i in decode_msg_id(uniq) if i["kind"] == "UNIQ_KEY")
    assert (u["ip"], u["pid"], u["class_loader_hash"], u["millis_since_month_start"], u["counter"]) == \
        ("2001:db8::7", 4242, -17, 123456, 9)
    assert u["plausible"]
    o = next(i for i in decode_msg_id(uniq) if i["kind"] == "offsetMsgId")
    assert not o["plausible"]  # its "port" would be 4242 << 16 | ...: not a 16-bit port
