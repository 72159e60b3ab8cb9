"""DLedger peers made with the project's DLedger writer, for the peer comparison tests (tests/test_dledger_peers.py,
tests/test_dledger_spark.py): one store root per member, a group after a leader change, a byte flip under an
unchanged entry header."""

from __future__ import annotations

from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.dledger import DLedgerWriter
from rmqinspect.store import Store

SIZE = 4096  # DLedger data file size


def peer_spec(i: int, tag: bytes = b"") -> MessageSpec:
    return MessageSpec(topic="T", queue_id=i % 3, body=tag + b"m%d-" % i * (1 + i % 5), born_timestamp=1000 + i,
                       store_timestamp=2000 + i)


def write_peer(root, self_id: str, plan: list[tuple[int, int, bytes]]) -> str:
    """A store root holding member ``self_id`` with entries (message number, term, body tag)."""
    w = DLedgerWriter(str(root / f"dledger-{self_id}"), SIZE, 32 * 64)
    for i, term, tag in plan:
        w.append(peer_spec(i, tag), term)
    last = w.entries[-1]
    w.write_checkpoint(last.index)
    w.write_currterm(last.term, self_id)
    return str(root)


def leader_change_group(base) -> tuple[str, str, str]:
    """Three peers under ``base`` (a, b, c): a is the leader of term 2; b kept the old leader's tail (entries 20-23
    of term 1); c fell behind at entry 14."""
    common = [(i, 1, b"") for i in range(20)]
    return (write_peer(base / "a", "n0", common + [(i, 2, b"") for i in range(20, 35)]),
            write_peer(base / "b", "n1", common + [(i, 1, b"old") for i in range(20, 24)]),
            write_peer(base / "c", "n2", common[:15]))


def flip_last_body_byte(root: str, index: int) -> None:
    """Flip the last byte of entry ``index``'s body: term, pos and size unchanged, the bytes differ."""
    with Store.open(root) as st:
        e = [x for x in st.dledger.entries() if x.index == index][0]
        path, at = e.file.path, e.position + e.size - 1
    with open(path, "r+b") as f:
        f.seek(at)
        old = f.read(1)
        f.seek(at)
        f.write(bytes([old[0] ^ 0xFF]))
