"""Every example marked `<!-- rmqinspect: ARGS -->` in README.md and docs/*.md is rerun and must print exactly
what its block shows (docs/regen.py rewrites the blocks; only the checkout's location is normalised)."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib

import pytest

from support import REPO, SAMPLE_STORE

_spec = importlib.util.spec_from_file_location("docs_regen", REPO / "docs" / "regen.py")
assert _spec is not None and _spec.loader is not None
regen = importlib.util.module_from_spec(_spec)
sys.modules["docs_regen"] = regen  # dataclasses look their module up there
_spec.loader.exec_module(regen)

EXAMPLES = [ex for doc in regen.documents() for ex in regen.examples(doc)]
README = (REPO / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("ex", EXAMPLES, ids=[f"{e.where} {e.args}" for e in EXAMPLES])
def test_example_output_is_what_the_command_prints(ex):
    if ex.needs_oracle and not regen.SHARED.is_dir():
        pytest.skip(f"{ex.where}: the oracle stores (../shared) are not beside this checkout")
    assert ex.block == regen.run(ex.args), f"{ex.where} is stale: run `python docs/regen.py`"


GENERATED = [g for doc in regen.documents() for g in regen.generated(doc)]


@pytest.mark.parametrize("g", GENERATED, ids=[f"{g.where} {g.kind}" for g in GENERATED])
def test_python_examples_and_the_package_picture_are_current(g):
    """docs/python-api.md's examples print what their blocks show; docs/architecture.md's picture is the one the
    imports draw today."""
    assert g.block == regen.fill(g), f"{g.where} is stale: run `python docs/regen.py`"


def test_the_python_api_and_the_architecture_are_documented():
    kinds = [(g.doc.name, g.kind) for g in GENERATED]
    assert kinds.count(("python-api.md", "python")) >= 6 and ("architecture.md", "picture") in kinds
    arch = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for recipe in ("### Adding a format", "### Adding a command", "### Adding an analysis"):
        assert recipe in arch


def test_the_picture_shows_every_layer_and_only_downward_arrows():
    picture = regen.package_picture()
    for layer in regen.LAYERS:
        assert f'    {layer}["{layer}' in picture
    for line in picture.splitlines():
        if " --> " in line:
            a, b = line.split(" --> ")
            assert regen.LAYERS.index(a.strip()) > regen.LAYERS.index(b.strip()), line


def test_readme_is_short_and_starts_with_the_two_set_up_commands():
    lines = README.splitlines()
    assert len(lines) < 200
    blocks = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    assert f"rmqinspect summary {SAMPLE_STORE.relative_to(REPO)}" in blocks[0]
    # the first command installs the extras the README advertises: the report (plotly) and the Spark pipeline
    extras = re.search(r"pip install -e '\.\[([a-z,]+)\]'", blocks[0])
    assert extras and {"report", "spark"} <= set(extras.group(1).split(","))
    with open(REPO / "pyproject.toml", "rb") as f:
        declared = tomllib.load(f)["project"]["optional-dependencies"]
    assert set(extras.group(1).split(",")) <= set(declared)
    assert "pip install -e '.[test]'" in blocks[1] and "python -m pytest" in blocks[1]
    # nothing but the title and one sentence before the set-up commands
    assert README.index("```bash") < README.index("\n## ")


def test_readme_has_three_checked_examples_on_the_sample_store():
    mine = [ex for ex in EXAMPLES if ex.doc.name == "README.md"]
    assert len(mine) == 3
    assert all(str(SAMPLE_STORE.relative_to(REPO)) in ex.args for ex in mine)


def test_docs_show_no_machine_paths():
    for doc in regen.documents():
        text = doc.read_text(encoding="utf-8")
        for bad in (str(REPO), "/work/", "/home/"):
            assert bad not in text, (doc.name, bad)


def test_examples_are_found():
    """Guards the parser: a mark it stopped recognising would silently drop every check above."""
    assert len(EXAMPLES) >= 10
    for doc in regen.documents():
        text = doc.read_text(encoding="utf-8")
        assert text.count("<!-- rmqinspect:") == len(regen.examples(doc)), doc.name


def test_no_pipe_inside_a_code_span_of_a_table_row():
    """GitHub ends a table cell at `|` even inside backticks: `a|b` in a row breaks the table."""
    for doc in regen.documents():
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("|"):
                assert not [s for s in re.findall(r"`([^`]*)`", line) if "|" in s], f"{doc.name}:{n}"


@pytest.mark.parametrize("fname", ["summary-sample-80.txt", "verify-sample-80.txt"])
def test_terminal_screens_of_the_sample_store_are_what_a_terminal_shows(fname):
    """docs/screens/after/ is rewritten by docs/regen.py from a real pseudo-terminal; two of them are rerun here."""
    _, args, columns, _ = next(s for s in regen.screen_names() if s[0] == fname)
    assert (REPO / "docs" / "screens" / "after" / fname).read_text(encoding="utf-8") == regen.screen(args, columns), \
        f"docs/screens/after/{fname} is stale: run `python docs/regen.py`"
