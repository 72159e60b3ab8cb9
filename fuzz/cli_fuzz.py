"""Whole-CLI mutation fuzzer (issue 12 item 4, issue 19): copied stores, 1-3 mutations, every command.

Each case is reproducible from (seed, case number): it copies one corpus store (the sample store, the oracle
stores, writer-made stores; copies only, into a temp dir) to CASE/store, applies 1-3 random mutations (bit flips,
extreme integers at record/CQ/index fields, truncations, appended zeros, spliced chunks, renamed / swapped /
deleted files, a directory or a dangling symlink where a file belongs, garbage or nested JSON in config/, hostile
topic directory names) and runs one command in-process (click's CliRunner), sometimes with extreme option values.
It checks what the error contract promises:

- no traceback (an exception other than SystemExit escaping the command), no hang (per-case alarm);
- exit code in 0..6 (errors.py);
- with --format json / ndjson: stdout is one JSON document / one JSON document per line;
- the store's bytes are unchanged, and nothing is written outside --out (the case directory is listed).

Every distinct finding (command, check, exception, innermost frame) is appended to the findings file with a
reproducer (``python fuzz/cli_fuzz.py --replay SEED:CASE``).

    python fuzz/cli_fuzz.py --cases 5000 --seed 1 --findings /work/notes/H-findings.md
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
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "fixtures" / "sample-store"
ORACLE = Path(os.environ.get("RMQINSPECT_ORACLE", "/work/shared/oracle"))

LONG_MAX = (1 << 63) - 1
EXTREME_INTS = [0, -1, 1, 0x7FFFFFFF, -0x80000000, 0xFFFFFFFF, LONG_MAX, -LONG_MAX - 1, 1 << 32, 1 << 40, 7, 21]
EXTREME_OPTS = ["0", "-1", "1", "2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
                "9223372036854775808", "1e30", "nan", "inf", "-inf", "", "garbage", "0001-01-01",
                "9999-12-31T23:59:59", "99999999999999999999", "\u0661\u0662", "1" * 5000]
HOSTILE_TOPICS = ["..", ".", "a/b", "%", "\u00e9\u4e2d\U0001f600", "x" * 300, "-1", "topic\nname", " ", "%RETRY%g"]


class Hang(BaseException):
    """Raised by the per-case alarm; a BaseException so no `except Exception` in the code under test eats it."""


def _on_alarm(signum, frame):
    raise Hang()


# ----------------------------------------------------------------------------------------------------------------
# corpus
# ----------------------------------------------------------------------------------------------------------------

def corpus_stores(work: Path) -> list[Path]:
    stores = [SAMPLE]
    if ORACLE.is_dir():
        for gen in sorted(ORACLE.iterdir()):
            for sc in sorted(gen.iterdir()):
                if (sc / "store").is_dir():
                    stores.append(sc / "store")
                elif sc.is_dir():
                    stores.append(sc)
    made = work / "writer-made"
    if not made.exists():
        try:
            _writer_made(made)
        except Exception as e:  # noqa: BLE001 - a corpus we cannot make is skipped, said so
            print(f"writer-made corpus skipped: {e!r}", file=sys.stderr)
    stores += sorted(p for p in made.iterdir() if p.is_dir()) if made.exists() else []
    return stores


def _writer_made(made: Path) -> None:
    """Small stores written by the project's writer (4.x layout and a 5.x one with a V2 topic)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.recover_fixtures import build_store  # noqa: PLC0415

    made.mkdir(parents=True)
    build_store(str(made / "recover-small"), n=120)
    from rmqinspect.fixtures.commitlog import CommitLogWriter, MessageSpec  # noqa: PLC0415
    from rmqinspect.fixtures.sample import mixed_messages  # noqa: PLC0415

    root = made / "mixed-v2"
    with CommitLogWriter(str(root / "commitlog"), file_size=1 << 16) as w:
        for spec in mixed_messages(150):
            w.append(spec)
        w.append(MessageSpec(topic="T" * 200, queue_id=1, body=b"v2 topic"))
    (root / "config").mkdir()
    (root / "config" / "consumerOffset.json").write_text('{"offsetTable":{"T@g":{0:3,1:5}}}')


