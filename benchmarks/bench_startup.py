"""Benchmark: start-up of the cheap command paths (issue 13), against `python -c pass` in the same run.

    python benchmarks/bench_startup.py [--repeat 15] [--store tests/fixtures/sample-store]

Each case is a fresh process (what a script looping over keys pays per call), timed wall-clock; the figure is the
median of --repeat runs, and the baseline is the interpreter's own start (`python -c pass`) measured in the same
run, interleaved with the cases. Target: every case under 0.15 s.

Cases: `--help`, `--version`, `msgid ID` (decoding only, no store), `index-lookup STORE --topic T --key K`
(a single-key look-up with one hit on the sample store, its fate after restart included), as a table and as JSON;
with --every-help also `CMD --help` for every command (what a person types before the first run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S = 0.15


def cases(store: str, other: str | None, every_help: bool = False) -> dict[str, tuple[list[str], str | None]]:
    """name -> (argv, PYTHONPATH): this checkout, and with --compare the same commands from another one."""
    cli = [sys.executable, "-m", "rmqinspect"]
    out: dict[str, tuple[list[str], str | None]] = {"python -c pass (baseline)": ([sys.executable, "-c", "pass"],
                                                                                  None)}
    for tag, path in (("", REPO), (" [compare]", other)):
        if path is None:
            continue
        out.update({
            "--help" + tag: (cli + ["--help"], path),
            "--version" + tag: (cli + ["--version"], path),
            "msgid (decode)" + tag: (cli + ["msgid", "C0A80A0B3E8F1B6D3586F1F8665C0005"], path),
            "index-lookup (one key)" + tag: (cli + ["index-lookup", os.path.join(REPO, store), "--topic", "OrderTopic",
                                                    "--key", "ord-14"], path),
            "index-lookup (one key, json)" + tag: (cli + ["index-lookup", os.path.join(REPO, store), "--topic",
                                                          "OrderTopic", "--key", "ord-14", "--format", "json"], path),
        })
        if every_help:
            sys.path.insert(0, REPO)
            from rmqinspect.cli.main import COMMANDS

            out.update({f"{name} --help{tag}": (cli + [name, "--help"], path) for name in sorted(COMMANDS)})
    return out


def run_once(argv: list[str], path: str | None) -> float:
    env = dict(os.environ)
    # an installed package has its .pyc files; a sandbox that sets PYTHONDONTWRITEBYTECODE would make every run
    # compile every module from source (~40-80 ms here) and measure that instead of the start-up
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if path is not None:
        env["PYTHONPATH"] = path  # ahead of the installed (editable) package
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=path or REPO, env=env)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--store", default="tests/fixtures/sample-store")
    ap.add_argument("--compare", default=None, metavar="CHECKOUT",
                    help="Another checkout of rmqinspect (e.g. the commit before a change) run the same way.")
    ap.add_argument("--every-help", action="store_true", help="Also every command's --help.")
    args = ap.parse_args()
    todo = cases(args.store, args.compare, args.every_help)
    times: dict[str, list[float]] = {name: [] for name in todo}
    for argv, path in todo.values():  # warm the page cache and the .pyc files
        run_once(argv, path)
    for _ in range(args.repeat):  # interleaved: a busy moment hits every case alike
        for name, (argv, path) in todo.items():
            times[name].append(run_once(argv, path))
    base = statistics.median(times["python -c pass (baseline)"])
    print(f"{'case':44} {'median s':>9} {'min s':>7} {'- baseline s':>13}  target < {TARGET_S} s")
    for name, ts in times.items():
        med = statistics.median(ts)
        verdict = "" if name.startswith("python") else ("ok" if med < TARGET_S else "OVER")
        print(f"{name:44} {med:9.3f} {min(ts):7.3f} {med - base:13.3f}  {verdict}")


if __name__ == "__main__":
    main()
