"""Decompression is bounded: a valid record (correct BODYCRC) whose 60 KB zstd body expands to
1.9 GB made decode-commitlog peak at 1,912 MiB and salvage at 1,080 MiB; zlib 60 KB -> 60 MB reached 816 MiB.
Every command now decompresses through formats.compression.decompress_body with a cap and says the body was
cut. Peak RSS is measured on a fresh child process (resource.getrusage of its own children only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import lz4.frame
import pytest
import zstandard

from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.constants import CompressionType, SysFlag

BOMB_BYTES = 1900 * (1 << 20)  # 1.9 GiB of zeros
CODEC_BITS = {CompressionType.LZ4: 0x100, CompressionType.ZSTD: 0x200, CompressionType.ZLIB: 0x300}


def _zstd_bomb() -> bytes:
    c = zstandard.ZstdCompressor(level=1).compressobj()
    zeros = bytes(8 << 20)
    parts = [c.compress(zeros) for _ in range(BOMB_BYTES // len(zeros))]
    parts.append(c.flush())
    return b"".join(parts)


def _zlib_bomb(n: int) -> bytes:
    c = zlib.compressobj(9)
    zeros = bytes(1 << 20)
    return b"".join([c.compress(zeros) for _ in range(n >> 20)] + [c.flush()])


def _store(root, body: bytes, codec: CompressionType):
    cl = root / "store" / "commitlog"
    cl.mkdir(parents=True)
    with CommitLogWriter(str(cl), file_size=max(1 << 20, 2 * len(body))) as w:
        w.append(MessageSpec("T", 0, body, encode_properties({"TAGS": "a"}),
                             sys_flag=SysFlag.COMPRESSED | CODEC_BITS[codec], store_timestamp=1))
        w.append(MessageSpec("T", 0, b"tail", encode_properties({"TAGS": "b"}), store_timestamp=2))
    return root / "store"


def _run_measured(argv, stdout_path):
    """Run ``rmqinspect argv`` in a fresh interpreter that reports its child's peak RSS (MiB), under a 2 GiB
    address-space limit like the fuzzer's."""
    code = (
        "import resource, subprocess, sys\n"
        "def lim():\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "with open(sys.argv[1], 'wb') as out:\n"
        "    r = subprocess.run([sys.executable, '-m', 'rmqinspect', *sys.argv[2:]], stdout=out,\n"
        "                       stderr=subprocess.PIPE, preexec_fn=lim)\n"
        "sys.stderr.write(r.stderr.decode(errors='replace'))\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(stdout_path), *argv], capture_output=True, text=True,
                       timeout=300)
    rc, peak = p.stdout.split()
    return int(rc), int(peak), p.stderr


@pytest.fixture(scope="module")
def zstd_bomb():
    body = _zstd_bomb()
    assert len(body) < 200_000  # a small record: the broker accepted it without complaint
    return body


def test_decode_commitlog_zstd_bomb_rss_bounded(zstd_bomb, tmp_path):
    st = _store(tmp_path, zstd_bomb, CompressionType.ZSTD)
    out = tmp_path / "out.json"
    rc, peak, err = _run_measured(["decode-commitlog", str(st), "--offset", "0", "--body", "text",
                                   "--format", "json"], out)
    assert rc == 0, err
    assert peak < 300, f"peak RSS {peak} MiB"
    rec = json.loads(out.read_text())[0]
    assert rec["body_truncated"] is True and "cut at" in rec["body_note"]
    assert rec["body_decompressed_size"] == 16 << 20  # formats.compression.DEFAULT_BODY_LIMIT
    assert rec["compression"] == "ZSTD"


