"""The package's layering, checked on the source: imports point down only and no private name crosses modules.

Layers, bottom to top (docs/architecture.md): errors -> formats -> store -> sinks -> analyses -> spark -> cli,
with report (the HTML renderer of `rmqinspect report`) beside cli: above analyses, below cli, which calls it;
with the package's own entry point (rmqinspect/__main__.py) above them all. A module may import its own layer
and the layers below it. ``fixtures`` (stores written for tests and benchmarks) may import everything but cli/spark, and
nothing else in the package may import it. A name starting with ``_`` is private to its module (a private module,
``_fastscan`` or ``_params``, to its package): importing one from elsewhere fails this test.

A function is at most 100 lines unless a hot loop needs the length and says so in a comment ("hot loop"), listed
in LONG_FUNCTIONS with the reason. No module import cycle either, whatever the layer: every import counts, the
ones inside a function (a lazy import is still a dependency) and under ``if TYPE_CHECKING`` alike, and ``from
package import name`` depends on the package (its ``__init__`` runs and its namespace is read) as well as on the
submodule ``name`` when it is one.
"""

from __future__ import annotations

import ast
import os

import pytest

PKG = "rmqinspect"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PKG)

LAYERS = ("errors", "formats", "store", "sinks", "analyses", "fixtures", "spark", "report", "cli")
RANK = {name: i for i, name in enumerate(LAYERS)}
TOP = len(LAYERS)  # rmqinspect/__init__.py, rmqinspect/__main__.py

# Exceptions to the rules above (empty); an entry needs a comment saying why. Each is
# (importing module, imported module, name or None for the module itself); delete it when the fix lands.
ALLOWED: set[tuple[str, str, str | None]] = set()


def _modules():
    for dirpath, _, names in os.walk(ROOT):
        for n in sorted(names):
            if n.endswith(".py"):
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                yield ".".join(rel), path, n == "__init__.py"


