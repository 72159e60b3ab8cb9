"""RIP-82's RocksDB (5.4.0+): ``<storeRoot>/RocksDBMessageStore`` with the ``default`` (index), ``timer`` and
``trans`` column families (``formats.rip82``), read through a private snapshot like the RocksDB consume queue:
RocksDB never opens the store's own directory. Modelled from the change descriptions, not checked against a
broker."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

from ..errors import CorruptDataError, StoreNotFoundError
from ..formats.rip82 import (
    CF_INDEX,
    CF_TIMER,
    CF_TRANS,
    META_KEYS,
    IndexRecord,
    TimerRecord,
    TransRecord,
    parse_index,
    parse_timer,
    parse_trans,
)
from .layout import is_rocksdb_dir
from .rocksdb_snapshot import SnapshotReader

RIP82_DIR = "RocksDBMessageStore"


def rip82_dir(root: str) -> str | None:
    p = os.path.join(root, RIP82_DIR)
    return p if is_rocksdb_dir(p) else None


class RIP82Store(SnapshotReader):
    """Read-only view of RocksDBMessageStore/: records of each column family, malformed ones counted."""

    def __init__(self, path: str):
        if not is_rocksdb_dir(path):
            raise StoreNotFoundError("not a RocksDB (no CURRENT/MANIFEST-*)", path)
        from .rocksdb_cq import snapshot_rocksdb_dir  # numpy: only when a command opens the database

        self.path = path
        self.snapshot_dir = snapshot_rocksdb_dir(path)
        self.malformed: dict[str, int] = {}
        try:
            from rocksdict import AccessType, Options, Rdict

            opts = Options(raw_mode=True)
            self.column_families = list(Rdict.list_cf(self.snapshot_dir, opts))
            self._db = Rdict(self.snapshot_dir, options=opts, access_type=AccessType.read_only(),
                             column_families={n: Options(raw_mode=True) for n in self.column_families
                                              if n != CF_INDEX})
        except Exception as e:  # rocksdict raises plain Exceptions for corrupt/unsupported databases
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
            raise CorruptDataError(f"RocksDB refused to open the snapshot: {e}", path) from e

    def _items(self, cf: str):
        if cf == CF_INDEX:
            return self._db.items()
        if cf not in self.column_families:
            return iter(())
        return self._db.get_column_family(cf).items()

    def _records(self, cf: str, parse) -> Iterator:
        for k, v in self._items(cf):
            if bytes(k) in META_KEYS:
                continue
            try:
                yield parse(bytes(k), bytes(v))
            except ValueError:
                self.malformed[cf] = self.malformed.get(cf, 0) + 1

    def index_records(self) -> Iterator[IndexRecord]:
        return self._records(CF_INDEX, parse_index)

    def timer_records(self) -> Iterator[TimerRecord]:
        return self._records(CF_TIMER, parse_timer)

    def trans_records(self) -> Iterator[TransRecord]:
        return self._records(CF_TRANS, parse_trans)

    def meta(self) -> dict[str, int]:
        """The meta keys of every column family (value as a big-endian long), by name (``cf/key``)."""
        out = {}
        for cf in [CF_INDEX, CF_TIMER, CF_TRANS]:
            for k, v in self._items(cf):
                if bytes(k) in META_KEYS and len(v) == 8:
                    out[f"{cf}/{bytes(k).decode()}"] = int.from_bytes(bytes(v), "big", signed=True)
        return out


__all__ = ["RIP82Store", "RIP82_DIR", "rip82_dir"]
