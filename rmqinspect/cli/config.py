"""`config`: the broker's config/*.json files (topics, subscription groups, consumer and delay offsets)."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_PROBLEMS
from ..store import Store
from ._params import broker_conf, broker_version_option, store_argument
from .output import emit, format_option, handle_errors, no_match, render, warn


@click.command("config")
@store_argument
@click.option("--only", type=click.Choice(("topics", "subscriptionGroups", "consumerOffsets", "delayOffsets")),
              help="Show one table only.")
@broker_version_option
@format_option
@handle_errors
def config_cmd(store, only, broker_version, fmt):
    """Decode config/*.json (topics, subscription groups, consumer offsets, delay offsets).

    fastjson's unquoted integer keys are accepted; when a main file is missing, empty or corrupt the
    .bak file is used (as ConfigManager.load does) and a warning says so.
    """
    from ..store.config_files import read_config_files

    st = Store.open(store, conf=broker_conf())
    cfg = read_config_files(st.layout.config_dir)
    for ld in cfg.loads.values():
        if ld.source == "bak":
            warn(f"{ld.path}: {ld.reason}")
    for p in cfg.problems:
        warn(p)
    doc = cfg.to_dict()
    if only:
        doc = {"files": {only: doc["files"][only]}, only: doc[only], "problems": cfg.problems}
    render(doc, fmt, lambda d: _render_config(cfg, d, only))
    if any(ld.source == "bak" for ld in cfg.loads.values()) or cfg.problems:
        sys.exit(EXIT_PROBLEMS)
    missing = [ld for k, ld in cfg.loads.items() if (not only or k == only) and ld.source == "missing"]
    if missing and len(missing) == (1 if only else len(cfg.loads)):
        # nothing asked for is there: the no-match rule (copied stores often lack config/; say where to look)
        no_match(f"{'no ' + missing[0].name if only else 'no config file'} (nor its .bak) in {st.layout.config_dir}"
                 + ("; consumer-lag, fate, gc and recover read consumer offsets from elsewhere with --offsets FILE"
                    if only in (None, "consumerOffsets") else ""))


def _render_config(cfg, doc: dict, only: str | None) -> None:
    emit(({"file": ld.name, "source": ld.source, "used": ld.used or "", "reason": ld.reason}
          for k, ld in cfg.loads.items() if not only or k == only), "table",
         ("file", "source", "used", "reason"), title="config files", cell_width=100)
    for key in ("topics", "subscriptionGroups", "consumerOffsets", "delayOffsets"):
        if key in doc and doc[key]:
            click.echo("")
            emit(doc[key], "table", title=key)


COMMANDS = [config_cmd]
