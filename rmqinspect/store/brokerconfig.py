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

from .errors import CorruptDataError

CONFIG_FILES = {
    "topics": "topics.json",
    "subscriptionGroups": "subscriptionGroup.json",
    "consumerOffsets": "consumerOffset.json",
    "delayOffsets": "delayOffset.json",
}
MAX_CONFIG_BYTES = 256 << 20  # bounded memory: a config file larger than this is not a real broker config


def quote_bare_keys(text: str) -> str:
    """Quote fastjson's bare integer object keys (``{0:1}`` -> ``{"0":1}``), never touching string literals."""
    out: list[str] = []
    i, n = 0, len(text)
    expect_key = False  # just after '{' or ',' (outside strings), whitespace skipped
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


def parse_fastjson(text: str):
    return json.loads(quote_bare_keys(text))


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


# -- decoders (plain rows) -----------------------------------------------------------------------------
def topic_rows(data: dict | None) -> list[dict]:
    out = []
    for name, tc in ((data or {}).get("topicConfigTable") or {}).items():
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
    for name, g in ((data or {}).get("subscriptionGroupTable") or {}).items():
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
    for key, table in ((data or {}).get("offsetTable") or {}).items():
        parts = key.split("@")
        if len(parts) != 2:
            if problems is not None:
                problems.append(f"offsetTable key {key!r} does not split into topic@group; ignored")
            continue
        for qid, off in (table or {}).items():
            try:
                out.append({"topic": parts[0], "group": parts[1], "queue_id": int(qid), "offset": int(off)})
            except (TypeError, ValueError):
                if problems is not None:
                    problems.append(f"offsetTable[{key!r}][{qid!r}] = {off!r} is not an integer")
    out.sort(key=lambda r: (r["topic"], r["group"], r["queue_id"]))
    return out


def delay_offset_rows(data: dict | None) -> list[dict]:
    out = []
    for level, off in ((data or {}).get("offsetTable") or {}).items():
        lv = int(level)
        out.append({"delay_level": lv, "queue_id": lv - 1, "offset": int(off)})
    out.sort(key=lambda r: r["delay_level"])
    return out


@dataclass
class BrokerConfig:
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


def read_broker_config(config_dir: str) -> BrokerConfig:
    loads = {k: load_config_file(config_dir, f) for k, f in CONFIG_FILES.items()}
    problems = [p for ld in loads.values() for p in ld.problems]
    try:
        topics = topic_rows(loads["topics"].data)
        groups = subscription_group_rows(loads["subscriptionGroups"].data)
        offsets = consumer_offset_rows(loads["consumerOffsets"].data, problems)
        delays = delay_offset_rows(loads["delayOffsets"].data)
    except (AttributeError, TypeError, ValueError) as e:
        raise CorruptDataError(f"config content has an unexpected shape: {e}", config_dir) from e
    return BrokerConfig(loads, topics, groups, offsets, delays, problems)