def _commitlog_files(store: Path) -> list[Path]:
    d = store / "commitlog"
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


_RECORD_CACHE: dict[str, list[tuple[str, int, int]]] = {}


def record_positions(store: Path) -> list[tuple[str, int, int]]:
    """(file name, position, sys_flag) of some records of the pristine store, to aim field mutations."""
    key = str(store)
    if key not in _RECORD_CACHE:
        out = []
        import struct  # noqa: PLC0415

        for f in _commitlog_files(store)[:3]:
            with open(f, "rb") as fh:
                data = fh.read(1 << 20)
            pos = 0
            while pos + 40 <= len(data) and len(out) < 2000:
                size, magic = struct.unpack_from(">ii", data, pos)
                if size <= 0 or magic not in (-626843481, -626843477):
                    break
                sys_flag = struct.unpack_from(">i", data, pos + 36)[0]
                out.append((f.name, pos, sys_flag))
                pos += size
        _RECORD_CACHE[key] = out
    return _RECORD_CACHE[key]


# ----------------------------------------------------------------------------------------------------------------
# mutations: each returns a one-line description (the reproducer is the seed; the description is for humans)
# ----------------------------------------------------------------------------------------------------------------

def _all_files(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file() and not p.is_symlink())


def _pick_file(rng: random.Random, store: Path) -> Path | None:
    files = _all_files(store)
    if not files:
        return None
    weighted = [f for f in files if any(s in f.parts for s in ("commitlog", "consumequeue", "index", "config"))]
    return rng.choice(weighted if weighted and rng.random() < 0.8 else files)


def _used_offset(rng: random.Random, size: int) -> int:
    if size <= 0:
        return 0
    return rng.randrange(min(size, 1 << 16)) if rng.random() < 0.8 else rng.randrange(size)


def m_bitflip(rng, store, pristine):
    f = _pick_file(rng, store)
    if f is None:
        return "bitflip: no file"
    size = f.stat().st_size
    if size == 0:
        return f"bitflip: {f.name} empty"
    flips = []
    with open(f, "r+b") as fh:
        for _ in range(rng.randint(1, 8)):
            off = _used_offset(rng, size)
            bit = rng.randrange(8)
            fh.seek(off)
            b = fh.read(1)[0]
            fh.seek(off)
            fh.write(bytes([b ^ (1 << bit)]))
            flips.append(f"{off}.{bit}")
    return f"bitflip {f.relative_to(store)} {','.join(flips)}"


# field offsets of a 4.x record (IPv4 hosts; v6 shifts later fields, which is fine: still hostile)
RECORD_FIELDS = [(0, 4), (4, 4), (8, 4), (12, 4), (16, 4), (20, 8), (28, 8), (36, 4), (40, 8), (48, 4), (52, 4),
                 (56, 8), (64, 4), (68, 4), (72, 4), (76, 8), (84, 4)]


def m_extreme_field(rng, store, pristine):
    recs = record_positions(pristine)
    if recs and rng.random() < 0.6:
        name, pos, _ = rng.choice(recs)
        f = store / "commitlog" / name
        off, width = rng.choice(RECORD_FIELDS)
        off += pos
        what = f"record@{pos}+{off - pos}"
    else:
        f = _pick_file(rng, store)
        if f is None:
            return "extreme: no file"
        width = rng.choice((4, 8))
        unit = 20 if "consumequeue" in f.parts or "index" in f.parts else width
        off = _used_offset(rng, f.stat().st_size)
        off -= off % unit
        what = f"{f.relative_to(store)}@{off}"
    if not f.exists() or f.stat().st_size < off + width:
        return f"extreme: {what} out of file"
    v = rng.choice(EXTREME_INTS + [rng.getrandbits(width * 8)])
    v &= (1 << (width * 8)) - 1
    with open(f, "r+b") as fh:
        fh.seek(off)
        fh.write(v.to_bytes(width, "big"))
    return f"extreme {what} width {width} = {v:#x}"


