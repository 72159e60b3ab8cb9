# Type stub for the optional C extension built from _fastscan.c (see setup.py). Its functions are typed Any here;
# what they return is documented, and proven equal to the pure-Python scanner, next to their callers and in tests.
from typing import Any

def __getattr__(name: str) -> Any: ...
