"""Rerun every example marked in README.md and docs/*.md and paste its real output into the block below the mark.

A marked example is an HTML comment naming the rmqinspect arguments, directly followed by a fenced block:

    <!-- rmqinspect: verify tests/fixtures/sample-store -->
    ```
    $ rmqinspect verify tests/fixtures/sample-store
    ...everything the command printed (stderr and stdout, in order)...
    $ echo $?            <- only when the exit code is not 0
    1
    ```

Commands run from the repository root. The only normalisation is where things are on this machine: the absolute
path of the repository becomes a relative path (``tests/fixtures/...``), the absolute path of ``../shared`` (the
oracle stores beside the checkout) becomes ``../shared``, and every ``/tmp/...`` argument lives in a fresh
temporary directory (deleted afterwards) whose path is shown as ``/tmp``. Examples on ``/tmp/rmqi-doc/store`` get
the demo store built by ``build_demo_store`` in that directory first.
tests/test_docs.py reruns every mark and fails when a block differs from what the command prints today.

Two more kinds of marks:

    <!-- python -->           a ```python block, run as a script from the repository root, followed by a ```
                              block holding what it printed (docs/python-api.md: the library's examples)
    <!-- picture: packages --> a ```mermaid block drawn from the package's imports (docs/architecture.md): one
                              node per layer with its module count, one arrow per layer it imports

It also rewrites the terminal screens of docs/screens.md: `summary`, `verify`, `recover --dry-run` and
`index-lookup` on the sample store and on the oracle's 5.3.3 crashed store (the 200-character topic), each run with
its standard output on a real pseudo-terminal of 80 and of 200 columns (tests/support/pty_screen.py), its standard
error after it. docs/screens/after/ is what the checkout prints; docs/screens/before/ was captured once from main
265484a (`--before DIR`, DIR a checkout of that commit, e.g. `git archive 265484a | tar -x -C DIR` plus the built
C extension copied in) and is kept for comparison.

    python docs/regen.py                  rewrite every marked block and the screens
    python docs/regen.py --check          list the blocks and screens that differ, exit 1 if any (writes nothing)
    python docs/regen.py --before DIR     capture docs/screens/before/ with the rmqinspect package under DIR
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DEMO = "/tmp/rmqi-doc/"
MARK = re.compile(r"^<!-- rmqinspect: (?P<args>.+?) -->$")
PY_MARK = "<!-- python -->"
PICTURE_MARK = "<!-- picture: packages -->"
FENCE = "```"
PKG = REPO / "rmqinspect"
# the layers bottom to top, as tests/test_architecture.py checks them
LAYERS = ("errors", "formats", "store", "sinks", "analyses", "fixtures", "spark", "report", "cli")


@dataclass(frozen=True)
class Example:
    doc: Path  # the markdown file
    line: int  # 1-based line of the mark
    args: str  # the arguments after `rmqinspect`, as written in the mark
    block: str  # the fenced block's text today (between the fences, with a final newline)

    @property
    def needs_oracle(self) -> bool:
        return any(a.startswith("../shared/") for a in shlex.split(self.args))

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def examples(doc: Path) -> list[Example]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or lines[i + 1] != FENCE:
            raise ValueError(f"{doc}:{i + 1}: a rmqinspect mark must be followed by a ``` line")
        end = lines.index(FENCE, i + 2)
        out.append(Example(doc, i + 1, m.group("args"), "".join(x + "\n" for x in lines[i + 2:end])))
    return out


@dataclass(frozen=True)
class Generated:
    """A block regen fills itself: a python example's output, or the package picture."""

    doc: Path
    line: int  # 1-based line of the mark
    kind: str  # "python" | "picture"
    code: str  # the python example's script ("" for the picture)
    start: int  # 0-based index of the first line of the block regen writes (after its opening fence)
    block: str  # that block's text today

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def generated(doc: Path) -> list[Generated]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        if line == PY_MARK:
            if lines[i + 1:i + 2] != [FENCE + "python"]:
                raise ValueError(f"{doc}:{i + 1}: a python mark must be followed by a ```python line")
            end = lines.index(FENCE, i + 2)
            if lines[end + 1:end + 2] != [FENCE]:
                raise ValueError(f"{doc}:{end + 2}: a python example's code must be followed by its ``` output block")
            close = lines.index(FENCE, end + 2)
            out.append(Generated(doc, i + 1, "python", "".join(x + "\n" for x in lines[i + 2:end]), end + 2,
                                 "".join(x + "\n" for x in lines[end + 2:close])))
        elif line == PICTURE_MARK:
            if lines[i + 1:i + 2] != [FENCE + "mermaid"]:
                raise ValueError(f"{doc}:{i + 1}: a picture mark must be followed by a ```mermaid line")
            close = lines.index(FENCE, i + 2)
            out.append(Generated(doc, i + 1, "picture", "", i + 2, "".join(x + "\n" for x in lines[i + 2:close])))
    return out


