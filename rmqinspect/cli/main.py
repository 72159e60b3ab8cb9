"""The `rmqinspect` command group. Command modules in this package register themselves by exposing
``COMMANDS`` (a list of click commands); adding a command never touches this file."""

from __future__ import annotations

import importlib
import pkgutil

import click

from .. import __version__
from ..store.errors import EXIT_CODES_HELP


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog="\b\n" + EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="rmqinspect")
@click.option("--debug", is_flag=True, help="Show the Python traceback with an error (also RMQINSPECT_DEBUG=1).")
def cli(debug: bool) -> None:
    """Offline forensic inspection of Apache RocketMQ store directories (4.x and 5.x).

    Every command opens the store read-only and never writes into it. Point STORE at a store root
    (the directory holding commitlog/, consumequeue/, index/, checkpoint) or at one commitlog file.
    """
    from .output import set_debug

    set_debug(debug)


def _register() -> None:
    from . import __path__ as pkg_path

    for mod in sorted(pkgutil.iter_modules(pkg_path), key=lambda m: m.name):
        if mod.name in ("main", "output") or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{mod.name}")
        for cmd in getattr(module, "COMMANDS", ()):
            cli.add_command(cmd)


_register()


def main() -> None:
    cli(prog_name="rmqinspect")
