"""Transactional messages as a broker writes them (the broker-level convention, 4.3+ and 5.x), for fixtures and
benchmarks: every record goes through the caller's writer (``StoreWriter`` or ``CommitLogWriter``), so queue
offsets, files and blank records are the writer's.

What each step writes, from apache/rocketmq @5.3.3 (4.9.8 where it differs):

* ``half``: ``TransactionalMessageBridge#parseHalfMessageInner``: the producer's message with ``__transactionId__``
  = UNIQ_KEY (5.x only), ``REAL_TOPIC`` and ``REAL_QID`` added, sysFlag transaction bits reset to NOT_TYPE, topic
  ``RMQ_SYS_TRANS_HALF_TOPIC``, queue 0 (the producer had set ``TRAN_MSG=true`` and ``PGROUP``).
* ``commit``: ``EndTransactionProcessor#endMessageTransaction``: topic REAL_TOPIC, queue REAL_QID, the half's body,
  flag, born time and hosts; sysFlag reset to COMMIT; ``preparedTransactionOffset`` = the half's commit-log
  offset. The properties string is built from the half's properties *before* REAL_TOPIC/REAL_QID are cleared
  from the map, so the record keeps them. The processor sets storeTimestamp to the half's, but
  ``CommitLog#asyncPutMessage`` overwrites it with the append time unless ``duplicationEnable``
  (``keep_half_store_time``).
* ``op``: ``TransactionalMessageServiceImpl#deletePrepareMessage`` + ``TransactionalOpBatchService``: topic
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, queue = the half's queue, tag ``d``, body ``<half queue offset>,`` per half
  (several batched); 4.9.8 wrote one offset per op with no separator (``batch_op=False``). sysFlag 0, born and
  store host the broker, a UNIQ_KEY of its own.
* ``check``: ``putBackHalfMsgQueue`` -> ``renewHalfMessageInner``: the half re-appended to the half topic with
  ``TRANSACTION_CHECK_TIMES`` = the check count; an immunity re-put (``putImmunityMsgBackToHalfQueue``,
  ``renewImmunityHalfMessageInner``) also carries ``TRAN_PREPARED_QUEUE_OFFSET`` = the original's queue offset.
* ``give_up``: ``DefaultTransactionalMessageCheckListener#resolveDiscardMsg``: the half's copy in
  ``TRANS_CHECK_MAX_TIME_TOPIC`` (one queue, TCMT_QUEUE_NUMS = 1), properties as the last copy had them.
* ``checker_offsets_json``: the check service's progress, group ``CID_RMQ_SYS_TRANS`` in consumerOffset.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..formats.commitlog import encode_properties
from ..formats.constants import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_OP_OFFSET_SEPARATOR,
    TRANS_OP_REMOVE_TAG,
    TRANSACTION_MASK,
    TransactionType,
)
from .commitlog import AppendResult, MessageSpec

BROKER_IP = bytes([10, 10, 0, 5])


@dataclass
class Half:
    """One half record as written (the original or a re-appended copy)."""

    physical_offset: int
    queue_offset: int
    store_timestamp: int
    spec: MessageSpec
    properties: dict[str, str] = field(default_factory=dict)
    original_queue_offset: int | None = None  # a copy: the original half's queue offset


class TransactionalBroker:
    """Writes what a broker's transaction services append, through ``writer.append``."""

    def __init__(self, writer, *, five: bool = True, batch_op: bool = True, keep_half_store_time: bool = False,
                 broker_ip: bytes = BROKER_IP, broker_port: int = 10911):
        self.w = writer
        self.five = five
        self.batch_op = batch_op
        self.keep_half_store_time = keep_half_store_time
        self.ip, self.port = broker_ip, broker_port
        self._op_counter = 0

    def _append(self, spec: MessageSpec) -> AppendResult:
        return self.w.append(spec)

    def half(self, topic: str, queue_id: int, body: bytes, uniq_key: str, store_timestamp: int, *,
             producer_group: str = "pg-tx", keys: str | None = None, tags: str | None = None,
             born_timestamp: int | None = None) -> Half:
        props: dict[str, str] = {}
        if keys:
            props["KEYS"] = keys
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props["UNIQ_KEY"] = uniq_key
        props[PROPERTY_PRODUCER_GROUP] = producer_group
        if tags:
            props["TAGS"] = tags
        if self.five:
            props[PROPERTY_TRANSACTION_ID] = uniq_key
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        # the producer asked PREPARED; the bridge resets the transaction bits to NOT_TYPE
        sys_flag = 0
        spec = MessageSpec(RMQ_SYS_TRANS_HALF_TOPIC, 0, body, encode_properties(props), sys_flag=sys_flag,
                           born_timestamp=born_timestamp or store_timestamp - 3, store_timestamp=store_timestamp,
                           store_ip=self.ip, store_port=self.port)
        r = self._append(spec)
        return Half(r.physical_offset, r.queue_offset, store_timestamp, spec, props)

    def commit(self, half: Half, store_timestamp: int) -> AppendResult:
        p = half.properties
        s = half.spec
        spec = MessageSpec(p[PROPERTY_REAL_TOPIC], int(p[PROPERTY_REAL_QUEUE_ID]), s.body, encode_properties(p),
                           flag=s.flag, sys_flag=(s.sys_flag & ~TRANSACTION_MASK) | TransactionType.COMMIT,
                           born_timestamp=s.born_timestamp, born_ip=s.born_ip, born_port=s.born_port,
                           store_timestamp=half.store_timestamp if self.keep_half_store_time else store_timestamp,
                           store_ip=s.store_ip, store_port=s.store_port, reconsume_times=s.reconsume_times,
                           prepared_transaction_offset=half.physical_offset)
        return self._append(spec)

    def op(self, halves: list[Half], store_timestamp: int) -> list[AppendResult]:
        """The op message(s) ending ``halves`` (one batched body in 5.x, one op per half in 4.x)."""
        groups = [halves] if self.batch_op else [[h] for h in halves]
        out = []
        for g in groups:
            if self.batch_op:
                body = "".join(f"{h.queue_offset}{TRANS_OP_OFFSET_SEPARATOR}" for h in g)
            else:
                body = str(g[0].queue_offset)
            out.append(self.raw_op(body.encode("ascii"), store_timestamp, queue_id=g[0].spec.queue_id))
        return out

    def raw_op(self, body: bytes, store_timestamp: int, *, queue_id: int = 0, tag: str = TRANS_OP_REMOVE_TAG
               ) -> AppendResult:
        """An op message with any body (hostile stores for tests)."""
        self._op_counter += 1
        props = {"TAGS": tag, "UNIQ_KEY": "0A0A00052A9F0000000000%010X" % self._op_counter}
        spec = MessageSpec(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, body, encode_properties(props), sys_flag=0,
                           born_timestamp=store_timestamp, born_ip=self.ip, born_port=self.port,
                           store_timestamp=store_timestamp, store_ip=self.ip, store_port=self.port)
        return self._append(spec)

    def check(self, half: Half, store_timestamp: int, *, immunity: bool = False) -> Half:
        """The checker re-appends ``half`` (the latest copy) after asking the producer once more."""
        p = dict(half.properties)
        n = int(p.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0")) + 1
        p[PROPERTY_TRANSACTION_CHECK_TIMES] = str(n)
        original = half.original_queue_offset if half.original_queue_offset is not None else half.queue_offset
        if immunity:
            p[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(
                p.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, half.queue_offset))
        s = half.spec
        spec = MessageSpec(RMQ_SYS_TRANS_HALF_TOPIC, s.queue_id, s.body, encode_properties(p), flag=s.flag,
                           sys_flag=s.sys_flag, born_timestamp=s.born_timestamp, born_ip=s.born_ip,
                           born_port=s.born_port, store_timestamp=store_timestamp, store_ip=s.store_ip,
                           store_port=s.store_port)
        r = self._append(spec)
        return Half(r.physical_offset, r.queue_offset, store_timestamp, spec, p, original)

    def give_up(self, half: Half, store_timestamp: int) -> AppendResult:
        s = half.spec
        spec = MessageSpec(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, s.body, encode_properties(half.properties),
                           flag=s.flag, sys_flag=s.sys_flag, born_timestamp=s.born_timestamp, born_ip=s.born_ip,
                           born_port=s.born_port, store_timestamp=store_timestamp, store_ip=s.store_ip,
                           store_port=s.store_port)
        return self._append(spec)


def checker_offsets_json(half_offset: int, op_offset: int = 0) -> str:
    """consumerOffset.json with the check service's progress (fastjson's shape: unquoted int keys)."""
    return ("{\n\t\"offsetTable\":{\n"
            f"\t\t\"{RMQ_SYS_TRANS_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}\":{{0:{half_offset}\n\t\t}},\n"
            f"\t\t\"{RMQ_SYS_TRANS_OP_HALF_TOPIC}@{CID_SYS_RMQ_TRANS}\":{{0:{op_offset}\n\t\t}}\n\t}}\n}}")


__all__ = ["Half", "TransactionalBroker", "checker_offsets_json"]
