"""The project's writer in DLedger mode (fixtures/dledger.py): byte for byte the oracle's data files, index files,
checkpoint and currterm when fed the oracle's messages and terms; whole DLedger stores whose consume queues and
index the oracle-proven dispatcher makes; multi-term logs and a follower truncated as a new leader would."""

from __future__ import annotations

import os

import pytest

from rmqinspect.analyses.recovery.dledger import dledger_recover
from rmqinspect.fixtures.commitlog import MessageSpec, spec_from_message
from rmqinspect.fixtures.dledger import DLedgerStoreWriter, DLedgerWriter
from rmqinspect.store import Store
from support import load_expected, require_oracle


@pytest.mark.parametrize("name", ["rocketmq-all-4.9.8/dledger-clean", "rocketmq-all-4.9.8/dledger-crash-intact"])
def test_writer_reproduces_the_oracle_member_files(name, tmp_path):
    p = require_oracle(name)
    exp = load_expected(name)
    member = p / "store" / "dledger-n0"
    with Store.open(p / "store") as st:
        msgs = list(st.commitlog.messages())
        terms = [m.dledger["term"] for m in msgs]
        w = DLedgerWriter(str(tmp_path / "dledger-n0"), exp["dledger"]["dataFileSize"],
                          exp["dledger"]["indexFileSize"])
        for m, t in zip(msgs, terms):
            w.append(spec_from_message(m), t)
    cp = exp["dledger"]["filesBeforeLoad"]
    w.write_checkpoint(int(cp["checkpoint"]["parsed"]["committedIndex"]),
                       int(cp["checkpoint"]["parsed"]["endIndex"]))
    w.write_currterm(0, "n0")
    compared = 0
    for sub in ("data", "index"):
        names = sorted(os.listdir(member / sub))
        assert sorted(os.listdir(tmp_path / "dledger-n0" / sub)) == names
        for n in names:
            assert (tmp_path / "dledger-n0" / sub / n).read_bytes() == (member / sub / n).read_bytes(), (sub, n)
            compared += 1
    for n in ("checkpoint", "currterm"):
        assert (tmp_path / "dledger-n0" / n).read_bytes() == (member / n).read_bytes(), n
    assert compared == 7


def _spec(i: int) -> MessageSpec:
    return MessageSpec(topic="T", queue_id=i % 2, body=b"m%d" % i * (1 + i % 7), properties=b"KEYS\x01k%d" % i,
                       born_timestamp=1000 + i, store_timestamp=2000 + i)


def test_dledger_store_writer_multi_term_reads_back_and_recovers(tmp_path):
    root = tmp_path / "store"
    with DLedgerStoreWriter(str(root), data_file_size=4096, cq_file_size=200, index_slots=16, index_max=64,
                            committed_index=20) as w:
        for i in range(60):
            w.append_in_term(_spec(i), 0 if i < 25 else 3)
    with Store.open(root) as st:
        msgs = list(st.commitlog.messages())
        assert [m.body for m in msgs] == [_spec(i).body for i in range(60)]
        assert [m.dledger["term"] for m in msgs] == [0] * 25 + [3] * 35
        assert [m.dledger["index"] for m in msgs] == list(range(60))
        assert len(st.commitlog.files) >= 3  # blank records moved entries to later files
        r = dledger_recover(st)
        assert (r.ledger_end_index, r.ledger_end_term, r.committed_index) == (59, 3, 20)
        assert r.max_offset_after_load == msgs[20].physical_offset + msgs[20].total_size
        assert r.max_offset_after_start == msgs[-1].physical_offset + msgs[-1].total_size
        from rmqinspect.analyses.verify import verify

        assert verify(st).ok


def test_truncate_after_cuts_data_and_index(tmp_path):
    w = DLedgerWriter(str(tmp_path / "dledger-n1"), 2048, 32 * 16)
    for i in range(40):
        w.append(_spec(i), 1)
    w.truncate_after(9)
    w.append(_spec(99), 2)
    st_entries = [(e.index, e.term) for e in w.entries]
    assert st_entries == [(i, 1) for i in range(10)] + [(10, 2)]
    files = sorted(os.listdir(tmp_path / "dledger-n1" / "data"))
    assert int(files[-1]) <= w.entries[-1].pos