def m_truncate(rng, store, pristine):
    f = _pick_file(rng, store)
    if f is None:
        return "truncate: no file"
    size = f.stat().st_size
    n = rng.choice([0, 1, 7, 19, 21, size // 2, max(0, size - 1), _used_offset(rng, size)])
    os.truncate(f, n)
    return f"truncate {f.relative_to(store)} {size} -> {n}"


def m_append(rng, store, pristine):
    f = _pick_file(rng, store)
    if f is None:
        return "append: no file"
    n = rng.choice([1, 3, 20, 4096, 2 << 20, 4 << 20])
    data = b"\0" * n if rng.random() < 0.6 else rng.randbytes(min(n, 1 << 16))
    with open(f, "ab") as fh:
        fh.write(data)
    return f"append {len(data)} {'zero' if not any(data[:64]) else 'random'} bytes to {f.relative_to(store)}"


def m_splice(rng, store, pristine):
    a, b = _pick_file(rng, store), _pick_file(rng, store)
    if a is None or b is None:
        return "splice: no file"
    sa, sb = a.stat().st_size, b.stat().st_size
    if sa == 0 or sb == 0:
        return "splice: empty"
    n = rng.choice([4, 8, 20, 64, 1024, 8192])
    src = _used_offset(rng, sa)
    dst = _used_offset(rng, sb)
    with open(a, "rb") as fh:
        fh.seek(src)
        chunk = fh.read(n)
    with open(b, "r+b") as fh:
        fh.seek(dst)
        fh.write(chunk)
    return f"splice {len(chunk)} bytes {a.relative_to(store)}@{src} -> {b.relative_to(store)}@{dst}"


BAD_NAMES = ["99999999999999999999", "09223372036854775808", "\u0660" * 19 + "\u0661", "00000000000000000007",
             "0000000000000000000x", "-0000000000000000001", "00000000001073741824", "1", ".hidden",
             "00000000000000000000~"]


def m_rename(rng, store, pristine):
    files = _all_files(store)
    if not files:
        return "rename: no file"
    f = rng.choice([x for x in files if "commitlog" in x.parts or "index" in x.parts or "consumequeue" in x.parts]
                   or files)
    new = f.with_name(rng.choice(BAD_NAMES))
    if new.exists():
        return "rename: exists"
    f.rename(new)
    return f"rename {f.relative_to(store)} -> {new.name}"


def m_swap(rng, store, pristine):
    files = _all_files(store)
    if len(files) < 2:
        return "swap: too few"
    a, b = rng.sample(files, 2)
    tmp = a.with_name(a.name + ".swaptmp")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    return f"swap {a.relative_to(store)} <-> {b.relative_to(store)}"


def m_delete(rng, store, pristine):
    f = _pick_file(rng, store)
    if f is None:
        return "delete: no file"
    f.unlink()
    return f"delete {f.relative_to(store)}"


def m_replace_kind(rng, store, pristine):
    f = _pick_file(rng, store)
    if f is None:
        return "replace: no file"
    f.unlink()
    kind = rng.choice(["dir", "dangling", "outside"])
    if kind == "dir":
        f.mkdir()
    elif kind == "dangling":
        f.symlink_to(store / "does-not-exist")
    else:
        outside = store.parent / "outside-target"
        outside.write_bytes(b"\1" * 4096)
        f.symlink_to(outside)
    return f"replace {f.relative_to(store)} by {kind}"


CONFIG_FILES = ["consumerOffset.json", "consumerOffset.json.bak", "delayOffset.json", "topics.json",
                "subscriptionGroup.json", "timercheck", "consumerOrderInfo.json"]


def _hostile_json(rng: random.Random) -> str:
    return rng.choice([
        "[" * 1000 + "]" * 1000,
        '{"offsetTable":' + '{"a":' * 1000 + "1" + "}" * 1001,
        '{"offsetTable":{"T@g":{0:' + "9" * 100000 + "}}}",
        '{"offsetTable":{"T@g":{0:"abc",0:"x"}}}',
        '{"offsetTable":{"T@g":{0:null}}}',
        '{"offsetTable":{"T@g":[1,2,3]}}',
        '{"offsetTable":"string"}',
        '{"offsetTable":[]}',
        '{"topicConfigTable":{"t":{"perm":"rw","readQueueNums":1e400}}}',
        '{"subscriptionGroupTable":{"g":5}}',
        "",
        "null",
        "\xff\xfe garbage \x00",
        '{"dataVersion":{"counter":-1},"offsetTable":{"%RETRY%g@g":{-1:-9223372036854775808}}}',
        '{"offsetTable":{"T@g":{2147483648:1}}}',
        '{"offsetTable":{"T@g":{0:1e30}}}',
        json.dumps({"offsetTable": {rng.choice(HOSTILE_TOPICS) + "@g": {"0": 1}}}),
    ])


def m_config(rng, store, pristine):
    cfg = store / "config"
    cfg.mkdir(exist_ok=True)
    name = rng.choice(CONFIG_FILES)
    text = _hostile_json(rng)
    (cfg / name).write_text(text, encoding="utf-8", errors="surrogateescape")
    return f"config/{name} = {text[:60]!r}{'...' if len(text) > 60 else ''} ({len(text)} chars)"


def m_topic_dir(rng, store, pristine):
    cq = store / "consumequeue"
    if not cq.is_dir():
        return "topic: no consumequeue"
    topics = [p for p in cq.iterdir() if p.is_dir()]
    if not topics:
        return "topic: none"
    t = rng.choice(topics)
    name = rng.choice([n for n in HOSTILE_TOPICS if "/" not in n and n not in (".", "..")] + ["0", "2147483648"])
    if rng.random() < 0.5:
        qs = [p for p in t.iterdir()]
        if qs:
            q = rng.choice(qs)
            q.rename(q.with_name(rng.choice(["-1", "2147483648", "abc", "\u0661", "00"])))
            return f"rename queue dir {q.relative_to(store)}"
    t.rename(t.with_name(name))
    return f"rename topic dir {t.name!r} -> {name!r}"


MUTATIONS = [(m_bitflip, 6), (m_extreme_field, 6), (m_truncate, 3), (m_append, 2), (m_splice, 2), (m_rename, 2),
             (m_swap, 1), (m_delete, 1), (m_replace_kind, 1), (m_config, 3), (m_topic_dir, 1)]


# ----------------------------------------------------------------------------------------------------------------
# commands
# ----------------------------------------------------------------------------------------------------------------

def _fmt(rng):
    return rng.choice(["json", "json", "ndjson", "table"])


def command_for(rng: random.Random, store: Path, out: Path) -> tuple[list[str], dict[str, list[str]]]:
    """argv for one command, and the options that may receive extreme values."""
    s = str(store)
    recs = record_positions(store)
    first = recs[0] if recs else ("0", 0, 0)
    phys = str(int(first[0]) + first[1]) if first[0].isdigit() else "0"
    topic = "TopicTest"
    cq = store / "consumequeue"
    if cq.is_dir():
        ts = sorted(p.name for p in cq.iterdir())
        if ts:
            topic = rng.choice(ts)
    if rng.random() < 0.05:
        topic = rng.choice(HOSTILE_TOPICS)
    f = _fmt(rng)
    c = rng.choice([
        "summary", "verify", "decode-commitlog", "decode-commitlog-walk", "cq", "cq-all", "cq-join", "index-lookup",
        "explain-missing", "msgid", "rebuild", "rebuild-dry", "recover", "salvage", "export", "gc", "config",
        "consumer-lag", "store-info", "timers", "batch-cq", "rocksdb-cq", "tiered-index-lookup", "compact-index",
        "fate", "fate-offset", "dump", "report", "dledger-peers", "verify-jobs", "rebuild-jobs",
    ])
    key = rng.choice(["k1", "key-0", "KEY0", "order-1", "m0"])
    table: dict[str, tuple[list[str], dict[str, list[str]]]] = {
        "summary": (["summary", s], {}),
        "verify": (["verify", s], {"--max-errors": ["5"]}),
        "decode-commitlog": (["decode-commitlog", s, "--offset", phys, "--body", rng.choice(["text", "hex", "base64"])],
                             {"--offset": [], "--count": ["3"]}),
        "decode-commitlog-walk": (["decode-commitlog", s, "--keep-going", "--count", "50"],
                                  {"--from": [], "--to": [], "--since": [], "--until": [], "--queue": []}),
        "cq": (["cq", s, "--topic", topic, "--queue", "0"], {"--from": [], "--count": [], "--cq-file-size": [],
                                                            "--queue": []}),
        "cq-all": (["cq", s, "--all"], {"--cq-file-size": []}),
        "cq-join": (["cq", s, "--topic", topic, "--queue", "0", "--join"], {"--count": ["5"], "--queue": []}),
        "index-lookup": (["index-lookup", s, "--key", key, "--topic", topic],
                         {"--index-slots": [], "--index-max": [], "--max": [], "--begin": [], "--end": [],
                          "--max-batch": []}),
        "explain-missing": (["explain-missing", s, "--key", key, "--topic", topic],
                            {"--index-slots": [], "--index-max": [], "--scan-bytes": [], "--max": []}),
        "msgid": (["msgid", "0A0000010000290F" + "%016X" % int(phys), "--store", s],
                  {"--index-slots": [], "--index-max": []}),
        "rebuild": (["rebuild", s, "--out", str(out / "rebuilt")],
                    {"--cq-file-size": [], "--index-slots": [], "--index-max": [], "--from": [], "--to": []}),
        "rebuild-dry": (["rebuild", s, "--dry-run", "--out", str(out / "rebuilt")],
                        {"--cq-file-size": [], "--index-slots": [], "--index-max": [], "--details": []}),
        "recover": (["recover", s, "--dry-run"] + rng.choice([[], ["--consumers"], ["--redispatch"],
                                                              ["--mode", "abnormal"]]),
                    {"--cq-file-size": [], "--broker-version": []}),
        "salvage": (["salvage", s, "--out", str(out / "salvaged.ndjson")], {"--broker-version": []}),
        "export": (["export", s, "--out", str(out / "export")], {"--since": [], "--until": []}),
        "gc": (["gc", s, "--dry-run"], {"--now": [], "--file-reserved-hours": [], "--disk-ratio": [],
                                        "--disk-max-used-ratio": [], "--tz": ["Asia/Shanghai", "Nowhere/Never"]}),
        "config": (["config", s], {}),
        "consumer-lag": (["consumer-lag", s] + rng.choice([[], ["--mode", "abnormal"]]), {}),
        "store-info": (["store-info", s], {}),
        "timers": (["timers", s], {"--precision-ms": [], "--due-before": []}),
        "batch-cq": (["batch-cq", s] + rng.choice([[], ["--expand"]]), {"--queue": []}),
        "rocksdb-cq": (["rocksdb-cq", s] + rng.choice([[], ["--list"], ["--offsets"]]),
                       {"--from": [], "--count": [], "--queue": []}),
        "tiered-index-lookup": (["tiered-index-lookup", s, "--topic", topic, "--key", key],
                                {"--hash-slots": [], "--max-items": [], "--max-num": []}),
        "compact-index": (["compact-index", s, "--out", str(out / "compacted")],
                          {"--hash-slots": [], "--max-items": []}),
        "fate": (["fate", s] + rng.choice([["--key", key, "--topic", topic], ["--msgid", "0A0000010000290F" +
                                                                                "%016X" % int(phys)]]),
                 {"--offsets": []}),
        "fate-offset": (["fate", s, "--offset", phys], {"--offset": []}),
        "dump": (["dump", s, "--offset", phys] + rng.choice([[], ["--snap"]]), {"--offset": [], "--length": []}),
        "report": (["report", s, "--out", str(out / "report.html")], {"--as-of": []}),
        "dledger-peers": (["dledger-peers", s, s], {}),
        "verify-jobs": (["verify", s, "--jobs", "2"], {"--max-errors": ["5"]}),
        "rebuild-jobs": (["rebuild", s, "--jobs", "2", "--out", str(out / "rebuilt")], {"--cq-file-size": []}),
    }
    argv, extreme = table[c]
    if c == "report":  # one HTML file, no --format
        return argv, extreme
    if c == "dump" and f == "ndjson":
        f = "json"
    return argv + ["--format", f], extreme


# ----------------------------------------------------------------------------------------------------------------
# running and checking
# ----------------------------------------------------------------------------------------------------------------

def tree_state(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "link:" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel + "/"] = "dir"
            else:
                h = hashlib.sha1()
                try:
                    with open(p, "rb") as fh:
                        for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                            h.update(chunk)
                    out[rel] = h.hexdigest()
                except OSError as e:
                    out[rel] = f"unreadable {e.errno}"
    return out


def innermost_frame(tb) -> str:
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "rmqinspect" in f.filename] or frames
    f = ours[-1] if ours else None
    if f is None:
        return "?"
    path = f.filename.split("rmqinspect/", 1)[-1] if "rmqinspect/" in f.filename else f.filename
    return f"{path}:{f.lineno} {f.name}"


def check_json(fmt: str, stdout: str) -> str | None:
    if fmt == "json":
        try:
            json.loads(stdout, parse_constant=_reject_constant)
        except ValueError as e:
            return f"stdout is not one JSON document: {str(e)[:120]}"
    elif fmt == "ndjson":
        for i, line in enumerate(stdout.splitlines()):
            if not line.strip():
                continue
            try:
                json.loads(line, parse_constant=_reject_constant)
            except ValueError as e:
                return f"ndjson line {i + 1} is not JSON: {str(e)[:120]}"
        if stdout and not stdout.endswith("\n"):
            return "ndjson does not end on a complete line"
    return None


def _reject_constant(name: str):
    raise ValueError(f"bare {name} is not JSON")


def run_case(seed: int, case: int, stores: list[Path], work: Path, timeout: int, verbose: bool = False) -> dict:
    from click.testing import CliRunner  # noqa: PLC0415

    from rmqinspect.cli.main import cli  # noqa: PLC0415

    rng = random.Random(f"{seed}:{case}")
    pristine = rng.choice(stores)
    case_dir = Path(tempfile.mkdtemp(prefix=f"case{case}-", dir=work))
    store = case_dir / "store"
    out = case_dir / "out"
    out.mkdir()
    shutil.copytree(pristine, store, symlinks=True)
    _RECORD_CACHE.setdefault(str(store), record_positions(pristine))
    muts = []
    funcs, weights = zip(*MUTATIONS)
    for fn in rng.choices(funcs, weights, k=rng.randint(1, 3)):
        try:
            muts.append(fn(rng, store, pristine))
        except OSError as e:
            muts.append(f"{fn.__name__}: {e}")
    argv, extreme = command_for(rng, store, out)
    if extreme and rng.random() < 0.3:
        opt = rng.choice(sorted(extreme))
        argv += [opt, rng.choice(extreme[opt] + EXTREME_OPTS)]
    fmt = argv[argv.index("--format") + 1] if "--format" in argv else "table"
    before_store = tree_state(store)
    before_case = sorted(p.name for p in case_dir.iterdir())
    result = {"seed": seed, "case": case, "store": str(pristine), "mutations": muts, "argv": argv[:1] + [
        a.replace(str(case_dir), "CASE") for a in argv[1:]], "findings": []}
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(out)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout)
    t0 = time.monotonic()
    try:
        res = runner.invoke(cli, argv, catch_exceptions=True)
        signal.alarm(0)
        exc_info = res.exc_info
        code = res.exit_code
        stdout, stderr = res.stdout, res.stderr
    except Hang:
        exc_info = None
        code, stdout, stderr = None, "", ""
        result["findings"].append(("hang", f"no answer in {timeout}s", ""))
    finally:
        signal.alarm(0)
        os.chdir(cwd)
    result["seconds"] = round(time.monotonic() - t0, 2)
    result["exit"] = code
    if code is not None:
        if exc_info is not None and not isinstance(exc_info[1], SystemExit):
            e = exc_info[1]
            if isinstance(e, Hang):
                result["findings"].append(("hang", f"no answer in {timeout}s", innermost_frame(exc_info[2])))
            else:
                result["findings"].append(("traceback", f"{type(e).__name__}: {str(e)[:150]}",
                                           innermost_frame(exc_info[2])))
        elif not 0 <= code <= 6:
            result["findings"].append(("exit code", f"exit {code}", ""))
        bare = stderr.strip() in ("rmqinspect: error:", "rmqinspect: error: ")
        if code == 5 and ("allocate" in stderr or "MemoryError" in stderr or bare):
            result["findings"].append(("memory", f"exit 5: {stderr.strip()[:150]!r}", ""))
        if "Traceback (most recent call last)" in stderr:
            result["findings"].append(("traceback on stderr", stderr.strip().splitlines()[-1][:150], ""))
        bad = check_json(fmt, stdout) if code in (0, 1) or stdout else None
        if bad:
            result["findings"].append(("invalid json", bad, f"exit {code}"))
    after_store = tree_state(store)
    if after_store != before_store:
        changed = sorted(k for k in set(before_store) | set(after_store) if before_store.get(k) != after_store.get(k))
        result["findings"].append(("store changed", ", ".join(changed[:5]), ""))
    after_case = sorted(p.name for p in case_dir.iterdir())
    if after_case != before_case:
        result["findings"].append(("wrote outside --out", str(sorted(set(after_case) - set(before_case))), ""))
    result["stderr"] = stderr.strip()[-300:]
    if verbose:
        print(json.dumps(result, indent=1, default=str))
        print("stdout:", stdout[:2000])
    shutil.rmtree(case_dir, ignore_errors=True)
    return result


