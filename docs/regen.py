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

    python docs/regen.py            rewrite every marked block
    python docs/regen.py --check    list the blocks that differ, exit 1 if any (writes nothing)
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


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = 0
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
