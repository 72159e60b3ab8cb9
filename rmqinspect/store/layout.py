"""Where things are in a store directory (FORMATS.md §0), and the geometry inferred from the files."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import StoreNotFoundError, UnsafeOutputError
from ..formats.dledger import CHECKPOINT_FILE, CURRTERM_FILE, DATA_DIR, INDEX_DIR, MEMBER_DIR_PREFIX
from .broker_conf import BrokerConf, configured
from .fileset_checks import check_commitlog_dir
from .live import check_store_lock

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


# RocksDB consume queue (5.2.0+): the database files sit in consumequeue/ itself (store.rocksdb_cq reads them)
def is_rocksdb_dir(path: str) -> bool:
    """A RocksDB database has CURRENT and at least one MANIFEST-* file."""
    if not os.path.isdir(path):
        return False
    names = os.listdir(path)
    return "CURRENT" in names and any(n.startswith("MANIFEST-") for n in names)


def rocksdb_files(path: str) -> list[str]:
    if not os.path.isdir(path):
        return []
    return sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)) and (
        n in ("CURRENT", "IDENTITY", "LOCK") or n.endswith((".sst", ".log", ".blob"))
        or n.startswith(("MANIFEST-", "OPTIONS-", "LOG"))))


@dataclass
class DLedgerMember:
    """Paths of one DLedger member's files (``<storePathRootDir>/dledger-<selfId>``, DLedgerConfig.getDefaultPath).

    In DLedger mode the messages live in the member's ``data/`` files (entries) instead of ``commitlog/``."""

    self_id: str
    dir: str
    data_dir: str
    index_dir: str
    checkpoint_path: str
    currterm_path: str
    how: str = ""  # how the member was chosen (directory found, or --broker-config keys)

    @classmethod
    def at(cls, member_dir: str, how: str = "") -> DLedgerMember:
        name = os.path.basename(os.path.abspath(member_dir))
        return cls(self_id=name[len(MEMBER_DIR_PREFIX):], dir=member_dir,
                   data_dir=os.path.join(member_dir, DATA_DIR), index_dir=os.path.join(member_dir, INDEX_DIR),
                   checkpoint_path=os.path.join(member_dir, CHECKPOINT_FILE),
                   currterm_path=os.path.join(member_dir, CURRTERM_FILE), how=how)

    def index_file_paths(self) -> list[tuple[int, str]]:
        """(start byte, path) of every DLedger index file, sorted."""
        if not os.path.isdir(self.index_dir):
            return []
        return sorted((int(n), os.path.join(self.index_dir, n)) for n in os.listdir(self.index_dir)
                      if is_offset_file_name(n) and os.path.isfile(os.path.join(self.index_dir, n)))


def is_dledger_member_dir(path: str, conf: BrokerConf | None = None) -> bool:
    """``dledger-<selfId>`` holding a ``data/`` directory (the layout DLedger creates), or only ``index/`` when
    ``conf`` sets storePathDLedgerCommitLog (the data files then live elsewhere)."""
    if not os.path.basename(os.path.abspath(path)).startswith(MEMBER_DIR_PREFIX):
        return False
    return os.path.isdir(os.path.join(path, DATA_DIR)) or (
        bool(configured(conf, "storePathDLedgerCommitLog")) and os.path.isdir(os.path.join(path, INDEX_DIR)))