def finding_key(res: dict, f: tuple) -> str:
    cmd = res["argv"][0]
    kind, what, where = f
    if kind == "traceback":
        return f"{cmd} | {kind} | {what.split(':')[0]} | {where}"
    if kind == "invalid json":
        return f"{cmd} | {kind} | {what.split(':')[0]} | {where}"
    return f"{cmd} | {kind} | {where or what[:60]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--findings", default=None, help="markdown file to append distinct findings to")
    ap.add_argument("--log", default=None, help="ndjson log of every case with a finding")
    ap.add_argument("--replay", default=None, help="SEED:CASE: run one case verbosely")
    ap.add_argument("--mem-gib", type=float, default=3.0, help="address-space limit of this process")
    ap.add_argument("--work", default=None)
    args = ap.parse_args(argv)
    lim = int(args.mem_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    os.environ.setdefault("COLUMNS", "200")
    work = Path(args.work or tempfile.mkdtemp(prefix="rmq-cli-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    stores = corpus_stores(work)
    if args.replay:
        seed, case = map(int, args.replay.split(":"))
        res = run_case(seed, case, stores, work, args.timeout, verbose=True)
        return 1 if res["findings"] else 0
    seen: dict[str, int] = {}
    counts = {"cases": 0, "with_findings": 0}
    t0 = time.monotonic()
    for case in range(args.start, args.start + args.cases):
        try:
            res = run_case(args.seed, case, stores, work, args.timeout)
        except MemoryError:
            res = {"seed": args.seed, "case": case, "argv": ["?"], "mutations": [], "store": "?", "exit": None,
                   "findings": [("memory", "MemoryError escaped into the fuzzer", "")], "stderr": ""}
        counts["cases"] += 1
        if res["findings"]:
            counts["with_findings"] += 1
            if args.log:
                with open(args.log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(res, default=str) + "\n")
        for f in res["findings"]:
            k = finding_key(res, f)
            seen[k] = seen.get(k, 0) + 1
            if seen[k] == 1:
                line = (f"- **{k}** — {f[1]}  \n  store `{res['store']}`, mutations {res['mutations']}, "
                        f"argv `{' '.join(res['argv'])}`, exit {res['exit']}, stderr `{res['stderr'][-160:]}`  \n"
                        f"  reproduce: `python fuzz/cli_fuzz.py --replay {res['seed']}:{res['case']}`\n")
                print(line, flush=True)
                if args.findings:
                    with open(args.findings, "a", encoding="utf-8") as fh:
                        fh.write(line)
        if case % 50 == 0:
            print(f"[{time.monotonic() - t0:.0f}s] case {case}: {counts}, distinct {len(seen)}", flush=True)
    print(json.dumps({"cases": counts["cases"], "cases_with_findings": counts["with_findings"],
                      "distinct": seen}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