def run_python(code: str) -> str:
    """What a python example prints (stdout and stderr, in order), run from the repository root."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)
    out = normalise(proc.stdout.decode("utf-8"))
    if proc.returncode:
        raise RuntimeError(f"python example failed (exit {proc.returncode}):\n{out}")
    return out if not out or out.endswith("\n") else out + "\n"


def _imports(path: Path, module: str) -> set[str]:
    """The rmqinspect modules ``path`` imports (relative imports resolved), lazy imports included."""
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "rmqinspect")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "rmqinspect":
                found.add(target)
    return found


def package_picture() -> str:
    """The layers of the package and which layers each imports (lazy imports included), from the source (mermaid,
    top layer first)."""
    modules: dict[str, list[Path]] = {layer: [] for layer in LAYERS}
    edges: set[tuple[str, str]] = set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        layer = parts[1] if len(parts) > 1 else None  # errors.py is a layer of one module
        if layer not in modules:
            continue  # rmqinspect/__init__.py, __main__.py: the entry point above every layer
        modules[layer].append(path)
        for target in _imports(path, ".".join(parts)):
            t = target.split(".")[1] if "." in target else None
            if t in modules and t != layer:
                edges.add((layer, t))
    out = ["graph TD"]
    for layer in reversed(LAYERS):
        paths = modules[layer]
        if (PKG / layer).is_dir():
            subs = sorted({p.relative_to(PKG / layer).parts[0] for p in paths
                           if len(p.relative_to(PKG / layer).parts) > 1})
            extra = f"<br/>{', '.join(s + '/' for s in subs)}" if subs else ""
            out.append(f'    {layer}["{layer}/<br/>{len(paths)} modules{extra}"]')
        else:
            out.append(f'    {layer}["{layer}.py"]')
    for a, b in sorted(edges, key=lambda e: (-LAYERS.index(e[0]), -LAYERS.index(e[1]))):
        out.append(f"    {a} --> {b}")
    return "\n".join(out) + "\n"


def fill(g: Generated) -> str:
    return run_python(g.code) if g.kind == "python" else package_picture()


def normalise(text: str) -> str:
    """Only the checkout's location varies between machines."""
    text = text.replace(str(REPO) + os.sep, "").replace(str(REPO), ".")
    return text.replace(str(SHARED.resolve()), "../shared").replace(str(SHARED), "../shared")


