"""Benchmark: which crc32 is fastest here - zlib, ISA-L (``isal``), zlib-ng (``zlib-ng``), the compiled scanner's own
PCLMULQDQ folding - in Python, inside the compiled scanner, and end to end in ``verify --checks crc,structure``.

    python benchmarks/bench_crc.py                          # 256 MiB of random bytes
    python benchmarks/bench_crc.py --store /tmp/rs1/store   # and verify on that store with every path

Every figure is the best of ``--repeat`` runs, in GB/s, with ``vs zlib`` = that path's speed / zlib.crc32's in the
same run. "C, 1.2 KiB bodies" calls the path from C once per body (``crc32_many``: no Python in between), as the
scanner does for every record. The end-to-end rows run ``rmqinspect verify`` in a fresh process with
``RMQINSPECT_CRC_LIBRARY`` (or ``RMQINSPECT_CRC_ZLIB=1``) choosing the path.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rmqinspect.formats.crc import _SYMBOLS  # noqa: E402
from rmqinspect.store import scanner  # noqa: E402


def best(fn, repeat: int) -> float:
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--store", default=None)
    a = ap.parse_args()
    data = os.urandom(a.mib << 20)
    fast = scanner.compiled()
    libs: dict[str, tuple] = {"zlib": (zlib.crc32, None)}
    try:
        from isal import isal_zlib

        libs["isal"] = (isal_zlib.crc32, isal_zlib)
    except ImportError:
        pass
    try:
        from zlib_ng import zlib_ng

        libs["zlib-ng"] = (zlib_ng.crc32, zlib_ng)
    except ImportError:
        pass
    print(f"load {os.getloadavg()}")
    print(f"{'path':34s} {'GB/s':>7s} {'vs zlib':>8s}")
    base = best(lambda: zlib.crc32(data), a.repeat)
    mv = memoryview(data)
    bodies = [mv[i:i + 1228] for i in range(0, min(len(data), 64 << 20), 1300)]
    nbytes = sum(len(b) for b in bodies)
    base_b = best(lambda: [zlib.crc32(b) for b in bodies], a.repeat)
    for name, (fn, _) in libs.items():
        t = best(lambda fn=fn: fn(data), a.repeat)
        print(f"{'Python ' + name + ', ' + str(a.mib) + ' MiB':34s} {len(data) / t / 1e9:7.2f} {base / t:8.2f}")
        t = best(lambda fn=fn: [fn(b) for b in bodies], a.repeat)
        print(f"{'Python ' + name + ', 1.2 KiB bodies':34s} {nbytes / t / 1e9:7.2f} {base_b / t:8.2f}")
    if fast is not None:
        pos = np.arange(0, min(len(data), 64 << 20) - 1228, 1300, dtype=np.int64)
        ln = np.full(len(pos), 1228, dtype=np.int64)
        paths = [("pclmul (built-in)", 0)]
        for name, (_, mod) in libs.items():
            if mod is not None:
                fnp = getattr(ctypes.CDLL(mod.__file__), _SYMBOLS[name])
                paths.append((name, ctypes.cast(fnp, ctypes.c_void_p).value))
        results = {}
        for name, addr in paths:
            fast.set_crc32(addr, name if addr else "")
            t_big = best(lambda: fast.crc32(data), a.repeat)
            t_many = best(lambda: fast.crc32_many(data, pos, ln), a.repeat)
            results[name] = (len(data) / t_big / 1e9, len(pos) * 1228 / t_many / 1e9)
        from rmqinspect.formats.crc import native_crc32

        native = native_crc32()
        fast.set_crc32(*(native or (0, "")))
        zl = None
        for name, (big, many) in results.items():
            print(f"{'C ' + name + ', ' + str(a.mib) + ' MiB':34s} {big:7.2f} {big / (len(data) / base / 1e9):8.2f}")
            print(f"{'C ' + name + ', 1.2 KiB bodies':34s} {many:7.2f}")
            zl = zl or many
    if a.store:
        envs = [("isal", {"RMQINSPECT_CRC_LIBRARY": "isal"}), ("zlib-ng", {"RMQINSPECT_CRC_LIBRARY": "zlib-ng"}),
                ("pclmul (built-in)", {"RMQINSPECT_CRC_LIBRARY": "pclmul"}), ("zlib", {"RMQINSPECT_CRC_ZLIB": "1"})]
        for jobs in (1, 2):
            for name, env in envs:
                def run(env=env, jobs=jobs):
                    subprocess.run([sys.executable, "-m", "rmqinspect", "verify", a.store, "--checks", "crc,structure",
                                    "--jobs", str(jobs), "--format", "json"], stdout=subprocess.DEVNULL,
                                   env={**os.environ, **env}, check=False)
                t = best(run, 3)
                print(f"{'verify crc,structure jobs ' + str(jobs) + ' ' + name:34s} {t:7.3f} s")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
