"""Where things are in a store directory (FORMATS.md §0), and the geometry inferred from the files."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .errors import StoreNotFoundError, UnsafeOutputError
from .fileset_checks import check_commitlog_dir

# exactly 20 ASCII digits (``\d`` would also take Arabic-Indic digits, which int() accepts), and a Java long:
# UtilAll.offset2FileName writes %020d of a long, so anything else is no broker's file
_OFFSET_NAME = re.compile(r"[0-9]{20}")
JAVA_LONG_MAX = (1 << 63) - 1


def is_offset_file_name(name: str) -> bool:
    return bool(_OFFSET_NAME.fullmatch(name)) and int(name) <= JAVA_LONG_MAX


_QUEUE_DIR = re.compile(r"-?[0-9]{1,10}")


def is_queue_dir_name(name: str) -> bool:
    """A queue directory is a Java int queue id in ASCII digits (ConsumeQueue's ``String.valueOf(queueId)``)."""
    return bool(_QUEUE_DIR.fullmatch(name)) and -(1 << 31) <= int(name) < (1 << 31)


def looks_like_offset_file_name(name: str) -> bool:
    """20 digits of any script, or beyond Long.MAX_VALUE: meant as an offset name but not a valid one."""
    return len(name) == 20 and name.isdigit() and not is_offset_file_name(name)


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
    def open(cls, path: str | os.PathLike) -> StoreLayout:
        # Paths stay as the user wrote them (normalised, not made absolute): every message names a file the way
        # the user can paste it back, and the same command prints the same text wherever the copy lives.
        path = os.path.normpath(os.fspath(path))
        if not os.path.exists(path):
            raise StoreNotFoundError("no such file or directory", path)
        if os.path.isfile(path):
            name = os.path.basename(path)
            parent = _parent(path)
            root = _parent(parent) if os.path.basename(os.path.abspath(parent)) == "commitlog" else parent
            lay = cls._for_root(root, [parent])
            lay.single_file = path
            if not is_offset_file_name(name):
                lay.notes.append(f"file name {name!r} is not a 20-digit offset; assuming it starts at offset 0")
            return lay
        if os.path.isdir(os.path.join(path, "commitlog")):
            return cls._for_root(path, [os.path.join(path, "commitlog")])
        # pointed at a commitlog directory itself
        names = os.listdir(path)
        if any(is_offset_file_name(n) for n in names) and os.path.basename(os.path.abspath(path)) == "commitlog":
            return cls._for_root(_parent(path), [path])
        if any(is_offset_file_name(n) for n in names):
            return cls._for_root(path, [path])
        raise StoreNotFoundError(
            "not a RocketMQ store: no commitlog/ directory and no 20-digit commitlog files", path)

    @classmethod
    def _for_root(cls, root: str, commitlog_dirs: list[str]) -> StoreLayout:
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
            check_commitlog_dir(self, d, os.listdir(d), is_offset_file_name)  # dirs/links in a file's place, conf paths
            for name in os.listdir(d):
                p = os.path.join(d, name)
                if is_offset_file_name(name) and os.path.isfile(p):
                    out.append((int(name), p))
                elif looks_like_offset_file_name(name) and not is_offset_file_name(name):
                    note = (f"{p}: file name is not a commitlog offset (20 ASCII digits <= Long.MAX_VALUE); "
                            f"file ignored")
                    if note not in self.notes:
                        self.notes.append(note)
        out.sort()
        return out

    @property
    def abort_present(self) -> bool:
        return os.path.exists(self.abort_path)


def _parent(path: str) -> str:
    """The directory holding ``path``, written relative when ``path`` is (``.`` for ``000…``, ``..`` for ``.``)."""
    return os.path.normpath(os.path.join(path, os.pardir))


def path_inside(path: str | os.PathLike, directory: str | os.PathLike) -> bool:
    """Whether ``path`` is ``directory`` or lies below it, both with symlinks resolved."""
    p = os.path.realpath(os.fspath(path))
    d = os.path.realpath(os.fspath(directory))
    return p == d or p.startswith(d.rstrip(os.sep) + os.sep)


def ensure_output_outside(store, out: str | os.PathLike) -> None:
    """The one "never write into the store being inspected" rule, for every command that writes.

    ``store`` is a ``Store``, a ``StoreLayout`` or a store directory. Raises ``UnsafeOutputError`` (exit
    code 6) when ``out`` - a file or directory about to be written, symlinks resolved - lies inside the
    store's root or any of its commitlog directories (a commitlog directory may be a symlink to elsewhere,
    and is evidence all the same), or when the store lies inside ``out``.
    """
    layout = getattr(store, "layout", store)
    if isinstance(layout, (str, os.PathLike)):
        root, dirs = os.fspath(layout), []
    else:
        root, dirs = layout.root, list(layout.commitlog_dirs)
    for d in [root] + dirs:
        if path_inside(out, d):
            raise UnsafeOutputError(f"refusing to write inside the inspected store: the output lies inside the "
                                    f"store ({os.path.realpath(d)})", out)
    if path_inside(root, out):
        raise UnsafeOutputError(f"refusing to write around the inspected store: the store {root} lies inside "
                                "the output directory", out)


def ensure_new_directory(out: str | os.PathLike) -> None:
    """Outputs go into a new directory: refuse (``UnsafeOutputError``, exit code 6) one that exists and is
    not empty, or a path that exists and is not a directory."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UnsafeOutputError("output path exists and is not a directory", out)
    if os.path.isdir(out) and os.listdir(out):
        raise UnsafeOutputError("output directory exists and is not empty; outputs only go into a new directory",
                                out)
