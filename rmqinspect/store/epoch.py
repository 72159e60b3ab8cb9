"""A replica's HA files: ``epochFileCheckpoint`` (+ ``.bak``) read as the broker reads them, and which HA mode and role
the store and its broker.conf show.

``read_epoch_checkpoint`` follows ``CheckpointFile.read()`` (develop 8fc57f1): the file is read; if it throws an
IOException (count or CRC mismatch) or reads no entries, the ``.bak`` is read instead; a missing file reads as no
entries. A count or CRC line that is not a number throws NumberFormatException, which is no IOException: the
``.bak`` is not tried and ``AutoSwitchHAService.init`` fails. Nothing here writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..formats.epoch import EpochEntry, EpochFileParse, parse_epoch_file
from .broker_conf import BrokerConf

EPOCH_FILE = "epochFileCheckpoint"
BROKER_IDENTITY = "brokerIdentity"
MAX_EPOCH_FILE_BYTES = 1 << 20  # one short line per epoch: a megabyte is tens of thousands of failovers


@dataclass
class EpochFile:
    path: str
    present: bool
    bak_present: bool
    primary: EpochFileParse | None
    bak: EpochFileParse | None
    used: str | None  # "file" | "bak" | None (no entries anywhere, or the read fails)
    entries: list[EpochEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # sentences for people, each naming the file
    read_fails: bool = False  # the broker's read throws: the HA service does not initialise

    def to_dict(self) -> dict:
        def one(p: EpochFileParse | None) -> dict | None:
            if p is None:
                return None
            return {"count": p.count, "stored_crc": p.stored_crc, "computed_crc": p.computed_crc,
                    "crc_checked": p.crc_checked, "error": p.error, "entries": [e.to_dict() for e in p.entries]}

        return {"path": self.path, "present": self.present, "bak_present": self.bak_present, "used": self.used,
                "entries": [e.to_dict() for e in self.entries], "file": one(self.primary), "bak": one(self.bak),
                "read_fails": self.read_fails, "problems": self.problems}


def _read(path: str) -> bytes | None:
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return f.read(MAX_EPOCH_FILE_BYTES + 1)


def read_epoch_checkpoint(root: str) -> EpochFile:
    path = os.path.join(root, EPOCH_FILE)
    bak_path = path + ".bak"
    raw, raw_bak = _read(path), _read(bak_path)
    primary = parse_epoch_file(raw) if raw is not None else None
    bak = parse_epoch_file(raw_bak) if raw_bak is not None else None
    out = EpochFile(path, raw is not None, raw_bak is not None, primary, bak, None)
    for p, parsed, data in ((path, primary, raw), (bak_path, bak, raw_bak)):
        if data is not None and len(data) > MAX_EPOCH_FILE_BYTES:
            out.problems.append(f"{p}: larger than {MAX_EPOCH_FILE_BYTES} bytes; not an epoch file")
        if parsed is not None and parsed.error:
            out.problems.append(f"{p}: {parsed.error}")
        if parsed is not None and parsed.ok and not parsed.crc_checked and parsed.entries:
            out.problems.append(f"{p}: CRC line is 0, so the broker does not check the entries")

    def take(which: str, parsed: EpochFileParse | None) -> None:
        out.used = which if parsed is not None and parsed.entries else None
        out.entries = list(parsed.entries) if parsed is not None else []

    if primary is not None and primary.fatal:
        out.read_fails = True
        out.problems.append(f"{path}: the broker's read throws NumberFormatException (not an IOException, so the "
                            ".bak is not tried): AutoSwitchHAService.init fails and the broker does not start")
        return out
    if primary is not None and primary.ok and primary.entries:
        take("file", primary)
    else:
        if primary is not None and not primary.ok:
            out.problems.append(f"{path}: rejected ({primary.error}); the broker reads {bak_path} instead")
        if bak is None or not bak.entries and bak.ok:
            take("none", None)
        elif bak.fatal:
            out.read_fails = True
            out.problems.append(f"{bak_path}: the broker's read throws NumberFormatException ({bak.error}): "
                                "AutoSwitchHAService.init fails and the broker does not start")
            take("none", None)
        elif not bak.ok:
            out.problems.append(f"{bak_path}: rejected too ({bak.error}); EpochFileCache.initCacheFromFile "
                                "returns false and the replica runs with no epochs (to a master: a new replica)")
            take("none", None)
        else:
            take("bak", bak)
    _check_order(out)
    return out


def _check_order(ef: EpochFile) -> None:
    where = ef.path + (".bak" if ef.used == "bak" else "")
    for a, b in zip(ef.entries, ef.entries[1:]):
        if b.epoch <= a.epoch or b.start_offset < a.start_offset:
            ef.problems.append(
                f"{where}: entry {b.epoch}-{b.start_offset} follows {a.epoch}-{a.start_offset} (epochs and start "
                "offsets must both increase); the broker keeps the entries sorted by epoch but ends each at the "
                "next line's start, so its epoch ranges are not the log's")
            break


@dataclass
class HaIdentity:
    """Which HA mode and role a store shows, each with where it comes from."""

    mode: str  # classic | controller | dledger
    mode_evidence: str
    role: str | None  # ASYNC_MASTER | SYNC_MASTER | SLAVE, or None when nothing says
    role_evidence: str
    broker_id: int | None
    broker_id_evidence: str
    broker_name: str | None = None
    cluster: str | None = None

    def to_dict(self) -> dict:
        return {"mode": self.mode, "mode_evidence": self.mode_evidence, "role": self.role,
                "role_evidence": self.role_evidence, "broker_id": self.broker_id,
                "broker_id_evidence": self.broker_id_evidence, "broker_name": self.broker_name,
                "cluster": self.cluster}


def read_broker_identity(root: str) -> tuple[str, str, int] | None:
    """``brokerIdentity`` (controller mode): ``cluster#broker#brokerId`` (BrokerMetadata#encodeToStr); the .bak when
    the file is unreadable. None when neither parses."""
    for p in (os.path.join(root, BROKER_IDENTITY), os.path.join(root, BROKER_IDENTITY + ".bak")):
        data = _read(p)
        if not data:
            continue
        parts = data.decode("utf-8", errors="replace").strip().split("#")
        if len(parts) >= 3 and parts[2].lstrip("-").isdigit():
            return parts[0], parts[1], int(parts[2])
    return None


def ha_identity(root: str, *, dledger: bool, epoch_file: EpochFile, confirm_phy_offset: int | None,
                conf: BrokerConf | None) -> HaIdentity:
    def conf_value(key: str):
        return None if conf is None else conf.get(key)

    ident = read_broker_identity(root)
    enabled = conf_value("enableControllerMode")
    if dledger:
        mode, mode_ev = "dledger", "a dledger-<selfId> directory holds the commit log (enableDLegerCommitLog)"
    elif enabled is not None:
        mode = "controller" if enabled else "classic"
        mode_ev = f"enableControllerMode={str(enabled).lower()} in {conf.where('enableControllerMode')}"  # type: ignore[union-attr]
        if not enabled and epoch_file.present:
            mode_ev += f"; but {EPOCH_FILE} is present (the store was in controller mode once)"
    elif epoch_file.present or epoch_file.bak_present:
        mode, mode_ev = "controller", f"{EPOCH_FILE} is present (only AutoSwitchHAService writes it)"
    elif ident is not None:
        mode, mode_ev = "controller", f"{BROKER_IDENTITY} is present (written after the controller confirms an id)"
    else:
        mode, mode_ev = "classic", ("no epoch file and no brokerIdentity: classic master/slave or a single broker "
                                    "(enableControllerMode in broker.conf settles it)")
        if confirm_phy_offset:
            # CommitLog.recoverNormally/Abnormally end with setConfirmOffset(lastValidMsgPhyOffset) in classic mode
            mode_ev += ("; confirmPhyOffset is set, which a classic broker's recovery also writes (the last valid "
                        "message's start), so it does not tell the modes apart")
    role = conf_value("brokerRole")
    broker_id = conf_value("brokerId")
    if role is not None:
        role_ev = f"brokerRole in {conf.where('brokerRole')}"  # type: ignore[union-attr]
        if mode == "controller":
            role_ev += " (in controller mode the controller assigns the role at run time; this is the start value)"
    else:
        role_ev = "not recorded in the store: brokerRole in broker.conf settles it (--broker-config; peers --conf)"
    id_ev = f"brokerId in {conf.where('brokerId')}" if broker_id is not None else ""  # type: ignore[union-attr]
    name = cluster = None
    if ident is not None:
        cluster, name, ident_id = ident
        if broker_id is None:
            broker_id, id_ev = ident_id, f"{BROKER_IDENTITY} ({cluster}#{name}#{ident_id})"
    if broker_id is None:
        id_ev = "not recorded in the store: brokerId in broker.conf settles it"
    if role is None and broker_id is not None and mode == "classic":
        role = "SLAVE" if broker_id > 0 else None
        if role:
            role_ev = f"brokerId {broker_id} > 0 (a classic broker with brokerId > 0 runs as SLAVE)"
    return HaIdentity(mode, mode_ev, role, role_ev, broker_id, id_ev, name, cluster)
