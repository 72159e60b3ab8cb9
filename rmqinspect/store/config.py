"""Broker config files under ``ROOT/config/`` (FORMATS.md §9): fastjson text with a ``.bak`` fallback.

fastjson 1.x writes non-string map keys unquoted (``{0:123,1:456}``), which strict JSON rejects. The
reader quotes bare integer keys outside string literals and then parses with ``json``. Like
``ConfigManager.load`` it falls back to ``<name>.bak`` when the main file is missing, empty or does not
parse, and it says which file was used. Read-only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from .errors import CorruptDataError, StoreIOError

_STRING = re.compile(r'"(?:\\.|[^"\\])*"', re.S)
_BARE_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def fastjson_to_json(text: str) -> str:
    """Quote fastjson's unquoted integer map keys, leaving string literals untouched."""
    out = []
    last = 0
    for m in _STRING.finditer(text):
        out.append(_BARE_KEY.sub(r'\1"\2"\3', text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_BARE_KEY.sub(r'\1"\2"\3', text[last:]))
    return "".join(out)


def parse_fastjson(text: str):
    return json.loads(fastjson_to_json(text))


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
    Raises CorruptDataError when every candidate exists but none parses."""
    problems: list[str] = []
    for cand, is_bak in ((name, False), (name + ".bak", True)):
        path = os.path.join(config_dir, cand)
        if not os.path.exists(path):
            problems.append(f"{cand}: missing")
            continue
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise StoreIOError(f"cannot read: {e.strerror}", path) from e
        if not raw.strip():
            problems.append(f"{cand}: empty")
            continue
        try:
            data = parse_fastjson(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            problems.append(f"{cand}: does not parse ({e})")
            continue
        return ConfigFile(name, path, data, is_bak, problems if is_bak else [])
    if all(p.endswith(": missing") for p in problems):
        return None
    raise CorruptDataError("; ".join(problems), os.path.join(config_dir, name), 0)
