"""Broker config files under ``ROOT/config/`` (FORMATS.md §9) as the recovery analyses need them.

A thin view over ``store.brokerconfig`` (the one fastjson-tolerant loader with the ``.bak`` fallback of
``ConfigManager.load``): ``read_config`` returns None when the file was never written and raises when it
exists but neither it nor its ``.bak`` can be parsed. Read-only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .brokerconfig import load_config_file, parse_fastjson, quote_bare_keys
from .errors import CorruptDataError

fastjson_to_json = quote_bare_keys

__all__ = ["ConfigFile", "read_config", "parse_fastjson", "fastjson_to_json"]


@dataclass
class ConfigFile:
    name: str  # e.g. consumerOffset.json
    path: str  # the file actually parsed
    data: object
    used_backup: bool
    problems: list[str] = field(default_factory=list)  # why the main file was not used

    @property
    def source(self) -> str:
        return os.path.basename(self.path)


def read_config(config_dir: str, name: str) -> ConfigFile | None:
    """Parse ``config_dir/name``, falling back to ``name.bak``. None when neither exists.
    Raises CorruptDataError when a candidate exists but none parses."""
    load = load_config_file(config_dir, name)
    if load.used is not None:
        return ConfigFile(name, load.used, load.data, load.source == "bak",
                          [load.reason] if load.source == "bak" else [])
    if not load.problems:
        return None
    raise CorruptDataError("; ".join(load.problems), os.path.join(config_dir, name), 0)