def _is_module(dotted: str) -> bool:
    """A .py file, a package or a compiled extension (``_fastscan.cpython-311-....so``)."""
    path = os.path.join(os.path.dirname(ROOT), *dotted.split("."))
    directory, leaf = os.path.split(path)
    if os.path.isfile(os.path.join(path, "__init__.py")) or os.path.isfile(path + ".py"):
        return True
    return os.path.isdir(directory) and any(n.split(".")[0] == leaf and n.endswith((".so", ".pyd"))
                                            for n in os.listdir(directory))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(module: str, path: str, is_package: bool):
    """(imported module, imported name or None, line) for every import in the file, relative ones resolved."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == PKG:
                    yield a.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PKG:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                # `from ..store import _fastscan` imports a module, `from .x import name` a name
                if _is_module(sub):
                    yield sub, None, node.lineno
                else:
                    yield target, a.name, node.lineno


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # rmqinspect/__init__.py: the version, nothing else
    return RANK.get(parts[1], TOP)


def _violations():
    out = []
    for module, path, is_package in _modules():
        for target, name, line in _imports(module, path, is_package):
            where = f"{os.path.relpath(path, os.path.dirname(ROOT))}:{line}: {module} imports {target}" + (
                f".{name}" if name else "")
            if (module, target, name) in ALLOWED:
                continue
            if _layer(target) > _layer(module):
                out.append(where + " (upward)")
            if target.split(".")[1:2] == ["fixtures"] and module.split(".")[1:2] != ["fixtures"]:
                out.append(where + " (fixtures/ is for tests and benchmarks only)")
            if _private(target.rpartition(".")[2]) and \
                    target.rpartition(".")[0] != (module if is_package else module.rpartition(".")[0]):
                out.append(where + " (private module used outside its package)")
            if name is not None and _private(name) and target != module:
                out.append(where + " (private name used outside its module)")
    return out


MAX_FUNCTION_LINES = 100
# Functions allowed past MAX_FUNCTION_LINES, each with why; an entry whose function shrank must be deleted.
LONG_FUNCTIONS = {
    "rmqinspect.store.walk.records.scan_buffer": "hot loop: the pure-Python scanner, once per record",
    "rmqinspect.store.walk.entries.walk_entries": "hot loop: the DLedger entry walk, once per entry",
    # not a hot loop: its table renderer is nested in the command; split it with issue 31's one render path
    # (cli/ rendering is that issue's), then delete this entry
    "rmqinspect.cli.peers.peers": "renderer nested in the command (issue 31)",
}


def _long_functions() -> dict[str, tuple[int, str]]:
    """Qualified name -> (lines, source) of every function or method longer than MAX_FUNCTION_LINES."""
    out: dict[str, tuple[int, str]] = {}

    def visit(node, prefix: str, lines: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    n = child.end_lineno - child.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        out[name] = (n, "\n".join(lines[child.lineno - 1:child.end_lineno]))
                visit(child, name, lines)

    for module, path, _ in _modules():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        visit(ast.parse(text, path), module, text.splitlines())
    return out


def test_functions_are_short_unless_a_hot_loop_needs_it():
    """Every function over MAX_FUNCTION_LINES is in LONG_FUNCTIONS (and every entry still is one); an entry
    that says "hot loop" has its function say so in a comment."""
    found = _long_functions()
    assert {k: n for k, (n, _) in found.items() if k not in LONG_FUNCTIONS} == {}
    assert sorted(set(LONG_FUNCTIONS) - set(found)) == []
    for name, why in LONG_FUNCTIONS.items():
        if why.startswith("hot loop"):
            assert "# A hot loop" in found[name][1], name


def test_the_length_check_sees_methods_and_nested_functions(tmp_path, monkeypatch):
    pkg = tmp_path / PKG
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (pkg / "store" / "m.py").write_text(f"class C:\n  def long(self):\n{body}\ndef outer():\n  def inner():\n{body}")
    monkeypatch.setitem(globals(), "ROOT", str(pkg))
    assert set(_long_functions()) == {"rmqinspect.store.m.C.long", "rmqinspect.store.m.outer",
                                      "rmqinspect.store.m.outer.inner"}


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (see the module docstring for what counts)."""
    mods = {m: (p, pk) for m, p, pk in _modules()}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, (path, is_package) in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        froms = {node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        for target, name, line in _imports(module, path, is_package):
            # `from P import sub` comes back as the module P.sub: P is imported too
            targets = [target, target.rpartition(".")[0]] if name is None and line in froms else [target]
            graph[module].update(t for t in targets if t in mods and t != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_import_cycle():
    """Each cycle is listed with its modules: cut it by moving what both sides need into a module of its own, or
    the caller that needs both one level up (docs/architecture.md)."""
    assert _cycles(_import_graph()) == []


@pytest.mark.parametrize("files", [
    # a function-level import closing the loop
    {"store/a.py": "from .b import B\nA = 1\n", "store/b.py": "def f():\n    from .a import A\n    return A\nB = 1\n"},
    # a package that imports its submodule, which reads the package's namespace
    {"store/__init__.py": "def f():\n    from .c import C\n    return C\n", "store/c.py": "from . import m\nC = 1\n",
     "store/m.py": "M = 1\n"},
])
def test_the_cycle_checker_catches_lazy_and_package_cycles(tmp_path, monkeypatch, files):
    """The cycle check itself can fail: a planted cycle in a fake package is reported."""
    pkg = tmp_path / PKG
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    monkeypatch.setitem(globals(), "ROOT", str(pkg))
    assert len(_cycles(_import_graph())) == 1


def test_imports_point_down_and_private_names_stay_home():
    assert _violations() == []


def test_allow_list_has_no_stale_entries():
    """An entry whose import is gone must be deleted, so the allow-list only ever shrinks."""
    seen = {(m, t, n) for m, p, pk in _modules() for t, n, _ in _imports(m, p, pk)}
    assert sorted(ALLOWED - seen) == []


@pytest.mark.parametrize("source, expected", [
    ("from ..cli._params import TIME\n", "upward"),
    ("from ..fixtures.store import StoreWriter\n", "fixtures/ is for tests and benchmarks"),
    ("from ..store.commitlog import _tuple_to_row\n", "private name"),
    ("from ..store import _fastscan\n", "private module"),
])
def test_the_checker_catches_each_kind(tmp_path, monkeypatch, source, expected):
    """The check itself can fail: a planted bad import in a fake analyses module is reported."""
    pkg = tmp_path / PKG
    for d in ("analyses", "cli", "fixtures", "store"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "_params.py").write_text("TIME = 1\n")
    (pkg / "fixtures" / "store.py").write_text("StoreWriter = 1\n")
    (pkg / "store" / "commitlog.py").write_text("_tuple_to_row = 1\n")
    (pkg / "store" / "_fastscan.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (pkg / "analyses" / "bad.py").write_text(source)
    monkeypatch.setitem(globals(), "ROOT", str(pkg))
    found = _violations()
    assert any(expected in v and "rmqinspect.analyses.bad" in v for v in found), found


# --- settings passed explicitly -------------------------------------------------------------------------------
# The broker's settings reach the readers and analyses as arguments (``Store.open(path, conf=...)``,
# ``store.conf``), never through process state: a ContextVar is not seen by a worker process or a Spark executor,
# and a module global makes two stores opened with different broker.conf files in one process answer alike.
# What store/, analyses/ and formats/ may still keep at module level is listed here with the reason; an entry is
# deleted when its state goes (the stale-entry test below), so the list only shrinks.
STATE_LAYERS = ("formats", "store", "analyses")
MUTATORS = {"append", "add", "clear", "update", "pop", "popitem", "setdefault", "extend", "remove", "discard",
            "insert"}
ALLOWED_STATE: dict[tuple[str, str], str] = {
    # caches: a value computed once from its key (the same answer every time), never a choice
    ("rmqinspect.formats.crc", "_chosen"): "the fastest CRC-32 implementation importable, chosen once",
    ("rmqinspect.formats.javahash", "_POW"): "powers of 31 for String.hashCode, grown on demand",
    ("rmqinspect.formats.batch", "_SCHEMAS"): "construct schemas built once per variant",
    ("rmqinspect.formats.commitlog", "_SCHEMAS"): "construct schemas built once per variant",
    ("rmqinspect.formats.rocksdb_cq", "_KEY_SCHEMAS"): "construct schemas built once per topic length",
    ("rmqinspect.analyses.lookup.fates", "_VIEWS"): "recovery views keyed by the store's files, mtimes and settings",
    # engines: how the same answer is computed, not what it is
    ("rmqinspect.store.scanner", "_enabled"): "compiled or pure-Python record scanner (same records; tests and "
                                              "benchmarks compare both)",
    ("rmqinspect.store.walk.parallel", "_worker_slots"): "shared-memory result slots a forked worker inherits",
    # the channel notes are said on (stderr in the CLI), and which were said already: output, not a setting
    ("rmqinspect.store.fileset_checks", "_SINK"): "where notes on the store's files are said",
    ("rmqinspect.store.fileset_checks", "_SAID"): "notes said once per invocation",
    # --live (a running broker's store): the one process-wide switch left, set by cli.main per invocation. Every
    # MappedFile reads it to snapshot files a broker still writes; passing it explicitly means a layout flag
    # carried to every reader that maps a file (17 call sites) - not done yet.
    ("rmqinspect.store.live", "_live"): "--live, set per invocation (to be passed with the layout)",
    ("rmqinspect.store.live", "_checked"): "lock checks done this invocation (live mode)",
    ("rmqinspect.store.live", "_size_at_start"): "each live file's size when first seen (live mode)",
}


def _module_state(path: str, source: str | None = None) -> dict[str, int]:
    """Module-level names a function rebinds (``global``) or mutates in place (item assignment, a mutating method,
    augmented assignment), with the line: state one call leaves for the next."""
    tree = ast.parse(source if source is not None else open(path, encoding="utf-8").read(), path)
    top = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
           for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    found: dict[str, int] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                for n in node.names:
                    found.setdefault(n, node.lineno)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in top:
                local.add(node.id)  # rebinding without ``global`` makes a local (caught by ``global`` otherwise)
        for node in ast.walk(fn):
            target = None
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                for t in (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        target = t.value.id
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in MUTATORS and isinstance(node.func.value, ast.Name):
                target = node.func.value.id
            if target in top and target not in local:
                found.setdefault(target, node.lineno)
    return found


def _ambient():
    out = {}
    for module, path, _ in _modules():
        with open(path, encoding="utf-8") as f:
            source = f.read()
        if "ContextVar" in source:
            out[(module, "ContextVar")] = f"{os.path.relpath(path, os.path.dirname(ROOT))}: uses a ContextVar"
        if module.split(".")[1:2] and module.split(".")[1] in STATE_LAYERS:
            for name, line in _module_state(path, source).items():
                out[(module, name)] = f"{os.path.relpath(path, os.path.dirname(ROOT))}:{line}: {name} is module " \
                                      "state a function changes"
    return out


def test_no_ambient_settings():
    """No ContextVar anywhere in the package, and no module-level state in formats/, store/ or analyses/ that a
    function changes, but for the listed caches, engine switches and output channels."""
    found = _ambient()
    assert sorted(v for k, v in found.items() if k not in ALLOWED_STATE) == []


def test_state_allow_list_has_no_stale_entries():
    assert sorted(set(ALLOWED_STATE) - set(_ambient())) == []


@pytest.mark.parametrize("source, name", [
    ("from contextvars import ContextVar\n_C = ContextVar('c')\n", "ContextVar"),
    ("_CONF = None\ndef set_conf(c):\n    global _CONF\n    _CONF = c\n", "_CONF"),
    ("_ON = [False]\ndef turn_on():\n    _ON[0] = True\n", "_ON"),
    ("_SEEN = {}\ndef remember(k, v):\n    _SEEN.update({k: v})\n", "_SEEN"),
])
def test_the_state_checker_catches_each_kind(tmp_path, monkeypatch, source, name):
    pkg = tmp_path / PKG
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    (pkg / "store" / "bad.py").write_text(source)
    monkeypatch.setitem(globals(), "ROOT", str(pkg))
    assert ("rmqinspect.store.bad", name) in _ambient()