def dledger_data_dirs(root: str, member: DLedgerMember, conf: BrokerConf | None = None
                      ) -> tuple[list[str], list[str]]:
    """The member's data directories in the copy, and notes. Without storePathDLedgerCommitLog (DLedgerConfig's
    dataStorePath, several paths joined by ','), ``<member>/data``. With it, each configured path that lies inside
    the broker's storePathRootDir is read at the same place inside the copy (``root``); a path outside it (another
    disk), or any path when storePathRootDir is not configured, is not part of the copy and never read - the note
    says so, and the copy's ``<member>/data`` is read if it exists."""
    dpath = configured(conf, "storePathDLedgerCommitLog")
    paths = [p.strip() for p in str(dpath.value).split(",") if p.strip()] if dpath else []
    if not dpath or not paths:
        return [member.data_dir], []
    rdir = configured(conf, "storePathRootDir")
    default = os.path.join(MEMBER_DIR_PREFIX + member.self_id, DATA_DIR)
    dirs, notes = [], []
    for p in paths:
        rel = _inside(p, rdir.value) if rdir else None
        if rel is None:
            why = (f"outside storePathRootDir {rdir.value}" if rdir else "storePathRootDir is not configured, so "
                   "where it lies in the copy is unknown")
            notes.append(f"{dpath.detail}: member {member.self_id}'s DLedger data files are kept in {p}, {why}: "
                         f"not read (copy its files into {member.data_dir} to read them)")
            continue
        there = os.path.join(root, rel)
        if os.path.normpath(rel) == default:
            dirs.append(there)
        elif os.path.isdir(there):
            dirs.append(there)
            notes.append(f"{dpath.detail}: member {member.self_id}'s DLedger data files are kept in {p}: the copy's "
                         f"{there} is read, not {member.data_dir}")
        else:
            notes.append(f"{dpath.detail}: member {member.self_id}'s DLedger data files are kept in {p}, but the "
                         f"copy has no {there}: not read")
    if not dirs:
        if not os.path.isdir(member.data_dir):
            raise StoreNotFoundError(f"no DLedger data files in the copy: {dpath.detail} puts them in "
                                     f"{', '.join(paths)}, not copied here ({'; '.join(notes)})", member.dir)
        dirs = [member.data_dir]
        notes.append(f"{member.data_dir} is read instead (what the broker wrote before storePathDLedgerCommitLog "
                     "was set, or a copy placed there)")
    member.data_dir = dirs[0]
    return dirs, notes


