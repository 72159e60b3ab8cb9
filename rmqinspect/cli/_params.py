"""Shared click parameter types and options."""

from __future__ import annotations

import click

from ..formats.timestamps import parse_epoch_millis
from ..store.version import ACCEPTED, BrokerVersion

JAVA_INT_MAX = (1 << 31) - 1
JAVA_LONG_MIN = -(1 << 63)
JAVA_LONG_MAX = (1 << 63) - 1
# the calendar Python's datetime can hold, one day inside each end so a time zone shift still fits
CALENDAR_MIN_MS = -62135510400000  # 0001-01-02T00:00:00Z
CALENDAR_MAX_MS = 253402214399999  # 9999-12-30T23:59:59.999Z

store_argument = click.argument("store", type=click.Path(exists=False, file_okay=True, dir_okay=True))

class TimeParam(click.ParamType):
    """Epoch milliseconds, or an ISO-8601 date/time (UTC unless it carries an offset), within [lo, hi]
    (a Java long by default; the calendar where a time becomes a date)."""

    name = "TIME"

    def __init__(self, lo: int = JAVA_LONG_MIN, hi: int = JAVA_LONG_MAX, what: str = "a Java long") -> None:
        self.lo, self.hi, self.what = lo, hi, what

    def convert(self, value, param, ctx):
        try:
            ms = parse_epoch_millis(value)
        except (ValueError, OverflowError) as e:
            self.fail(str(e), param, ctx)
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


def accepts_v2(version: BrokerVersion | None) -> bool:
    """Whether records with message format V2 are read as records; without a version, both formats are."""
    return True if version is None else version.accepts_v2


def max_body_option(fn):
    """``--max-body-bytes``: the cap on a decompressed body (formats.compression); a longer body is cut with a
    note, so a 60 KB record that expands to gigabytes never decides our memory."""
    from ..formats.compression import DEFAULT_BODY_LIMIT

    return click.option("--max-body-bytes", type=click.IntRange(0, JAVA_INT_MAX), default=DEFAULT_BODY_LIMIT,
                        show_default=True, help="Cut decompressed bodies at this many bytes (with a note).")(fn)
