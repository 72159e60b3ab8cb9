"""One argument convention for every command, and every field reachable from a table: STORE first (`msgid STORE ID`
as well as `msgid ID --store STORE`), options that cannot combine refused in a sentence, --key's need of --topic
said with the command that needs none, --from inside a record (DLedger too) answered as --offset is, all fields under
--vertical, --columns listing the valid names, sys_flag as MessageSysFlag words, a UNIQ_KEY's approximate born time
(MessageClientIDSetter.getNearlyTimeFromID) and an implausible offsetMsgId reading said as a note."""

from __future__ import annotations

import datetime as dt
import json
import os

from click.testing import CliRunner

from rmqinspect.cli.main import cli
from rmqinspect.formats.msgid import nearly_born_time
from support import require_oracle

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(REPO, "tests", "fixtures", "sample-store")
UNIQ = "C0A80A0B3E8F1B6D3586510323690001"  # the UNIQ_KEY of the record at 579 in the sample store


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def test_msgid_takes_the_store_first_or_as_an_option():
    first = run("msgid", SAMPLE, UNIQ, "--format", "json")
    option = run("msgid", UNIQ, "--store", SAMPLE, "--format", "json")
    assert first.exit_code == option.exit_code == 0, first.output
    assert first.stdout == option.stdout and json.loads(first.stdout)["as_uniq_key"]["hits"]
    r = run("msgid", SAMPLE, UNIQ, "extra")
    assert r.exit_code == 2 and "msgid takes STORE and ID, or ID with --store" in r.stderr


def test_options_that_cannot_combine_are_refused_in_a_sentence():
    r = run("cq", SAMPLE, "--topic", "OrderTopic", "--queue", "0", "--as-recovered", "--join")
    assert r.exit_code == 2 and "--as-recovered and --join cannot be combined:" in r.stderr
    r = run("cq", SAMPLE, "--all", "--join")
    assert r.exit_code == 2 and "--all and --join cannot be combined" in r.stderr
    for cmd in ("index-lookup", "fate"):
        r = run(cmd, SAMPLE, "--key", "ord-14")
        assert r.exit_code == 2 and "the broker's index holds TOPIC#KEY" in r.stderr, cmd
        assert "decode-commitlog STORE --key ord-14" in r.stderr


def test_from_inside_a_dledger_entry_names_the_record_as_offset_does():
    store = str(require_oracle("rocketmq-all-4.9.8/dledger-clean") / "store")
    first = json.loads(run("decode-commitlog", store, "--count", "1", "--format", "json").stdout)[0]
    inside = first["physical_offset"] + 52
    r = run("decode-commitlog", store, "--from", str(inside), "--count", "1")
    assert r.exit_code == 4
    assert (f"offset {inside} lies inside the message record at {first['physical_offset']}" in r.stderr
            and f"--from {first['physical_offset']} walks from there" in r.stderr), r.stderr
    assert "--snap decodes it" in run("decode-commitlog", store, "--offset", str(inside)).stderr


def test_every_field_is_reachable_from_a_table():
    r = run("decode-commitlog", SAMPLE, "--offset", "140719", "--vertical")
    assert r.exit_code == 0
    fields = {line.split("|")[0].strip() for line in r.stdout.splitlines() if "|" in line}
    rec = json.loads(run("decode-commitlog", SAMPLE, "--offset", "140719", "--format", "json").stdout)[0]
    assert set(rec) <= fields  # properties, hosts, offset_msg_id, reconsume_times ... all of them
    assert "| COMPRESSED_LZ4|PREPARED" in r.stdout and "| COMPRESSED, TRANSACTION_PREPARED, COMPRESSION_LZ4" in r.stdout
    r = run("decode-commitlog", SAMPLE, "--count", "1", "--columns", "topic,no_such")
    assert "--columns: no table had no_such; valid: " in r.stderr
    valid = r.stderr.split("valid: ")[1].strip().split(", ")
    assert {"born_host", "offset_msg_id", "properties", "reconsume_times", "sys_flag"} <= set(valid)


def test_sys_flag_words_in_the_table_and_the_number_in_json():
    table = run("decode-commitlog", SAMPLE, "--offset", "17935").stdout
    assert " COMPRESSED_ZLIB " in table
    assert " COMPRESSED_ZLIB|BORN_V6 " in run("decode-commitlog", SAMPLE, "--offset", "259913").stdout
    assert json.loads(run("decode-commitlog", SAMPLE, "--offset", "17935", "--format", "json").stdout)[0][
        "sys_flag"] == 769


def test_nearly_born_time_is_the_month_of_the_reference_or_the_one_before():
    span = ms("2026-11-21T21:36:18") - ms("2026-11-01T00:00:00")  # 20 days 21:36:18 into a month
    assert nearly_born_time(span, ms("2026-11-21T21:36:20")) == ms("2026-11-21T21:36:18")  # this month
    assert nearly_born_time(span, ms("2026-12-25T00:00:00")) == ms("2026-12-21T21:36:18")  # this month
    # the span would end after the reference in its own month: the month before (across a year too)
    assert nearly_born_time(span, ms("2026-12-02T00:00:00")) == ms("2026-11-21T21:36:18")
    assert nearly_born_time(span, ms("2027-01-05T00:00:00")) == ms("2026-12-21T21:36:18")


def test_msgid_table_gives_the_born_time_and_notes_an_implausible_offset_msg_id():
    r = run("msgid", SAMPLE, UNIQ)
    assert r.exit_code == 0
    assert "born about" in r.stdout and "Record at the offset" not in r.stdout
    assert "read as an offsetMsgId the id names no record" in r.stderr and "port above 65535" in r.stderr