def _inside(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` when it lies inside it (as written, both normalised), else None."""
    rel = os.path.relpath(os.path.normpath(path), os.path.normpath(base))
    return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel) else rel


def _is_member_data_dir(path: str) -> bool:
    """``dledger-<selfId>/data``: where DLedger keeps a member's data files by default."""
    a = os.path.abspath(path)
    return os.path.basename(a) == DATA_DIR and os.path.basename(os.path.dirname(a)).startswith(MEMBER_DIR_PREFIX)


def is_dledger_data_dir(path: str, conf: BrokerConf | None = None) -> bool:
    """A directory of DLedger data files (entries, not commitlog records): a member's ``data/``, or the copy of a
    storePathDLedgerCommitLog directory ``conf`` places inside storePathRootDir (a store root holding a
    ``dledger-<selfId>`` member at the same distance above it)."""
    if _is_member_data_dir(path):
        return True
    dpath, rdir = configured(conf, "storePathDLedgerCommitLog"), configured(conf, "storePathRootDir")
    if dpath is None or rdir is None:
        return False
    a = os.path.abspath(path)
    for p in str(dpath.value).split(","):
        rel = _inside(p.strip(), rdir.value) if p.strip() else None
        if rel and rel != os.curdir and a.endswith(os.sep + rel) and dledger_members(a[:-len(rel) - 1], conf):
            return True
    return False


def dledger_members(root: str, conf: BrokerConf | None = None) -> list[str]:
    """The ``dledger-<selfId>`` member directories under a store root, sorted."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if n.startswith(MEMBER_DIR_PREFIX)
            and is_dledger_member_dir(os.path.join(root, n), conf)]


def _choose_member(root: str, conf: BrokerConf | None) -> DLedgerMember | None:
    """The DLedger member of a store root: ``dLegerSelfId`` from --broker-config when given, else the only
    ``dledger-*`` directory. Several members without the key is refused (never guessed)."""
    members = dledger_members(root, conf)
    self_id = configured(conf, "dLegerSelfId")
    if self_id is not None:
        want = os.path.join(root, MEMBER_DIR_PREFIX + str(self_id.value))
        if not is_dledger_member_dir(want, conf):
            raise StoreNotFoundError(f"dLegerSelfId={self_id.value} ({self_id.detail}) but there is no "
                                     f"{MEMBER_DIR_PREFIX}{self_id.value}/{DATA_DIR} directory", root)
        return DLedgerMember.at(want, f"dLegerSelfId from {self_id.detail}")
    if not members:
        return None
    if len(members) > 1:
        ids = ", ".join(os.path.basename(m) for m in members)
        raise StoreNotFoundError(f"several DLedger members ({ids}); --broker-config with dLegerSelfId chooses one",
                                 root)
    return DLedgerMember.at(members[0], "the only dledger-<selfId> directory")


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
    # DLedger mode (enableDLegerCommitLog): the member whose data/ files replace commitlog/ (commitlog_dirs)
    dledger: DLedgerMember | None = None
    # the broker.conf the store was opened with (--broker-config): which member, where its data files are
    conf: BrokerConf | None = None

    @classmethod
    def open(cls, path: str | os.PathLike, conf: BrokerConf | None = None) -> StoreLayout:
        # Paths stay as the user wrote them (normalised, not made absolute): every message names a file the way
        # the user can paste it back, and the same command prints the same text wherever the copy lives.
        path = os.path.normpath(os.fspath(path))
        if not os.path.exists(path):
            raise StoreNotFoundError("no such file or directory", path)
        lay = cls._open(path, conf)
        lay.conf = conf
        check_store_lock(lay.root)  # a running broker's store is refused unless --live (store.live)
        return lay

    @classmethod
    def _open(cls, path: str, conf: BrokerConf | None) -> StoreLayout:
        if os.path.isfile(path):
            name = os.path.basename(path)
            parent = _parent(path)
            if _is_member_data_dir(parent):
                lay = cls._for_dledger(_parent(_parent(parent)), DLedgerMember.at(_parent(parent), "file given"),
                                       conf, data_given=True)
                lay.single_file = path
                return lay
            root = _parent(parent) if os.path.basename(os.path.abspath(parent)) == "commitlog" else parent
            lay = cls._for_root(root, [parent])
            lay.single_file = path
            if not is_offset_file_name(name):
                lay.notes.append(f"file name {name!r} is not a 20-digit offset; assuming it starts at offset 0")
            return lay
        if is_dledger_member_dir(path, conf):
            return cls._for_dledger(_parent(path), DLedgerMember.at(path, "member directory given"), conf)
        if _is_member_data_dir(path):
            return cls._for_dledger(_parent(_parent(path)), DLedgerMember.at(_parent(path), "data directory given"),
                                    conf, data_given=True)
        enabled = configured(conf, "enableDLegerCommitLog")
        has_commitlog = os.path.isdir(os.path.join(path, "commitlog"))
        if enabled is None or enabled.value or not has_commitlog:
            member = _choose_member(path, conf)
            if member is not None:
                lay = cls._for_dledger(path, member, conf)
                if has_commitlog:
                    lay.notes.append(f"{os.path.join(path, 'commitlog')} is ignored: DLedger mode ("
                                     f"{'enableDLegerCommitLog in ' + enabled.detail if enabled else member.how}); "
                                     "a pre-DLedger commit log is not read")
                return lay
            if enabled is not None and enabled.value:
                raise StoreNotFoundError(f"enableDLegerCommitLog=true ({enabled.detail}) but no "
                                         f"{MEMBER_DIR_PREFIX}<selfId>/{DATA_DIR} directory", path)
        if has_commitlog:
            return cls._for_root(path, [os.path.join(path, "commitlog")])
        # pointed at a commitlog directory itself
        names = os.listdir(path)
        if any(is_offset_file_name(n) for n in names) and os.path.basename(os.path.abspath(path)) == "commitlog":
            return cls._for_root(_parent(path), [path])
        if any(is_offset_file_name(n) for n in names):
            return cls._for_root(path, [path])
        raise StoreNotFoundError(
            "not a RocketMQ store: no commitlog/ directory, no dledger-<selfId>/data directory and no 20-digit "
            "commitlog files", path)

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

    @classmethod
    def _for_dledger(cls, root: str, member: DLedgerMember, conf: BrokerConf | None,
                     data_given: bool = False) -> StoreLayout:
        # storePathDLedgerCommitLog: the copy's data directories, never outside the copy (a data directory or file
        # the user named is read as named)
        dirs, notes = ([member.data_dir], []) if data_given else dledger_data_dirs(root, member, conf)
        lay = cls._for_root(root, dirs)
        lay.notes.extend(notes)
        lay.dledger = member
        return lay

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


# how far above a path a store root is looked for: consumequeue/TOPIC/QUEUE/FILE is the deepest store file
_STORE_DEPTH = 4
# what a broker keeps beside commitlog/: a path under one of these is part of that store
_STORE_PARTS = frozenset({"consumequeue", "batchconsumequeue", "index", "config", "checkpoint", "abort", "lock",
                          "timerlog", "timerwheel", "timercheck", "timermetrics", "compaction", "rocksdbstore",
                          "tiered_index_file", "dledger"})


def resolve_store_path(path: str | os.PathLike, conf: BrokerConf | None = None) -> tuple[str, str | None]:
    """The store a path the user typed means, and a note when that is not the path itself.

    A path inside a store (its consume queue, index, config, checkpoint ...) means that store: read as a
    commitlog it would give a confident wrong answer. A directory just above one store means that store.
    A path in or at ``commitlog/`` is returned unchanged (one commitlog file or directory is a valid input).
    A directory above several stores raises ``StoreNotFoundError`` naming them."""
    p = os.path.normpath(os.fspath(path))
    if not os.path.exists(p) or _is_store_root(p, conf):
        return p, None
    cur = p
    for _ in range(_STORE_DEPTH):
        up = os.path.normpath(os.path.join(cur, os.pardir))
        if os.path.abspath(up) == os.path.abspath(cur):
            break
        cur = up
        if _is_store_root(cur, conf):
            part = os.path.relpath(p, cur).split(os.sep)[0]
            if part not in _STORE_PARTS:
                return p, None
            return cur, f"{p} lies inside the store {cur} (its {part}); reading the store {cur}"
    if os.path.isdir(p) and not any(is_offset_file_name(n) for n in os.listdir(p)):
        stores = sorted(os.path.join(p, n) for n in os.listdir(p) if _is_store_root(os.path.join(p, n), conf))
        if len(stores) == 1:
            return stores[0], f"{p} is not a store; reading the store inside it, {stores[0]}"
        if not stores:  # two levels down (e.g. one directory per copied broker, each holding ./store)
            stores = sorted(os.path.join(p, a, b) for a in os.listdir(p) if os.path.isdir(os.path.join(p, a))
                            for b in _listdir(os.path.join(p, a)) if _is_store_root(os.path.join(p, a, b), conf))
        if stores:
            shown = ", ".join(stores[:5]) + (f" and {len(stores) - 5} more" if len(stores) > 5 else "")
            raise StoreNotFoundError(f"not a RocketMQ store; it holds the stores {shown}: name one", p)
    return p, None


def _is_store_root(d: str, conf: BrokerConf | None = None) -> bool:
    """A store root: ``commitlog/``, or a DLedger member directory (``dledger-<selfId>``) in it."""
    return os.path.isdir(os.path.join(d, "commitlog")) or (os.path.isdir(d) and bool(dledger_members(d, conf)))


def _listdir(d: str) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []
