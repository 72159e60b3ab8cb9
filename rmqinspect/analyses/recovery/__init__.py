"""The recovery a RocketMQ broker runs when it loads a store, reproduced offline (FORMATS.md §7).

``plan_recovery(store, RecoveryOptions(...))`` answers "what will the broker keep and what will it throw
away if I start it on these files?": normal vs abnormal mode (the ``abort`` file), the first commit-log file
scanned (by version), the record scan and its stop rule, the truncation point T, the commit-log files
deleted / truncated, every consume queue's recover + truncateDirtyLogicFiles, the records re-dispatched,
the index files dropped on an abnormal start, and the per-queue max offsets after ``load()`` and
``start()``. Nothing is written: every number is computed from read-only maps.

- ``version``: which release the plan assumes and why (the type is ``store.version.BrokerVersion``);
- ``queues``: the file consume-queue model (ConsumeQueue.recover, truncateDirtyLogicFiles, dispatch);
- ``rocksdb``: the RocksDB consume queue (5.2.0+) as recovery reads and truncates it;
- ``redispatch``: DispatchRequests built in bulk from the walk's record runs;
- ``plan``: the steps, in the broker's order (its two commit-log walks are ``store.commitlog``'s), and
  ``plan_recovery``;
- ``dledger``: DLedger's own recovery, step 1 of a DLedger store's plan (``plan.plan_dledger_recovery``);
- ``queueset``: the consume queues while recovery runs, which every step shares;
- ``scan``: the shared state, the start-file rules and the commit-log scan's control flow (no numpy);
- ``small``: that scan over row tuples for a small store (a key look-up's fates without numpy);
- ``walked``: the runs another walk of the same files hands the scan (the report: verify's), taken where they are
  the scan's own.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .plan import RecoveryOptions, RecoveryPlan, plan_recovery
    from .queues import ConsumeQueueModel, QueueRecovery
    from .redispatch import Redispatch
    from .rocksdb import RocksDBQueues, read_rocksdb_queues
    from .version import BrokerVersion, VersionAssumption, detect_version

# where each name lives: imported on first use, so that ``recovery.scan`` / ``recovery.small`` (a key look-up's
# fates) load without the plan's numpy modules
_HOME = {"RecoveryOptions": "scan", "RecoveryPlan": "plan", "plan_recovery": "plan", "ConsumeQueueModel": "queues",
         "QueueRecovery": "queues", "Redispatch": "redispatch", "RocksDBQueues": "rocksdb",
         "read_rocksdb_queues": "rocksdb", "BrokerVersion": "version", "VersionAssumption": "version",
         "detect_version": "version"}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = ["BrokerVersion", "ConsumeQueueModel", "QueueRecovery", "RecoveryOptions", "RecoveryPlan", "Redispatch",
           "RocksDBQueues", "VersionAssumption", "detect_version", "plan_recovery", "read_rocksdb_queues"]
