"""Recovery decisions on damaged stores written with the project's writer and then doctored.

Each expectation is reasoned from FORMATS.md §7 (written down in the docstrings), not copied from our
own output. Fixture: 240 messages (~300 bytes) round-robin over 3 queues, 16 KiB commit-log files
(about 55 records per file, 5 files), 20-entry consume-queue files, a checkpoint covering everything.
"""

import json

from click.testing import CliRunner

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery
from rmqinspect.analyses.verify import verify
from rmqinspect.cli.main import cli
from rmqinspect.store import Store
from support import tree_hashes
from support.recover_fixtures import build_store


def _plan(fx, version=None, **kw):
    v = BrokerVersion.parse(version) if version else None
    return plan_recovery(Store.open(fx.root), RecoveryOptions(version=v, **kw))


def test_clean_fixture_is_clean(tmp_path):
    fx = build_store(tmp_path / "s")
    assert len(fx.file_names()) >= 4
    plan = _plan(fx)
    end = fx.records[-1].end
    assert plan.mode == "normal" and plan.truncate_offset == end
    assert plan.commitlog_files_deleted == [] and plan.messages_lost["count"] == 0
    assert plan.consume_queue_max_offsets == fx.queue_counts()
    assert verify(Store.open(fx.root)).problems == []


def test_torn_tail_normal(tmp_path):
    """§7.2: the last record's second half is zero -> its body CRC fails -> the scan stops at its start,
    T = last.offset. §7.3: the last file is truncated to T - start; maxPhyOffsetOfConsumeQueue (last.end)
    >= T, so every queue runs truncateDirtyLogicFiles(T): only the entry pointing at T is cut."""
    fx = build_store(tmp_path / "s", preallocate=True)
    last = fx.records[-1]
    fx.zero(last.offset + last.size // 2, last.end)
    before = tree_hashes(fx.root)
    plan = _plan(fx, version="4.9.8")
    assert plan.truncate_offset == last.offset
    assert plan.stop_kind == "crc"
    assert plan.commitlog_file_truncated == {"name": fx.file_of(last.offset),
                                             "position": last.offset % fx.file_size}
    # the pre-allocated empty next file starts after T: deleted
    assert plan.commitlog_files_deleted == [fx.file_names()[-1]]
    assert plan.consume_queue_truncated
    assert plan.consume_queue_max_offsets == fx.queue_counts(before=last.offset)
    key = f"{last.topic}/{last.queue_id}"
    assert [q.entries_cut for q in plan.queues if q.key == key] == [1]
    lost = plan.messages_lost
    assert (lost["count"], lost["intact"], lost["damaged"]) == (1, 0, 1)
    assert [(r["kind"], r["start"], r["end"]) for r in lost["regions"]] == [("torn_tail", last.offset, last.end)]
    assert tree_hashes(fx.root) == before  # the dry run never writes


def _flip_body_byte(fx, rec):
    hdr = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4  # V1, IPv4 hosts: body follows
    fx.patch(rec.offset + hdr + 3, bytes([fx_byte(fx, rec.offset + hdr + 3) ^ 0xFF]))


def fx_byte(fx, off):
    base = off - off % fx.file_size
    with open(f"{fx.commitlog}/{base:020d}", "rb") as f:
        f.seek(off - base)
        return f.read(1)[0]


def _middle_bad(fx):
    """A record in the middle of the second file."""
    second = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[1]]
    return second[len(second) // 2]


def test_bad_crc_in_middle_file_normal_4x_is_not_seen(tmp_path):
    """§7.1: 4.9.8 normal recovery starts at the third-last file; files before it are not verified
    (§7.2 note), so a CRC error in file 1 of 4 is invisible: nothing truncated, nothing lost. verify sees it."""
    fx = build_store(tmp_path / "s")
    bad = _middle_bad(fx)
    _flip_body_byte(fx, bad)
    names = fx.file_names()
    assert len(names) >= 4
    plan = _plan(fx, version="4.9.8")
    assert plan.start_file == names[-3] and int(plan.start_file) > bad.offset
    assert plan.truncate_offset == fx.records[-1].end and plan.messages_lost["count"] == 0
    assert plan.commitlog_files_deleted == []
    rep = verify(Store.open(fx.root), ("crc", "structure"))
    assert [(p.kind, p.start, p.end) for p in rep.problems] == [("crc_mismatch", bad.offset, bad.end)]


def test_bad_crc_in_middle_file_abnormal_cuts_everything_after(tmp_path):
    """§7.1 abnormal: the checkpoint's minTimestamp (= first store time) only matches file 0, so the scan
    starts there; §7.2: checkCRCOnRecover stops at the bad record; §7.3: T = its offset, every later file
    deleted, file 1 truncated, every CQ entry at or after T cut. Salvage finds every later record intact."""
    fx = build_store(tmp_path / "s")
    bad = _middle_bad(fx)
    _flip_body_byte(fx, bad)
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts + 3000)
    plan = _plan(fx, version="4.9.8")
    assert plan.mode == "abnormal" and plan.start_file == fx.file_names()[0]
    assert plan.truncate_offset == bad.offset and plan.stop_kind == "crc"
    assert plan.commitlog_files_deleted == fx.file_names()[2:]
    assert plan.commitlog_file_truncated == {"name": fx.file_names()[1], "position": bad.offset % fx.file_size}
    assert plan.consume_queue_max_offsets == fx.queue_counts(before=bad.offset)
    after = [r for r in fx.records if r.offset > bad.offset]
    lost = plan.messages_lost
    assert lost["intact"] == len(after) and lost["damaged"] == 1
    assert [(r["kind"], r["start"], r["end"]) for r in lost["regions"]] == [("crc_mismatch", bad.offset, bad.end)]
    # the abnormal scan re-dispatches every record before T
    assert len(plan.redispatch) == sum(1 for r in fx.records if r.offset < bad.offset)
    # --no-check-crc: the broker would keep everything
    plan2 = _plan(fx, version="4.9.8", check_crc=False)
    assert plan2.truncate_offset == fx.records[-1].end


