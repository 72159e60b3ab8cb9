"""Shared click parameter types and options."""

from __future__ import annotations

import re
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
)
from ..store.version import ACCEPTED, BrokerVersion

JAVA_INT_MAX = (1 << 31) - 1
JAVA_LONG_MIN = -(1 << 63)
JAVA_LONG_MAX = (1 << 63) - 1
# the calendar Python's datetime can hold, one day inside each end so a time zone shift still fits
CALENDAR_MIN_MS = -62135510400000  # 0001-01-02T00:00:00Z
CALENDAR_MAX_MS = 253402214399999  # 9999-12-30T23:59:59.999Z



def resolve_store_callback(ctx: click.Context, param: click.Parameter, value):
    """A path inside a store, or just above one, means that store (with a note after the output); a directory
    above several stores is refused naming them (exit 3)."""
    if value is None:
        return value
    from ..errors import StoreNotFoundError
    from ..store.layout import resolve_store_path
    from .output import error, hold_note

    try:
        resolved, why = resolve_store_path(value, ctx.meta.get(BROKER_CONF_META))
    except StoreNotFoundError as e:
        error(str(e))
        ctx.exit(e.exit_code)
    if why:
        hold_note(why)
    return resolved


store_argument = click.argument("store", type=click.Path(exists=False, file_okay=True, dir_okay=True),
                                callback=resolve_store_callback)

# what every time option accepts (said in each option's help)
TIME_FORMS = ("epoch ms, ISO-8601 (UTC unless it carries an offset: 2026-11-21T13:37:10 is UTC), epoch seconds "
              "with an s suffix (1795297030s), or a time ago (30m, 2h, 7d)")
# digits in this range are epoch seconds 2001..5138, as milliseconds 1970-01-12..1973-03-03 when no RocketMQ
# broker ran: a tired human typed seconds; refused with the spellings that mean what they meant
_SECONDS_LO, _SECONDS_HI = 10**9, 10**11
_AGO_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_AGO = re.compile(r"^([0-9]{1,8})([smhdw])$")
_EPOCH_SECONDS = re.compile(r"^([0-9]{9,12})s$")


class TimeParam(click.ParamType):
    """A time: epoch milliseconds, ISO-8601 (UTC unless it carries an offset), ``<epoch seconds>s``, or a time
    ago (``2h``: now minus two hours); within [lo, hi] (a Java long by default; the calendar where a time becomes
    a date). Plain digits that can only be epoch seconds are refused, showing the ms, ISO and ``s`` spellings."""

    name = "TIME"

    def __init__(self, lo: int = JAVA_LONG_MIN, hi: int = JAVA_LONG_MAX, what: str = "a Java long") -> None:
        self.lo, self.hi, self.what = lo, hi, what

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if m := _EPOCH_SECONDS.match(text):
            ms = int(m.group(1)) * 1000
        elif m := _AGO.match(text):
            import time

            ms = int(time.time() * 1000) - int(m.group(1)) * _AGO_UNITS[m.group(2)]
        else:
            try:
                ms = parse_epoch_millis(text)
            except (ValueError, OverflowError) as e:
                self.fail(f"{e}; accepted: {TIME_FORMS}", param, ctx)
            if text.isdigit() and _SECONDS_LO <= ms < _SECONDS_HI:
                from .output import ms_to_iso

                self.fail(f"{text} looks like epoch seconds ({ms_to_iso(ms * 1000)}); as milliseconds it is "
                          f"{ms_to_iso(ms)}, before any RocketMQ broker. Write {ms * 1000} (ms), "
                          f"{ms_to_iso(ms * 1000).replace(' ', 'T')} or {text}s", param, ctx)
        if not self.lo <= ms <= self.hi:
            self.fail(f"{value!r} is outside {self.what} (epoch ms {self.lo}..{self.hi})", param, ctx)
        return ms


TIME = TimeParam()
# a time that is turned into a calendar date (gc's deleteWhen hour, file name dates)
CALENDAR_TIME = TimeParam(CALENDAR_MIN_MS, CALENDAR_MAX_MS, "the calendar 0001-01-02..9999-12-30")


class FiniteFloatRange(click.FloatRange):
    """A float range that also refuses NaN (which compares false to every bound) and infinities."""

    def convert(self, value, param, ctx):
        v = super().convert(value, param, ctx)
        if v != v or v in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number in the range {self._describe_range()}", param, ctx)
        return v


