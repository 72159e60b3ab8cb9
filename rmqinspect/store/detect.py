"""Which RocketMQ generation wrote a store (FORMATS.md §0.1, §6, §10): evidence, not a guess from one file.

Each signal says what was looked at and which version range it implies; the guess is "5.x" when any
5.x-only structure is present, "4.x" when the store shows only 4.x traits, "unknown" otherwise.
``--broker-version`` on the commands overrides the guess; either way ``StoreDetection.broker_version`` is the
one ``BrokerVersion`` type every analysis takes.
"""

from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass, field

from ..errors import RmqInspectError
from ..formats.checkpoint import CHECKPOINT_TABLE
from ..formats.constants import SysFlag
from ..formats.properties import has_crc32_trailer
from .layout import is_rocksdb_dir, rocksdb_files
from .version import BrokerVersion
from .walk.records import RECORDS_PER_RUN, RecordRun

SCAN_RECORDS = 5000  # records examined for V2 magic / __CRC32# / inner batch (bounded cost on huge stores)
# those checks read a run's columns as lists (a few thousand records need no numpy)
_INNER_BATCH = int(SysFlag.INNER_BATCH)  # a plain int: `int & Flag` goes through the enum machinery per record
# checkpoint fields 5.x maps after the 4.x ones
_5X_CHECKPOINT_FIELDS = tuple(CHECKPOINT_TABLE.position(n) for n in ("master_flushed_offset", "confirm_phy_offset"))


@dataclass
class Evidence:
    signal: str
    found: bool
    detail: str
    implies: str  # "5.x", "5.1.0+", "5.2.0+", "5.3.4+", "5.4.0+", "5.5.0+", "4.x", "" (neutral)


@dataclass
class StoreDetection:
    version_guess: str  # "4.x" | "5.x" | "unknown"
    consume_queue_kind: str  # "file" | "rocksdb" | "file+rocksdb" | "none"
    evidence: list[Evidence] = field(default_factory=list)
    override: BrokerVersion | None = None
    dledger: dict | None = None  # store.dledger.dledger_info in DLedger mode (enableDLegerCommitLog)

    @property
    def broker_version(self) -> BrokerVersion | None:
        """The version commands act on: the override when given, else the guess (None when unknown)."""
        if self.override is not None:
            return self.override
        return None if self.version_guess == "unknown" else BrokerVersion.parse(self.version_guess)

    @property
    def version(self) -> str:
        """``broker_version`` as text ("unknown" when there is none)."""
        v = self.broker_version
        return v.text if v is not None else self.version_guess

    @property
    def major(self) -> int | None:
        v = self.broker_version
        return v.major if v is not None else None

    def found(self) -> list[Evidence]:
        return [e for e in self.evidence if e.found]

    @property
    def min_release(self) -> BrokerVersion | None:
        """The oldest release every found layout allows (the highest "X.Y.Z+" any evidence implies), or None when
        no evidence names a release after 5.3.3: such a store's bytes cannot tell 5.3.2-5.3.3 from 5.3.4+."""
        best = None
        for e in self.found():
            if e.implies.endswith("+") and e.implies[:-1] in LAYOUT_RELEASES:
                v = BrokerVersion.parse(e.implies[:-1])
                if best is None or v.parts > best.parts:
                    best = v
        return best

    @property
    def release_sentence(self) -> str:
        """What the files say about the release band, for people (store-info, summary)."""
        if self.override is not None:
            return f"RocketMQ {self.override.text} given ({self.override.recovery_band} recovery rules)"
        floor = self.min_release
        if floor is not None:
            return (f"the layout proves RocketMQ {floor.text} or later ({floor.recovery_band} recovery rules; "
                    "later releases differ only by opt-ins)")
        if self.version_guess == "5.x":
            return ("a 5.x store without a 5.3.4-only layout: the files cannot tell the recovery bands <=5.3.1, "
                    "5.3.2-5.3.3 and 5.3.4+ apart; `recover` says where their answers differ, --broker-version "
                    "settles it")
        return f"{self.version_guess}: no 5.x recovery band applies" if self.version_guess == "4.x" else \
            "the files do not tell the release; --broker-version settles it"

    def layout_sentences(self) -> list[str]:
        """One sentence per found layout of 5.3.4 and later (store-info, summary)."""
        return [f"{e.detail} ({e.implies}; {LAYOUT_TRUST[e.implies]})" for e in self.found()
                if e.implies.endswith("+") and e.implies[:-1] in LAYOUT_RELEASES]

    def to_dict(self) -> dict:
        return {"version_guess": self.version_guess, "version": self.version,
                "override": self.override.text if self.override is not None else None,
                "consume_queue_kind": self.consume_queue_kind, "evidence": [asdict(e) for e in self.evidence],
                "commitlog_mode": "dledger" if self.dledger else "commitlog", "dledger": self.dledger,
                "min_release": self.min_release.text if self.min_release is not None else None,
                "layouts": self.layout_sentences(), "release": self.release_sentence}


