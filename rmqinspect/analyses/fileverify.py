"""Record checks that need nothing but one commitlog file, so they run per file (one Spark task each):
record structure as the broker checks it, body CRC, the stored PHYSICALOFFSET against file start + position,
and what follows the data (a blank record declaring exactly the rest of the file; zero bytes after it and
after the data end). Plus the store-level geometry checks that need the list of files."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store.mapped import MappedFile
from ..store.walk.file import walk_file
from ..store.walk.kinds import BLANK, CRC_MISMATCH, END, FILE_END, HALF, ILLEGAL
from ..store.walk.records import RecordRun
from .rows import FileTask

_ZERO_CHUNK = 1 << 22


def first_nonzero(buf, start: int, end: int) -> int | None:
    """Position of the first non-zero byte in ``buf[start:end]`` (numpy, in bounded chunks), or None."""
    import numpy as np

    pos = start
    while pos < end:
        n = min(_ZERO_CHUNK, end - pos)
        a = np.frombuffer(buf, dtype=np.uint8, count=n, offset=pos)
        nz = np.flatnonzero(a)
        if nz.size:
            return pos + int(nz[0])
        pos += n
    return None


@dataclass
class FileVerify:
    source: str
    file: str
    start: int
    size: int
    messages: int = 0
    data_end: int = 0  # position where the records stop (blank record / zero tail / damage / end)
    end_kind: str = ""
    problems: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"source": self.source, "file": self.file, "start": self.start, "size": self.size,
                "messages": self.messages, "data_end": self.data_end, "end_kind": self.end_kind,
                "problems": len(self.problems)}


def verify_file(task: FileTask) -> FileVerify:
    """The broker's check over the file, going on after a body-CRC mismatch (reported) and after a half
    record (reported; the next record follows its TOTALSIZE), stopping at the first other damage."""
    import numpy as np

    res = FileVerify(task.source, task.name, task.start, task.size)

    def problem(pos, check, detail):
        res.problems.append({"source": task.source, "file": task.path, "physical_offset": task.start + pos,
                             "check": check, "detail": detail})

    mf = MappedFile(task.path, task.start, dledger=task.dledger)
    try:
        buf = mf.buffer
        for ev in walk_file(mf, check_crc=True, crc_continue=True):
            if type(ev) is RecordRun:
                r = ev.records
                res.messages += len(r)
                for j in np.flatnonzero(r["physical_offset_field"] != r["position"] + task.start).tolist():
                    pos, stored = int(r[j]["position"]), int(r[j]["physical_offset_field"])
                    problem(pos, "physical_offset", f"stored PHYSICALOFFSET {stored} != file start + position "
                                                    f"{task.start + pos}")
                res.data_end = ev.end
                continue
            kind, pos, size = ev.kind, ev.position, ev.size
            if kind == HALF:
                # lengths disagree: body bounds and offsets inside are not trustworthy
                problem(pos, "structure", ev.reason)
                res.data_end = pos + size
                continue
            if kind == CRC_MISMATCH:
                hdr = ev.header
                res.messages += 1
                problem(pos, "body_crc", f"BODYCRC {hdr.body_crc} does not match the body")
                if hdr.physical_offset != task.start + pos:
                    problem(pos, "physical_offset", f"stored PHYSICALOFFSET {hdr.physical_offset} != file start + "
                                                    f"position {task.start + pos}")
                res.data_end = pos + size
                continue
            res.end_kind = str(kind)
            res.data_end = pos
            if kind == BLANK:
                if size != mf.size - pos:
                    problem(pos, "blank", f"blank record declares {size} bytes, {mf.size - pos} are left")
                nz = first_nonzero(buf, pos + 8, mf.size)
                if nz is not None:
                    problem(nz, "tail", "non-zero bytes after the blank end-of-file record")
            elif kind == END:
                nz = first_nonzero(buf, pos, mf.size)
                if nz is not None:  # cannot happen for END (scan saw zeros at pos) but bytes further on can
                    problem(nz, "tail", "non-zero bytes after the data end (torn or stale write)")
            elif kind == FILE_END:
                if not task.last:
                    problem(pos, "blank", "file ends at a record boundary without a blank record")
            elif kind == ILLEGAL:
                problem(pos, "structure", ev.reason)
    finally:
        mf.close()
    if res.end_kind == "" and res.data_end:
        res.end_kind = str(FILE_END)
    return res


def store_level_problems(tasks: list[FileTask]) -> list[dict]:
    """Geometry of one store's files: equal lengths, names spaced by the file size, no missing file."""
    import collections

    out = []
    if not tasks:
        return out
    sizes = collections.Counter(t.size for t in tasks)
    size = sizes.most_common(1)[0][0]
    for t in tasks:
        if t.size != size and not t.last:
            out.append({"source": t.source, "file": t.path, "physical_offset": t.start, "check": "file_size",
                        "detail": f"length {t.size} differs from the mapped file size {size}"})
    for a, b in zip(tasks, tasks[1:]):
        if a.start + size != b.start:
            out.append({"source": b.source, "file": b.path, "physical_offset": a.start + size, "check": "gap",
                        "detail": f"next file starts at {b.start}, expected {a.start + size}"})
    return out
