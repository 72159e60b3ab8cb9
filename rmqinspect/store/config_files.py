"""Broker config files (FORMATS.md §9): ``ROOT/config/*.json`` written by fastjson 1.x, with ``.bak``.

fastjson writes non-string map keys unquoted (``{0:250,1:250}``), which strict JSON parsers reject; we
quote bare integer keys outside string literals before ``json.loads``. Loading follows
``ConfigManager.load``: when the main file is missing, empty or unparseable, ``<file>.bak`` is used, and
the result says which file was used and why.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..errors import ConfigSyntaxError, CorruptDataError

CONFIG_FILES = {
    "topics": "topics.json",
    "subscriptionGroups": "subscriptionGroup.json",
    "consumerOffsets": "consumerOffset.json",
    "delayOffsets": "delayOffset.json",
}
MAX_CONFIG_BYTES = 256 << 20  # bounded memory: a config file larger than this is not a real broker config
# a broker's config nests 4 levels (table -> entry -> attributes); anything this deep is damage, and Python's
# json would otherwise hit RecursionError
MAX_CONFIG_DEPTH = 64
# the numbers fastjson writes are Java ints/longs (<= 20 characters); a longer literal is damage, and Python
# refuses to convert more than 4300 digits anyway
MAX_INT_DIGITS = 40


def quote_bare_keys(text: str) -> str:
    """Quote fastjson's bare integer object keys (``{0:1}`` -> ``{"0":1}``), never touching string literals."""
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False  # just after '{' or ',' (outside strings), whitespace skipped
    depth = 0  # nesting outside strings: bounded, so json.loads never recurses out of the stack
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == '"':
                    break
                j += 1
            out.append(text[i:j + 1])
            i = j + 1
            expect_key = False
            continue
        if c in "{[":
            depth += 1
            if depth > MAX_CONFIG_DEPTH:
                raise ConfigSyntaxError(f"nested deeper than {MAX_CONFIG_DEPTH} levels", i)
        elif c in "}]":
            depth -= 1
        if c in "{,":
            out.append(c)
            i += 1
            expect_key = True
            continue
        if expect_key and (c == "-" or c.isdigit()):
            j = i + 1 if c == "-" else i
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if j > i and k < n and text[k] == ":":
                out.append('"' + text[i:j] + '"')
                i = j
                expect_key = False
                continue
        if not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


def _parse_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise ConfigSyntaxError(f"an integer of {len(literal.lstrip('-'))} digits (a Java long has at most 19)")
    return int(literal)


def parse_fastjson(text: str):
    """fastjson text -> Python objects. Raises ValueError (json.JSONDecodeError, ConfigSyntaxError) for text no
    broker writes, including nesting deeper than MAX_CONFIG_DEPTH and integers longer than MAX_INT_DIGITS."""
    return json.loads(quote_bare_keys(text), parse_int=_parse_int)


@dataclass
class ConfigLoad:
    """Result of loading one config file the way ConfigManager.load does."""

    name: str
    path: str  # main file path
    used: str | None  # path actually decoded (main or .bak), None when neither was usable
    source: str  # "main" | "bak" | "missing"
    reason: str  # why that file was used
    data: dict | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "used": self.used, "source": self.source,
                "reason": self.reason, "problems": self.problems}


def _try_parse(path: str) -> tuple[dict | None, str | None]:
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return None, "missing"
    if size == 0:
        return None, "empty"
    if size > MAX_CONFIG_BYTES:
        return None, f"{size} bytes, larger than {MAX_CONFIG_BYTES}"
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 at byte {e.start}"
    if not text.strip():
        return None, "blank"
    try:
        obj = parse_fastjson(text)
    except json.JSONDecodeError as e:
        return None, f"unparseable at char {e.pos} (line {e.lineno} col {e.colno}): {e.msg}"
    except (ValueError, RecursionError) as e:
        return None, f"unparseable: {e}"
    if not isinstance(obj, dict):
        return None, f"top level is {type(obj).__name__}, not an object"
    return obj, None


