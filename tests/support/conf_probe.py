"""A task for the local parallel engine's workers: the broker.conf value they see (tests/test_parallel.py)."""

from __future__ import annotations


def configured_value(key: str):
    from rmqinspect.store.broker_conf import configured

    s = configured(key)
    return None if s is None else (s.value, s.source)