def build_demo_store(root: str) -> None:
    """The damaged store of docs/verify-and-recover.md, built with the test fixtures: 240 messages in five 16 KiB
    commitlog files with consume queues, an abort file, a checkpoint at the first store time, one body byte flipped
    in the record at 17290 (second file), and one consumer group's committed offsets."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.recover_fixtures import build_store

    fx = build_store(os.path.join(root, "store"))
    fx.set_abort()
    fx.write_checkpoint(fx.records[0].store_ts)
    fx.patch(17290 + 100, b"\xff")  # a body byte of the record at 17290 (the body starts 88 bytes in)
    offsets = {"offsetTable": {"OrderTopic@billing": {"0": 79, "1": 20}, "PayTopic@billing": {"0": 80}}}
    with open(os.path.join(root, "store", "config", "consumerOffset.json"), "w", encoding="utf-8") as f:
        json.dump(offsets, f)


def run(args: str) -> str:
    """The block an example should hold: the command line, everything it printed, and a non-zero exit code."""
    argv = shlex.split(args)
    scratch = tempfile.mkdtemp(prefix="rmqinspect-doc-")
    try:
        if any(a.startswith(DEMO) for a in argv):
            build_demo_store(os.path.join(scratch, DEMO[len("/tmp/"):]))
        argv = [os.path.join(scratch, a[len("/tmp/"):]) if a.startswith("/tmp/") else a for a in argv]
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
        env.pop("COLUMNS", None)
        proc = subprocess.run([sys.executable, "-m", "rmqinspect", *argv], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = normalise(proc.stdout.decode("utf-8").replace(scratch, "/tmp"))
    if out and not out.endswith("\n"):
        out += "\n"
    block = f"$ rmqinspect {args}\n{out}"
    if proc.returncode:
        block += f"$ echo $?\n{proc.returncode}\n"
    return block


def rewrite(doc: Path, fresh: dict[int, str]) -> None:
    """Replace the block under each mark (by mark line) with its fresh text."""
    lines = doc.read_text(encoding="utf-8").splitlines(keepends=True)
    for line in sorted(fresh, reverse=True):
        i = line - 1
        end = next(j for j in range(i + 2, len(lines)) if lines[j].rstrip("\n") == FENCE)
        lines[i + 2:end] = [fresh[line]]
    doc.write_text("".join(lines), encoding="utf-8")


def rewrite_generated(doc: Path, fresh: dict[int, str]) -> None:
    """Replace each generated block (by the index of its first line) with its fresh text."""
    lines = doc.read_text(encoding="utf-8").splitlines(keepends=True)
    for start in sorted(fresh, reverse=True):
        end = next(j for j in range(start, len(lines)) if lines[j].rstrip("\n") == FENCE)
        lines[start:end] = [fresh[start]]
    doc.write_text("".join(lines), encoding="utf-8")


SCREENS = REPO / "docs" / "screens"
SCREENS_DOC = REPO / "docs" / "screens.md"
LONG_TOPIC_5_3_3 = "V2Topic_longer_than_127_chars_" + "".join(chr(ord("a") + (i + 4) % 26) for i in range(170))
SCREEN_STORES = (
    ("sample", "tests/fixtures/sample-store", "OrderTopic", "ord-14"),
    ("oracle-5.3.3-crash", "../shared/oracle/rocketmq-all-5.3.3/crash-torn-tail/store", LONG_TOPIC_5_3_3, "ord-5"),
)
SCREEN_COMMANDS = (("summary", "summary {store}"), ("verify", "verify {store}"),
                   ("recover", "recover {store} --dry-run"),
                   ("index-lookup", "index-lookup {store} --topic {topic} --key {key}"))
SCREEN_WIDTHS = (80, 200)


def screen(args: str, columns: int, package_dir: str | None = None) -> str:
    """What a person sees: the command line, its standard output on a pseudo-terminal of ``columns`` columns, then
    its standard error, and the exit code when it is not 0."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.pty_screen import run_on_terminal

    argv = [str(SHARED / a[len("../shared/"):]) if a.startswith("../shared/") else a for a in shlex.split(args)]
    # `python -m` puts the working directory first on sys.path: the other package's checkout is where it runs
    s = run_on_terminal(argv, columns, cwd=package_dir or str(REPO),
                        extra_env={"PYTHONPATH": package_dir} if package_dir else None)
    text = f"$ rmqinspect {args}\n" + normalise((s.text + s.stderr).replace(package_dir or str(REPO), "."))
    if s.exit_code:
        text += f"$ echo $?\n{s.exit_code}\n"
    return text


