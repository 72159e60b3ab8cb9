"""What the read-only RocksDB readers (the 5.x consume queue, RIP-82's column families) share: each opens a private
copy of the database (RocksDB writes LOCK/LOG files even read-only, so the store itself is never opened) and
removes that copy when it is closed."""

from __future__ import annotations

import shutil
from typing import Any


class SnapshotReader:
    """A context manager over ``self._db`` (an open rocksdict.Rdict or None) and ``self.snapshot_dir``, which the
    subclass sets when it opens the copy."""

    _db: Any
    snapshot_dir: str

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            try:
                db.close()
            finally:
                self._db = None
        shutil.rmtree(self.snapshot_dir, ignore_errors=True)