def load_config_file(config_dir: str, file_name: str) -> ConfigLoad:
    path = os.path.join(config_dir, file_name)
    data, why = _try_parse(path)
    if data is not None:
        return ConfigLoad(file_name, path, path, "main", "main file parsed", data)
    bak = path + ".bak"
    bdata, bwhy = _try_parse(bak)
    if bdata is not None:
        return ConfigLoad(file_name, path, bak, "bak", f"main file {why}; loaded {file_name}.bak instead "
                                                      "(ConfigManager.load fallback)", bdata)
    problems = [] if why == "missing" and bwhy == "missing" else [f"{file_name}: {why}", f"{file_name}.bak: {bwhy}"]
    if os.path.exists(path + ".tmp"):
        problems.append(f"{file_name}.tmp present: a 4.x persist was interrupted (the .tmp holds the newest "
                        "generation, not read by the broker)")
    return ConfigLoad(file_name, path, None, "missing", f"main file {why}, .bak {bwhy}", None, problems)


@dataclass
class ConfigFile:
    """One config file as the recovery analyses use it (``read_config``)."""

    name: str  # e.g. consumerOffset.json
    path: str  # the file actually parsed
    data: object
    used_backup: bool
    problems: list[str] = field(default_factory=list)  # why the main file was not used

    @property
    def source(self) -> str:
        return os.path.basename(self.path)


def read_config(config_dir: str, name: str) -> ConfigFile | None:
    """``config_dir/name`` as ``load_config_file`` reads it (with the ``.bak`` fallback); None when neither was
    ever written; raises CorruptDataError when a candidate exists but none parses."""
    load = load_config_file(config_dir, name)
    if load.used is not None:
        return ConfigFile(name, load.used, load.data, load.source == "bak",
                          [load.reason] if load.source == "bak" else [])
    if not load.problems:
        return None
    raise CorruptDataError("; ".join(load.problems), os.path.join(config_dir, name), 0)


# -- decoders (plain rows) -----------------------------------------------------------------------------
def table_of(data, key: str, problems: list[str] | None = None, where: str = "") -> dict:
    """``data[key]`` when it is an object; a missing/null table is empty; any other type (a list, a string,
    a number where the broker writes an object) is reported in ``problems`` and read as empty."""
    if not isinstance(data, dict):
        return {}
    v = data.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        if problems is not None:
            problems.append(f"{where}{key} is a {_json_type(v)}, not an object; ignored")
        return {}
    return v


def java_long(v) -> int | None:
    """A JSON integer within a Java long; None for anything else (null, strings, floats, booleans)."""
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v if -(1 << 63) <= v < (1 << 63) else None


def _json_type(v) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(v), type(v).__name__)


def topic_rows(data: dict | None) -> list[dict]:
    out = []
    for name, tc in table_of(data, "topicConfigTable").items():
        tc = tc if isinstance(tc, dict) else {}
        perm = tc.get("perm", 6)
        out.append({"topic": tc.get("topicName", name), "read_queue_nums": tc.get("readQueueNums", 16),
                    "write_queue_nums": tc.get("writeQueueNums", 16), "perm": perm,
                    "perm_text": perm_text(perm) if isinstance(perm, int) else str(perm),
                    "topic_filter_type": tc.get("topicFilterType"), "topic_sys_flag": tc.get("topicSysFlag", 0),
                    "order": tc.get("order", False), "attributes": tc.get("attributes") or {}})
    return out


def perm_text(perm: int) -> str:
    return "".join(ch if perm & bit else "-" for ch, bit in (("P", 8), ("R", 4), ("W", 2), ("I", 1)))


