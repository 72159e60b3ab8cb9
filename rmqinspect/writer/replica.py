"""Replica sets for tests: the HA files a controller-mode or classic replica holds, written next to a store the
writer made (``StoreWriter``). Never pointed at an inspected store.

Two stores fed the same ``MessageSpec``s from the same start hold byte-identical records at identical offsets -
exactly what HA replication leaves on a slave - so a replica set is: one spec sequence for the common history,
then each replica's own tail (``diverging_replicas``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..formats.checkpoint import CHECKPOINT_FILE_SIZE
from ..formats.epoch import encode_epoch_file
from .commitlog import MessageSpec
from .store import StoreWriter

EPOCH_FILE = "epochFileCheckpoint"


def write_epoch_file(root: str, entries: Sequence[tuple[int, int]], *, crc: int | None = None,
                     bak: Sequence[tuple[int, int]] | None = None, raw: bytes | None = None,
                     raw_bak: bytes | None = None) -> None:
    """``epochFileCheckpoint`` (and its ``.bak``) as ``CheckpointFile.write`` leaves them; ``raw`` / ``raw_bak``
    write given bytes instead (damaged files for tests)."""
    with open(os.path.join(root, EPOCH_FILE), "wb") as f:
        f.write(raw if raw is not None else encode_epoch_file(list(entries), crc))
    if bak is not None or raw_bak is not None:
        with open(os.path.join(root, EPOCH_FILE + ".bak"), "wb") as f:
            f.write(raw_bak if raw_bak is not None else encode_epoch_file(list(bak or ())))


def set_confirm_offset(root: str, confirm: int) -> None:
    """Rewrite the checkpoint's confirmPhyOffset (byte 32), as ``StoreCheckpoint#setConfirmPhyOffset`` + flush."""
    path = os.path.join(root, "checkpoint")
    with open(path, "rb") as f:
        data = bytearray(f.read().ljust(CHECKPOINT_FILE_SIZE, b"\0"))
    data[32:40] = confirm.to_bytes(8, "big", signed=True)
    with open(path, "wb") as f:
        f.write(bytes(data))


def write_broker_conf(path: str, **settings) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for k, v in settings.items():
            f.write(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n")


def diverging_replicas(roots: Sequence[str], common: Sequence[MessageSpec],
                       tails: Sequence[Sequence[MessageSpec]], **store_kwargs) -> tuple[int, list[int]]:
    """One store per root: the ``common`` records, then that replica's tail. Returns (where the common records
    end - the next epoch's start offset -, each store's end offset).
    ``store_kwargs`` go to every ``StoreWriter`` (5-field checkpoint by default, so confirmPhyOffset exists)."""
    store_kwargs.setdefault("checkpoint_fields", 5)
    ends = []
    fork = 0
    for root, tail in zip(roots, tails, strict=True):
        with StoreWriter(root, **store_kwargs) as w:
            for spec in common:
                w.append(spec)
            fork = w.write_offset
            for spec in tail:
                w.append(spec)
            ends.append(w.write_offset)
    return fork, ends

