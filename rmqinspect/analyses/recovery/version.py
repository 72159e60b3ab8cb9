"""Which broker version a recovery plan assumes, and why (given, detected from the files, or the default).

The version type itself is ``store.version.BrokerVersion``; this module adds the recovery's choice of a
concrete release when only the generation is known, and the sentence the report prints about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...store import Store
from ...store.broker_conf import KEY_SINCE, BrokerConf, configured
from ...store.detect import detect_store
from ...store.version import BrokerVersion

NORMAL_START_RULES = {
    "third-last": "normal recovery starts at the third-last commit-log file (4.x ... 5.3.1)",
    "cq-max": "normal recovery starts at the newest file whose start <= maxPhyOffsetOfConsumeQueue (5.3.2, 5.3.3)",
    "head": "normal recovery starts at the newest file whose first record passes the full check (CRC) and the "
            "consume-queue store's test (5.3.4+)",
}
# what the bytes of a 5.x store without a 5.3.4+ layout cannot tell apart: the band assumed and the one the plan
# also computes, so that a difference between them is said (VERSIONS.md §1.1)
ALTERNATIVES_5X = ("5.3.1", "5.3.4")
SETTLED_BY = "--broker-version (or a broker.conf key that exists only from 5.3.4, e.g. rocksdbCQDoubleWriteEnable)"

# the release assumed when the files show only the generation
ASSUMED_5X = "5.3.3"
ASSUMED_4X = "4.9.8"


@dataclass
class VersionAssumption:
    version: BrokerVersion
    source: str  # "option" | "detected" | "default"
    evidence: list[str] = field(default_factory=list)
    # DLedger mode: DLedger's own recovery decides where the walk starts, not the version's commit-log rules
    dledger: bool = False
    # releases the files cannot exclude whose recovery rules differ from ``version``'s: the plan computes their
    # answer too and says both when they differ
    alternatives: list[BrokerVersion] = field(default_factory=list)

    def describe(self) -> str:
        how = {"option": "given with --broker-version", "detected": "detected", "default": "assumed"}[self.source]
        ev = f" ({'; '.join(self.evidence)})" if self.evidence else ""
        if self.dledger:
            return (f"RocketMQ {self.version.text} {how}{ev}: in DLedger mode the commit-log start-file rules of "
                    f"normal and abnormal recovery do not apply; DLedger's recovery walks from the third-last data "
                    f"file checking entry headers and index units (no CRC), the same after a clean or a crashed "
                    f"shutdown (modelled on RocketMQ 4.9.8's DLedgerCommitLog over DLedger 0.3.1.2)")
        abn = ("abnormal recovery starts at the newest file whose first record validates and is not newer than "
               "the checkpoint minTimestamp" if self.version.normal_rule == "head" else
               "abnormal recovery starts at the newest file whose first record is not newer than the checkpoint "
               "minTimestamp")
        alt = ""
        if self.alternatives:
            alt = (f"; the files cannot tell it from {', '.join(a.recovery_band for a in self.alternatives)} "
                   f"(settled by {SETTLED_BY})")
        return (f"RocketMQ {self.version.text} ({self.version.recovery_band}) {how}{ev}: "
                f"{NORMAL_START_RULES[self.version.normal_rule]}; {abn}{alt}")

    def to_dict(self) -> dict:
        return {"version": self.version.text, "source": self.source, "evidence": self.evidence,
                "normal_start_rule": "dledger" if self.dledger else self.version.normal_rule,
                "recovery_band": self.version.recovery_band,
                "alternatives": [a.text for a in self.alternatives],
                "description": self.describe()}


def detect_version(store: Store) -> VersionAssumption:
    """What the files themselves say about the broker version (FORMATS.md §0.1, §6), from the one store
    detector (``store.detect``): any 5.x-only structure or record format means 5.x rules."""
    det = detect_store(store)
    ev5 = [e.detail for e in det.found() if e.implies.startswith("5")]
    other = [e.detail for e in det.found() if not e.implies.startswith("5")]
    floor = det.min_release
    conf = conf_release(store.conf)
    if conf is not None and (floor is None or conf[0].parts > floor.parts):
        floor = conf[0]
        ev5 = ev5 + [conf[1]]
    if floor is not None and floor.at_least(5, 3, 4):
        # a layout (or a broker.conf key) of 5.3.4 or later: the oldest release that has it is assumed; later
        # releases differ only by opt-ins (checkCommitLogOffsetOnRecover) that are off by default
        return VersionAssumption(floor, "detected", ev5 + other +
                                 [f"release assumed: {floor.text}, the first with these layouts or settings"])
    if ev5:
        return VersionAssumption(BrokerVersion.parse(ASSUMED_5X), "detected", ev5 + other +
                                 [f"5.x release assumed: {ASSUMED_5X}; pass --broker-version for 5.0-5.3.1 or "
                                  f"5.3.4+"], alternatives=[BrokerVersion.parse(a) for a in ALTERNATIVES_5X])
    return VersionAssumption(BrokerVersion.parse(ASSUMED_4X), "default",
                             other + ["no 5.x marker found (abort PID, abort.bak, compaction/, timer store, RocksDB "
                                      "consume queue, V2 or __CRC32# records, 32/40-byte checkpoint); 4.x assumed: "
                                      f"{ASSUMED_4X}"])


def conf_release(conf: BrokerConf | None) -> tuple[BrokerVersion, str] | None:
    """The newest release a key of ``conf`` (the broker.conf given) exists from (``broker_conf.KEY_SINCE``)."""
    best = None
    for key, since in KEY_SINCE.items():
        s = configured(conf, key)
        if s is not None:
            v = BrokerVersion.parse(since)
            if best is None or v.parts > best[0].parts:
                best = (v, f"broker.conf sets {key} ({s.source}), a key from {since}")
    return best


def assume_version(store: Store, version: BrokerVersion | None) -> VersionAssumption:
    """The given version, else the one the files suggest."""
    return detect_version(store) if version is None else VersionAssumption(version, "option")


__all__ = ["ALTERNATIVES_5X", "BrokerVersion", "NORMAL_START_RULES", "SETTLED_BY", "VersionAssumption",
           "assume_version", "conf_release", "detect_version"]
