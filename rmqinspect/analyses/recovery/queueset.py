"""The consume queues of a store while recovery runs, by (topic, queueId): the set every step of the recovery
(``scan``, ``queues``, ``combine``, ``rocksdb``, ``batch``) shares, in a module of its own so that none of them
imports another to reach it."""

from __future__ import annotations


class QueueSet:
    """Every consume queue of the store while recovery runs (file or RocksDB models), in the order they were
    loaded or created, and by (topic, queueId)."""

    def __init__(self, models: list | None = None):
        self.models: list = []
        self.by_key: dict = {}
        for m in models or ():
            self.add(m)

    def add(self, model):
        self.models.append(model)
        self.by_key[(model.cq.topic, model.cq.queue_id)] = model
        return model

    def find(self, topic: str, queue_id: int):
        return self.by_key.get((topic, queue_id))

    def sorted(self) -> list:
        return sorted(self.models, key=lambda m: (m.cq.topic, m.cq.queue_id))
