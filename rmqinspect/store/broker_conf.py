"""The broker's own properties file (``broker.conf``): the settings a copied store cannot prove by itself.

The broker reads it with ``java.util.Properties.load`` and ``MixAll.properties2Object`` into BrokerConfig and
MessageStoreConfig, matching keys to setter names. The syntax (``key=value``, ``key: value`` or ``key value``;
``#``/``!`` comments; ``\\`` line continuations; ``\\uXXXX`` escapes) is read by the ``javaproperties`` package,
which implements Properties.load's grammar and is tested against Java; what is ours is the keys the analyses
need, typed as their setters are. Unknown keys are ignored, as the broker ignores them. Where the
broker would silently skip a value its setter cannot parse (``Integer.parseInt`` throwing inside
``properties2Object``), we refuse it with the line number: a wrong number here would make every answer that
depends on it silently wrong.

Precedence, applied by ``Setting.resolve``: an explicit flag wins over this file, the file over inference
from the data, inference over the broker's default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import BrokerConfigError

MAX_CONF_BYTES = 1 << 20  # a broker.conf is a few KB; anything larger is not one

# key -> type, as MessageStoreConfig / BrokerConfig declare the setter (int covers Java int and long)
KNOWN_KEYS: dict[str, type] = {
    "storePathRootDir": str,
    "storePathCommitLog": str,
    "storePathDLedgerCommitLog": str,
    "mappedFileSizeCommitLog": int,
    "mappedFileSizeConsumeQueue": int,
    "mapperFileSizeBatchConsumeQueue": int,
    "mappedFileSizeConsumeQueueExt": int,
    "mappedFileSizeTimerLog": int,
    "maxHashSlotNum": int,
    "maxIndexNum": int,
    "maxMsgsNumBatch": int,
    "messageDelayLevel": str,
    "storeType": str,
    "checkCRCOnRecover": bool,
    "messageIndexEnable": bool,
    "messageIndexSafe": bool,
    "enableConsumeQueueExt": bool,
    "fileReservedTime": int,
    "deleteWhen": str,
    "diskMaxUsedSpaceRatio": int,
    "cleanFileForciblyEnable": bool,
    "brokerRole": str,
    "offsetCheckInSlave": bool,
    "timerPrecisionMs": int,
    "timerWheelEnable": bool,
    "enableDLegerCommitLog": bool,
    "dLegerGroup": str,
    "dLegerSelfId": str,
    "dLegerPeers": str,
    "brokerName": str,
    "brokerClusterName": str,
    "maxTransferBytesOnMessageInMemory": int,
    "maxTransferCountOnMessageInMemory": int,
    "maxTransferBytesOnMessageInDisk": int,
    "maxTransferCountOnMessageInDisk": int,
    "accessMessageInMemoryMaxRatio": int,
    "travelCqFileNumWhenGetMessage": int,
    "duplicationEnable": bool,
    "enableLmq": bool,
    "enableMultiDispatch": bool,
    # 5.3.4+ (VERSIONS.md §1.2, §1.3)
    "rocksdbCQDoubleWriteEnable": bool,
    "combineCQPreferCQType": str,
    "combineAssignOffsetCQType": str,
    "combineCQLoadingCQTypes": str,
    "combineCQMaxExtraSearchCommitLogFiles": int,
    "enableAcceleratedRecovery": bool,
    "useSingleRocksDBForAllConfigs": bool,
    # 5.4.0+ (RIP-82) and 5.5.0+; modelled from the change descriptions
    "indexRocksDBEnable": bool,
    "timerRocksDBEnable": bool,
    "transRocksDBEnable": bool,
    "indexFileWriteEnable": bool,
    "checkCommitLogOffsetOnRecover": bool,
    "useSeparateStorePathForRocksdbCQ": bool,
    # HA (REPLICAS.md): the role and mode a copy ran with
    "brokerId": int,
    "enableControllerMode": bool,
    "allAckInSyncStateSet": bool,
    "readUnCommitted": bool,
}
# keys MessageStoreConfig has only from a release on: a broker.conf that sets one was written for that release
# or a later one (a key the broker does not know it ignores, so this is a lower bound a user chose, not a proof)
KEY_SINCE: dict[str, str] = {
    "rocksdbCQDoubleWriteEnable": "5.3.4", "combineCQPreferCQType": "5.3.4", "combineAssignOffsetCQType": "5.3.4",
    "combineCQLoadingCQTypes": "5.3.4", "combineCQMaxExtraSearchCommitLogFiles": "5.3.4",
    "enableAcceleratedRecovery": "5.3.4", "useSingleRocksDBForAllConfigs": "5.3.4",
    "indexRocksDBEnable": "5.4.0", "timerRocksDBEnable": "5.4.0", "transRocksDBEnable": "5.4.0",
    "indexFileWriteEnable": "5.4.0", "checkCommitLogOffsetOnRecover": "5.5.0",
    "useSeparateStorePathForRocksdbCQ": "5.5.0",
}
JAVA_INT_KEYS = {"combineCQMaxExtraSearchCommitLogFiles",
                 "maxHashSlotNum", "maxIndexNum", "mappedFileSizeConsumeQueue", "mapperFileSizeBatchConsumeQueue",
                 "mappedFileSizeTimerLog", "maxMsgsNumBatch", "fileReservedTime", "diskMaxUsedSpaceRatio",
                 "timerPrecisionMs", "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
                 "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk",
                 "accessMessageInMemoryMaxRatio", "travelCqFileNumWhenGetMessage", "mappedFileSizeCommitLog"}
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Properties.load's line terminators


@dataclass
class BrokerConf:
    path: str
    values: dict[str, Any] = field(default_factory=dict)  # known keys only, typed
    lines: dict[str, int] = field(default_factory=dict)  # key -> line it was read from
    ignored: list[str] = field(default_factory=list)  # unknown keys, for --debug

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def where(self, key: str) -> str:
        return f"{self.path}:{self.lines[key]} ({key})" if key in self.lines else f"{self.path} ({key})"


def _key_values(text: str, path: str) -> Iterator[tuple[int, str, str]]:
    """(first physical line, key, value) of every entry, as ``java.util.Properties.load`` reads them (the
    ``javaproperties`` package: separators, ``\\`` continuations, ``\\uXXXX`` escapes). A malformed ``\\u`` escape,
    on which Properties.load throws and the broker does not start, is refused naming the line."""
    import javaproperties  # only when a broker.conf is given: its import (~40 ms) is not paid by every command

    line = 1
    elements = javaproperties.parse(text)
    while True:
        try:
            el = next(elements)
        except StopIteration:
            return
        except javaproperties.InvalidUEscapeError as e:
            raise BrokerConfigError(f"{e}: Properties.load refuses the file", f"{path}:{line}") from None
        if isinstance(el, javaproperties.KeyValue):
            yield line, el.key, el.value
        line += len(_LINE_BREAK.findall(el.source))


def _typed(key: str, raw: str, where: str) -> Any:
    kind = KNOWN_KEYS[key]
    v = raw.strip()
    if kind is str:
        return v
    if kind is bool:
        if v.lower() not in ("true", "false"):
            raise BrokerConfigError(f"{key}={raw!r}: not true/false (Boolean.parseBoolean would read it as false)",
                                    where)
        return v.lower() == "true"
    if not (v.lstrip("+-").isascii() and v.lstrip("+-").isdigit()) or len(v) > 20:
        raise BrokerConfigError(f"{key}={raw!r}: not an integer", where)
    n = int(v)
    lo, hi = (INT_MIN, INT_MAX) if key in JAVA_INT_KEYS else (LONG_MIN, LONG_MAX)
    if not lo <= n <= hi:
        raise BrokerConfigError(f"{key}={v}: outside the Java {'int' if hi == INT_MAX else 'long'} range", where)
    return n


def read_broker_conf(path: str | os.PathLike) -> BrokerConf:
    """Parse a broker.conf; raises BrokerConfigError (exit 2) naming file and line for a malformed value."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise BrokerConfigError("no such broker config file", p)
    if os.path.getsize(p) > MAX_CONF_BYTES:
        raise BrokerConfigError(f"larger than {MAX_CONF_BYTES} bytes: not a broker.conf", p)
    with open(p, "rb") as f:
        text = f.read().decode("latin-1")  # Properties.load(InputStream) reads ISO-8859-1
    conf = BrokerConf(p)
    for no, key, value in _key_values(text, p):
        if key not in KNOWN_KEYS:
            conf.ignored.append(key)
            continue
        conf.values[key] = _typed(key, value, f"{p}:{no}")
        conf.lines[key] = no
    for key in ("maxHashSlotNum", "maxIndexNum", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
                "mapperFileSizeBatchConsumeQueue", "timerPrecisionMs"):
        if key in conf.values and conf.values[key] <= 0:
            raise BrokerConfigError(f"{key}={conf.values[key]}: must be positive", f"{p}:{conf.lines[key]}")
    return conf


@dataclass(frozen=True)
class Setting:
    """A value and where it came from: flag | config | inferred | default | ambiguous."""

    value: Any
    source: str
    detail: str = ""
    candidates: tuple = ()

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"value": self.value, "source": self.source}
        if self.detail:
            d["detail"] = self.detail
        if self.candidates:
            d["candidates"] = list(self.candidates)
        return d

    @staticmethod
    def resolve(flag: Any, conf: BrokerConf | None, key: str, inferred: Setting | None = None,
                default: Any = None) -> Setting:
        """Explicit flag > broker.conf > inference from the data > the broker's default."""
        if flag is not None:
            return Setting(flag, "flag")
        if conf is not None and key in conf.values:
            return Setting(conf.values[key], "config", conf.where(key))
        if inferred is not None:
            return inferred
        return Setting(default, "default", f"broker default for {key}")


def configured(conf: BrokerConf | None, key: str) -> Setting | None:
    """``key`` from ``conf`` (the broker.conf given to the command, ``Store.conf``) as a Setting(source="config"),
    or None when there is no broker.conf or it does not set the key."""
    if conf is None or key not in conf.values:
        return None
    return Setting(conf.values[key], "config", conf.where(key))
