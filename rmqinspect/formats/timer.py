"""Timer message store (FORMATS.md §10.2, 5.0.0+): ``timerlog/`` units, ``timerwheel`` slots and
``config/timercheck`` (TimerLog, TimerWheel, TimerCheckpoint)."""

from __future__ import annotations

from .fields import FieldTable

UNIT_SIZE = 52  # TimerLog.UNIT_SIZE
UNIT_PRE_SIZE_FOR_MSG = 28
UNIT_PRE_SIZE_FOR_METRIC = 40
MIN_BLANK_LEN = 4 + 8 + 4
BLANK_MAGIC_CODE = 0xCBD43194 - (1 << 32)  # sits at offset 12, where a unit keeps its magic
MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024  # mappedFileSizeTimerLog

TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 86_400
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS
WHEEL_SLOT_SIZE = 32  # Slot.SIZE
WHEEL_FILE_SIZE = 2 * SLOTS_TOTAL * WHEEL_SLOT_SIZE  # 38,707,200
DEFAULT_PRECISION_MS = 1000  # timerPrecisionMs
TIMERCHECK_SIZE = 4096

# --- FORMATS.md §10.2: TimerLog unit (TimerMessageStore.doEnqueue), TimerLog end-of-file blank
# (TimerLog.append), TimerWheel Slot (Slot.SIZE) and config/timercheck (TimerCheckpoint) ---------------------
UNIT_FIELDS = (("size", "i"), ("prev_pos", "q"), ("magic", "i"), ("curr_write_time", "q"), ("delay", "i"),
               ("commitlog_offset", "q"), ("commitlog_size", "i"), ("real_topic_hash", "i"), ("reserved", "q"))
BLANK_FIELDS = (("size", "i"), ("zero", "q"), ("magic", "i"))
SLOT_FIELDS = (("time_units", "q"), ("first_pos", "q"), ("last_pos", "q"), ("num", "i"), ("magic", "i"))
TIMERCHECK_FIELDS = (("last_read_time_ms", "q"), ("last_timer_log_flush_pos", "q"),
                     ("last_timer_queue_offset", "q"), ("master_timer_queue_offset", "q"),
                     ("state_version", "q"), ("timestamp", "q"), ("counter", "q"))

UNIT_TABLE = FieldTable(UNIT_FIELDS)
BLANK_TABLE = FieldTable(BLANK_FIELDS)
SLOT_TABLE = FieldTable(SLOT_FIELDS)
TIMERCHECK_TABLE = FieldTable(TIMERCHECK_FIELDS)
TimerLogUnit = UNIT_TABLE.construct()
TimerLogBlank = BLANK_TABLE.construct()
TimerWheelSlot = SLOT_TABLE.construct()
TimerCheckpoint = TIMERCHECK_TABLE.construct()

UNIT = UNIT_TABLE.struct
BLANK = BLANK_TABLE.struct
SLOT = SLOT_TABLE.struct
TIMERCHECK = TIMERCHECK_TABLE.struct
SLOT_DTYPE = SLOT_TABLE.dtype
# A unit and a blank keep their magic at the same place; the walk reads it before knowing which it is.
MAGIC_POSITION = UNIT_TABLE.position("magic")
assert MAGIC_POSITION == BLANK_TABLE.position("magic") == 12
assert UNIT.size == UNIT_SIZE and SLOT.size == WHEEL_SLOT_SIZE == SLOT_DTYPE.itemsize and BLANK.size == MIN_BLANK_LEN


def magic_valid(magic: int) -> bool:
    """TimerLog recovery: a unit's magic has only the low four bits."""
    return (magic | 0xF) == 0xF


def magic_names(magic: int) -> list[str]:
    return [n for n, b in (("DEFAULT", MAGIC_DEFAULT), ("ROLL", MAGIC_ROLL), ("DELETE", MAGIC_DELETE)) if magic & b]


def slot_index(time_ms: int, precision_ms: int = DEFAULT_PRECISION_MS, slots_total: int = SLOTS_TOTAL) -> int:
    return (time_ms // precision_ms) % (2 * slots_total)
