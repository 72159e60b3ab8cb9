"""The one switch between the compiled record scanner (``store/_fastscan.c``) and the pure-Python one.

Every part of rmqinspect asks ``compiled()`` for the extension module (None: use pure Python); nothing
else imports ``_fastscan``. Both scanners give the same results (tests/test_commitlog_walk.py proves it on
every oracle file and on corrupted files), the compiled one is faster.

``RMQINSPECT_PURE_PYTHON=1`` in the environment (read once, here) selects pure Python for the whole
process and for Spark executors that inherit it; ``use_compiled(False)`` does the same from code. When the
extension is missing (no C compiler at install time, or a Spark executor that received the package as a
zip built for another platform) a ``RuntimeWarning`` says so once, instead of silently running slower.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
import warnings
import zipimport

PURE_PYTHON_ENV = "RMQINSPECT_PURE_PYTHON"
_EXT = "_fastscan"


def _from_zip():
    """The extension shipped inside a zip on sys.path (Spark ``addPyFile``): zipimport cannot load shared
    libraries, so the file is extracted to a private temporary directory and loaded from there."""
    loader = getattr(sys.modules[__package__], "__loader__", None)
    if not isinstance(loader, zipimport.zipimporter):
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        member = "/".join(__package__.split(".") + [_EXT + suffix])
        try:
            data = loader.get_data(os.path.join(loader.archive, member))
        except OSError:
            continue
        import tempfile  # here only: it imports shutil, random, bz2 and lzma (~5 ms of every command's start)

        path = os.path.join(tempfile.mkdtemp(prefix="rmqinspect-ext-"), _EXT + suffix)
        with open(path, "wb") as fh:
            fh.write(data)
        name = f"{__package__}.{_EXT}"
        ext_loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=ext_loader)
        if spec is None:
            return None
        mod = importlib.util.module_from_spec(spec)
        ext_loader.exec_module(mod)
        sys.modules[name] = mod
        return mod
    return None


def _load():
    try:
        # the submodule by its full name: `from . import` would read this package's namespace (an import cycle)
        import rmqinspect.store._fastscan as _fastscan

        return _fastscan, ""
    except ImportError as e:
        why = str(e)
    try:
        mod = _from_zip()
    except (ImportError, OSError) as e:
        return None, f"{why}; the copy shipped in the package zip does not load here: {e}"
    if mod is not None:
        return mod, ""
    return None, why


def _fast_crc(mod) -> None:
    """Hand the fastest installed CRC library's C function to the compiled scanner (formats.crc); the scanner
    keeps its own folding when there is none, or when the library's function fails its check."""
    if mod is None or not hasattr(mod, "set_crc32"):
        return
    from ..formats.crc import native_crc32

    native = native_crc32()
    if native is not None:
        try:
            mod.set_crc32(*native)
        except ValueError as e:
            warnings.warn(f"rmqinspect: {e}; the scanner computes CRCs itself", RuntimeWarning, stacklevel=2)


_module, _missing_why = _load()
_fast_crc(_module)
_enabled = _module is not None and os.environ.get(PURE_PYTHON_ENV, "") not in ("1", "true", "yes")
if _module is None and os.environ.get(PURE_PYTHON_ENV, "") not in ("1", "true", "yes"):
    warnings.warn(f"rmqinspect: compiled scanner unavailable ({_missing_why}); using the pure-Python scanner "
                  f"(same results, slower). Set {PURE_PYTHON_ENV}=1 to choose it explicitly.", RuntimeWarning,
                  stacklevel=2)


def compiled():
    """The compiled extension module when it is built and selected, else None (use pure Python)."""
    return _module if _enabled else None


def compiled_built() -> bool:
    """Whether the extension could be loaded at all (whatever the switch says)."""
    return _module is not None


def use_compiled(on: bool) -> None:
    """Select the scanner for the whole process. ``True`` fails when the extension is not built."""
    global _enabled
    if on and _module is None:
        raise RuntimeError(f"compiled scanner not built: {_missing_why}")
    _enabled = bool(on)


@contextlib.contextmanager
def selected(on: bool):
    """``use_compiled(on)`` for the duration of a ``with`` block (tests and benchmarks compare both)."""
    global _enabled
    prev = _enabled
    use_compiled(on)
    try:
        yield
    finally:
        _enabled = prev


def describe() -> str:
    """Which scanner runs, for logs and reports."""
    if _enabled:
        return "compiled"
    if _module is None:
        return f"pure-python (extension not available: {_missing_why})"
    return "pure-python (selected)"


def crc32_path() -> str:
    """How body CRCs are computed: by the compiled scanner, "isal" or "zlib-ng" (the library's C function,
    formats.crc), "pclmul" (its own carry-less multiply folding, x86-64) or "zlib" (``RMQINSPECT_CRC_ZLIB=1``,
    another CPU); by the pure-Python scanner, formats.crc's library."""
    m = compiled()
    if m is not None and hasattr(m, "crc32_path"):
        return m.crc32_path()
    from ..formats.crc import library

    return library()


__all__ = ["PURE_PYTHON_ENV", "compiled", "compiled_built", "use_compiled", "selected", "describe", "crc32_path"]
