"""Where things are in a store directory (FORMATS.md §0), and the geometry inferred from the files."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .errors import StoreNotFoundError

_OFFSET_NAME = re.compile(r"^\d{20}$")


def is_offset_file_name(name: str) -> bool:
    return bool(_OFFSET_NAME.match(name))


@dataclass
class StoreLayout:
    """Paths of one store. ``single_file`` is set when the user pointed at one commitlog file."""

    root: str
    commitlog_dirs: list[str]
    consumequeue_dir: str
    index_dir: str
    checkpoint_path: str
    abort_path: str
    config_dir: str
    single_file: str | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "StoreLayout":
        path = os.path.abspath(os.fspath(path))
        if not os.path.exists(path):
            raise StoreNotFoundError("no such file or directory", path)
        if os.path.isfile(path):
            name = os.path.basename(path)
            parent = os.path.dirname(path)
            root = os.path.dirname(parent) if os.path.basename(parent) == "commitlog" else parent
            lay = cls._for_root(root, [parent])
            lay.single_file = path
            if not is_offset_file_name(name):
                lay.notes.append(f"file name {name!r} is not a 20-digit offset; assuming it starts at offset 0")
            return lay
        if os.path.isdir(os.path.join(path, "commitlog")):
            return cls._for_root(path, [os.path.join(path, "commitlog")])
        # pointed at a commitlog directory itself
        names = os.listdir(path)
        if any(is_offset_file_name(n) for n in names) and os.path.basename(path) == "commitlog":
            return cls._for_root(os.path.dirname(path), [path])
        if any(is_offset_file_name(n) for n in names):
            return cls._for_root(path, [path])
        raise StoreNotFoundError(
            "not a RocketMQ store: no commitlog/ directory and no 20-digit commitlog files", path)

    @classmethod
    def _for_root(cls, root: str, commitlog_dirs: list[str]) -> "StoreLayout":
        return cls(
            root=root,
            commitlog_dirs=commitlog_dirs,
            consumequeue_dir=os.path.join(root, "consumequeue"),
            index_dir=os.path.join(root, "index"),
            checkpoint_path=os.path.join(root, "checkpoint"),
            abort_path=os.path.join(root, "abort"),
            config_dir=os.path.join(root, "config"),
        )

    def commitlog_file_paths(self) -> list[tuple[int, str]]:
        """(start offset, path) of every commitlog file, merged over all directories, sorted by offset."""
        if self.single_file:
            name = os.path.basename(self.single_file)
            start = int(name) if is_offset_file_name(name) else 0
            return [(start, self.single_file)]
        out = []
        for d in self.commitlog_dirs:
            for name in os.listdir(d):
                p = os.path.join(d, name)
                if is_offset_file_name(name) and os.path.isfile(p):
                    out.append((int(name), p))
        out.sort()
        return out

    @property
    def abort_present(self) -> bool:
        return os.path.exists(self.abort_path)

    def within(self, path: str | os.PathLike) -> bool:
        """Whether ``path`` lies inside this store (used to refuse writing there)."""
        p = os.path.realpath(os.fspath(path))
        r = os.path.realpath(self.root)
        return p == r or p.startswith(r + os.sep)
