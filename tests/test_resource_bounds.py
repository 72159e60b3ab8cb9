"""Resource bounds on hostile stores: every command runs in a subprocess under an address-space
limit (RLIMIT_AS); the test checks the exit code is documented, stderr carries no traceback (one clear line when
the command fails), --format json stays one JSON document, the store is unchanged, and the peak RSS the child
reports (getrusage) stays bounded.

Stores are written by the project's writer (tests/support/recover_fixtures.build_store) and damaged in a temp
copy: a record claiming 2 GiB, an index chain longer than its item count (a cycle), a consume-queue file of odd
length, 0- and 1-byte files, a directory where a file belongs, unreadable files, symlinks leaving the store.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest

from rmqinspect.formats.indexfile import item_position, slot_position
from rmqinspect.store.message import Message
from support import tree_hashes
from support.recover_fixtures import build_store

AS_LIMIT = 2 << 30  # the child's address space: numpy, pyarrow and the maps fit well below this
RSS_BOUND_MIB = 300

# The child: limit the address space, run each command in turn (click's runner), write the results and the peak
# RSS (KiB) as JSON to a file. One process for several commands keeps the test fast (imports once).
DRIVER = r"""
import json, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from click.testing import CliRunner
from rmqinspect.cli.main import cli
results = []
for args in json.loads(sys.argv[3]):
    r = CliRunner().invoke(cli, args)
    err = r.stderr
    if r.exc_info is not None and not isinstance(r.exc_info[1], SystemExit):
        err += "".join(traceback.format_exception(*r.exc_info))
    results.append({"code": r.exit_code, "out": r.stdout, "err": err})
# VmHWM: this process image's peak RSS. (getrusage's ru_maxrss would carry the forking parent's peak across exec:
# inside a long pytest run that is the test runner's size, not the command's.)
with open("/proc/self/status") as f:
    hwm = [int(line.split()[1]) for line in f if line.startswith("VmHWM:")]
