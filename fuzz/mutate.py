"""A small deterministic mutator for the CI smoke run (no atheris needed): libFuzzer's basic moves."""

from __future__ import annotations

import random

INTERESTING = [b"\x00" * 4, b"\xff" * 4, b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00" * 8, b"\xff" * 8,
               b"\x7f" + b"\xff" * 7, b"\x80" + b"\x00" * 7]


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    d = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if op == 0 and d:  # flip a bit
            i = rng.randrange(len(d))
            d[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # truncate
            del d[rng.randrange(len(d) + 1):]
        elif op == 2 and len(d) >= 8:  # an extreme integer at an aligned position
            v = rng.choice(INTERESTING)
            i = rng.randrange(0, len(d) - len(v) + 1)
            i -= i % 4
            d[i:i + len(v)] = v
        elif op == 3:  # append random bytes or zeros
            d += rng.randbytes(rng.randrange(1, 64)) if rng.random() < 0.5 else b"\0" * rng.randrange(1, 4096)
        elif op == 4 and corpus:  # splice a chunk of another input
            other = rng.choice(corpus)
            if other:
                a = rng.randrange(len(other))
                chunk = other[a:a + rng.randrange(1, 256)]
                i = rng.randrange(len(d) + 1)
                d[i:i + len(chunk)] = chunk
        elif op == 5 and d:  # erase a range
            i = rng.randrange(len(d))
            del d[i:i + rng.randrange(1, 64)]
        elif op == 6 and d:  # random byte
            d[rng.randrange(len(d))] = rng.randrange(256)
    return bytes(d)