def screen_names():
    for name, store, topic, key in SCREEN_STORES:
        for cmd, pattern in SCREEN_COMMANDS:
            args = pattern.format(store=store, topic=topic, key=key)
            for columns in SCREEN_WIDTHS:
                yield f"{cmd}-{name}-{columns}.txt", args, columns, store.startswith("../shared/")


def screens(check: bool, before: str | None = None) -> int:
    """Rewrite (or, with ``check``, compare) docs/screens/after/ - or capture docs/screens/before/ - and the line
    counts in docs/screens.md. Returns how many screens differ."""
    stale = 0
    where = SCREENS / ("before" if before else "after")
    for fname, args, columns, oracle in screen_names():
        if oracle and not SHARED.is_dir():
            print(f"docs/screens/{fname}: skipped, ../shared (oracle stores) absent", file=sys.stderr)
            continue
        text = screen(args, columns, before)
        path = where / fname
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale += 1
            print(f"{path.relative_to(REPO)}: {'differs' if check else 'updated'}", file=sys.stderr)
            if not check:
                where.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    if not check:
        write_screens_doc()
    return stale


def _lines(path: Path, columns: int) -> str:
    """"lines / rows": the lines printed, and the rows they take on a terminal of ``columns`` columns (a longer
    line wraps onto more rows); the command line is not counted."""
    if not path.exists():
        return ""
    from rich.cells import cell_len

    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    rows = sum(max(1, -(-cell_len(x) // columns)) for x in lines)
    return f"{len(lines)} / {rows}"


def write_screens_doc() -> None:
    rows = []
    for fname, args, columns, _ in screen_names():
        before, after = (_lines(SCREENS / d / fname, columns) for d in ("before", "after"))
        rows.append(f"| `{args.split()[0]}` | {'oracle 5.3.3 crash-torn-tail' if 'oracle' in fname else 'sample'} "
                    f"| {columns} | {before} | {after} "
                    f"| [before](screens/before/{fname}) · [after](screens/after/{fname}) |")
    SCREENS_DOC.write_text(
        "# Terminal screens, before and after\n\n"
        "What a person sees on a terminal of 80 and 200 columns: each command run with its standard output on a real "
        "pseudo-terminal of that width (`tests/support/pty_screen.py`) and its standard error after it. "
        "`after/` is what this checkout prints and is rewritten by `python docs/regen.py`; `before/` was captured "
        "once from main 265484a (`python docs/regen.py --before DIR`, DIR holding that commit's package) and is "
        "kept as it was. The stores: `tests/fixtures/sample-store` (one 200-character V2 topic among short ones) "
        "and the oracle's RocketMQ 5.3.3 `crash-torn-tail` (written by the broker, crashed, the 200-character "
        "topic). A line wider than the terminal is the terminal's own wrapping of one identifier that is alone on "
        "its line.\n\n"
        "| command | store | columns | before: lines / rows on screen | after: lines / rows on screen | screens |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    check = "--check" in argv
    if "--before" in argv:
        screens(False, os.path.abspath(argv[argv.index("--before") + 1]))
        return 0
    stale = screens(check)
    for doc in documents():
        made = {}
        for g in generated(doc):
            block = fill(g)
            if block != g.block:
                stale += 1
                print(f"{g.where}: {'differs' if check else 'updated'}: {g.kind}", file=sys.stderr)
                made[g.start] = block
        if made and not check:
            rewrite_generated(doc, made)
        fresh = {}
        for ex in examples(doc):
            if ex.needs_oracle and not SHARED.is_dir():
                print(f"{ex.where}: skipped, ../shared (oracle stores) absent", file=sys.stderr)
                continue
            block = run(ex.args)
            if block != ex.block:
                stale += 1
                print(f"{ex.where}: {'differs' if check else 'updated'}: rmqinspect {ex.args}", file=sys.stderr)
                fresh[ex.line] = block
        if fresh and not check:
            rewrite(doc, fresh)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