with open(sys.argv[2], "w") as f:
    json.dump({"results": results, "rss_kib": hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, f)
"""


def run_many(commands: list[list[str]], timeout: int = 300) -> tuple[list[tuple[int, str, str]], float]:
    """[(exit code, stdout, stderr)] of each ``rmqinspect ARGS`` run in one child under AS_LIMIT, and its peak RSS
    in MiB."""
    with tempfile.TemporaryDirectory() as tmp:
        res_file = os.path.join(tmp, "res")
        p = subprocess.run([sys.executable, "-c", DRIVER, str(AS_LIMIT), res_file, json.dumps(commands)],
                           capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0 and os.path.exists(res_file), p.stderr[-3000:]
        with open(res_file) as f:
            doc = json.load(f)
    return [(r["code"], r["out"], r["err"]) for r in doc["results"]], doc["rss_kib"] / 1024


def run_bounded(*args: str, timeout: int = 120) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, peak RSS MiB) of one ``rmqinspect ARGS`` under AS_LIMIT."""
    (res,), rss = run_many([list(args)], timeout)
    return (*res, rss)


def check_all(commands: list[list[str]], timeout: int = 300) -> list[tuple[int, str, str]]:
    results, rss = run_many([[*c, "--format", "json"] for c in commands], timeout)
    for c, (code, out, err) in zip(commands, results):
        try:
            assert_clean(code, out, err, rss)
        except AssertionError as e:
            raise AssertionError(f"{c}: {e}") from e
    return results


def assert_clean(code: int, out: str, err: str, rss: float, fmt: str | None = "json", codes=range(0, 7)) -> None:
    assert code in codes, (code, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    if code > 1 and not out.strip():  # failed without a result: one clear line says why
        lines = [ln for ln in err.splitlines() if ln.startswith("rmqinspect: error:")]
        assert len(lines) == 1 and len(lines[0]) > len("rmqinspect: error: ") + 5, err
    if fmt == "json" and out.strip():
        json.loads(out)
    assert rss < RSS_BOUND_MIB, f"peak RSS {rss:.0f} MiB"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("bounds") / "store"
    build_store(str(root), n=60)
    return root


@pytest.fixture
def store(pristine, tmp_path):
    d = tmp_path / "store"
    shutil.copytree(pristine, d, symlinks=True)
    return d


def commitlog_files(store) -> list[str]:
    d = os.path.join(store, "commitlog")
    return [os.path.join(d, n) for n in sorted(os.listdir(d))]


def test_record_claiming_2_gib_is_named_and_memory_stays_bounded(store, tmp_path, record_property):
    first = commitlog_files(store)[0]
    with open(first, "rb") as f:
        size0 = struct.unpack(">i", f.read(4))[0]
    with open(first, "r+b") as f:  # the second record's TOTALSIZE claims 2 GiB - 1
        f.seek(size0)
        f.write(struct.pack(">i", 0x7FFFFFFF))
    before = tree_hashes(store)
    peaks = {}
    code, out, err, rss = run_bounded("decode-commitlog", str(store), "--offset", str(size0), "--format", "json")
    assert code == 4 and f"00000000000000000000 @ {size0}" in err and "2147483647" in err, err
    assert_clean(code, out, err, rss)
    peaks["decode-commitlog"] = rss
    for args in (["verify"], ["summary"], ["recover", "--dry-run"], ["salvage", "--out", str(tmp_path / "s.ndjson")],
                 ["decode-commitlog", "--keep-going", "--count", "100"],
                 ["rebuild", "--dry-run", "--out", str(tmp_path / "rb")]):
        code, out, err, rss = run_bounded(args[0], str(store), *args[1:], "--format", "json")
        assert_clean(code, out, err, rss)
        peaks[args[0]] = rss  # one process per command here: the figure is each command's own peak
    assert tree_hashes(store) == before
    record_property("peak_rss_mib_2gib_claim", {k: round(v) for k, v in peaks.items()})
    print("peak RSS (MiB) on the 2 GiB-claim store:", {k: round(v) for k, v in peaks.items()})


def test_record_body_length_claiming_2_gib(store):
    first = commitlog_files(store)[0]
    with open(first, "r+b") as f:  # BODYLENGTH of the first record (IPv4 hosts: at 84)
        f.seek(84)
        f.write(struct.pack(">i", 0x7FFFFFFF))
    code, out, err, rss = run_bounded("decode-commitlog", str(store), "--offset", "0", "--format", "json")
    assert code == 4 and "00000000000000000000 @ 0" in err, err
    assert_clean(code, out, err, rss)


def _index_store(tmp_path, pristine) -> str:
    d = tmp_path / "idx"
    shutil.copytree(pristine, d)
    code, out, err, _ = run_bounded("rebuild", str(d), "--out", str(tmp_path / "rebuilt"), "--what", "index",
                                    "--index-slots", "16", "--index-max", "400", "--format", "json")
    assert code == 0, err
    os.makedirs(d / "index", exist_ok=True)
    for n in os.listdir(tmp_path / "rebuilt" / "index"):
        shutil.copy(tmp_path / "rebuilt" / "index" / n, d / "index" / n)
    return str(d)


def test_index_chain_longer_than_the_item_count_ends(tmp_path, pristine):
    d = _index_store(tmp_path, pristine)
    (name,) = os.listdir(os.path.join(d, "index"))
    path = os.path.join(d, "index", name)
    with open(path, "r+b") as f:
        for slot in range(16):  # every slot points at item 2, whose prev points at item 3, whose prev is 2: a cycle
            f.seek(slot_position(slot))
            f.write(struct.pack(">i", 2))
        for item, prev in ((2, 3), (3, 2)):
            f.seek(item_position(16, item) + 16)
            f.write(struct.pack(">i", prev))
    before = tree_hashes(d)
    check_all([["index-lookup", d, "--key", "k1", "--topic", "OrderTopic", "--index-slots", "16",
                "--index-max", "400", "--explain"],
               ["explain-missing", d, "--key", "k1", "--topic", "OrderTopic", "--index-slots", "16",
                "--index-max", "400"]], timeout=60)
    assert tree_hashes(d) == before


def test_queue_file_of_odd_length(store):
    """Regression (fuzz/cli_fuzz.py, seed 1): a 7-byte consume-queue file made recover's queue model 0 entries
    long, then IndexError in analyses/recovery/queues.py dispatch (recover, salvage, consumer-lag)."""
    qdir = os.path.join(store, "consumequeue")
    topic = sorted(os.listdir(qdir))[0]
    q = sorted(os.listdir(os.path.join(qdir, topic)))[0]
    files = sorted(os.listdir(os.path.join(qdir, topic, q)))
    for n in files[1:]:
        os.unlink(os.path.join(qdir, topic, q, n))
    os.truncate(os.path.join(qdir, topic, q, files[0]), 7)
    s = str(store)
    results = check_all([["recover", s, "--dry-run", "--mode", "abnormal"], ["recover", s, "--dry-run"],
                         ["consumer-lag", s], ["salvage", s], ["cq", s, "--topic", topic, "--queue", q], ["verify", s]])
    doc = json.loads(results[0][1])  # the recovery ran to its end and reports the damaged queue
    assert doc["mode"] == "abnormal" and f"{topic}/{q}" in json.dumps(doc["consume_queues"])


@pytest.mark.parametrize("length", [0, 1])
@pytest.mark.parametrize("what", ["commitlog", "checkpoint", "cq", "config"])
def test_zero_and_one_byte_files(store, what, length):
    if what == "commitlog":
        path = commitlog_files(store)[0]
    elif what == "checkpoint":
        path = os.path.join(store, "checkpoint")
    elif what == "cq":
        qdir = os.path.join(store, "consumequeue")
        t = sorted(os.listdir(qdir))[0]
        q = sorted(os.listdir(os.path.join(qdir, t)))[0]
        path = os.path.join(qdir, t, q, sorted(os.listdir(os.path.join(qdir, t, q)))[0])
    else:
        os.makedirs(os.path.join(store, "config"), exist_ok=True)
        path = os.path.join(store, "config", "consumerOffset.json")
        open(path, "wb").close()
    os.truncate(path, length)
    before = tree_hashes(store)
    s = str(store)
    check_all([["summary", s], ["verify", s], ["recover", s, "--dry-run"], ["decode-commitlog", s, "--offset", "0"],
               ["config", s], ["consumer-lag", s], ["cq", s, "--all"]])
    assert tree_hashes(store) == before


@pytest.mark.parametrize("what", ["commitlog", "checkpoint", "config"])
def test_directory_where_a_file_belongs(store, what):
    if what == "commitlog":
        path = commitlog_files(store)[0]
    elif what == "checkpoint":
        path = os.path.join(store, "checkpoint")
    else:
        path = os.path.join(store, "config", "consumerOffset.json")
    if os.path.exists(path):
        os.unlink(path)
    os.makedirs(path)
    s = str(store)
    for code, _out, err in check_all([["summary", s], ["verify", s], ["recover", s, "--dry-run"], ["config", s],
                                     ["consumer-lag", s]]):
        if code == 5:
            assert "directory" in err, err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="running as root: chmod 000 does not deny root, the file stays readable")
@pytest.mark.parametrize("what", ["commitlog", "checkpoint"])
def test_unreadable_files(store, what):
    path = commitlog_files(store)[0] if what == "commitlog" else os.path.join(store, "checkpoint")
    os.chmod(path, 0)
    try:
        s = str(store)
        for code, _out, err in check_all([["summary", s], ["verify", s], ["recover", s, "--dry-run"]]):
            assert code == 5 and "ermission" in err, err
    finally:
        os.chmod(path, 0o644)


def test_symlinks_leaving_the_store_are_read_only(store, tmp_path):
    """A commitlog file and the checkpoint replaced by symlinks to files outside the store: the commands stay
    clean and write nothing through the links (the outside files keep their bytes)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    last = commitlog_files(store)[-1]
    target = outside / "commitlog-copy"
    shutil.copy(last, target)
    os.unlink(last)
    os.symlink(target, last)
    cp_target = outside / "checkpoint-copy"
    shutil.copy(os.path.join(store, "checkpoint"), cp_target)
    os.unlink(os.path.join(store, "checkpoint"))
    os.symlink(cp_target, os.path.join(store, "checkpoint"))
    before = tree_hashes(outside)
    s = str(store)
    check_all([["summary", s], ["verify", s], ["recover", s, "--dry-run"],
               ["salvage", s, "--out", str(tmp_path / "x")]])
    assert tree_hashes(outside) == before


def test_unknown_compression_code_renders():
    """Regression (atheris, record target): SYSFLAG COMPRESSED with codec bits 5 made Message.to_dict raise
    ``ValueError: 5 is not a valid CompressionType``; the row now names the codec and keeps the raw body."""
    msg = Message(physical_offset=0, total_size=0, magic_version=1, body_crc=0, crc_ok=True, queue_id=0, flag=0,
                  queue_offset=0, physical_offset_field=0, sys_flag=0x501, born_timestamp=0, born_ip=b"\0" * 4,
                  born_port=0, store_timestamp=0, store_ip=b"\0" * 4, store_port=0, reconsume_times=0,
                  prepared_transaction_offset=0, body=b"abc", topic="T", properties_raw=b"", properties={})
    d = msg.to_dict("hex")
    assert d["compression"] == "UNKNOWN5" and d["body"] == b"abc".hex() and "body_error" in d


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", tempfile.gettempdir()]))


def test_tiered_index_geometry_search_is_linear(tmp_path):
    """Regression (found while fuzzing the tiered target): an unsealed tiered index file whose length fits no
    hint and whose header claims used slots the table does not have made the slot-count search count the
    table's non-empty slots once per candidate: 37 s for 2 MiB, quadratic. Now prefix sums: linear."""
    import time

    from rmqinspect.errors import CorruptDataError
    from rmqinspect.formats import tiered_index as F
    from rmqinspect.store.tiered_index import TieredIndexFile

    p = tmp_path / "00000000000000000000"
    with open(p, "wb") as f:
        f.write(F.HEADER.pack(F.BEGIN_MAGIC, 1, 2, 5, 0))  # hashSlotCount 5, no item, an all-zero table
        f.truncate((2 << 20) + 4)
    t0 = time.monotonic()
    with pytest.raises(CorruptDataError, match="matches neither layout"):
        TieredIndexFile(str(p))
    assert time.monotonic() - t0 < 5