def test_salvage_export_zstd_bomb_rss_bounded(zstd_bomb, tmp_path):
    """The bomb lies past the truncation point (the record before it has a wrong BODYCRC), so salvage finds it
    intact and exports it with its body."""
    cl = tmp_path / "store" / "commitlog"
    cl.mkdir(parents=True)
    with CommitLogWriter(str(cl), file_size=1 << 20) as w:
        first = w.append(MessageSpec("T", 0, b"first", encode_properties({"TAGS": "a"}), store_timestamp=1))
        w.append(MessageSpec("T", 0, zstd_bomb, encode_properties({"TAGS": "a"}),
                             sys_flag=SysFlag.COMPRESSED | CODEC_BITS[CompressionType.ZSTD], store_timestamp=2))
        w.append(MessageSpec("T", 0, b"tail", encode_properties({"TAGS": "b"}), store_timestamp=3))
    f = sorted(cl.iterdir())[0]
    with open(f, "r+b") as fh:  # BODYCRC of the first record (offset 8) wrong: recovery stops there
        fh.seek(first.physical_offset + 8)
        b = fh.read(1)
        fh.seek(first.physical_offset + 8)
        fh.write(bytes([b[0] ^ 0xFF]))
    out = tmp_path / "salvaged.ndjson"
    rc, peak, err = _run_measured(["salvage", str(tmp_path / "store"), "--out", str(out), "--body", "text",
                                   "--format", "json"], tmp_path / "doc.json")
    assert rc in (0, 1), err
    assert peak < 300, f"peak RSS {peak} MiB"
    json.loads((tmp_path / "doc.json").read_text())
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    bomb = [r for r in recs if r.get("compression") == "ZSTD"]
    assert bomb and bomb[0]["body_truncated"] is True, [(r.get("compression"), r.get("body_size")) for r in recs]


def test_zlib_bomb_decoded_with_a_cap(tmp_path):
    st = _store(tmp_path, _zlib_bomb(60 << 20), CompressionType.ZLIB)
    out = tmp_path / "out.ndjson"
    rc, peak, err = _run_measured(["decode-commitlog", str(st), "--offset", "0", "--body", "hex", "--format",
                                   "ndjson", "--max-body-bytes", str(1 << 20)], out)
    assert rc == 0, err
    assert peak < 300, f"peak RSS {peak} MiB"
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["body_truncated"] is True and len(rec["body"]) == 2 * (1 << 20)


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("n", [0, 1, 1000, 70_000])
@pytest.mark.parametrize("limit", [0, 1, 999, 1000, 1001, 1 << 20])
def test_decompress_body_cuts_exactly(codec, n, limit):
    from rmqinspect.formats.compression import decompress_body

    raw = os.urandom(n // 2) + b"z" * (n - n // 2)
    comp = {CompressionType.ZLIB: zlib.compress, CompressionType.ZSTD: zstandard.ZstdCompressor().compress,
            CompressionType.LZ4: lz4.frame.compress}[codec](raw)
    r = decompress_body(codec, comp, limit)
    assert r.data == raw[:limit] and r.truncated == (n > limit)


@pytest.mark.parametrize("codec,bad", [(CompressionType.ZLIB, zlib.compress(b"x" * 999)[:-3]),
                                       (CompressionType.ZSTD, b"garbage"),
                                       (CompressionType.LZ4, lz4.frame.compress(b"x" * 999)[:-5])])
def test_broken_bodies_are_a_value_error(codec, bad):
    from rmqinspect.formats.compression import decompress_body

    with pytest.raises(ValueError, match=codec.name):
        decompress_body(codec, bad)


def test_unknown_codec_bits_are_reported_not_raised(tmp_path):
    """SYSFLAG compression bits 0x700 -> `ValueError: 7 is not a valid CompressionType` in decode-commitlog."""
    cl = tmp_path / "store" / "commitlog"
    cl.mkdir(parents=True)
    with CommitLogWriter(str(cl), file_size=1 << 16) as w:
        w.append(MessageSpec("T", 0, b"abc", encode_properties({"TAGS": "a"}), sys_flag=SysFlag.COMPRESSED | 0x700))
    p = subprocess.run([sys.executable, "-m", "rmqinspect", "decode-commitlog", str(tmp_path / "store"), "--offset",
                        "0", "--body", "text", "--format", "json"], capture_output=True, text=True)
    assert "Traceback" not in p.stderr
    rec = json.loads(p.stdout)[0]
    assert rec["compression"] == "UNKNOWN7" and "body_error" in rec
