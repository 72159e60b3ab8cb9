"""Shared click parameter types and options."""

from __future__ import annotations

import click

from ..formats.timestamps import parse_epoch_millis

store_argument = click.argument("store", type=click.Path(exists=False, file_okay=True, dir_okay=True))

broker_version_option = click.option(
    "--broker-version", default=None, metavar="VERSION",
    help="Override store detection (e.g. 4.9.8, 5.3.3, 4.x, 5.x).")


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


def accepts_v2(broker_version: str | None) -> bool:
    """Message format V2 (2-byte topic length) exists from RocketMQ 5.1.0 (FORMATS.md §0.1)."""
    if not broker_version:
        return True
    parts = [int(p) if p.isdigit() else 0 for p in broker_version.replace("x", "0").split(".")[:3]]
    if broker_version.upper() == "HEAD":
        return True
    parts += [0] * (3 - len(parts))
    if not broker_version[0].isdigit():
        raise click.BadParameter(f"{broker_version!r} is not a RocketMQ version", param_hint="--broker-version")
    return tuple(parts) >= (5, 1, 0)
