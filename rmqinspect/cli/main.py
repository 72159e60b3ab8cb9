"""The `rmqinspect` command group. Command modules in this package register themselves by exposing
``COMMANDS`` (a list of click commands); adding a command never touches this file."""

from __future__ import annotations

import functools
import importlib
import pkgutil

import click

from .. import __version__
from ..store.errors import EXIT_CODES_HELP
from ._params import apply_broker_config, broker_config_option


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog="\b\n" + EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="rmqinspect")
@click.option("--debug", is_flag=True, help="Show the Python traceback with an error (also RMQINSPECT_DEBUG=1).")
def cli(debug: bool) -> None:
    """Offline forensic inspection of Apache RocketMQ store directories (4.x and 5.x).

    Every command opens the store read-only and never writes into it. Point STORE at a store root
    (the directory holding commitlog/, consumequeue/, index/, checkpoint) or at one commitlog file.
    """
    from ..store.fileset_checks import set_notice_sink
    from .output import set_debug, warn

    set_debug(debug)
    set_notice_sink(warn)  # notes on the store's files (a link leaving the store, a directory in a file's place)


def _register() -> None:
    from . import __path__ as pkg_path

    for mod in sorted(pkgutil.iter_modules(pkg_path), key=lambda m: m.name):
        if mod.name in ("main", "output") or mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{mod.name}")
        for cmd in getattr(module, "COMMANDS", ()):
            cli.add_command(cmd)
    # --broker-config on every command, defined once (cli._params): commands never declare it
    for cmd in cli.commands.values():
        _add_broker_config(cmd)


def _add_broker_config(cmd: click.Command) -> None:
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _add_broker_config(sub)
        return
    if any(p.name == "broker_config" for p in cmd.params) or cmd.callback is None:
        return
    cmd.params.append(broker_config_option())
    callback = cmd.callback

    @functools.wraps(callback)
    def with_broker_config(*args, **kwargs):
        ctx = click.get_current_context()
        if ctx.command is cmd:  # not when another command ctx.invoke()s this one with its own arguments
            apply_broker_config(ctx, kwargs)
        return callback(*args, **kwargs)

    cmd.callback = with_broker_config


_register()


def main() -> None:
    cli(prog_name="rmqinspect")