# releases a layout can prove (VERSIONS.md §1.3-1.8); what each claim rests on
LAYOUT_RELEASES = ("5.3.4", "5.4.0", "5.5.0")
LAYOUT_TRUST = {"5.3.4+": "checked against develop@8fc57f1 stores",
                "5.4.0+": "modelled from the change descriptions, not checked against a broker",
                "5.5.0+": "modelled from the change descriptions, not checked against a broker"}
# names proposed for the separate RocksDB consume-queue directory of PR #10174 (the merged name was not readable)
SEPARATE_ROCKSDB_CQ_DIRS = ("consumequeue_rocksdb", "consumequeue_r")
# config files ConfigManager#persist writes through X.json -> X.json.bak (PR #9706)
_CONFIG_JSON = ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json",
                "consumerFilter.json", "timercheck", "timermetrics", "consumerOrderInfo.json", "lmqConsumerOffset.json")


def layout_evidence(root: str, cq_dir: str, config_dir: str) -> list[Evidence]:
    """The layouts of 5.3.4 and later releases (VERSIONS.md §1.3-§1.8), one Evidence each."""
    ev: list[Evidence] = []
    cq_files = os.path.isdir(cq_dir) and any(os.path.isdir(os.path.join(cq_dir, n)) for n in os.listdir(cq_dir))
    combine = cq_files and is_rocksdb_dir(cq_dir)
    ev.append(Evidence("file CQ and RocksDB CQ side by side", combine,
                       "consumequeue/ holds <topic>/<queueId> files and a RocksDB database: the "
                       "CombineConsumeQueueStore of rocksdbCQDoubleWriteEnable=true" if combine else
                       "no combined consume queue", "5.3.4+"))
    sep = [n for n in SEPARATE_ROCKSDB_CQ_DIRS if is_rocksdb_dir(os.path.join(root, n))]
    ev.append(Evidence("separate RocksDB CQ directory", bool(sep),
                       f"{sep[0]}/ holds the RocksDB consume queue (useSeparateStorePathForRocksdbCQ)" if sep else
                       "no separate RocksDB consume-queue directory", "5.5.0+"))
    rms = os.path.join(root, "RocksDBMessageStore")
    ev.append(Evidence("RocksDBMessageStore/", is_rocksdb_dir(rms),
                       "RocksDBMessageStore/ holds the RIP-82 index/timer/trans column families" if is_rocksdb_dir(rms)
                       else "no RIP-82 message RocksDB", "5.4.0+"))
    meta = os.path.join(config_dir, "metadata")
    ev.append(Evidence("config/metadata/", is_rocksdb_dir(meta),
                       "config/metadata/ holds all broker metadata in one RocksDB (useSingleRocksDBForAllConfigs)"
                       if is_rocksdb_dir(meta) else "no single metadata RocksDB", "5.3.4+"))
    bak = sorted(n for n in _CONFIG_JSON if os.path.isfile(os.path.join(config_dir, n + ".bak"))
                 and not os.path.exists(os.path.join(config_dir, n)))
    ev.append(Evidence(".bak-only configs", bool(bak),
                       f"config/{', '.join(b + '.bak' for b in bak)} without the file itself: copied during an atomic "
                       "persist (the broker reads the .bak)" if bak else "every config file present as itself",
                       "5.3.4+"))
    snaps = sorted(n for n in (os.listdir(root) if os.path.isdir(root) else ())
                   if n.startswith("timerwheel.") and n[len("timerwheel."):].isdigit())
    ev.append(Evidence("timerwheel snapshots", bool(snaps),
                       f"{len(snaps)} TimerWheel snapshot(s), newest {snaps[-1]} (timerWheelSnapshotFlush)" if snaps
                       else "no TimerWheel snapshot", "5.4.0+"))
    return ev


def _dir_nonempty(p: str) -> bool:
    return os.path.isdir(p) and bool(os.listdir(p))


