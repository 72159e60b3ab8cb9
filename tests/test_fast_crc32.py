"""The compiled scanner's body CRC (rmqinspect/store/_fastscan.c crc32_of: carry-less-multiply folding on x86-64
with PCLMULQDQ, zlib for the tail and elsewhere) is zlib.crc32 - the broker's UtilAll.crc32 - for every input:
lengths around every folding boundary, every alignment, any running value."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqinspect.store import scanner

fast = scanner.compiled()
pytestmark = pytest.mark.skipif(fast is None, reason="the compiled scanner is not built")


def test_every_length_and_alignment_near_the_folding_boundaries():
    data = os.urandom(5000 + 16)
    for n in [*range(0, 300), *range(1000, 1040), 4096, 4097, 4999]:
        for off in range(16):
            d = data[off:off + n]
            for crc in (0, 1, 0x7FFFFFFF, 0xFFFFFFFF):
                assert fast.crc32(d, crc) == zlib.crc32(d, crc), (n, off, crc)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=20000), st.integers(0, 0xFFFFFFFF))
def test_any_input(data, crc):
    assert fast.crc32(data, crc) == zlib.crc32(data, crc)
    assert fast.crc32(memoryview(data)[1:], crc) == zlib.crc32(data[1:], crc)


def test_patterns_that_stress_the_reduction():
    for pattern in (b"\x00", b"\xff", b"\x80", b"\x01", b"\xaa\x55"):
        for n in (64, 80, 127, 128, 129, 1 << 16, (1 << 20) + 13):
            d = (pattern * n)[:n]
            assert fast.crc32(d) == zlib.crc32(d), (pattern, n)


def test_the_zlib_path_can_be_forced_and_is_reported():
    code = "from rmqinspect.store import scanner; print(scanner.crc32_path())"
    forced = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "RMQINSPECT_CRC_ZLIB": "1"}).stdout.strip()
    assert forced == "zlib"
    assert scanner.crc32_path() in ("pclmul", "zlib")
