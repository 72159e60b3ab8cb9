"""The body CRC (UtilAll.crc32: java.util.zip.CRC32, zlib's crc32) from the fastest maintained library installed.

zlib computes it a word at a time (2.3-4 GB/s on the development machine). ISA-L (``isal``, a dependency) and
zlib-ng (``zlib-ng``) fold it with carry-less multiplies, 256 bytes at a time on CPUs with VPCLMULQDQ: measured on
the development machine (same run, docs/benchmarks.md), called from C on 1.2 KiB bodies ISA-L 10.5 GB/s, zlib-ng
9.4, the scanner's own PCLMULQDQ folding 8.6, zlib 2.7; over 1 MiB buffers 13.5 / 10.4 / 8.3 / 2.3. Every one
gives zlib's bits (tests/test_fast_crc32.py on random and oracle bodies); zlib is the fallback when neither
library imports, and ``RMQINSPECT_CRC_ZLIB=1`` forces it (the compiled scanner reads the same variable).

``crc32(data, value=0)`` is zlib.crc32's signature; ``native_crc32()`` gives the compiled scanner the address of
the chosen library's C function (``store/scanner.py`` hands it over once at import).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable

ZLIB_ENV = "RMQINSPECT_CRC_ZLIB"
LIBRARY_ENV = "RMQINSPECT_CRC_LIBRARY"  # isal | zlib-ng | pclmul | zlib: one path, for measurements
LIBRARIES = ("isal", "zlib-ng", "zlib")  # in order of preference (fastest first, as measured)


def _forced_zlib() -> bool:
    return os.environ.get(ZLIB_ENV, "") not in ("", "0")


def _choose() -> tuple[str, Callable, object | None]:
    """(library name, its crc32, its extension module) of the first library that imports (``LIBRARY_ENV`` names
    one: the benchmarks compare them; "pclmul" leaves the compiled scanner its own folding, Python zlib)."""
    want = os.environ.get(LIBRARY_ENV, "")
    if not _forced_zlib() and want not in ("zlib", "pclmul"):
        if want in ("", "isal"):
            try:
                from isal import isal_zlib

                return "isal", isal_zlib.crc32, isal_zlib
            except ImportError:
                pass
        if want in ("", "zlib-ng"):
            try:
                from zlib_ng import zlib_ng

                return "zlib-ng", zlib_ng.crc32, zlib_ng
            except ImportError:
                pass
    return "zlib", zlib.crc32, None


_chosen: tuple[str, Callable, object | None] | None = None


def _get() -> tuple[str, Callable, object | None]:
    global _chosen
    if _chosen is None:
        _chosen = _choose()
    return _chosen


def crc32(data, value: int = 0) -> int:
    """zlib.crc32(data, value), computed by the chosen library."""
    return _get()[1](data, value)


def crc32_function() -> Callable:
    """The chosen library's crc32 itself (for hot loops: no extra call)."""
    return _get()[1]


def library() -> str:
    """Which library computes CRCs in Python: "isal", "zlib-ng" or "zlib"."""
    return _get()[0]


# the C function of each library, with zlib's convention (crc in and out as zlib.crc32 has them, 64-bit length)
_SYMBOLS = {"isal": "crc32_gzip_refl", "zlib-ng": "zng_crc32_z"}


def native_crc32() -> tuple[int, str] | None:
    """(address, library name) of the chosen library's C crc32 function, for the compiled scanner; None when
    the choice is zlib or the symbol cannot be found (the scanner then keeps its own)."""
    name, _, mod = _get()
    sym = _SYMBOLS.get(name)
    path = getattr(mod, "__file__", None)
    if sym is None or not path:
        return None
    try:
        import ctypes

        fn = getattr(ctypes.CDLL(path), sym)  # the extension is loaded already: the same handle, no new copy
        addr = ctypes.cast(fn, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    return (addr, name) if addr else None


__all__ = ["LIBRARIES", "LIBRARY_ENV", "ZLIB_ENV", "crc32", "crc32_function", "library", "native_crc32"]
