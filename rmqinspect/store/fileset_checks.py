"""Checks on the set of files a store directory holds, said once in one clear line each.

A copied store may hold a commit-log file that is a symbolic link leaving the store (legitimate when the copy
links rather than copies big files, but the user must know that bytes outside the copy are read), or a
directory where a commit-log file belongs (nothing there can be read: the offsets that file would hold are
damage). The broker.conf a store is opened with may name store paths (storePathRootDir, storePathCommitLog) that are not
the copy's: the copy is read, never the configured paths, and the user is told.

Every note goes to the store layout's ``notes`` (library users) and to the notice sink the CLI installs
(``set_notice_sink``: stderr), each at most once per process.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .broker_conf import BrokerConf

_SINK: Callable[[str], None] | None = None
_SAID: set[str] = set()


def set_notice_sink(sink: Callable[[str], None] | None) -> None:
    """Where notes about the store's files are said as they are found (the CLI: one stderr line each)."""
    global _SINK
    _SINK = sink
    _SAID.clear()  # a new invocation says its notes again


def notice(notes: list[str], note: str) -> None:
    """Add ``note`` to ``notes`` and say it once per process."""
    if note not in notes:
        notes.append(note)
    if note not in _SAID:
        _SAID.add(note)
        if _SINK is not None:
            _SINK(note)


def _inside(path: str, root: str) -> bool:
    p, r = os.path.realpath(path), os.path.realpath(root)
    return p == r or p.startswith(r.rstrip(os.sep) + os.sep)


def commitlog_entry_notes(root: str, directory: str, names: list[str],
                          is_offset_name: Callable[[str], bool]) -> list[str]:
    """One line per commit-log entry of ``directory`` that is not a plain file inside the store ``root``: a
    directory or a dangling link in a file's place (its offset range is unreadable, up to the next file's start)
    and a symbolic link resolving outside the store (read, and said)."""
    offs = sorted(int(n) for n in names if is_offset_name(n))
    out = []
    for name in sorted(n for n in names if is_offset_name(n)):
        p = os.path.join(directory, name)
        start = int(name)
        nxt = next((o for o in offs if o > start), None)
        span = f"[{start}, {nxt})" if nxt is not None else f"from {start} on"
        if os.path.isdir(p):
            out.append(f"{p}: a directory where a commit-log file belongs: offsets {span} are unreadable (damage; "
                       "the broker cannot map it either)")
        elif os.path.islink(p) and not os.path.exists(p):
            out.append(f"{p}: a symbolic link to {os.readlink(p)!r}, which does not exist: offsets {span} are "
                       "unreadable (damage)")
        elif os.path.islink(p) and not _inside(p, root):
            out.append(f"{p}: a symbolic link leaving the store (to {os.path.realpath(p)}): read; a copy may link "
                       "big files legitimately, check that it is the file you mean")
    return out


def store_path_notes(root: str, commitlog_dir: str, conf: BrokerConf | None) -> list[str]:
    """Where ``conf`` (the broker.conf given) names a storePathRootDir / storePathCommitLog that is not the store
    being read: the copy is read (nothing outside it), and the note says what the broker would have used."""
    if conf is None:
        return []
    out = []
    rdir, cdir = conf.get("storePathRootDir"), conf.get("storePathCommitLog")
    if rdir and os.path.realpath(rdir) != os.path.realpath(root):
        out.append(f"{conf.where('storePathRootDir')}: storePathRootDir is {rdir}, not the store given ({root}): "
                   f"{root} is read (a copy?), nothing under {rdir}")
    if cdir and os.path.realpath(cdir) != os.path.realpath(commitlog_dir):
        base = rdir or os.path.join(os.path.expanduser("~"), "store")  # MessageStoreConfig's default root
        rel = os.path.relpath(cdir, base) if _inside(cdir, base) else None
        if rel == "commitlog":
            pass  # the broker's layout; the copy's commitlog/ is its copy
        elif rel is not None:
            there = os.path.join(root, rel)
            out.append(f"{conf.where('storePathCommitLog')}: the broker keeps its commit log in {rel}/ of its store "
                       f"({cdir}); {commitlog_dir} is read"
                       + (f": give {there} as STORE to read the copy's {rel}/" if os.path.isdir(there) else ""))
        else:
            out.append(f"{conf.where('storePathCommitLog')}: storePathCommitLog is {cdir}, outside the broker's store "
                       f"root: it is not read; {commitlog_dir} is (give the copy of {cdir} as STORE to read it)")
    return out


def check_commitlog_dir(layout, directory: str, names: list[str], is_offset_name: Callable[[str], bool]) -> None:
    """The checks above for one commit-log directory of ``layout``, said through ``notice``. A DLedger member's
    data directory is not where storePathCommitLog points (a DLedger broker ignores that key): its configured
    paths are said by the layout itself (storePathDLedgerCommitLog)."""
    conf_notes = store_path_notes(layout.root, directory, layout.conf) if layout.dledger is None else []
    for note in conf_notes + commitlog_entry_notes(layout.root, directory, names,
                                                                                is_offset_name):
        notice(layout.notes, note)


__all__ = ["check_commitlog_dir", "commitlog_entry_notes", "notice", "set_notice_sink", "store_path_notes"]