def subscription_group_rows(data: dict | None) -> list[dict]:
    out = []
    for name, g in table_of(data, "subscriptionGroupTable").items():
        g = g if isinstance(g, dict) else {}
        row = {"group": g.get("groupName", name), "consume_enable": g.get("consumeEnable", True),
               "consume_broadcast_enable": g.get("consumeBroadcastEnable", False),
               "retry_queue_nums": g.get("retryQueueNums", 1), "retry_max_times": g.get("retryMaxTimes", 16),
               "consume_message_orderly": g.get("consumeMessageOrderly", False)}
        out.append(row)
    return out


def consumer_offset_rows(data: dict | None, problems: list[str] | None = None) -> list[dict]:
    """``offsetTable``: ``topic@group`` -> {queueId: next logical offset}. Keys that do not split into
    exactly two parts on '@' are skipped, as the broker does."""
    out = []
    for key, table in table_of(data, "offsetTable", problems).items():
        parts = key.split("@")
        if len(parts) != 2:
            if problems is not None:
                problems.append(f"offsetTable key {key!r} does not split into topic@group; ignored")
            continue
        for qid, off in table_of({"t": table}, "t", problems, f"offsetTable[{key!r}]: ").items():
            q = java_long(int(qid)) if _is_int_text(qid) else None
            o = java_long(off)
            if q is None or o is None:
                if problems is not None:
                    problems.append(f"offsetTable[{key!r}][{qid!r}] = {_short(off)} is not a queue id and a Java "
                                    "long offset; ignored")
                continue
            out.append({"topic": parts[0], "group": parts[1], "queue_id": q, "offset": o})
    out.sort(key=lambda r: (r["topic"], r["group"], r["queue_id"]))
    return out


def _is_int_text(s: str) -> bool:
    t = s[1:] if s[:1] == "-" else s
    return 0 < len(t) <= 19 and t.isascii() and t.isdigit()


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def delay_offset_rows(data: dict | None, problems: list[str] | None = None) -> list[dict]:
    out = []
    for level, off in table_of(data, "offsetTable", problems).items():
        lv = int(level) if _is_int_text(level) else None
        o = java_long(off)
        if lv is None or o is None:
            if problems is not None:
                problems.append(f"delayOffset offsetTable[{level!r}] = {_short(off)} is not a level and a Java "
                                "long offset; ignored")
            continue
        out.append({"delay_level": lv, "queue_id": lv - 1, "offset": o})
    out.sort(key=lambda r: r["delay_level"])
    return out


@dataclass
class ConfigFiles:
    """Every file under ``config/`` decoded (the ``config`` command)."""

    loads: dict  # kind -> ConfigLoad
    topics: list
    subscription_groups: list
    consumer_offsets: list
    delay_offsets: list
    problems: list

    def to_dict(self) -> dict:
        return {"files": {k: v.to_dict() for k, v in self.loads.items()}, "topics": self.topics,
                "subscriptionGroups": self.subscription_groups, "consumerOffsets": self.consumer_offsets,
                "delayOffsets": self.delay_offsets, "problems": self.problems}


def read_config_files(config_dir: str) -> ConfigFiles:
    loads = {k: load_config_file(config_dir, f) for k, f in CONFIG_FILES.items()}
    problems = [p for ld in loads.values() for p in ld.problems]
    try:
        topics = topic_rows(loads["topics"].data)
        groups = subscription_group_rows(loads["subscriptionGroups"].data)
        found: list[str] = []
        offsets = consumer_offset_rows(loads["consumerOffsets"].data, found)
        problems.extend(f"{loads['consumerOffsets'].used}: {p}" for p in found)
        found = []
        delays = delay_offset_rows(loads["delayOffsets"].data, found)
        problems.extend(f"{loads['delayOffsets'].used}: {p}" for p in found)
    except (AttributeError, TypeError, ValueError) as e:
        raise CorruptDataError(f"config content has an unexpected shape: {e}", config_dir) from e
    return ConfigFiles(loads, topics, groups, offsets, delays, problems)
