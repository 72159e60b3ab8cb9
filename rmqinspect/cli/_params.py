"""Shared click parameter types and options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from ..formats.timestamps import parse_epoch_millis
from ..store.broker_conf import (
    BrokerConf,
    BrokerConfigError,
    Setting,
    read_broker_conf,
    reset_active_broker_conf,
    set_active_broker_conf,
)
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


# --- --broker-config: appended to every command by cli.main (one definition, no per-command decorator) ---

def _load_broker_config(ctx: click.Context, param: click.Parameter, value):
    """Parse the file before the command runs (a malformed value is a usage error naming the line) and put it
    in effect for the invocation: readers not given a value by a flag consult it before inferring."""
    if not value:
        return None
    try:
        conf = read_broker_conf(value)
    except BrokerConfigError as e:
        raise click.BadParameter(str(e), ctx, param) from None
    ctx.meta[BROKER_CONF_META] = conf
    token = set_active_broker_conf(conf)
    ctx.call_on_close(lambda: reset_active_broker_conf(token))
    return conf


BROKER_CONF_META = "rmqinspect.broker_conf"


def broker_config_option() -> click.Option:
    return click.Option(["--broker-config"], type=click.Path(dir_okay=False), envvar="RMQINSPECT_BROKER_CONFIG",
                        expose_value=False, is_eager=True, callback=_load_broker_config, metavar="FILE",
                        help="The broker's broker.conf (also RMQINSPECT_BROKER_CONFIG): its geometry and settings "
                             "(maxHashSlotNum, maxIndexNum, mappedFileSize*, messageDelayLevel, ...) are used "
                             "where no flag gives them, instead of inferring them from the files.")


def broker_conf() -> BrokerConf | None:
    """The --broker-config of the running command, or None."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(BROKER_CONF_META) if ctx is not None else None


def conf_setting(flag, key: str, inferred: Setting | None = None, default=None) -> Setting:
    """flag > --broker-config > inferred > the broker's default, for one MessageStoreConfig key."""
    return Setting.resolve(flag, broker_conf(), key, inferred, default)


# Options whose built-in default is a broker default: when the user did not give the flag, the broker.conf's
# value replaces it (flag > config > default). param name -> (config key, conversion, commands it does not
# apply to). Options whose default is None resolve the config themselves (index geometry, --max-batch,
# rebuild's geometry) so that they can say where each value came from.
CONFIG_FOR_OPTION: dict[str, tuple[str, Callable[[Any], Any], frozenset[str]]] = {
    "file_reserved_hours": ("fileReservedTime", float, frozenset()),
    "delete_when": ("deleteWhen", str, frozenset()),
    "disk_max_used_ratio": ("diskMaxUsedSpaceRatio", int, frozenset()),
    "no_clean_forcibly": ("cleanFileForciblyEnable", lambda v: not v, frozenset()),
    "precision_ms": ("timerPrecisionMs", int, frozenset()),
    "check_crc": ("checkCRCOnRecover", bool, frozenset()),
    "message_index_safe": ("messageIndexSafe", bool, frozenset()),
    "cq_file_size": ("mappedFileSizeConsumeQueue", int, frozenset({"rebuild"})),
    "cq_format": ("storeType", lambda v: "rocksdb" if v == "defaultRocksDB" else "file", frozenset({"rebuild"})),
}


def apply_broker_config(ctx: click.Context, kwargs: dict) -> None:
    """Replace, in a command's arguments, every defaulted option that has a broker.conf key in effect."""
    conf = ctx.meta.get(BROKER_CONF_META)
    if conf is None:
        return
    for name, (key, convert, not_for) in CONFIG_FOR_OPTION.items():
        if name not in kwargs or key not in conf.values or ctx.info_name in not_for:
            continue
        if ctx.get_parameter_source(name) in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            kwargs[name] = convert(conf.values[key])
