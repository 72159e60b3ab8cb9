"""Message ids: what an offsetMsgId or a uniqKey (msgId) says, and the message(s) it names in a store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import RmqInspectError
from ...formats.msgid import decode_offset_msg_id, decode_uniq_key
from .fates import RecoveryView, beyond_truncation_text, mark_fates, offset_fate, restore_as_recovered
from .query import DEFAULT_MAX_MSGS_NUM_BATCH, JAVA_LONG_MAX, IndexService, query_message

if TYPE_CHECKING:
    pass


@dataclass
class MsgIdReport:
    """``find_msg_id``: both readings of a message id, and what the store holds for each."""

    msg_id: str
    interpretations: list[dict] = field(default_factory=list)  # decode_msg_id
    as_offset_msg_id: dict | None = None  # the record at the offset, or {"error": ...}
    as_uniq_key: dict | None = None  # {"topics_searched": [...], "hits": [...]} through the index

    @property
    def found(self) -> bool:
        """A record carries the id: the one at the offset matches, or the index finds the UNIQ_KEY."""
        a, u = self.as_offset_msg_id or {}, self.as_uniq_key or {}
        return bool(a.get("matches")) or bool(u.get("hits"))

    def to_dict(self) -> dict:
        d = {"msg_id": self.msg_id, "interpretations": self.interpretations}
        if self.as_offset_msg_id is not None:
            d["as_offset_msg_id"] = self.as_offset_msg_id
        if self.as_uniq_key is not None:
            d["as_uniq_key"] = self.as_uniq_key
        return d


def decode_msg_id(msg_id: str) -> list[dict]:
    """Both readings of a 32/56-hex id: offsetMsgId (store host + physical offset) and UNIQ_KEY (client id)."""
    out = []
    try:
        o = decode_offset_msg_id(msg_id)
        # a port is 16 bits and offsets stay far below 2**50: a UNIQ_KEY read this way gives absurd values
        out.append({"kind": "offsetMsgId", "store_host": o.store_host, "physical_offset": o.physical_offset,
                    "plausible": 0 < o.store_port <= 65535 and 0 <= o.physical_offset < 1 << 50})
    except ValueError as e:
        out.append({"kind": "offsetMsgId", "error": str(e)})
    try:
        u = decode_uniq_key(msg_id)
        out.append({"kind": "UNIQ_KEY", "ip": u.ip, "pid": u.pid, "class_loader_hash": u.class_loader_hash,
                    "millis_since_month_start": u.millis_since_month_start, "counter": u.counter,
                    # an offsetMsgId read this way has pid 0 (the high half of the port int)
                    "plausible": u.pid != 0 and u.millis_since_month_start < 31 * 86400 * 1000})
    except ValueError as e:
        out.append({"kind": "UNIQ_KEY", "error": str(e)})
    return out


def uniq_key_timestamp(uniq: str, born_timestamp: int) -> dict:
    """The client id stores milliseconds since the start of the producer's month (local time); with the
    record's born time we can tell which month start that was."""
    u = decode_uniq_key(uniq)
    return {"millis_since_month_start": u.millis_since_month_start,
            "implied_month_start": born_timestamp - u.millis_since_month_start}


def find_msg_id(store, svc: IndexService, msg_id: str, topic: str | None = None,
                max_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH, view: RecoveryView | None = None,
                as_recovered: bool = False) -> MsgIdReport:
    """Look ``msg_id`` up in ``store`` both ways: as an offsetMsgId (decode the record at its physical offset and
    say whether that record's offsetMsgId is this id) and as a UNIQ_KEY (the index look-up of ``topic#id`` in
    ``topic``, or in every topic that has a consume queue, keeping the hits whose record carries the key).

    With a recovery ``view`` every answer carries its ``fate`` after restart; ``as_recovered`` keeps only what
    the broker serves once it has recovered the directory (the record at the offset must lie before the
    truncation; UNIQ_KEY hits must survive or be re-dispatched, as ``index-lookup --as-recovered``)."""
    from ...store.consumequeue import list_queues

    if as_recovered and view is None:
        raise ValueError("as_recovered needs the recovery view")
    rep = MsgIdReport(msg_id, decode_msg_id(msg_id))
    cl = store.commitlog
    fate = None
    try:
        o = decode_offset_msg_id(msg_id)
        # an offset no commit-log file holds has no fate (a UNIQ_KEY read as an offsetMsgId gives absurd ones)
        fate = offset_fate(o.physical_offset, view) if cl.min_offset <= o.physical_offset < cl.end_offset else None
        if as_recovered and fate == "beyond_truncation":
            assert view is not None
            rep.as_offset_msg_id = {"error": beyond_truncation_text(o.physical_offset, view), "fate": fate}
        else:
            msg = cl.read_message(o.physical_offset)
            rep.as_offset_msg_id = {"record_offset_msg_id": msg.offset_msg_id,
                                    "matches": msg.offset_msg_id == msg_id.strip().upper(), "message": msg.to_dict()}
            if fate is not None:
                rep.as_offset_msg_id["fate"] = fate
    except (ValueError, RmqInspectError) as e:
        rep.as_offset_msg_id = {"error": str(e)} | ({"fate": fate} if fate is not None else {})
    topics = [topic] if topic else sorted({q.topic for q in list_queues(store.layout.consumequeue_dir)})
    hits = []
    for t in topics:
        q = query_message(svc, cl, t, msg_id.strip(), max_batch, 0, JAVA_LONG_MAX, max_batch)
        mark_fates(q, view)
        if as_recovered:
            restore_as_recovered(q, cl, view)
        for h in q.verified:
            d = {"topic": t, "physical_offset": h.physical_offset, "index_file": h.index_file,
                 "message": h.message.to_dict()}
            if view is not None:
                d["fate"] = h.fate
            try:
                d["uniq_key_time"] = uniq_key_timestamp(msg_id.strip(), h.message.born_timestamp)
            except ValueError:
                pass
            hits.append(d)
    rep.as_uniq_key = {"topics_searched": topics, "hits": hits}
    return rep