def _flat(events) -> list:
    from rmqinspect.store.walk.records import RecordRun

    out = []
    for ev in events:
        if type(ev) is RecordRun:
            out.extend(("message", ev.file.name, *r) for r in ev.records.tolist())
        else:
            out.append((str(ev.kind), ev.file.name, ev.offset, ev.size, ev.crc_ok, ev.reason))
    return out


def test_compiled_and_python_entry_walks_agree_on_damage(tmp_path):
    """A body byte flipped (CRC), a record TOTALSIZE that is not the entry's bodySize (HALF, the walk goes on at
    the next entry), a broken entry header (ILLEGAL, the file ends there): both scanners report the same."""
    from rmqinspect.store import scanner
    from rmqinspect.store.walk.file import walk_file

    w = DLedgerWriter(str(tmp_path / "s" / "dledger-n0"), 1 << 16, 32 * 256)
    for i in range(40):
        w.append(_spec(i), 1)
    e3, e7, e12 = w.entries[3], w.entries[7], w.entries[12]
    path = tmp_path / "s" / "dledger-n0" / "data" / ("%020d" % 0)
    data = bytearray(path.read_bytes())
    tail = 2 + len(b"T") + 1 + len(_spec(3).properties)  # topic and properties after the body
    data[e3.pos + e3.size - tail - 1] ^= 0x55  # the last body byte of entry 3's record
    rec7 = e7.pos + 48
    data[rec7:rec7 + 4] = (int.from_bytes(data[rec7:rec7 + 4], "big") - 1).to_bytes(4, "big")
    data[e12.pos:e12.pos + 4] = (7).to_bytes(4, "big")  # entry magic 7
    path.write_bytes(bytes(data))
    with Store.open(tmp_path / "s") as st:
        f = st.commitlog.files[0]
        for crc in (True, False):
            for cont in (False, True):
                got = []
                for compiled in (True, False):
                    with scanner.selected(compiled):
                        got.append(_flat(walk_file(f, check_crc=crc, crc_continue=cont, run_records=5)))
                assert got[0] == got[1], (crc, cont)
                kinds = [g[0] for g in got[0]]
                if crc and not cont:  # the CRC mismatch ends the file, as in walk_file
                    assert kinds == ["message"] * 3 + ["crc"]
                else:
                    assert kinds == ["message"] * 3 + ["crc" if crc else "message"] + ["message"] * 3 + ["half"] \
                        + ["message"] * 4 + ["illegal"]


def test_salvage_keeps_the_record_of_an_entry_whose_header_is_damaged(tmp_path):
    from rmqinspect.analyses.dledger import entry_problems
    from rmqinspect.analyses.salvage import salvage

    root = tmp_path / "store"
    with DLedgerStoreWriter(str(root), data_file_size=1 << 16, cq_file_size=200, index_slots=16, index_max=64) as w:
        for i in range(30):
            w.append(_spec(i))
    e = w.dledger.entries[10]
    p = root / "dledger-n0" / "data" / ("%020d" % 0)
    data = bytearray(p.read_bytes())
    data[e.pos:e.pos + 4] = (0x0BADBEEF).to_bytes(4, "big")
    p.write_bytes(bytes(data))
    with Store.open(root) as st:
        r = dledger_recover(st)
        assert (r.ledger_end_index, r.data_end) == (9, e.pos)
        rep = salvage(st, r.data_end)
        assert [(d.start, d.end) for d in rep.regions] == [(e.pos, e.pos + 48)]  # exactly the header
        assert [m.physical_offset for m in rep.messages][:2] == [e.pos + 48, w.dledger.entries[11].pos + 48]
        assert len(rep.messages) == 20
        assert [p.kind for p in entry_problems(st.dledger)] == ["dledger_entry"]
