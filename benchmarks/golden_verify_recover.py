"""Dump every verify / recover --dry-run / salvage report on the oracle stores and on a set of doctored
writer-made stores as one JSON document, so an optimisation can be checked byte for byte against the
previous implementation:

    python benchmarks/golden_verify_recover.py OUT.json        # before the change (e.g. on main)
    python benchmarks/golden_verify_recover.py OUT2.json       # after
    cmp OUT.json OUT2.json

``--pure`` forces the pure-Python scanner (no compiled extension) for the same comparison.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from rmqinspect.analyses.recovery import BrokerVersion, RecoveryOptions, plan_recovery  # noqa: E402
from rmqinspect.analyses.salvage import salvage  # noqa: E402
from rmqinspect.analyses.verify import ALL_CHECKS, verify  # noqa: E402
from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec  # noqa: E402
from rmqinspect.formats.commitlog import encode_properties  # noqa: E402
from rmqinspect.store import Store  # noqa: E402
from rmqinspect.store.walk.resync import walk_with_resync  # noqa: E402
from support.recover_fixtures import build_store  # noqa: E402

ORACLE = "/work/shared/oracle"


def reports(root: str) -> dict:
    out = {}
    for checks in (ALL_CHECKS, ("structure", "crc"), ("cq",), ("index",), ("structure",)):
        for v2 in (True, False):
            rep = verify(Store.open(root), checks, accept_v2=v2)
            out[f"verify {','.join(checks)} v2={v2}"] = [rep.to_dict(), [p.to_dict() for p in rep.problems]]
    rep = verify(Store.open(root), ALL_CHECKS, max_errors=2)
    out["verify max_errors=2"] = [rep.to_dict(), [p.to_dict() for p in rep.problems]]
    for version in (None, "4.9.8", "5.3.3", "HEAD", "4.4.0"):
        for mode in (None, "normal", "abnormal"):
            for crc in (True, False):
                try:
                    v = BrokerVersion.parse(version) if version else None
                    plan = plan_recovery(Store.open(root), RecoveryOptions(v, force_mode=mode, check_crc=crc))
                    d = plan.to_dict(with_redispatch=True)
                    d["salvage"] = plan.salvage.to_dict() if plan.salvage else None
                    d["salvage_msgs"] = [m.to_dict() for m in plan.salvage.messages] if plan.salvage else None
                    d["cq_files"] = {k: {n: b.hex() for n, b in plan.consume_queue_files(k).items()}
                                     for k in plan.consume_queue_keys()}
                except Exception as e:  # noqa: BLE001 - the error text is part of the behaviour
                    d = {"error": f"{type(e).__name__}: {e}"}
                out[f"recover {version} {mode} crc={crc}"] = d
    st = Store.open(root)
    out["salvage 0"] = salvage(st, st.commitlog.min_offset).to_dict()
    for crc in (True, False):
        items = []
        for x in walk_with_resync(Store.open(root), None, check_crc=crc):
            items.append(x.to_dict() if hasattr(x, "to_dict") else [x.kind, x.offset, x.size, x.position,
                                                                     x.body_pos, x.crc_ok])
        out[f"walk crc={crc}"] = items
    return out


def doctored(tmp: str):
    """(name, root) of damaged writer-made stores."""
    def fx(name, **kw):
        return build_store(os.path.join(tmp, name), **kw)

    f = fx("clean")
    yield "clean", f.root
    f = fx("torn", preallocate=True)
    last = f.records[-1]
    f.zero(last.offset + last.size // 2, last.end)
    yield "torn", f.root
    f = fx("crc_mid")
    r = f.records[len(f.records) // 3]
    f.patch(r.offset + 100, b"\xff\xee")
    yield "crc_mid", f.root
    f = fx("crc_mid_abort")
    r = f.records[len(f.records) // 3]
    f.patch(r.offset + 100, b"\xff\xee")
    f.set_abort()
    f.write_checkpoint(f.records[0].store_ts + 3000)
    yield "crc_mid_abort", f.root
    f = fx("zero_page")
    base = int(f.file_names()[-3])
    f.zero(base + 4096, base + 8192)
    yield "zero_page", f.root
    f = fx("missing")
    os.remove(os.path.join(f.commitlog, f.file_names()[1]))
    f.set_abort()
    f.write_checkpoint(f.records[0].store_ts + 3000)
    yield "missing", f.root
    f = fx("cq_ahead")
    f.zero(f.records[-3].offset, f.records[-1].end)
    yield "cq_ahead", f.root
    f = fx("cq_behind")
    f.write_consume_queues(f.records[:-5])
    yield "cq_behind", f.root
    f = fx("stale")
    a = f.records[10]
    b = next(r for r in f.records[12:] if r.size == a.size and f.file_of(r.offset) == f.file_of(a.offset))
    raw = open(os.path.join(f.commitlog, f.file_of(a.offset)), "rb").read()
    f.patch(b.offset, raw[a.offset % f.file_size:a.end % f.file_size or f.file_size])
    yield "stale", f.root
    f = fx("stale_run")
    for k in range(3):  # three consecutive copies: one stale region
        a = f.records[5 + k]
        b = f.records[40 + k]
        if a.size == b.size and f.file_of(a.offset) == f.file_of(b.offset):
            raw = open(os.path.join(f.commitlog, f.file_of(a.offset)), "rb").read()
            f.patch(b.offset, raw[a.offset % f.file_size:a.end % f.file_size or f.file_size])
    yield "stale_run", f.root
    f = fx("half")
    r = f.records[30]
    f.patch(r.offset, (r.size + 8).to_bytes(4, "big"))
    yield "half", f.root
    f = fx("garbage")
    r = f.records[70]
    f.patch(r.offset + 2, b"\x12\x34\x56\x78\x9a")
    yield "garbage", f.root
    f = fx("blank_zeroed")  # a blank end-of-file record wiped: zeros to the end, later files hold data
    first = f.file_names()[0]
    in_first = [x for x in f.records if f.file_of(x.offset) == first]
    f.zero(in_first[-1].end, int(f.file_names()[1]))
    yield "blank_zeroed", f.root
    for bad in ("zz", "3"):  # SCHEDULE_TOPIC_XXXX records; "zz" stops the recovery (Integer.parseInt)
        d = os.path.join(tmp, f"delay_{bad}")
        with CommitLogWriter(os.path.join(d, "commitlog"), 8192) as w:
            for i in range(60):
                sched = i in (20, 33)
                props = {"KEYS": f"k{i}", "TAGS": "T"}
                if sched:
                    props.update({"DELAY": bad if i == 33 else "2", "REAL_TOPIC": "Real", "REAL_QID": "0"})
                w.append(MessageSpec(topic="SCHEDULE_TOPIC_XXXX" if sched else "T" + "x" * (i % 3),
                                     queue_id=1 if sched else i % 2, body=b"b" * (i * 3),
                                     properties=encode_properties(props), store_timestamp=1795000000000 + i,
                                     append_property_crc=i % 5 == 0, born_ip=b"\0" * 16 if i == 7 else b"\x7f\0\0\1",
                                     sys_flag=0x10 if i == 7 else 0))
        open(os.path.join(d, "abort"), "wb").close()
        yield f"delay_{bad}", d
    rng = random.Random(4)
    for k in range(6):
        f = fx(f"random{k}")
        for _ in range(rng.randint(1, 4)):
            r = rng.choice(f.records)
            o = r.offset + rng.randrange(r.size)
            if rng.random() < 0.5:
                f.zero(o, min(o + rng.choice((1, 7, 300, 5000)), r.offset - r.offset % f.file_size + f.file_size))
            else:
                f.patch(o, bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 9)))))
        if k % 2:
            f.set_abort()
        yield f"random{k}", f.root


def main() -> None:
    out_path = sys.argv[1]
    if "--pure" in sys.argv:
        from rmqinspect.store import scanner

        scanner.use_compiled(False)
    tmp = tempfile.mkdtemp(prefix="rmqi-golden-")
    doc = {}
    try:
        for ver in ("rocketmq-all-4.9.8", "rocketmq-all-5.3.3"):
            for sc in sorted(os.listdir(os.path.join(ORACLE, ver))):
                root = os.path.join(ORACLE, ver, sc, "store")
                # DLedger stores keep their log in dledger-*/data, which is not read yet (issue 14)
                if os.path.isdir(os.path.join(root, "commitlog")):
                    doc[f"{ver}/{sc}"] = reports(root)
        for name, root in doctored(tmp):
            doc[name] = json.loads(json.dumps(reports(root)).replace(tmp, "TMP"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(out_path, "w") as fh:
        json.dump(doc, fh, indent=0, sort_keys=True)
    print(f"{len(doc)} stores -> {out_path}")


if __name__ == "__main__":
    main()
