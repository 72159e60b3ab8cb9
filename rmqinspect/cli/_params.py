"""Shared click parameter types and options."""

from __future__ import annotations

import click

from ..formats.timestamps import parse_epoch_millis
from ..store.version import ACCEPTED, BrokerVersion

store_argument = click.argument("store", type=click.Path(exists=False, file_okay=True, dir_okay=True))

class TimeParam(click.ParamType):
    """Epoch milliseconds, or an ISO-8601 date/time (UTC unless it carries an offset)."""

    name = "TIME"

    def convert(self, value, param, ctx):
        try:
            return parse_epoch_millis(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


TIME = TimeParam()


class OffsetParam(click.ParamType):
    """A physical offset: decimal, 0x-hex, or a 20-digit file name."""

    name = "OFFSET"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        s = str(value).strip().replace("_", "")
        try:
            return int(s, 16) if s.lower().startswith("0x") else int(s)
        except ValueError:
            self.fail(f"{value!r} is not an offset", param, ctx)


OFFSET = OffsetParam()


class BrokerVersionParam(click.ParamType):
    """A RocketMQ version (store.version.BrokerVersion); anything else is a usage error naming the option."""

    name = "VERSION"

    def convert(self, value, param, ctx):
        if isinstance(value, BrokerVersion):
            return value
        try:
            return BrokerVersion.parse(str(value))
        except ValueError:
            self.fail(f"{value!r} is not {ACCEPTED}", param, ctx)


BROKER_VERSION = BrokerVersionParam()


def broker_version_option_for(help: str, default: str | None = None):
    """``--broker-version`` for every command: a ``BrokerVersion`` (``default`` when given, else None: the
    command's own default, e.g. detection); ``help`` says what the version changes in that command."""
    return click.option("--broker-version", "broker_version", type=BROKER_VERSION, default=default,
                        metavar="VERSION", show_default=default is not None, help=help)


# the 5.x structure commands: the version overrides store detection
broker_version_option = broker_version_option_for("Override store detection (e.g. 4.9.8, 5.3.3, 4.x, 5.x).")


def accepts_v2(version: BrokerVersion | None) -> bool:
    """Whether records with message format V2 are read as records; without a version, both formats are."""
    return True if version is None else version.accepts_v2