def test_zero_page(tmp_path):
    """A lost 4 KiB page inside the third-last file. §7.2: the first record overlapping the page fails
    (tail zeroed -> CRC mismatch, or magic 0) -> T = its offset; the last file is deleted. Salvage
    resynchronises after the page: every record starting at or after the page end is intact."""
    fx = build_store(tmp_path / "s")
    names = fx.file_names()
    base = int(names[-3])
    page = (base + 4096, base + 8192)
    fx.zero(*page)
    plan = _plan(fx, version="4.9.8")
    first_hit = min(r.offset for r in fx.records if r.end > page[0])
    assert plan.truncate_offset == first_hit
    assert plan.commitlog_files_deleted == names[-2:]
    survivors = [r for r in fx.records if r.offset >= page[1]]
    lost = plan.messages_lost
    assert lost["intact"] == len(survivors)
    nxt = min(r.offset for r in survivors)
    assert [(r["kind"], r["start"], r["end"]) for r in lost["regions"]] == [("zero_page", first_hit, nxt)]


def test_missing_middle_file(tmp_path):
    """A deleted middle file. The broker's scan moves to the next file *in its list* after a blank record
    (§7.2; MappedFileQueue.load does not require contiguous names), so even an abnormal recovery from file 0
    runs across the gap: nothing truncated. verify reports the missing range and the dangling CQ entries."""
    import os

    fx = build_store(tmp_path / "s")
    names = fx.file_names()
    gone = names[1]
    os.remove(os.path.join(fx.commitlog, gone))
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts + 3000)
    plan = _plan(fx, version="4.9.8")
    assert plan.start_file == names[0]
    assert plan.truncate_offset == fx.records[-1].end
    assert plan.commitlog_files_deleted == [] and plan.messages_lost["count"] == 0
    assert any("not contiguous" in n for n in plan.notes)
    rep = verify(Store.open(fx.root), ("structure", "cq"))
    kinds = [(p.kind, p.start, p.end) for p in rep.problems if p.check == "structure"]
    assert kinds == [("missing_file", int(gone), int(gone) + fx.file_size)]
    in_gap = sum(1 for r in fx.records if fx.file_of(r.offset) == gone)
    assert sum(p.count for p in rep.problems if p.kind == "cq_points_to_damage") == in_gap


def test_cq_ahead_of_commitlog(tmp_path):
    """The consume queues were flushed but the last 3 records never reached the commit-log file (zeros).
    §7.2: the scan stops at the zeros, T = first lost record; maxPhyOffsetOfConsumeQueue > T so
    truncateDirtyLogicFiles(T) cuts the 3 entries (§7.4). Nothing to salvage: the bytes are zeros."""
    fx = build_store(tmp_path / "s")
    lost = fx.records[-3:]
    fx.zero(lost[0].offset, lost[-1].end)
    plan = _plan(fx, version="4.9.8")
    assert plan.truncate_offset == lost[0].offset and plan.stop_kind == "end"
    assert plan.consume_queue_truncated
    assert plan.consume_queue_max_offsets == fx.queue_counts(before=lost[0].offset)
    assert sum(q.entries_cut for q in plan.queues) == 3
    assert plan.messages_lost["count"] == 0 and plan.messages_lost["cq_entries_cut"]
    rep = verify(Store.open(fx.root), ("cq",))
    assert sum(p.count for p in rep.problems if p.kind == "cq_ahead") == 3


