"""The per-consumer-group "lost window": committed offsets (``config/consumerOffset.json``) against each
queue's max offset before and after the broker's recovery.

For one group and queue, with ``committed`` the next logical offset the group will pull, ``before`` the
queue's max offset on disk now and ``after`` its max offset once the broker is up again (recovery, then the
ReputMessageService catching up in start()):

* ``never_see`` = entries in ``[max(committed, after), before)``: visible in the queue before the crash,
  not yet consumed by this group, and cut by the recovery - this group will never receive them;
* ``consumed_then_cut`` = entries in ``[after, min(committed, before))``: consumed before the crash but gone
  from the store; their queue offsets are handed out again to new messages after the restart;
* ``backlog`` = ``after - committed`` when positive: what the group will be delivered after the restart.
  Offsets are persisted periodically (every 5 s by default), so part of it may already have been processed:
  at-least-once delivery makes those the messages the group may see twice;
* ``status``: ``ok`` (committed within the queue), ``overflow`` (committed > after: the broker answers the
  next pull with OFFSET_OVERFLOW_BADLY and moves the group back to ``after``), ``no_queue``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import StoreNotFoundError
from ..store import Store
from ..store.config_files import ConfigFile, consumer_offset_rows, read_config


@dataclass
class GroupQueueWindow:
    group: str
    topic: str
    queue_id: int
    committed: int
    max_offset_before: int | None
    max_offset_after: int | None
    never_see: int
    consumed_then_cut: int
    backlog: int
    status: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LostWindowReport:
    source: str | None  # the file used (consumerOffset.json or its .bak)
    used_backup: bool
    problems: list[str]
    rows: list[GroupQueueWindow]

    def to_dict(self) -> dict:
        return {"source": self.source, "used_backup": self.used_backup, "problems": self.problems,
                "groups": [r.to_dict() for r in self.rows]}


def read_consumer_offsets(store: Store, path: str | None = None
                          ) -> tuple[ConfigFile | None, dict[tuple[str, str], dict[int, int]]]:
    """{(topic, group): {queueId: offset}} from consumerOffset.json (``topic@group`` keys): the store's
    ``config/consumerOffset.json`` (.bak fallback), or the file at ``path`` (a copied store often lacks its
    config/ while the file exists elsewhere)."""
    import os

    if path is not None:
        cfg = read_config(os.path.dirname(path) or ".", os.path.basename(path))
        if cfg is None:
            raise StoreNotFoundError("no such file", path)
    else:
        cfg = read_config(store.layout.config_dir, "consumerOffset.json")
    out: dict[tuple[str, str], dict[int, int]] = {}
    if cfg is None:
        return None, out
    # one typed reading of offsetTable for every command (null / string / list values are problems, not crashes)
    found: list[str] = []
    for r in consumer_offset_rows(cfg.data, found):
        out.setdefault((r["topic"], r["group"]), {})[r["queue_id"]] = r["offset"]
    cfg.problems.extend(f"{cfg.path}: {p}" for p in found)
    return cfg, out


def lost_window(store: Store, before: dict[str, int], after: dict[str, int],
                offsets_path: str | None = None) -> LostWindowReport:
    cfg, table = read_consumer_offsets(store, offsets_path)
    rows: list[GroupQueueWindow] = []
    for (topic, group), qmap in sorted(table.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        for qid, committed in sorted(qmap.items()):
            key = f"{topic}/{qid}"
            b = before.get(key)
            a = after.get(key)
            if b is None and a is None:
                rows.append(GroupQueueWindow(group, topic, qid, committed, None, None, 0, 0, 0, "no_queue"))
                continue
            b = b if b is not None else 0
            a = a if a is not None else 0
            never = max(0, b - max(committed, a))
            cut = max(0, min(committed, b) - a)
            backlog = max(0, a - committed)
            status = "overflow" if committed > a else "ok"
            rows.append(GroupQueueWindow(group, topic, qid, committed, b, a, never, cut, backlog, status))
    return LostWindowReport(cfg.source if cfg else None, cfg.used_backup if cfg else False,
                            list(cfg.problems) if cfg else ["config/consumerOffset.json not found"], rows)
