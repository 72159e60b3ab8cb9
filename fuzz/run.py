"""Coverage-guided fuzzing of the parser entry points with atheris (libFuzzer), one harness per target.

    python fuzz/run.py --list
    python fuzz/run.py record --runs 1000000            # one harness, N cases
    python fuzz/run.py all --time 600 --out /tmp/fz     # every harness, 10 minutes each

Each harness is ``fuzz.targets.TARGETS[name]`` wrapped by ``run_one`` (a typed RmqInspectError is the contract;
any other exception, a hang past --timeout or RSS past --rss-mb is a crash libFuzzer saves under OUT/NAME/).
The corpus starts from ``seed_corpus(name)`` (sample store, writer-made structures) in OUT/NAME/corpus and grows
there. The summary line per harness gives the cases run (libFuzzer's ``#N DONE``) and the crashes saved.
Nothing is written outside OUT (default: a new temp directory) and the scratch directory of fuzz/targets.py.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(name: str, libfuzzer_args: list[str]) -> None:
    import atheris

    sys.path.insert(0, str(ROOT))
    import importlib
    import pkgutil

    with atheris.instrument_imports(include=["rmqinspect"]):
        # every parser module is imported here, inside the instrumentation (the targets import lazily)
        for pkg in ("rmqinspect.formats", "rmqinspect.store"):
            for m in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
                if not m.name.startswith("_"):
                    importlib.import_module(f"{pkg}.{m.name}")
        from fuzz.targets import run_one

    def one_input(data: bytes) -> None:
        run_one(name, data)

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input)
    atheris.Fuzz()


# atheris 3.0's native comparison hook keeps ~35 bytes for every `==`/`<` on a numpy array in instrumented code
# (found with tracemalloc: the growth is all at the readers' mask comparisons, none without instrumentation),
# so a long run's RSS grows ~2.4 KB per case until libFuzzer reports an "oom" that no single input causes.
# Runs are therefore cut into chunks of this many cases, each a fresh process on the same (growing) corpus.
CHUNK = 200_000


def run_harness(name: str, out: Path, runs: int | None, seconds: int | None, timeout: int, rss_mb: int,
                chunk: int = CHUNK) -> dict:
    import time

    sys.path.insert(0, str(ROOT))
    from fuzz.targets import seed_corpus

    d = out / name
    corpus = d / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(seed_corpus(name)):
        (corpus / f"seed-{i}").write_bytes(s)
    log = d / "fuzz.log"
    log.write_text("")
    total, rc, t0 = 0, 0, time.monotonic()
    while True:
        left_runs = None if runs is None else runs - total
        left_time = None if seconds is None else int(seconds - (time.monotonic() - t0))
        if (left_runs is not None and left_runs <= 0) or (left_time is not None and left_time <= 0):
            break
        args = [str(corpus), f"-timeout={timeout}", f"-rss_limit_mb={rss_mb}", f"-artifact_prefix={d}/",
                "-print_final_stats=1", "-max_len=70000", f"-runs={min(chunk, left_runs or chunk)}"]
        if left_time is not None:
            args.append(f"-max_total_time={left_time}")
        part = d / "fuzz.part.log"
        with open(part, "w") as fh:
            rc = subprocess.call([sys.executable, __file__, "--child", name, "--", *args], stdout=fh, stderr=fh)
        text = part.read_text(errors="replace")
        with open(log, "a") as fh:
            fh.write(text)
        execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", text)
        done = re.findall(r"#(\d+)\s+DONE", text) or re.findall(r"#(\d+)\s", text)
        n = int(execs[-1]) if execs else int(done[-1]) if done else 0
        total += n
        if rc != 0 or n == 0:
            break
    crashes = sorted(p.name for p in d.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-", "leak-")))
    return {"harness": name, "cases": total, "exit": rc, "crashes": crashes, "log": str(log)}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        name = argv[1]
        child(name, argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return 0
    sys.path.insert(0, str(ROOT))
    from fuzz.targets import TARGETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("harness", nargs="?", default="all", help="a target name or 'all'")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--runs", type=int, default=None, help="cases per harness")
    ap.add_argument("--time", type=int, default=None, help="seconds per harness")
    ap.add_argument("--timeout", type=int, default=10, help="seconds for one input before it counts as a hang")
    ap.add_argument("--rss-mb", type=int, default=1024, help="RSS beyond which an input counts as a crash")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(TARGETS))
        return 0
    if a.runs is None and a.time is None:
        a.runs = 100_000
    out = Path(a.out or tempfile.mkdtemp(prefix="rmq-atheris-"))
    names = list(TARGETS) if a.harness == "all" else [a.harness]
    bad = 0
    for name in names:
        r = run_harness(name, out, a.runs, a.time, a.timeout, a.rss_mb)
        print(f"{r['harness']}: {r['cases']} cases, exit {r['exit']}, crashes {r['crashes'] or 'none'} ({r['log']})",
              flush=True)
        bad += bool(r["crashes"]) or r["exit"] not in (0,)
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
