"""Raw bytes at any commit-log offset, valid or not: ``hexdump -C`` lines, the record that encloses an
offset (the broker's walk from the file's start: ``CommitLog.walk``), and a best-effort overlay of the record
header fields over the bytes (FORMATS.md §1.2, the field tables of ``formats.commitlog``), stopping where the
lengths stop adding up."""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass

from ..formats.commitlog import (
    HOST_V6_BITS,
    PROPERTIES_LENGTH_CODE,
    RECORD_HEADERS,
    SYSFLAG_POSITION,
    TOPIC_LENGTH_CODES,
)
from ..formats.constants import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from ..store.walk.kinds import Kind


@dataclass
class EnclosingRecord:
    """The walk's record (or damage) whose bytes contain an offset."""

    start: int
    size: int
    kind: Kind  # the walk's kind of the slot
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OverlayField:
    name: str
    physical_offset: int
    length: int
    value: str
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def enclosing_record(commitlog, offset: int) -> EnclosingRecord | None:
    """The record the broker's walk of ``offset``'s file meets at or before ``offset`` and that spans it; None when
    the walk stops (damage, end of data) before reaching it."""
    from ..store.walk.records import Gap, RecordRun

    f, _ = commitlog.locate(offset)
    for ev in commitlog.walk(f.start, None, check_crc=False, stop_at_end=True, follow_blank=False):
        if isinstance(ev, Gap):
            continue
        if isinstance(ev, RecordRun):
            r = ev.records
            pos = offset - ev.file.start
            i = int(r["position"].searchsorted(pos, side="right")) - 1
            if i >= 0 and int(r["position"][i]) + int(r["total_size"][i]) > pos:
                return EnclosingRecord(ev.file.start + int(r["position"][i]), int(r["total_size"][i]),
                                       Kind.MESSAGE)
            if ev.file.start + int(r["position"][-1]) > offset:
                return None
            continue
        if ev.offset <= offset < ev.offset + max(ev.size, 1):
            return EnclosingRecord(ev.offset, ev.size, ev.kind, ev.reason)
        if ev.offset > offset:
            return None
    return None


def hexdump_lines(data: bytes, base: int) -> list[str]:
    """``hexdump -C``: offset (hex), 16 bytes in two groups of 8, and the printable characters."""
    width = max(8, len(f"{base + len(data):x}"))
    out = []
    for i in range(0, len(data), 16):
        chunk = data[i:i + 16]
        left = " ".join(f"{b:02x}" for b in chunk[:8])
        right = " ".join(f"{b:02x}" for b in chunk[8:])
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{base + i:0{width}x}  {left:<23}  {right:<23}  |{text}|")
    return out


def field_overlay(data: bytes, base: int) -> list[OverlayField]:
    """The record fields ``data`` (bytes from a record's start) holds, named and placed, as far as they make
    sense: the fixed header (its host layout from SYSFLAG), the body, topic and properties, each length checked
    against TOTALSIZE and the bytes available; the first length that does not add up ends the overlay with a
    note saying why."""
    out: list[OverlayField] = []
    if len(data) < 8:
        return out
    total, magic = struct.unpack_from(">ii", data, 0)
    if magic == BLANK_MAGIC_CODE:
        return [OverlayField("total_size", base, 4, str(total)),
                OverlayField("magic_code", base + 4, 4, f"0x{magic & 0xFFFFFFFF:08X}", "BLANK: end-of-file filler")]
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        return [OverlayField("total_size", base, 4, str(total)),
                OverlayField("magic_code", base + 4, 4, f"0x{magic & 0xFFFFFFFF:08X}",
                             "not a record's magic code: these bytes are not the start of a record")]
    version = 1 if magic == MESSAGE_MAGIC_CODE_V1 else 2
    sys_flag = struct.unpack_from(">i", data, SYSFLAG_POSITION)[0] if len(data) >= SYSFLAG_POSITION + 4 else 0
    table = RECORD_HEADERS[sys_flag & HOST_V6_BITS]
    pos = 0
    for name, code in table.fields:
        size = struct.calcsize(">" + code)
        if pos + size > len(data):
            out.append(OverlayField(name, base + pos, size, "", "beyond the bytes shown (--length)"))
            return out
        v = struct.unpack_from(">" + code, data, pos)[0]
        shown = v.hex() if isinstance(v, bytes) else (f"0x{v & 0xFFFFFFFF:08X}" if name == "magic_code" else str(v))
        note = ""
        if name == "total_size" and total <= 0:
            note = "not a record length"
        if name == "physical_offset" and v != base:
            note = f"the record says it is at {v}, not {base}"
        out.append(OverlayField(name, base + pos, size, shown, note))
        pos += size
    body_len = struct.unpack_from(">i", data, table.position("body_length"))[0]
    if body_len < 0 or pos + body_len > total:
        out[-1].note = f"body_length {body_len}: the body would end at {base + pos + body_len}, past TOTALSIZE " \
                       f"(record ends at {base + total}): the lengths stop adding up here"
        return out
    out.append(OverlayField("body", base + pos, body_len, f"{body_len} bytes"))
    p = pos + body_len
    tl_code = TOPIC_LENGTH_CODES[version]
    tl_size = struct.calcsize(">" + tl_code)
    if p + tl_size > len(data):
        return out
    topic_len = struct.unpack_from(">" + tl_code, data, p)[0]
    out.append(OverlayField("topic_length", base + p, tl_size, str(topic_len)))
    p += tl_size
    if topic_len < 0 or p + topic_len > total:
        out[-1].note = f"topic of {topic_len} bytes would end past TOTALSIZE: the lengths stop adding up here"
        return out
    topic = data[p:p + topic_len].decode("utf-8", "replace") if p + topic_len <= len(data) else ""
    out.append(OverlayField("topic", base + p, topic_len, topic))
    p += topic_len
    pl_size = struct.calcsize(">" + PROPERTIES_LENGTH_CODE)
    if p + pl_size > len(data):
        return out
    props_len = struct.unpack_from(">" + PROPERTIES_LENGTH_CODE, data, p)[0]
    out.append(OverlayField("properties_length", base + p, pl_size, str(props_len)))
    p += pl_size
    if props_len < 0 or p + props_len != total:
        out[-1].note = (f"properties of {props_len} bytes end at {base + p + props_len}, TOTALSIZE says the record "
                        f"ends at {base + total}: the lengths stop adding up here")
        return out
    out.append(OverlayField("properties", base + p, props_len, f"{props_len} bytes"))
    return out


__all__ = ["EnclosingRecord", "OverlayField", "enclosing_record", "field_overlay", "hexdump_lines"]