# numeric option types: every numeric option has a range (a usage error, exit 2, names option and range)
QUEUE_ID = click.IntRange(0, JAVA_INT_MAX)  # a queue id is a Java int, never negative
NON_NEGATIVE_LONG = click.IntRange(0, JAVA_LONG_MAX)  # --from / --count / limits
POSITIVE_LONG = click.IntRange(1, JAVA_LONG_MAX)
POSITIVE_INT = click.IntRange(1, JAVA_INT_MAX)
class CqFileSizeParam(click.IntRange):
    """mappedFileSizeConsumeQueue: at least one 20-byte unit, a Java int, rounded up to a multiple of 20 as
    MessageStoreConfig.getMappedFileSizeConsumeQueue does (a file of 21 bytes would hold a torn unit)."""

    def convert(self, value, param, ctx):
        v = super().convert(value, param, ctx)
        return -(-v // 20) * 20


CQ_FILE_SIZE = CqFileSizeParam(20, JAVA_INT_MAX - JAVA_INT_MAX % 20)
INDEX_SLOTS = click.IntRange(1, JAVA_INT_MAX)  # maxHashSlotNum
INDEX_MAX = click.IntRange(2, JAVA_INT_MAX)  # maxIndexNum: the header counts as item 0, so 1 is always full
INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INDEX_ITEM_SIZE = 40, 4, 20


def check_index_geometry(slots: int | None, items: int | None, slots_opt: str = "--index-slots",
                         items_opt: str = "--index-max") -> None:
    """IndexFile's size is a Java int (40 + slots*4 + items*20); a larger geometry is no broker's file and
    would only make us allocate gigabytes."""
    size = INDEX_HEADER_SIZE + (slots or 0) * INDEX_SLOT_SIZE + (items or 0) * INDEX_ITEM_SIZE
    if size > JAVA_INT_MAX:
        raise click.UsageError(f"{slots_opt} {slots} / {items_opt} {items}: an index file of {size} bytes "
                               f"(40 + slots*4 + items*20) exceeds {JAVA_INT_MAX} (a Java int)")


class OffsetParam(click.ParamType):
    """A physical offset: decimal, 0x-hex, or a 20-digit file name."""

    name = "OFFSET"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        s = str(value).strip().replace("_", "")
        try:
            v = int(s, 16) if s.lower().startswith("0x") else int(s)
        except ValueError:
            self.fail(f"{value!r} is not an offset", param, ctx)
        if not 0 <= v <= JAVA_LONG_MAX:
            self.fail(f"{value!r} is outside the range 0..{JAVA_LONG_MAX} (a physical offset is a Java long)",
                      param, ctx)
        return v


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

# one rule for every command whose answer depends on what a restart keeps: the release band's recovery rules
# (<=5.3.1, 5.3.2-5.3.3, 5.3.4+, 5.5.0+); the same option, help and default on each of them
RELEASE_RULES_HELP = (
    "RocketMQ release whose recovery rules decide what a restart keeps (e.g. 4.9.8, 5.3.3, 5.3.4, 5.5.1; bands "
    "<=5.3.1, 5.3.2-5.3.3, 5.3.4+, 5.5.0+). Default: detected from the files and broker.conf; where they cannot "
    "tell the bands apart and the answers differ, `recover` says both.")
release_option = broker_version_option_for(RELEASE_RULES_HELP)


def accepts_v2(version: BrokerVersion | None) -> bool:
    """Whether records with message format V2 are read as records; without a version, both formats are."""
    return True if version is None else version.accepts_v2


# --- --broker-config: appended to every command by cli.main (one definition, no per-command decorator) ---

def _load_broker_config(ctx: click.Context, param: click.Parameter, value):
    """Parse the file before the command runs (a malformed value is a usage error naming the line) and keep it
    with the invocation (``broker_conf()``): the command opens its stores with it (``Store.open(path,
    conf=broker_conf())``), and readers not given a value by a flag consult it before inferring."""
    if not value:
        return None
    try:
        conf = read_broker_conf(value)
    except BrokerConfigError as e:
        raise click.BadParameter(str(e), ctx, param) from None
    ctx.meta[BROKER_CONF_META] = conf
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


def key_needs_topic(key: str | None, topic: str | None, required: bool = False) -> None:
    """--key means one thing in every command (a KEYS token or UNIQ_KEY the record carries); the index commands
    also need --topic, because the broker indexes TOPIC#KEY: said in a sentence, with the command that needs none."""
    if required and key is None:
        raise click.UsageError("give --key (a KEYS token or a UNIQ_KEY) and --topic")
    if key is not None and topic is None:
        raise click.UsageError(f"--key needs --topic here: the broker's index holds TOPIC#KEY, so a look-up names "
                               f"the topic (`decode-commitlog STORE --key {key}` walks every topic's records; "
                               "`cq STORE --all` lists the topics)")


def refuse_together(given: dict[str, object], why: str) -> None:
    """Options that cannot combine are refused with a sentence (exit 2), never one of them silently ignored.
    ``given``: option spelling -> its value; refused when two or more are set."""
    on = [name for name, v in given.items() if v not in (None, False, ())]
    if len(on) > 1:
        raise click.UsageError(f"{' and '.join(on)} cannot be combined: {why}")


offsets_file_option = click.option(
    "--offsets", "offsets_file", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
    help="consumerOffset.json to use instead of STORE/config/consumerOffset.json (a copied store often lacks it).")


# --- --columns / --vertical / --no-truncate: appended to every command by cli.main, like --broker-config ---

def _set_layout(ctx: click.Context, param: click.Parameter, value):
    from .output import current

    inv = current()
    if param.name == "columns":
        inv.columns = tuple(c.strip() for c in value.split(",") if c.strip()) if value else None
        inv.columns_seen = set()
        if inv.columns:
            ctx.call_on_close(_unknown_columns_note)
    elif param.name == "vertical":
        inv.vertical = bool(value)
    else:
        inv.no_truncate = bool(value)
    return value


def _unknown_columns_note() -> None:
    """--columns naming a column no table had: said with the names that were there to pick."""
    from .output import current, warn

    inv = current()
    missing = [c for c in inv.columns or () if c not in inv.columns_seen]
    if missing:
        valid = sorted(inv.columns_offered)
        warn(f"--columns: no table had {', '.join(missing)}"
             + (f"; valid: {', '.join(valid)}" if valid else ""))


def layout_options() -> list[click.Option]:
    return [
        click.Option(["--columns"], metavar="A,B,...", expose_value=False, callback=_set_layout,
                     help="Only these columns, in this order (every format; tables without them are shown whole; "
                          "an unknown name is answered with the valid ones)."),
        click.Option(["--vertical"], is_flag=True, expose_value=False, callback=_set_layout,
                     help="One record per block with every field the records carry, each on its own line (like "
                          "psql's \\x)."),
        click.Option(["--no-truncate"], is_flag=True, expose_value=False, callback=_set_layout,
                     help="On a terminal too, every table at its full width, one row per line, as in a pipe (by "
                          "default a table wider than the terminal folds free text, puts an overlong identifier "
                          "alone above its row, or shows one record per block; identifiers are never cut)."),
    ]


def max_body_option(fn):
    """``--max-body-bytes``: the cap on a decompressed body (formats.compression); a longer body is cut with a
    note, so a 60 KB record that expands to gigabytes never decides our memory."""
    from ..formats.compression import DEFAULT_BODY_LIMIT

    return click.option("--max-body-bytes", type=click.IntRange(0, JAVA_INT_MAX), default=DEFAULT_BODY_LIMIT,
                        show_default=True, help="Cut decompressed bodies at this many bytes (with a note).")(fn)


def jobs_option(fn):
    """``--jobs N``: worker processes of the local parallel engine (store.walk.parallel), one commitlog file per
    task; default the number of cores (``RMQINSPECT_JOBS`` overrides); 1 runs the files one after another in
    this process. The output is the same for every N."""
    return click.option("--jobs", "jobs", type=POSITIVE_INT, default=None, metavar="N",
                        help="Worker processes, one commitlog file per task (default: the number of cores; "
                             "1 = one file after another in this process). Output is the same for any N.")(fn)


def live_option() -> click.Option:
    """``--live`` on every command (added by cli.main, like --broker-config): read a store a running broker holds
    (store.live), each file with pread up to its size when the command started, never through a map."""
    return click.Option(["--live"], is_flag=True, default=False,
                        help="Read a store a running broker holds (refused otherwise, exit 6): each file up to "
                             "its size when the command started, read without mapping it.")
