"""Column helpers over the compiled scanner's record rows (``store.commitlog.scan_records_array``)."""

from __future__ import annotations

import numpy as np


_TOPIC_GATHER_MAX = 256  # longest topic compared as a fixed-width byte row; longer ones are decoded one by one


def topic_ids(u8: np.ndarray, rows: np.ndarray, topics: dict[str, int]) -> np.ndarray:
    """Topic id of every row (ids in order of first appearance, as the per-record loop assigned them):
    the distinct topic byte strings of the batch are found with numpy and decoded once each."""
    tpos = rows[:, 11]
    tlen = rows[:, 12]
    width = int(tlen.max()) if len(rows) else 0
    if width > _TOPIC_GATHER_MAX:
        names = [bytes(u8[p:p + n]).decode("utf-8", "replace") for p, n in zip(tpos.tolist(), tlen.tolist())]
        return np.array([topics.setdefault(t, len(topics)) for t in names], dtype=np.int64)
    # fixed-width rows: the topic bytes padded with zeros, then its length (a topic may hold zero bytes)
    cols = np.arange(width, dtype=np.int64)
    idx = np.minimum(tpos[:, None] + cols, u8.size - 1)
    mat = np.where(cols < tlen[:, None], u8[idx], 0).astype(np.uint8)
    mat = np.concatenate([mat, tlen.astype("<u2").view(np.uint8).reshape(-1, 2)], axis=1)
    keys = np.ascontiguousarray(mat).view(np.dtype((np.void, mat.shape[1]))).ravel()
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    ids = np.empty(len(first), dtype=np.int64)
    for u in order.tolist():
        r = int(first[u])
        p, n = int(tpos[r]), int(tlen[r])
        ids[u] = topics.setdefault(bytes(u8[p:p + n]).decode("utf-8", "replace"), len(topics))
    return ids[inv.ravel()]
