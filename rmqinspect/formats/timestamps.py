"""RocketMQ's times (born/store timestamps, index and timer times) are epoch milliseconds; people write them as
ISO-8601. One parser for both, shared by the command line and the Spark data source options."""

from __future__ import annotations

import datetime as _dt


def parse_epoch_millis(value: int | str) -> int:
    """Epoch milliseconds (an int, or a string of digits), or an ISO-8601 date/time, UTC unless it carries an
    offset. Raises ``ValueError`` for anything else."""
    if isinstance(value, int):
        return value
    s = str(value).strip()
    if s.lstrip("-").isdigit():
        return int(s)
    try:
        dt = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is neither epoch milliseconds nor an ISO date/time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.UTC)
    return int(dt.timestamp() * 1000)
