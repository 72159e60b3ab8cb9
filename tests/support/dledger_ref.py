"""Independent readings of DLedger-mode oracle data for the generic tests (not product code).

``expected_walk``: the broker's walk (expected.json ``records``) as (kind, physical offset, size), whatever the
mode: a DLedger ``entry`` row is the message at ``physicalOffset`` (entry pos + 48) of ``msgSize`` bytes, a
blank row sits at its ``dledgerPos``. ``reference_entries``: a plain loop over one DLedger data file (entry
header: magic int32, size int32 at +0/+4, record at +48) with ``scan_buffer`` on each record, giving what the
walk must report as (kind, position, size)."""

from __future__ import annotations

import struct

from rmqinspect.store.walk.kinds import BLANK, END, FILE_END
from rmqinspect.store.walk.records import scan_buffer


def is_dledger(exp: dict) -> bool:
    return "dledgerVersion" in exp


def expected_walk(exp: dict) -> list[tuple[str, int, int]]:
    out = []
    for r in exp["records"]:
        if r["kind"] == "message":
            out.append(("message", r["physicalOffset"], r["size"]))
        elif r["kind"] == "entry":
            out.append(("message", r["physicalOffset"], r["msgSize"]))
        elif r["kind"] == "blank":
            out.append(("blank", r["physicalOffset"] if "physicalOffset" in r else r["dledgerPos"],
                        r["declaredTotalSize"]))
    return out


def reference_entries(buf, limit: int, check_crc: bool) -> list[tuple]:
    out: list[tuple] = []
    p = 0
    while True:
        if p >= limit:
            out.append((FILE_END, p, 0))
            return out
        magic, size = struct.unpack_from(">ii", buf, p)
        if magic == -1:
            out.append((BLANK, p, size))
            return out
        if size == 0:
            out.append((END, p, limit - p))
            return out
        k, q, s, *_ = next(scan_buffer(buf, p + 48, p + size, check_crc))
        out.append((k, q, s))
        p += size


def cq_truncation_point(exp: dict) -> int:
    """Where load() truncates the consume queues (truncateDirtyLogicFiles): the recovered commit-log end, or in
    DLedger mode the data end DLedger recovered (processOffset), which a stale checkpoint does not move."""
    if is_dledger(exp):
        return exp["stateAfterLoad"]["dledger"]["dataMaxWrotePosition"]
    return exp["stateAfterLoad"]["commitLogMaxOffset"]


def entry_record_tuples(buf, limit: int, check_crc: bool = False):
    """``scan_buffer``'s tuple for the record inside each entry of one DLedger data file, to the first blank
    record or zero size (a plain loop over the 48-byte headers)."""
    p = 0
    while p + 8 <= limit:
        magic, size = struct.unpack_from(">ii", buf, p)
        if magic == -1 or size == 0:
            return
        yield next(scan_buffer(buf, p + 48, p + size, check_crc))
        p += size
