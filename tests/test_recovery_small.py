"""The small-store recovery scan (analyses.recovery.small) against the plan's (analyses.recovery.plan): the same
``Scan`` (truncation offset, stop, re-dispatch range, counters) and the same ConsumeQueue.recover maxPhysicOffset,
on every oracle store and on writer-made stores doctored by hypothesis (crashes, torn tails, CRC damage, bad
magic codes, SCHEDULE_TOPIC_XXXX records whose DELAY the broker cannot parse, damaged consume queues, 4.x and 5.x
markers, abort files, checkpoints). A key look-up's fate column takes the small scan: its answer must be the
plan's, whichever path ran.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqinspect.analyses.lookup import fates as lookup
from rmqinspect.analyses.recovery import small
from rmqinspect.analyses.recovery.plan import (
    RecoveryOptions,
    choose_start_file,
    load_consume_queues,
    scan_commitlog,
)
from rmqinspect.analyses.recovery.queues import ConsumeQueueModel
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.consumequeue import CQ_ENTRY
from rmqinspect.store import Store
from rmqinspect.store.consumequeue import ConsumeQueue
from rmqinspect.store.version import BrokerVersion
from support import ALL_SCENARIOS, SAMPLE_STORE, require_oracle, tree_hashes
from support.recover_fixtures import BASE_TS, Fixture, Rec

FILE_SIZE = 8192
CQ_FILE_SIZE = 200  # 10 entries a file: several files per queue, so recover's third-last rule matters


def _options(check_crc: bool, index_safe: bool) -> RecoveryOptions:
    return RecoveryOptions(check_crc=check_crc, index_safe=index_safe, with_salvage=False, keep_redispatch=False,
                           model_start=False, dispatch=False)


def _plan_scan(store: Store, check_crc: bool = True, index_safe: bool = False):
    """The plan's steps 1-3 with the options a look-up's fate uses: (Recovery, Scan)."""
    rec = load_consume_queues(store, _options(check_crc, index_safe))
    idx, _ = choose_start_file(rec)
    return rec, scan_commitlog(rec, idx)


def _fields(scan) -> dict:
    d = dataclasses.asdict(scan)
    assert d.pop("redispatch") == []  # keep_redispatch=False: nothing listed on either side
    return d


def _assert_same_scan(root: str, check_crc: bool = True, index_safe: bool = False) -> dict:
    store = Store.open(root)
    got = small.small_recovery_scan(store, check_crc, index_safe)
    assert got is not None, "a small store takes the small scan"
    rec, want = _plan_scan(Store.open(root), check_crc, index_safe)
    assert _fields(got) == _fields(want)
    # ConsumeQueue.recover's maxPhysicOffset, queue by queue
    for m in rec.queues.models:
        if isinstance(m, ConsumeQueueModel):
            assert small.queue_max_physic_offset(m.cq, rec.bv)[0] == m.max_phys, m.rec.key
    return _fields(got)


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_oracle_stores_give_the_plans_scan(scenario):
    root = require_oracle(scenario) / "store"
    before = tree_hashes(root)
    store = Store.open(str(root))
    if store.layout.dledger is not None or "rocksdb" in scenario or "batchcq" in scenario:
        # DLedger mode, a RocksDB or a batch consume queue: only the plan models them
        assert small.small_recovery_scan(store) is None
    else:
        for check_crc in (True, False):
            got = _assert_same_scan(str(root), check_crc)
            assert got["messages"] > 0
    assert tree_hashes(root) == before


def test_the_sample_store_gives_the_plans_scan():
    got = _assert_same_scan(str(SAMPLE_STORE))
    assert got["stop_kind"] and got["messages"] > 0


@pytest.mark.parametrize("scenario", ALL_SCENARIOS + ["sample"])
def test_a_lookups_recovery_view_is_the_plans(scenario, monkeypatch):
    root = str(SAMPLE_STORE) if scenario == "sample" else str(require_oracle(scenario) / "store")
    got = lookup.recovery_view(Store.open(root), cache=False)
    monkeypatch.setattr(small, "SMALL_STORE_BYTES", 0)  # every store is "large": the plan answers
    assert small.small_recovery_scan(Store.open(root)) is None
    assert lookup.recovery_view(Store.open(root), cache=False) == got
    monkeypatch.undo()
    monkeypatch.setattr(small, "SMALL_SCAN_RECORDS", 3)  # more records than the scan may take one by one
    assert small.small_recovery_scan(Store.open(root)) is None
    assert lookup.recovery_view(Store.open(root), cache=False) == got


# --- writer-made stores, doctored -----------------------------------------------------------------------------

MESSAGE = st.fixed_dictionaries({
    "topic": st.sampled_from(["OrderTopic", "OrderTopic", "PayTopic", "SCHEDULE_TOPIC_XXXX"]),
    "queue_id": st.integers(0, 1),
    "delay": st.sampled_from([None, "3", "18", "-2", "x", " 3", "+7"]),
    "body": st.integers(0, 600),
    "crc_property": st.booleans(),
    "v2": st.booleans(),
})

DAMAGE = st.one_of(
    st.tuples(st.just("torn"), st.integers(0, 10_000), st.integers(1, 400)),  # zeros from inside a record on
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 10_000)),  # one body byte: a CRC mismatch
    st.tuples(st.just("magic"), st.integers(0, 10_000), st.integers(0, 0xFFFFFFFF)),  # a record's magic code
    st.tuples(st.just("cq"), st.integers(0, 10_000), st.sampled_from([b"\0" * 20, CQ_ENTRY.pack(-5, 100, 0),
                                                                      CQ_ENTRY.pack(64, 0, 0)])),
    st.tuples(st.just("cqcut"), st.integers(0, 10_000), st.integers(0, 199)),  # a consume-queue file cut short
)


def _write_store(root: str, messages: list[dict], *, v2_allowed: bool, dispatched: int) -> Fixture:
    fx = Fixture(root, FILE_SIZE, CQ_FILE_SIZE)
    os.makedirs(os.path.join(root, "config"), exist_ok=True)
    with CommitLogWriter(fx.commitlog, FILE_SIZE) as w:
        for i, m in enumerate(messages):
            props = {"UNIQ_KEY": "%032X" % (0xAC10 << 100 | i), "KEYS": f"k-{i}"}
            if m["delay"] is not None and m["topic"] == "SCHEDULE_TOPIC_XXXX":
                props["DELAY"] = m["delay"]
            ts = BASE_TS + i * 1000
            body = bytes((i + k) % 251 for k in range(m["body"]))
            res = w.append(MessageSpec(topic=m["topic"], queue_id=m["queue_id"], body=body,
                                       properties=encode_properties(props), born_timestamp=ts - 5, store_timestamp=ts,
                                       version=2 if (m["v2"] and v2_allowed) else None,
                                       append_property_crc=m["crc_property"] and v2_allowed))
            fx.records.append(Rec(res.physical_offset, res.total_size, m["topic"], m["queue_id"], res.queue_offset,
                                  ts, body, ""))
    fx.write_consume_queues(fx.records[:dispatched])  # the dispatch lags: queues behind the commit log
    return fx


def _cq_files(root: str) -> list[str]:
    out = []
    for d, _, names in sorted(os.walk(os.path.join(root, "consumequeue"))):
        out += [os.path.join(d, n) for n in sorted(names)]
    return out


def _damage(fx: Fixture, d: tuple) -> None:
    kind, a, b = d
    recs = fx.records
    if kind in ("torn", "flip", "magic"):
        r = recs[a % len(recs)]
        path = os.path.join(fx.commitlog, fx.file_of(r.offset))
        with open(path, "r+b") as f:
            if kind == "torn":  # zeros from inside the record to the file's end
                at = r.offset % FILE_SIZE + b % r.size
                f.seek(at)
                f.write(b"\0" * (os.path.getsize(path) - at))
            elif kind == "flip":  # any byte past the record's first 20 (header fields, body, topic, properties)
                at = r.offset % FILE_SIZE + 20 + b % (r.size - 20)
                f.seek(at)
                byte = f.read(1)
                f.seek(at)
                f.write(bytes([byte[0] ^ 0x5A]))
            else:
                f.seek(r.offset % FILE_SIZE + 4)
                f.write(b.to_bytes(4, "big"))
        return
    files = _cq_files(fx.root)
    if not files:
        return
    p = files[a % len(files)]
    size = os.path.getsize(p)
    if kind == "cq":
        if size >= 20:
            with open(p, "r+b") as f:
                f.seek((a // len(files)) % (size // 20) * 20)
                f.write(b)
    else:
        with open(p, "r+b") as f:
            f.truncate(min(b, size))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(MESSAGE, min_size=1, max_size=90), damage=st.lists(DAMAGE, max_size=3),
       marker=st.sampled_from(["none", "abort", "abort-pid", "compaction", "abort.bak"]),
       checkpoint=st.integers(-1, 95), dispatched=st.integers(0, 95), check_crc=st.booleans(), index_safe=st.booleans())
def test_doctored_stores_give_the_plans_scan(messages, damage, marker, checkpoint, dispatched, check_crc, index_safe):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "store")
        # V2 records and __CRC32# only where a 5.x marker says the writer was 5.x (as a real store would show)
        fx = _write_store(root, messages, v2_allowed=marker != "none" and marker != "abort", dispatched=dispatched)
        ts = fx.records[min(checkpoint, len(fx.records) - 1)].store_ts if checkpoint >= 0 else 0
        fx.write_checkpoint(ts, index=ts)
        if marker.startswith("abort"):
            with open(os.path.join(root, "abort.bak" if marker == "abort.bak" else "abort"), "wb") as f:
                f.write(b"4242" if marker == "abort-pid" else b"")
        elif marker == "compaction":
            os.makedirs(os.path.join(root, "compaction"))
        for d in damage:
            _damage(fx, d)
        _assert_same_scan(root, check_crc, index_safe)


@settings(max_examples=80, deadline=None)
@given(files=st.lists(st.lists(st.tuples(st.integers(-3, 5000), st.integers(-2, 300)), max_size=12), min_size=1,
                      max_size=5),
       cuts=st.lists(st.integers(0, 260), max_size=5), file_size=st.sampled_from([200, 240, 207, 0]),
       version=st.sampled_from(["4.9.8", "5.3.3", "4.4.0"]))
def test_consume_queue_max_physic_offset_is_recovers(files, cuts, file_size, version):
    """ConsumeQueue.recover over files of valid and invalid entries, cut short or not, of a mapped size that is or
    is not a whole number of entries: the small reader's maxPhysicOffset is the model's."""
    bv = BrokerVersion.parse(version)
    with tempfile.TemporaryDirectory() as d:
        for i, entries in enumerate(files):
            data = b"".join(CQ_ENTRY.pack(o, s, 0) for o, s in entries).ljust(200, b"\0")
            if i < len(cuts):
                data = data[:cuts[i]]
            with open(os.path.join(d, "%020d" % (i * 200)), "wb") as f:
                f.write(data)
        cq = ConsumeQueue("T", 0, d, file_size or None)
        try:
            m = ConsumeQueueModel(cq, bv, cq.file_size or 6_000_000)
            m.recover()
            assert small.queue_max_physic_offset(cq, bv)[0] == m.max_phys
        finally:
            cq.close()


@pytest.mark.parametrize("scenario", ["rocketmq-all-5.3.3/clean"])
def test_queues_beyond_the_entry_budget_go_to_the_plan(scenario, monkeypatch):
    """A normal 5.x store: the start-file rule reads maxPhyOffsetOfConsumeQueue. Its queues hold more entries than
    a budget of 5: the small scan declines and the look-up's view is the plan's."""
    root = str(require_oracle(scenario) / "store")
    assert small.small_recovery_scan(Store.open(root)) is not None
    view = lookup.recovery_view(Store.open(root), cache=False)
    monkeypatch.setattr(small, "SMALL_QUEUE_ENTRIES", 5)
    assert small.small_recovery_scan(Store.open(root)) is None
    assert lookup.recovery_view(Store.open(root), cache=False) == view


def test_a_preallocated_queue_file_is_read_to_its_first_empty_entry(tmp_path):
    """A broker pre-allocates each consume-queue file (6 MB by default): a 5.x store with such files, a few entries
    each, still takes the small scan (the read stops at the first empty entry) and gives the plan's scan."""
    root = str(tmp_path / "store")
    msgs = [{"topic": "OrderTopic", "queue_id": i % 2, "delay": None, "body": 50, "crc_property": True, "v2": False}
            for i in range(30)]
    fx = _write_store(root, msgs, v2_allowed=True, dispatched=20)
    fx.cq_file_size = 6_000_000
    fx.write_consume_queues(fx.records[:20])
    fx.write_checkpoint(fx.records[-1].store_ts)
    os.makedirs(os.path.join(root, "compaction"))  # a 5.x marker: the cq-max start rule and dispatch-from offset
    assert {os.path.getsize(p) for p in _cq_files(root)} == {6_000_000}
    got = _assert_same_scan(root)
    # maxPhyOffsetOfConsumeQueue is the end of record 19: the scan re-dispatches the records past it (21-29); record
    # 20 starts there and is left to start()'s ReputMessageService
    assert (got["redispatch_first"], got["redispatch_count"]) == (fx.records[21].offset, 9)
