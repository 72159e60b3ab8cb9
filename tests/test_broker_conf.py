"""broker.conf parsing: the Java Properties syntax, typed keys, refusal of malformed values with the line,
and the precedence flag > config > inference > default. Each oracle scenario's storeConfig, written as the
broker.conf it was run with, reads back to the same values."""

from __future__ import annotations

import pytest

from rmqinspect.errors import EXIT_USAGE
from rmqinspect.store.broker_conf import KNOWN_KEYS, BrokerConfigError, Setting, read_broker_conf
from support import ALL_SCENARIOS, load_expected, require_oracle


def _java(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_oracle_store_config_reads_back(name, tmp_path):
    require_oracle(name)
    cfg = load_expected(name)["storeConfig"]
    flat = {k: v for k, v in cfg.items() if v is not None and not isinstance(v, (dict, list))}
    p = tmp_path / "broker.conf"
    p.write_text("# written from expected.json storeConfig\n" + "".join(f"{k}={_java(v)}\n" for k, v in flat.items()))
    conf = read_broker_conf(p)
    known = {k: v for k, v in flat.items() if k in KNOWN_KEYS}
    assert known and conf.values == known
    assert set(conf.ignored) == set(flat) - set(KNOWN_KEYS)
    assert conf.where("mappedFileSizeCommitLog").endswith(f":{list(flat).index('mappedFileSizeCommitLog') + 2} "
                                                          "(mappedFileSizeCommitLog)")


def test_java_properties_syntax(tmp_path):
    p = tmp_path / "broker.conf"
    p.write_text("! comment\n   # indented comment\n\nmaxHashSlotNum : 16\nmaxIndexNum 400\n"
                 "messageDelayLevel=1s 5s \\\n    10s\nbrokerName=caf\\u00e9\nunknownKey=whatever\n"
                 "checkCRCOnRecover=TRUE\n")
    conf = read_broker_conf(p)
    assert conf.values == {"maxHashSlotNum": 16, "maxIndexNum": 400, "messageDelayLevel": "1s 5s 10s",
                           "brokerName": "café", "checkCRCOnRecover": True}
    assert conf.lines["messageDelayLevel"] == 6 and conf.ignored == ["unknownKey"]


@pytest.mark.parametrize("line, words", [
    ("maxHashSlotNum=sixteen", "not an integer"),
    ("maxIndexNum=2147483648", "outside the Java int range"),
    ("mappedFileSizeConsumeQueue=0", "must be positive"),
    ("checkCRCOnRecover=yes", "not true/false"),
    ("maxHashSlotNum=1" + "0" * 5000, "not an integer"),
    ("brokerClusterName=c\\u00zz", "Invalid \\u escape"),  # Properties.load throws: the broker does not start
])
def test_malformed_values_name_the_line(tmp_path, line, words):
    p = tmp_path / "broker.conf"
    p.write_text("brokerName=b\n" + line + "\n")
    with pytest.raises(BrokerConfigError) as ei:
        read_broker_conf(p)
    assert words in str(ei.value) and f"{p}:2" in str(ei.value) and ei.value.exit_code == EXIT_USAGE


def test_precedence(tmp_path):
    p = tmp_path / "broker.conf"
    p.write_text("maxHashSlotNum=16\n")
    conf = read_broker_conf(p)
    inferred = Setting(64, "inferred", "from the slot table")
    assert Setting.resolve(8, conf, "maxHashSlotNum", inferred).to_dict() == {"value": 8, "source": "flag"}
    s = Setting.resolve(None, conf, "maxHashSlotNum", inferred)
    assert (s.value, s.source) == (16, "config") and s.detail.endswith(":1 (maxHashSlotNum)")
    assert Setting.resolve(None, conf, "maxIndexNum", inferred) is inferred
    assert Setting.resolve(None, None, "maxIndexNum", None, 20_000_000).source == "default"
