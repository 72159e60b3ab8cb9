"""The body CRC is zlib.crc32 - the broker's UtilAll.crc32 - for every input (lengths around every folding boundary,
every alignment, any running value, every oracle record) on every path: formats.crc's library (ISA-L or zlib-ng)
in Python, the compiled scanner (rmqinspect/store/_fastscan.c crc32_of) with that library's C function, and with
its own carry-less-multiply folding (x86-64 PCLMULQDQ, zlib for the tail and elsewhere)."""

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


@pytest.fixture(params=["library", "built-in"])
def scanner_path(request):
    """The scanner with the library's C function (when one is installed) and with its own folding."""
    from rmqinspect.formats.crc import native_crc32

    native = native_crc32()
    if request.param == "built-in":
        fast.set_crc32(0, "")
    elif native is None:
        pytest.skip("no CRC library installed: the scanner folds itself")
    yield request.param
    fast.set_crc32(*(native or (0, "")))


def test_every_length_and_alignment_near_the_folding_boundaries(scanner_path):
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


def test_patterns_that_stress_the_reduction(scanner_path):
    for pattern in (b"\x00", b"\xff", b"\x80", b"\x01", b"\xaa\x55"):
        for n in (64, 80, 127, 128, 129, 1 << 16, (1 << 20) + 13):
            d = (pattern * n)[:n]
            assert fast.crc32(d) == zlib.crc32(d), (pattern, n)


def test_the_zlib_path_can_be_forced_and_is_reported():
    code = "from rmqinspect.store import scanner; print(scanner.crc32_path())"
    forced = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "RMQINSPECT_CRC_ZLIB": "1"}).stdout.strip()
    assert forced == "zlib"
    assert scanner.crc32_path() in ("isal", "zlib-ng", "pclmul", "zlib")


# --- the libraries (formats.crc): ISA-L / zlib-ng in Python and, through set_crc32, inside the scanner -------------

def _library_functions():
    """(name, crc32) of every maintained library installed, and formats.crc's choice."""
    from rmqinspect.formats import crc

    out = [("formats.crc", crc.crc32)]
    try:
        from isal import isal_zlib

        out.append(("isal", isal_zlib.crc32))
    except ImportError:
        pass
    try:
        from zlib_ng import zlib_ng

        out.append(("zlib-ng", zlib_ng.crc32))
    except ImportError:
        pass
    return out


def _scanner_paths():
    """The compiled scanner's crc32 with each C function it can be given: (name, crc32), restored afterwards."""
    from rmqinspect.formats import crc

    paths = []
    for name in ("isal", "zlib-ng"):
        try:
            mod = __import__({"isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng"}[name], fromlist=["x"])
        except ImportError:
            continue
        import ctypes

        fn = getattr(ctypes.CDLL(mod.__file__), crc._SYMBOLS[name])
        paths.append((name, ctypes.cast(fn, ctypes.c_void_p).value))
    paths.append(("built-in", 0))
    return paths


def test_the_chosen_library_is_reported_and_is_installed():
    from rmqinspect.formats import crc

    assert crc.library() in crc.LIBRARIES
    assert scanner.crc32_path() in ("isal", "zlib-ng", "pclmul", "zlib")
    if crc.library() != "zlib":
        assert scanner.crc32_path() == crc.library()  # the scanner uses the same library


def test_every_library_and_scanner_path_gives_zlibs_bits_on_random_data():
    rnd = os.urandom(70_000)
    cases = [(rnd[o:o + n], c) for n in (*range(0, 130), 255, 256, 257, 1023, 1024, 1025, 4096, 65_537)
             for o in (0, 1, 7) for c in (0, 1, 0x7FFFFFFF, 0xFFFFFFFF)]
    for name, f in _library_functions():
        for d, c in cases:
            assert f(d, c) == zlib.crc32(d, c), (name, len(d), c)
    for name, addr in _scanner_paths():
        fast.set_crc32(addr, name)
        try:
            for d, c in cases:
                assert fast.crc32(d, c) == zlib.crc32(d, c), (name, len(d), c)
        finally:
            from rmqinspect.formats.crc import native_crc32

            native = native_crc32()
            fast.set_crc32(*(native or (0, "")))


def test_a_function_that_is_not_crc32_is_refused():
    import ctypes

    libc = ctypes.CDLL(None)
    with pytest.raises(ValueError, match="does not compute zlib's crc32"):
        fast.set_crc32(ctypes.cast(libc.labs, ctypes.c_void_p).value, "labs")
    assert scanner.crc32_path() != "labs"


def test_every_path_gives_the_stored_body_crc_of_every_oracle_record():
    """Every record of every oracle commit log: its body CRC (the broker's, stored in the record) and its whole-record
    CRC, by every library and every scanner path, equal zlib's."""
    from rmqinspect.store import Store
    from rmqinspect.store.walk.kinds import MESSAGE
    from support import ORACLE, oracle_scenarios

    scenarios = oracle_scenarios()
    if not scenarios:
        pytest.skip(f"oracle stores not found at {ORACLE}")
    funcs = _library_functions()
    paths = _scanner_paths()
    seen = intact = 0
    for sc in scenarios:
        st = Store.open(str(ORACLE / sc / "store"))
        try:
            for f in st.commitlog.files:
                buf = f.buffer
                for r in st.commitlog.scan(start=f.start, end=f.start + f.size, check_crc=False):
                    h = getattr(r, "header", None)
                    if r.kind != MESSAGE or h is None or r.file is not f:
                        continue
                    body = bytes(buf[r.body_pos:r.body_pos + h.body_length])
                    whole = bytes(buf[r.position:r.position + r.size])
                    want_body, want_whole = zlib.crc32(body), zlib.crc32(whole)
                    intact += (want_body & 0x7FFFFFFF) == h.body_crc
                    for name, fn in funcs:
                        assert fn(body) == want_body and fn(whole) == want_whole, (name, sc, r.offset)
                    for name, addr in paths:
                        fast.set_crc32(addr, name)
                        assert fast.crc32(body) == want_body and fast.crc32(whole) == want_whole, (name, sc)
                    seen += 1
        finally:
            from rmqinspect.formats.crc import native_crc32

            native = native_crc32()
            fast.set_crc32(*(native or (0, "")))
            st.close()
    assert seen > 1000 and intact > 0.99 * seen, (seen, intact)  # the broker's stored CRCs agree
