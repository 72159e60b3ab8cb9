"""A consume queue's entries after restart, for ``cq``: each on-disk entry's fate once the broker has recovered
the directory (``EntryFates``, streaming), and the recovery plan ``cq`` asks (``cq_recovery_plan``)."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import RmqInspectError


def _ignore(_: str) -> None:
    pass


class EntryFates:
    """Each on-disk entry's fate once the broker has recovered the directory (ENTRY_FATES), one entry at a time:
    the shown entries stream out, never held in a list (a queue may hold millions). Entries whose records lie
    before both the truncation offset and the re-dispatch range are left as they are by every step of the
    recovery; only when an entry lies past that bound is the queue modelled (``queue_entries_after_recovery``).
    If that model fails, the entries from there on carry no fate (None), said through ``on_note``."""

    def __init__(self, st, topic: str, queue_id: int, cq_file_size, bound: int, version=None,
                 on_note: Callable[[str], None] = _ignore):
        self.st, self.key, self.cq_file_size, self.bound = st, f"{topic}/{queue_id}", cq_file_size, bound
        self.version = version
        self.on_note = on_note
        self.after: dict | None = None
        self.truncate_offset = 0
        self.failed = False
        self.shown = self.gone = 0

    @classmethod
    def of(cls, st, d, topic, queue_id, cq_file_size, version=None,
           on_note: Callable[[str], None] = _ignore) -> EntryFates | None:
        """None when the queue is read from another directory (--cq-dir) or the recovery cannot be modelled."""
        from .lookup.fates import recovery_view

        if os.path.abspath(d) != os.path.abspath(st.layout.consumequeue_dir):
            return None
        try:
            view = recovery_view(st) if version is None else recovery_view(st, version=version)
        except RmqInspectError as e:
            on_note(f"recovery not modelled ({e}): entries carry no fate after restart")
            return None
        bound = min(view.truncate_offset, view.redispatch_first if view.redispatch_first is not None else
                    view.truncate_offset)
        return cls(st, topic, queue_id, cq_file_size, bound, version, on_note)

    def __call__(self, entry) -> str | None:
        from .recovery.queues import entry_fate

        self.shown += 1
        if entry[1] < self.bound:
            return "survives"
        if self.after is None and not self.failed:
            self._model()
        if self.after is None:
            return None
        fate = entry_fate(entry, self.after, self.truncate_offset)
        self.gone += fate != "survives"
        return fate

    def _model(self) -> None:
        from .recovery.rocksdb import queue_entries_after_recovery

        try:
            plan = cq_recovery_plan(self.st, self.cq_file_size, self.version)
            after = queue_entries_after_recovery(self.st, plan, self.key)
        except RmqInspectError as e:
            self.failed = True
            self.on_note(f"recovery not modelled ({e}): entries from here on carry no fate after restart")
            return
        self.after = {e[0]: tuple(e[:4]) for e in after or ()}
        self.truncate_offset = plan.truncate_offset

    def finish(self) -> None:
        if self.gone:
            self.on_note(f"{self.gone} of {self.shown} entries shown do not survive the broker's recovery of this "
                         f"directory (truncation offset {self.truncate_offset}): see the fate column, or "
                         "--as-recovered")


def cq_recovery_plan(st, cq_file_size, version=None):
    """The recovery plan ``cq`` asks about a queue after restart: the broker.conf in effect decides the CRC check
    and messageIndexSafe, ``cq_file_size`` the consume-queue file size; no salvage, no re-dispatch list."""
    from .recovery import RecoveryOptions, plan_recovery

    return plan_recovery(st, RecoveryOptions(with_salvage=False, keep_redispatch=False, cq_file_size=cq_file_size,
                                             version=version))
