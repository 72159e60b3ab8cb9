"""``np.unique``'s plain answers for integer arrays, without ``np.unique``: from numpy 2.3 on, it asks numpy.ma
whether its argument is a masked array, which imports numpy.ma (~40 ms) the first time in a process; verify's
index check, the report and txn would each pay it for one call."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of integer array ``a``, ascending (``np.unique(a)``)."""
    import numpy as np

    s = np.sort(a, axis=None)
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def has_repeats(a: np.ndarray) -> bool:
    """Whether integer array ``a`` holds a value twice (``np.unique(a).size != a.size``)."""
    import numpy as np

    s = np.sort(a, axis=None)
    return bool(s.size > 1 and (s[1:] == s[:-1]).any())


__all__ = ["distinct", "has_repeats"]