def detect_store(store, broker_version: BrokerVersion | None = None,
                 scan_records: int = SCAN_RECORDS) -> StoreDetection:
    """Look at ``store`` (a Store) and return the evidence; ``broker_version`` overrides the guess. Never writes."""
    root = store.layout.root
    ev: list[Evidence] = []

    def add(signal, found, detail, implies):
        ev.append(Evidence(signal, bool(found), detail, implies))

    # checkpoint: 5.x maps more fields (masterFlushedOffset, confirmPhyOffset)
    cp = os.path.join(root, "checkpoint")
    if os.path.isfile(cp):
        with open(cp, "rb") as f:
            raw = f.read(4096)
        used = len(raw.rstrip(b"\0"))
        extra = any(struct.unpack_from(">q", raw, o)[0] for o in _5X_CHECKPOINT_FIELDS if len(raw) >= o + 8)
        at = "/".join(f"@{o}" for o in _5X_CHECKPOINT_FIELDS)
        add("checkpoint used length", extra, f"{used} non-zero prefix bytes; fields {at} "
            f"{'set' if extra else 'zero'}", "5.x" if extra else "")
    # abort: 4.x empty, 5.x the broker PID
    ab = store.layout.abort_path
    if os.path.isfile(ab):
        with open(ab, "rb") as f:
            content = f.read(64).strip()
        pid = content.isdigit()
        add("abort holds a pid", pid, f"abort present ({'pid ' + content.decode() if pid else 'empty'}): last "
            "exit abnormal", "5.x")
        add("empty abort", not content, "4.x creates an empty abort file", "4.x")
    else:
        add("abort holds a pid", False, "no abort file: last exit was clean", "")
    add("abort.bak", os.path.exists(ab + ".bak"), "MixAll.string2File leaves the previous abort as abort.bak",
        "5.x")
    add("compaction/", os.path.isdir(os.path.join(root, "compaction")), "compaction service checkpoint dir", "5.x")
    cq = store.layout.consumequeue_dir
    rocks = is_rocksdb_dir(cq)
    add("RocksDB files in consumequeue/", rocks, ", ".join(rocksdb_files(cq)[:6]) if rocks else "none", "5.2.0+")
    add("timerlog/", _dir_nonempty(os.path.join(root, "timerlog")), "timer message store log", "5.x")
    add("timerwheel", os.path.isfile(os.path.join(root, "timerwheel")), "timer wheel file", "5.x")
    add("config/timercheck", os.path.isfile(os.path.join(store.layout.config_dir, "timercheck")),
        "timer checkpoint", "5.x")
    add("batchconsumequeue/", _dir_nonempty(os.path.join(root, "batchconsumequeue")), "BatchConsumeQueue", "5.x")
    ev.extend(layout_evidence(root, cq, store.layout.config_dir))
    add("tiered_index_file/", os.path.isdir(os.path.join(root, "tiered_index_file")), "tiered-store index",
        "5.2.0+")
    member = store.layout.dledger
    add("dledger-<selfId>/data", member is not None,
        f"DLedger mode, member {member.self_id}: messages in DLedger entries (4.5+)" if member
        else "no DLedger member directory", "")
    # records: V2 magic, __CRC32# property, inner batch
    v2 = crc = inner = 0
    seen = 0
    try:
        for run in store.commitlog.walk(check_crc=False, stop_at_end=False,
                                        run_records=max(1, min(scan_records, RECORDS_PER_RUN))):
            if type(run) is not RecordRun:
                continue
            k = scan_records - seen
            pos, size = run.column("position")[:k], run.column("total_size")[:k]
            seen += len(pos)
            buf = run.file.buffer
            v2 += run.column("magic_version")[:k].count(2)
            inner += sum(1 for f in run.column("sys_flag")[:k] if f & _INNER_BATCH)
            crc += sum(1 for p, n in zip(pos, size) if has_crc32_trailer(buf, p + n))
            if seen >= scan_records:
                break
    except RmqInspectError as e:
        add("commitlog readable", False, str(e), "")
    add("V2 records", v2, f"{v2} of the first {seen} records use magic 0xDAA320AB", "5.1.0+")
    add("__CRC32# properties", crc, f"{crc} of the first {seen} records carry __CRC32#", "5.2.0+")
    add("INNER_BATCH records", inner, f"{inner} of the first {seen} records have sysflag INNER_BATCH", "5.x")
    cq_files = os.path.isdir(cq) and any(os.path.isdir(os.path.join(cq, n)) for n in os.listdir(cq))
    kind = "file+rocksdb" if rocks and cq_files else "rocksdb" if rocks else "file" if cq_files else "none"
    if any(e.found and e.implies.startswith("5") for e in ev):
        guess = "5.x"
    elif any(e.found and e.implies == "4.x" for e in ev) or seen:
        guess = "4.x"
    else:
        guess = "unknown"
    info = None
    if store.layout.dledger is not None:
        from .dledger import dledger_info

        info = dledger_info(store.dledger, store.conf)
    return StoreDetection(guess, kind, ev, broker_version, info)
