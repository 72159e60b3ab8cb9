"""Writer-made stores of transactions (the broker-level convention with 4.x store-level records beside it)."""

from __future__ import annotations

from rmqinspect.fixtures.commitlog import MessageSpec
from rmqinspect.fixtures.store import StoreWriter
from rmqinspect.fixtures.transaction import TransactionalBroker, checker_offsets_json
from rmqinspect.formats.commitlog import encode_properties
from rmqinspect.formats.constants import TransactionType

T0 = 1_795_300_000_000


def write_every_verdict(root, *, crash_record_before: str | None = None, five: bool = True):
    """One store with every verdict, both conventions; returns the broker-level halves by UNIQ_KEY."""
    w = StoreWriter(str(root), commitlog_file_size=1 << 16, abort=crash_record_before is not None,
                    config={"consumerOffset.json": checker_offsets_json(4, 2)})
    b = TransactionalBroker(w, five=five, batch_op=five)
    h = {}
    h["C"] = b.half("OrderTopic", 1, b"a", "UKC", T0, keys="ord-1 ord-2")
    h["R"] = b.half("PayTopic", 0, b"b", "UKR", T0 + 1)
    b.commit(h["C"], T0 + 2)
    b.op([h["C"], h["R"]], T0 + 3)  # one batched op ends both
    w.append(MessageSpec("OrderTopic", 0, b"plain", encode_properties({"UNIQ_KEY": "PLAIN"}), store_timestamp=T0 + 4))
    h["D"] = b.half("OrderTopic", 2, b"c", "UKD", T0 + 5)
    b.commit(h["D"], T0 + 6)  # crash before the op: in doubt
    c = h["O"] = b.half("OrderTopic", 0, b"d", "UKO", T0 + 7)
    for i in range(3):
        c = b.check(c, T0 + 10 + i)
    g = h["G"] = b.half("LogTopic", 0, b"e", "UKG", T0 + 20)
    g = b.check(b.check(g, T0 + 21), T0 + 22)
    b.give_up(g, T0 + 23)
    h["K"] = b.half("OrderTopic", 3, b"f", "UKK", T0 + 30)
    k = b.check(h["K"], T0 + 31, immunity=True)
    b.commit(k, T0 + 32)  # the producer's answer to the check names the copy
    b.op([k], T0 + 33)
    # 4.x store level in the same store
    p = w.append(MessageSpec("OrderTopic", 1, b"p", encode_properties({"UNIQ_KEY": "UKP", "TRAN_MSG": "true",
                                                                      "PGROUP": "pg-4"}),
                             sys_flag=TransactionType.PREPARED, store_timestamp=T0 + 40))
    w.append(MessageSpec("OrderTopic", 1, b"p", encode_properties({"UNIQ_KEY": "UKP"}),
                         sys_flag=TransactionType.COMMIT, store_timestamp=T0 + 41,
                         prepared_transaction_offset=p.physical_offset))
    q = w.append(MessageSpec("PayTopic", 0, b"q", encode_properties({"UNIQ_KEY": "UKQ", "TRAN_MSG": "true"}),
                             sys_flag=TransactionType.PREPARED, store_timestamp=T0 + 42))
    w.append(MessageSpec("PayTopic", 0, b"q", b"", sys_flag=TransactionType.ROLLBACK, store_timestamp=T0 + 43,
                         prepared_transaction_offset=q.physical_offset))
    w.append(MessageSpec("PayTopic", 0, b"open", encode_properties({"UNIQ_KEY": "UKN", "TRAN_MSG": "true"}),
                         sys_flag=TransactionType.PREPARED, store_timestamp=T0 + 44))
    # the crash: a record the recovery refuses (body CRC), then what was written after it
    h["X"] = b.half("OrderTopic", 1, b"x", "UKX", T0 + 50)
    bad = MessageSpec("OrderTopic", 0, b"torn", encode_properties({"UNIQ_KEY": "BAD"}), store_timestamp=T0 + 51,
                      body_crc=12345)
    if crash_record_before == "commit":
        w.append(bad)
    b.commit(h["X"], T0 + 52)
    if crash_record_before == "op":
        w.append(bad)
    b.op([h["X"]], T0 + 53)
    w.close()
    return h