def test_cq_behind_commitlog_depends_on_version_and_mode(tmp_path):
    """The last 5 records have no consume-queue entry. 4.9.8 normal: recovery does not dispatch (the
    ReputMessageService fills the queues at start()), so max offsets stay behind. 4.9.8 abnormal: every
    record from the start file is re-dispatched -> queues complete. 5.3.3 normal: the start file is the
    newest one starting <= maxPhyOffsetOfConsumeQueue and records beyond it are dispatched during load."""
    fx = build_store(tmp_path / "s")
    fx.write_consume_queues(fx.records[:-5])
    behind = fx.queue_counts(before=fx.records[-5].offset)
    full = fx.queue_counts()
    p1 = _plan(fx, version="4.9.8")
    assert p1.consume_queue_max_offsets == behind and p1.redispatch == []
    # 5.3.x recoverNormally dispatches a record only when its commitLogOffset > maxPhyOffsetOfConsumeQueue
    # (CommitLog.recoverNormally's doDispatch; the batchcq oracle shows the strict '>'). A file queue's max
    # physical offset is the END of its last entry, so the first missing record, which starts exactly there,
    # is skipped; start()'s reput then begins after the records load() dispatched, and never adds it.
    p2 = _plan(fx, version="5.3.3")
    first = fx.records[-5]
    assert [r.commit_log_offset for r in p2.redispatch] == [r.offset for r in fx.records[-4:]]
    assert p2.max_phy_offset_of_consume_queue == first.offset
    key = f"{first.topic}/{first.queue_id}"
    assert p2.consume_queue_max_offsets == {k: v - (k == key) for k, v in full.items()}
    assert p2.consume_queue_max_offsets_after_start == p2.consume_queue_max_offsets
    fx.set_abort()
    p3 = _plan(fx, version="4.9.8")
    assert p3.mode == "abnormal" and p3.consume_queue_max_offsets == full
    assert len(p3.redispatch) == sum(1 for r in fx.records if r.offset >= int(p3.start_file))
    rep = verify(Store.open(fx.root), ("cq",))
    assert sum(p.count for p in rep.problems if p.kind == "cq_behind") == 5


def test_cli_recover_on_fixture_never_writes(tmp_path):
    fx = build_store(tmp_path / "s")
    last = fx.records[-1]
    fx.zero(last.offset + 40, last.end)
    before = tree_hashes(fx.root)
    r = CliRunner().invoke(cli, ["recover", fx.root, "--dry-run", "--format", "json", "--redispatch"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["truncate_offset"] == last.offset and doc["redispatch"] == []
    assert "assumed" in r.stderr or "detected" in r.stderr
    assert tree_hashes(fx.root) == before


def test_start_file_rule_by_version(tmp_path):
    """§7.1 normal recovery: <= 5.3.1 the third-last file; 5.3.2/5.3.3 the newest file starting at or below
    maxPhyOffsetOfConsumeQueue (here the last data file); HEAD the newest file whose first record validates
    and whose PHYSICALOFFSET <= maxPhyOffsetOfConsumeQueue. With the CQ cut back to the third file's records,
    5.3.3 and HEAD start at the third file."""
    fx = build_store(tmp_path / "s")
    names = fx.file_names()
    assert _plan(fx, version="5.3.1").start_file == names[-3]
    assert _plan(fx, version="5.3.3").start_file == names[-1]
    assert _plan(fx, version="HEAD").start_file == names[-1]
    third = [r for r in fx.records if fx.file_of(r.offset) <= names[2]]
    fx.write_consume_queues(third)
    assert _plan(fx, version="5.3.3").start_file == names[2]
    assert _plan(fx, version="HEAD").start_file == names[2]
    # the first record of the last file fails its CRC: HEAD refuses that file as a start, 5.3.3 does not look
    fx.write_consume_queues()
    first_last = min((r for r in fx.records if fx.file_of(r.offset) == names[-1]), key=lambda r: r.offset)
    fx.patch(first_last.offset + 91, b"\x00\x01")
    assert _plan(fx, version="HEAD").start_file == names[-2]
    p = _plan(fx, version="5.3.3")
    assert p.start_file == names[-1] and p.truncate_offset == first_last.offset


def test_property_crc_checked_by_verify(tmp_path):
    """5.2.0+ __CRC32# covers the whole record except its 20-byte trailer (FORMATS §1.8): a changed FLAG field
    keeps the structure and the body CRC valid but breaks the property CRC."""
    import os

    from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
    from rmqinspect.formats.commitlog import encode_properties

    d = tmp_path / "s"
    with CommitLogWriter(str(d / "commitlog"), 8192) as w:
        res = [w.append(MessageSpec(topic="T", queue_id=0, body=b"x" * 50, store_timestamp=1795000000000 + i,
                                    properties=encode_properties({"KEYS": f"k{i}"}), append_property_crc=True))
               for i in range(5)]
    assert verify(Store.open(d), ("crc", "structure")).problems == []
    victim = res[2]
    with open(os.path.join(d, "commitlog", "%020d" % 0), "r+b") as f:
        f.seek(victim.physical_offset + 16)  # FLAG
        f.write(b"\x00\x00\x00\x07")
    rep = verify(Store.open(d), ("crc", "structure"))
    assert [(p.kind, p.start, p.end) for p in rep.problems] == \
        [("property_crc", victim.physical_offset, victim.physical_offset + victim.total_size)]
