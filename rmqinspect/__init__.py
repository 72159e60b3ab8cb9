"""rmqinspect: offline forensic decoder and inspector for Apache RocketMQ store directories."""

import os as _os

# numpy's OpenBLAS starts a thread per extra core when numpy is imported, and each spins for about 0.1 s of CPU
# waiting for matrix work that rmqinspect never gives it (no BLAS call anywhere): with one thread none is started.
# Set before any module imports numpy; a value the user set wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
