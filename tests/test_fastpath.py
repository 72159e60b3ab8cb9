"""The hot path's struct layouts (derived from the schema) decode every oracle record exactly as the
construct schema does. (The compiled scanner against the pure-Python one: tests/test_commitlog_walk.py.)"""

from rmqinspect.formats.commitlog import CommitLogRecord, HEADER_STRUCT_NAMES
from rmqinspect.store import Store
from rmqinspect.store.walk.kinds import MESSAGE
from rmqinspect.store.walk.records import _topic_and_properties


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
