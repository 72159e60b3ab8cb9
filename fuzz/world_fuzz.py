"""World-event fuzzer (issue 29): the world around the bytes, not the bytes.

Each case is reproducible from (seed, case number) and runs one real ``rmqinspect`` process (its own session)
under one event:

- ``lock``: a process holds the store's lock the way a running broker's JVM does (F_SETLK, F_WRLCK); without
  --live the command must refuse in one sentence (exit 6) and leave the lock held; with --live it must answer;
- ``signal``: SIGINT or SIGTERM at a random moment of a long command (--jobs 1 or 2);
- ``nospace``: --out under a file-size limit (RLIMIT_FSIZE) or on a small tmpfs (ENOSPC, when we may mount one);
- ``race``: --live while a writer appends to and truncates commitlog files;
- ``pipe``: the reader of stdout goes away after a few bytes (``| head``).

Checks on every case: no death by a signal (SIGBUS, SIGXFSZ, SIGPIPE ...), no traceback, an exit code from the
documented table (0-6, 130, 143), JSON / NDJSON on stdout valid UTF-8 and complete, no worker process left in the
command's process group, no temporary name and no partial output left beside --out, the store unchanged (file
sizes and times each case, full hashes at the end). The event's own promise is checked too (exit 6 and the lock
still held; exit 5 and one line naming the output; 130/143 with the line; a quiet broken pipe).

    python fuzz/world_fuzz.py --cases 2000 --seed 1 --work /tmp/world --findings /tmp/world/findings.md
    python fuzz/world_fuzz.py --replay 1:417 --work /tmp/world
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.world import (  # noqa: E402
    LockHolder,
    cli_process,
    error_lines,
    group_gone,
    json_problem,
    lock_owner,
    make_store,
)

EVENTS = ("lock", "signal", "nospace", "race", "pipe")
DOCUMENTED = set(range(0, 7)) | {130, 143}
REFUSAL = b"a running broker holds this store; copy it first, or pass --live"

# commands by what they need; {s} the store, {o} an output path
READERS = [["summary", "{s}"], ["verify", "{s}"], ["decode-commitlog", "{s}"], ["cq", "{s}", "--all"],
           ["salvage", "{s}"], ["rebuild", "{s}", "--dry-run"], ["recover", "{s}", "--dry-run"],
           ["fate", "{s}", "--offset", "0"], ["gc", "{s}", "--dry-run"], ["store-info", "{s}"],
           ["index-lookup", "{s}", "--topic", "OrderTopic", "--key", "ord-1"], ["consumer-lag", "{s}"]]
WITH_JOBS = {"summary", "verify", "salvage", "rebuild", "recover", "export"}
WITH_FORMAT = {"summary", "verify", "decode-commitlog", "cq", "salvage", "rebuild", "recover", "fate", "gc",
               "index-lookup", "export", "consumer-lag", "store-info"}
LONG = [["verify", "{s}"], ["rebuild", "{s}", "--out", "{o}"], ["export", "{s}", "--out", "{o}"],
        ["salvage", "{s}", "--out", "{o}.ndjson"], ["report", "{s}", "--out", "{o}.html"],
        ["decode-commitlog", "{s}"], ["summary", "{s}"]]
WRITERS = [["rebuild", "{s}", "--out", "{o}"], ["rebuild", "{s}", "--out", "{o}", "--what", "index"],
           ["export", "{s}", "--out", "{o}"], ["salvage", "{damaged}", "--out", "{o}.ndjson"],
           ["report", "{s}", "--out", "{o}.html"], ["compact-index", "{tiered}", "--out", "{o}"]]


class World:
    """The stores (made once under ``work``) and the small file systems the cases use."""

    def __init__(self, work: Path, light: bool = False):
        """``light``: one small store stands for all three sizes and no tmpfs is mounted (the bounded CI run)."""
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.stores: dict[str, Path] = {}
        sizes = (("small", 1500, 1 << 16), ("medium", 6000, 1 << 18), ("big", 30000, 1 << 21))
        for name, n, size in sizes[:1] if light else sizes:
            p = work / "stores" / name
            if not (p / "checkpoint").exists():
                shutil.rmtree(p, ignore_errors=True)
                make_store(p, messages=n, file_size=size)
            self.stores[name] = p
        self.damaged = work / "stores" / "damaged"
        if not (self.damaged / "checkpoint").exists():
            from support.recover_fixtures import build_store

            shutil.rmtree(self.damaged, ignore_errors=True)
            fx = build_store(self.damaged)
            second = [r for r in fx.records if fx.file_of(r.offset) == fx.file_names()[1]]
            fx.patch(second[3].offset + 91, b"\xff\xfe")
            fx.set_abort()
            fx.write_checkpoint(fx.records[0].store_ts + 3000)
        self.tiered = work / "stores" / "tiered"
        if not (self.tiered / "tiered_index_file").exists():
            from rmqinspect.fixtures.tiered_index import TieredIndexWriter

            (self.tiered / "commitlog").mkdir(parents=True, exist_ok=True)
            for k, begin in enumerate((1_700_000_000_000, 1_700_000_100_000)):
                with TieredIndexWriter(str(self.tiered / "tiered_index_file"), begin, 64, 2000) as w:
                    for i in range(1500):
                        w.put_key("TopicTest", 1, i % 4, {f"k{k}-{i}"}, i * 100, 100, begin + i)
        if light:
            self.stores["medium"] = self.stores["big"] = self.stores["small"]
        self.tmpfs: list[Path] = []
        if os.geteuid() == 0 and not light:
            for size in ("64k", "1m"):
                mnt = work / f"tmpfs-{size}"
                mnt.mkdir(exist_ok=True)
                if subprocess.run(["mountpoint", "-q", str(mnt)]).returncode == 0 or subprocess.run(
                        ["mount", "-t", "tmpfs", "-o", f"size={size}", "rmqinspect-world", str(mnt)],
                        capture_output=True).returncode == 0:
                    self.tmpfs.append(mnt)
        self.fingerprints = {k: self.fingerprint(p) for k, p in self.all_stores().items()}
        self.hashes = {k: self.hash_tree(p) for k, p in self.all_stores().items()}

    def all_stores(self) -> dict[str, Path]:
        return {**{k: p for k, p in self.stores.items() if p.name == k}, "damaged": self.damaged,
                "tiered": self.tiered}

    @staticmethod
    def fingerprint(root: Path) -> list[tuple[str, int, int]]:
        out = []
        for d, _, names in os.walk(root):
            for n in names:
                st = os.stat(os.path.join(d, n))
                out.append((os.path.relpath(os.path.join(d, n), root), st.st_size, st.st_mtime_ns))
        return sorted(out)

    @staticmethod
    def hash_tree(root: Path) -> dict[str, str]:
        out = {}
        for d, _, names in os.walk(root):
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    out[os.path.relpath(os.path.join(d, n), root)] = hashlib.sha256(f.read()).hexdigest()
        return out

    def close(self) -> None:
        for mnt in self.tmpfs:
            subprocess.run(["umount", str(mnt)], capture_output=True)


def _argv(rng: random.Random, template: list[str], s: Path, o: Path, world: World,
          fmt_choices=("table", "json", "ndjson")) -> tuple[list[str], str]:
    args = [a.format(s=s, o=o, damaged=world.damaged, tiered=world.tiered) for a in template]
    fmt = "table"
    if args[0] in WITH_FORMAT:
        fmt = rng.choice(fmt_choices)
        args += ["--format", fmt]
    if args[0] in WITH_JOBS:
        args += ["--jobs", str(rng.choice((1, 2)))]
    return args, fmt


def _leftovers(parent: Path, finished: bool, out_names: set[str]) -> list[str]:
    left = sorted(os.listdir(parent))
    allowed = out_names if finished else set()
    return [n for n in left if n not in allowed]


def run_case(world: World, seed: int, case: int, event: str | None = None) -> dict:
    rng = random.Random(f"{seed}:{case}")
    event = event or rng.choice(EVENTS)
    case_dir = world.work / "cases" / f"{seed}-{case}"
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    findings: list[str] = []
    res: dict = {"seed": seed, "case": case, "event": event, "findings": findings}
    try:
        globals()[f"_case_{event}"](world, rng, case_dir, res)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)
    for k, p in world.all_stores().items():
        if world.fingerprint(p) != world.fingerprints[k]:
            findings.append(f"store {k} changed")
            world.fingerprints[k] = world.fingerprint(p)
    return res


def _common(res: dict, rc: int, out: bytes, err: bytes, fmt: str, pgid: int, allow_signal: int | None = None) -> None:
    f = res["findings"]
    res.update(rc=rc, stderr=err.decode("utf-8", "replace")[-400:])
    if rc < 0 and rc != -(allow_signal or 0):
        f.append(f"died of {signal.Signals(-rc).name}")
    elif rc >= 0 and rc not in DOCUMENTED:
        f.append(f"exit code {rc} not documented")
    if b"Traceback" in err or b"Exception ignored" in err:
        f.append("traceback on stderr")
    if fmt in ("json", "ndjson") and (p := json_problem(fmt, out)):
        f.append(f"invalid {fmt}: {p}")
    if not group_gone(pgid):
        f.append("process left in the group")
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _case_lock(world: World, rng, case_dir: Path, res: dict) -> None:
    s = case_dir / "store"
    shutil.copytree(world.stores[rng.choice(("small", "medium"))], s)
    (s / "lock").touch()
    live = rng.random() < 0.4
    args, fmt = _argv(rng, rng.choice(READERS), s, case_dir / "out", world)
    if live:
        args.append("--live")
    res["argv"] = args
    with LockHolder(s) as holder:
        p = cli_process(args)
        out, err = p.communicate(timeout=300)
        _common(res, p.returncode, out, err, fmt, p.pid)
        if lock_owner(s / "lock") != holder.proc.pid:
            res["findings"].append("the broker's lock was disturbed")
    if not live:
        lines = error_lines(err)
        if p.returncode != 6 or len(lines) != 1 or REFUSAL.decode() not in lines[0] or out:
            res["findings"].append(f"lock not refused in one sentence (exit {p.returncode}, {lines[:2]})")
    elif p.returncode == 6:
        res["findings"].append("refused under --live")


def _case_signal(world: World, rng, case_dir: Path, res: dict) -> None:
    s = world.stores[rng.choice(("medium", "big"))]
    parent = case_dir / "outs"
    parent.mkdir()
    template = rng.choice(LONG)
    args, fmt = _argv(rng, template, s, parent / "o", world)
    sig = rng.choice((signal.SIGINT, signal.SIGTERM))
    # from 0.15 s: a signal in the interpreter's own start-up, before any rmqinspect code runs, is Python's
    delay = rng.uniform(0.15, 1.5)
    res["argv"], res["signal"], res["delay"] = args, sig.name, round(delay, 3)
    p = cli_process(args)
    time.sleep(delay)
    p.send_signal(sig)
    out, err = p.communicate(timeout=300)
    _common(res, p.returncode, out, err, fmt, p.pid, allow_signal=sig)
    finished = p.returncode in (0, 1)
    if p.returncode == 128 + sig and not error_lines(err)[-1:][0].startswith(
            f"rmqinspect: error: interrupted by {sig.name}"):
        res["findings"].append("interrupted without its line")
    outs = {n.format(o="o") for n in ("{o}", "{o}.ndjson", "{o}.html")}
    left = _leftovers(parent, finished or p.returncode == -sig, outs)
    if left:
        res["findings"].append(f"left beside --out: {left}")


def _case_nospace(world: World, rng, case_dir: Path, res: dict) -> None:
    s = world.stores[rng.choice(("small", "medium", "medium", "big"))]
    on_tmpfs = world.tmpfs and rng.random() < 0.4
    parent = rng.choice(world.tmpfs) if on_tmpfs else case_dir / "outs"
    parent.mkdir(exist_ok=True)
    for n in os.listdir(parent):  # a tmpfs is shared by the cases: empty it
        shutil.rmtree(parent / n, ignore_errors=True) if (parent / n).is_dir() else os.unlink(parent / n)
    template = rng.choice(WRITERS)
    args, fmt = _argv(rng, template, s, parent / "o", world, ("table", "json"))
    limit = rng.choice((1, 512, 4096, 65536, 1 << 20, 8 << 20))
    res["argv"], res["limit"] = args, "tmpfs " + parent.name if on_tmpfs else limit

    def pre():
        if not on_tmpfs:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = cli_process(args, preexec_fn=pre)
    out, err = p.communicate(timeout=300)
    _common(res, p.returncode, out, err, fmt, p.pid)
    final = [a for a in args if a.startswith(str(parent / "o"))][0]
    if p.returncode == 5:
        lines = error_lines(err)
        if len(lines) != 1 or not lines[0].startswith(f"rmqinspect: error: {final}") or \
                not lines[0].endswith(f"nothing was left at {final}"):
            res["findings"].append(f"full disk not said in one line naming the output: {lines[:2]}")
        if os.listdir(parent):
            res["findings"].append(f"left after a full disk: {os.listdir(parent)}")
    elif p.returncode in (0, 1):
        if os.listdir(parent) != [os.path.basename(final)]:
            res["findings"].append(f"finished but the output is not alone: {os.listdir(parent)}")
    else:
        res["findings"].append(f"exit {p.returncode} under a full disk: {error_lines(err)[:2]}")
    if on_tmpfs:
        for n in os.listdir(parent):
            shutil.rmtree(parent / n, ignore_errors=True) if (parent / n).is_dir() else os.unlink(parent / n)


def _race_writer(s: Path, stop: threading.Event, rng: random.Random) -> None:
    files = sorted((s / "commitlog").iterdir())
    newest = files[-1]
    victims = files[:-1]
    contents = {v: v.read_bytes() for v in victims}
    while not stop.is_set():
        v = rng.choice(victims)
        with open(v, "r+b") as f:
            f.truncate(rng.randrange(len(contents[v]) + 1))
        with open(newest, "ab") as f:
            f.write(os.urandom(rng.randrange(1, 8192)))
        if rng.random() < 0.5:
            with open(v, "r+b") as f:
                f.write(contents[v])
        time.sleep(rng.uniform(0, 0.01))


def _case_race(world: World, rng, case_dir: Path, res: dict) -> None:
    s = case_dir / "store"
    shutil.copytree(world.stores[rng.choice(("small", "medium"))], s)
    args, fmt = _argv(rng, rng.choice(READERS), s, case_dir / "out", world)
    args.append("--live")
    res["argv"] = args
    stop = threading.Event()
    t = threading.Thread(target=_race_writer, args=(s, stop, random.Random(rng.random())))
    t.start()
    try:
        p = cli_process(args)
        out, err = p.communicate(timeout=300)
    finally:
        stop.set()
        t.join()
    _common(res, p.returncode, out, err, fmt, p.pid)


def _case_pipe(world: World, rng, case_dir: Path, res: dict) -> None:
    s = world.stores[rng.choice(("small", "medium"))]
    parent = case_dir / "outs"
    parent.mkdir()
    args, fmt = _argv(rng, rng.choice(READERS + [["export", "{s}", "--out", "{o}"]]), s, parent / "o", world)
    n = rng.choice((0, 1, 3, 100, 4096))
    res["argv"], res["read"] = args, n
    p = cli_process(args)
    assert p.stdout is not None and p.stderr is not None
    head = p.stdout.read(n) if n else b""
    p.stdout.close()
    err = p.stderr.read()
    p.wait(300)
    _common(res, p.returncode, b"", err, "table", p.pid, allow_signal=None)
    bad = [ln for ln in error_lines(err) if "no record" not in ln and "no consumer offsets" not in ln
           and "not found" not in ln]
    if bad or (p.returncode not in (0, 1, 3) and head is not None):
        res["findings"].append(f"broken pipe not quiet: exit {p.returncode}, {bad[:2]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="first case number (shards: --first 1000 --cases 1000)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/rmqinspect-world"))
    ap.add_argument("--findings", type=Path, default=None)
    ap.add_argument("--log", type=Path, default=None, help="one JSON line per case")
    ap.add_argument("--replay", default=None, help="SEED:CASE")
    ap.add_argument("--event", choices=EVENTS, default=None, help="only this event")
    a = ap.parse_args()
    world = World(a.work)
    try:
        if a.replay:
            seed, case = map(int, a.replay.split(":"))
            print(json.dumps(run_case(world, seed, case), indent=2))
            return
        counts: dict[str, int] = {}
        found = 0
        log = open(a.log, "a") if a.log else None
        for case in range(a.first, a.first + a.cases):
            r = run_case(world, a.seed, case, a.event)
            counts[r["event"]] = counts.get(r["event"], 0) + 1
            if log:
                log.write(json.dumps({k: v for k, v in r.items() if k != "stderr"}) + "\n")
                log.flush()
            if r["findings"]:
                found += 1
                text = f"- {a.seed}:{case} {r['event']} {r.get('argv')}: {r['findings']} (exit {r.get('rc')}; " \
                       f"{r.get('stderr', '')[-200:]!r})\n"
                print(text, end="", flush=True)
                if a.findings:
                    with open(a.findings, "a") as f:
                        f.write(text)
        for k, p in world.all_stores().items():
            if world.hash_tree(p) != world.hashes[k]:
                print(f"store {k} bytes changed", flush=True)
                found += 1
        print(json.dumps({"cases": a.cases, "by_event": counts, "cases_with_findings": found}), flush=True)
    finally:
        world.close()


if __name__ == "__main__":
    main()
