"""`txn`: was a transaction committed? Every transaction of a store with its verdict, from the commit log alone
(../shared/docs/TRANSACTIONS.md; the broker's code named below, @5.3.3 unless said).

Two conventions can share one store (a broker may have written both over its life):

* **store level (4.x ``CommitLog``):** a PREPARED record (sysFlag transaction type 4) in the real topic, queue
  offset 0, never dispatched; a COMMIT (8) or ROLLBACK (12) record names it by ``preparedTransactionOffset``.
  Committed when a COMMIT names it (a ROLLBACK naming it too is a note: the COMMIT was dispatched, consumers had
  it), rolled back when only a ROLLBACK does, open when nothing does.
* **broker level (4.3+ and 5.x, ``TransactionalMessageBridge``):** the half goes to ``RMQ_SYS_TRANS_HALF_TOPIC``
  queue 0 with ``REAL_TOPIC``/``REAL_QID``; ``EndTransactionProcessor`` writes the COMMIT record (real topic,
  ``preparedTransactionOffset`` = the half's offset) and then an op message to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``
  (tag ``d``, body = the half's queue offset; 5.x batches ``offset,`` per half); a rollback writes only the op.
  The check service re-appends an unresolved half (``TRANSACTION_CHECK_TIMES`` + 1; an immunity re-put carries
  ``TRAN_PREPARED_QUEUE_OFFSET`` = the original's queue offset) and past ``transactionCheckMax`` moves it to
  ``TRANS_CHECK_MAX_TIME_TOPIC``. The producer's end of a re-appended copy names *that copy* (its commit-log
  offset and queue offset), so the copies of one half are one transaction: committed = op and commit, rolled
  back = op without commit, in doubt = commit without op (a crash between the two writes), given up = in
  ``TRANS_CHECK_MAX_TIME_TOPIC``, open = none of these.

Copies are grouped by UNIQ_KEY (every copy carries the original's properties): a half without
``TRANSACTION_CHECK_TIMES`` and ``TRAN_PREPARED_QUEUE_OFFSET`` starts a transaction (a producer's resend of
the same UNIQ_KEY is a new half) and later copies of its UNIQ_KEY join it. Nothing follows a chain of offsets,
so a hostile cycle of ``TRAN_PREPARED_QUEUE_OFFSET`` values cannot loop.

Memory: one pass over the commit log (``CommitLog.walk``'s record runs; topics told apart with numpy by
``rows.topic_ids``), keeping a few int64 per transactional record in ``array`` columns (about 100 bytes per half,
so a million open halves take ~100 MB, not a Python object each); a transaction's text (keys, producer group)
is read back from its record only when it is shown.

The restart is the RecoveryPlan's: a record ending past ``plan.truncate_offset`` is cut, and the verdict is
decided again without it (``Transaction.after_restart``).
"""

from __future__ import annotations

import array
import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from ..errors import RmqInspectError
from ..formats.commitlog import PREPARED_TRANSACTION_OFFSET_BEFORE_BODY
from ..formats.constants import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_OP_OFFSET_SEPARATOR,
    TRANS_OP_REMOVE_TAG,
    SysFlag,
    TransactionType,
)
from ..formats.consumequeue import CQ_STORE_UNIT_SIZE
from ..formats.distinct import distinct
from ..formats.properties import parse_properties
from ..store import Store
from ..store.broker_conf import BrokerConf
from ..store.consumequeue import ConsumeQueue
from ..store.message import split_keys
from ..store.walk.kinds import DAMAGE_KINDS
from ..store.walk.records import Gap, PageReleaser, Record, RecordRun
from .rows import topic_ids


class TxnState(StrEnum):
    """A transaction's verdict (the JSON value; the table prints the same word)."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    IN_DOUBT = "in_doubt"
    OPEN = "open"
    GIVEN_UP = "given_up"


STATES = tuple(TxnState)
_CODE = {s: i for i, s in enumerate(STATES)}
_COMMIT = int(TransactionType.COMMIT)
CUT = -1  # after restart: the half itself is cut, the transaction is gone from the store

# a half's convention
BROKER_LEVEL = "half"  # RMQ_SYS_TRANS_HALF_TOPIC
STORE_LEVEL = "prepared"  # 4.x PREPARED record

MAX_NOTES = 20  # per kind of problem; the rest are counted
# offsets read from one op body; the broker's own op bodies stay under transactionOpMsgMaxSize (4096 bytes, about
# 800 offsets), so more is damage or a hostile store, and the rest of that body is not read
MAX_OP_OFFSETS = 65536
_NUMERIC = frozenset("0123456789")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _int_or_none(s: str | None) -> int | None:
    """Java's Long.parseLong: optional sign, decimal digits, no blanks, within a long; None where it throws."""
    if not s:
        return None
    sign, t = (-1, s[1:]) if s[0] == "-" else (1, s[1:]) if s[0] == "+" else (1, s)
    if not t or len(t) > 19 or not set(t) <= _NUMERIC:
        return None
    v = sign * int(t)
    return v if _LONG_MIN <= v <= _LONG_MAX else None


class Notes:
    """Problems met on the way: the first ``MAX_NOTES`` of each kind verbatim, the rest counted."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counts: dict[str, int] = {}

    def add(self, kind: str, line: str) -> None:
        n = self.counts.get(kind, 0) + 1
        self.counts[kind] = n
        if n <= MAX_NOTES:
            self.lines.append(line)

    def count(self, kind: str, lines: list[str], total: int) -> None:
        """``total`` problems of one kind, of which ``lines`` are the first few spelled out."""
        for line in lines:
            self.add(kind, line)
        if total > len(lines):
            self.counts[kind] = self.counts.get(kind, 0) + total - len(lines)

    def all(self) -> list[str]:
        more = [f"... and {n - MAX_NOTES} more {kind}" for kind, n in self.counts.items() if n > MAX_NOTES]
        return self.lines + more


@dataclass
class Transaction:
    physical_offset: int  # the half (or PREPARED) record that started it
    convention: str  # "half" (broker level) | "prepared" (4.x store level)
    state: str  # TxnState
    real_topic: str | None
    real_queue_id: int | None
    producer_group: str | None = None
    transaction_id: str | None = None  # __transactionId__ (5.x half); else the UNIQ_KEY, the client's transactionId
    keys: list[str] = field(default_factory=list)
    uniq_key: str | None = None
    first_store_time: int = 0
    last_store_time: int = 0
    check_count: int = 0  # TRANSACTION_CHECK_TIMES of the latest copy: how often the checker asked the producer
    copies: list[int] = field(default_factory=list)  # re-appended halves (commit-log offsets), oldest first
    half_queue_offsets: list[int] = field(default_factory=list)  # of the half and its copies
    checker_passed: bool | None = None  # open halves: CID_RMQ_SYS_TRANS's half-queue offset is past the last copy
    op_offset: int | None = None  # the op message that ends it
    commit_offset: int | None = None  # the COMMIT record (the message consumers get)
    commit_queue: str | None = None  # TOPIC/QUEUEID @ queue offset of the commit record
    commit_cq_entry: list[int] | None = None  # [queue offset, physical offset, size, tagsCode] on disk, or None
    rollback_offset: int | None = None  # 4.x ROLLBACK record
    given_up_offset: int | None = None  # its copy in TRANS_CHECK_MAX_TIME_TOPIC
    state_after_restart: str | None = None  # the verdict once the recovery has cut the commit log; "cut": no half
    after_restart: str = ""  # a sentence when the restart changes the verdict
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        # fields are plain values and lists of them: a shallow copy (asdict's deep walk was 60% of `txn`'s time)
        return dict(self.__dict__)


@dataclass
class TopicCount:
    topic: str
    counts: dict[str, int]


def _cols(*names: str) -> dict[str, array.array]:
    return {n: array.array("q") for n in names}


class _Collect:
    """The walk's per-record harvest, in ``array`` columns (8 bytes a value)."""

    def __init__(self) -> None:
        self.half = _cols("phys", "end", "qid", "qoff", "sts", "checks", "tpqo", "uhash", "rtopic", "rqid", "kind",
                          "ppos", "plen")
        self.end = _cols("phys", "end", "prep", "type", "topic", "qid", "qoff", "sts")
        self.op = _cols("hqoff", "phys", "end", "qid")
        self.gave = _cols("phys", "end", "uhash")
        self.real_topics: dict[str, int] = {}  # REAL_TOPIC (or a PREPARED record's topic) -> id
        self.notes = Notes()
        self.op_records = 0


class TxnScan:
    """What one pass over the commit log proves about every transaction: numpy columns, one row per half or
    PREPARED record (``h_*``), per COMMIT/ROLLBACK record (``e_*``), per offset listed by an op (``o_*``) and per
    ``TRANS_CHECK_MAX_TIME_TOPIC`` record (``g_*``); transactions are groups of halves (``gid``)."""

    def __init__(self, store: Store, col: _Collect, topic_names: list[str], *, truncate_offset: int | None,
                 checker_offsets: dict[int, int] | None, checker_source: str | None):
        import numpy as np

        self.store = store
        self._touched: set[int] = set()  # commitlog files whose pages _read_text faulted in
        self.truncate_offset = truncate_offset
        self.checker_offsets = checker_offsets
        self.checker_source = checker_source
        self.topic_names = topic_names
        self.real_topic_names = list(col.real_topics)
        self.notes = col.notes
        self.op_records = col.op_records

        def a(c: array.array):
            return np.frombuffer(c, dtype=np.int64) if len(c) else np.zeros(0, dtype=np.int64)

        h = {k: a(v) for k, v in col.half.items()}
        self.h = h
        n = len(h["phys"])
        kind1 = h["kind"] == 1
        original = kind1 | ((h["checks"] <= 0) & (h["tpqo"] < 0))
        # members of one transaction: sorted by UNIQ_KEY hash then offset, a new group at every original half
        order = np.lexsort((h["phys"], h["uhash"]))
        start = original[order].copy()
        if n:
            start[0] = True
            us = h["uhash"][order]
            start[1:] |= us[1:] != us[:-1]
        gs = np.cumsum(start) - 1
        gid = np.empty(n, dtype=np.int64)
        gid[order] = gs
        self.gid = gid
        self.order = order  # members of group g: order[gstart[g]:gstart[g + 1]], oldest first
        self.gstart = np.append(np.flatnonzero(start), n)
        self.ng = G = int(start.sum())
        first = order[self.gstart[:-1]]
        self.first = first  # half index of each group's first record
        last = order[self.gstart[1:] - 1]
        self.last = last
        self.orphan_copy = ~original[first]  # the group's oldest record is a re-appended copy
        self.group_kind = h["kind"][first]
        by_phys = np.argsort(h["phys"], kind="stable")
        self.by_phys = by_phys
        self.sorted_phys = h["phys"][by_phys]

        # ends: COMMIT / ROLLBACK records naming a half
        e = {k: a(v) for k, v in col.end.items()}
        self.e = e
        idx = np.searchsorted(self.sorted_phys, e["prep"]) if n else np.zeros(len(e["prep"]), dtype=np.int64)
        ok = idx < n
        ok[ok] = self.sorted_phys[idx[ok]] == e["prep"][ok]
        e_half = np.full(len(e["prep"]), -1, dtype=np.int64)
        e_half[ok] = by_phys[idx[ok]]
        self.e_half = e_half
        self.e_gid = np.where(e_half >= 0, gid[np.maximum(e_half, 0)] if n else -1, -1)
        self.notes.count("ends naming no half", [
            f"{'COMMIT' if e['type'][i] == TransactionType.COMMIT else 'ROLLBACK'} record at {int(e['phys'][i])} "
            f"names preparedTransactionOffset {int(e['prep'][i])}, where no half or PREPARED record starts (deleted "
            "by retention, or the offset is damaged)" for i in np.flatnonzero(~ok)[:MAX_NOTES].tolist()],
            int((~ok).sum()))

        # ops: the half queue offsets each op lists
        o = {k: a(v) for k, v in col.op.items()}
        self.o = o
        o_order = np.lexsort((o["phys"], o["hqoff"]))
        self.o_sorted_q = o["hqoff"][o_order]
        self.o_order = o_order
        # gave up: TRANS_CHECK_MAX_TIME_TOPIC copies, to the latest transaction of their UNIQ_KEY before them
        g = {k: a(v) for k, v in col.gave.items()}
        self.g = g
        g_gid = np.full(len(g["phys"]), -1, dtype=np.int64)
        if len(g["phys"]) and n:
            wanted = set(g["uhash"].tolist())
            starts: dict[int, list[tuple[int, int]]] = {}
            for gg, hi in enumerate(first.tolist()):
                uh = int(h["uhash"][hi])
                if uh in wanted:
                    starts.setdefault(uh, []).append((int(h["phys"][hi]), gg))
            for i, (uh, ph) in enumerate(zip(g["uhash"].tolist(), g["phys"].tolist())):
                cands = starts.get(uh, [])
                j = bisect.bisect_left(cands, (ph, -1)) - 1
                if j >= 0:
                    g_gid[i] = cands[j][1]
        self.notes.count("given-up copies without a half", [
            f"{RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC} record at {int(g['phys'][i])} has no half of its UNIQ_KEY before "
            "it (deleted by retention?)" for i in np.flatnonzero(g_gid < 0)[:MAX_NOTES].tolist()],
            int((g_gid < 0).sum()))
        self.g_gid = g_gid

        self.state = self._states(None)
        self.state_after = self._states(truncate_offset) if truncate_offset is not None else None
        # checker progress: its half-queue offset against the last copy's queue offset
        self.checker_passed = None
        if checker_offsets is not None and G:
            q = h["qoff"][last]
            qid = h["qid"][last]
            off = np.array([checker_offsets.get(int(x), -1) for x in qid.tolist()], dtype=np.int64) if len(
                set(qid.tolist())) > 1 else np.full(G, checker_offsets.get(int(qid[0]), -1), dtype=np.int64)
            self.checker_passed = np.where(off >= 0, (q < off).astype(np.int8), -1)

    def _states(self, cut: int | None):
        """Each transaction's verdict code from the records that end at or before ``cut`` (all: None)."""
        import numpy as np

        h, e, o, g, gid, G = self.h, self.e, self.o, self.g, self.gid, self.ng
        alive = np.ones(len(h["phys"]), dtype=bool) if cut is None else h["end"] <= cut
        e_ok = (self.e_gid >= 0) & (True if cut is None else e["end"] <= cut)
        commits = np.bincount(self.e_gid[e_ok & (e["type"] == TransactionType.COMMIT)], minlength=G)[:G]
        rollbacks = np.bincount(self.e_gid[e_ok & (e["type"] == TransactionType.ROLLBACK)], minlength=G)[:G]
        o_ok = np.ones(len(o["phys"]), dtype=bool) if cut is None else o["end"] <= cut
        listed = distinct(o["hqoff"][o_ok])
        broker = (h["kind"] == 0) & alive
        hit = broker & (np.isin(h["qoff"], listed) | ((h["tpqo"] >= 0) & np.isin(h["tpqo"], listed)))
        has_op = np.bincount(gid[hit], minlength=G)[:G] > 0
        g_ok = (self.g_gid >= 0) & (True if cut is None else g["end"] <= cut)
        gave = np.bincount(self.g_gid[g_ok], minlength=G)[:G] > 0
        store_level = self.group_kind == 1
        s = np.full(G, _CODE[TxnState.OPEN], dtype=np.int64)
        s[gave] = _CODE[TxnState.GIVEN_UP]
        s[(rollbacks > 0) | (has_op & ~store_level)] = _CODE[TxnState.ROLLED_BACK]
        s[(commits > 0) & ~has_op & ~store_level] = _CODE[TxnState.IN_DOUBT]
        s[(commits > 0) & (has_op | store_level)] = _CODE[TxnState.COMMITTED]
        if cut is not None:
            s[np.bincount(gid[alive], minlength=G)[:G] == 0] = CUT
        return s

    # --- the answer ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.ng

    def select(self, *, topic: str | None = None, states: set[str] | None = None, since: int | None = None,
               until: int | None = None):
        """Group numbers passing the cheap filters (real topic, state, store-time overlap), oldest first."""
        import numpy as np

        keep = np.ones(self.ng, dtype=bool)
        if topic is not None:
            tid = self.real_topic_names.index(topic) if topic in self.real_topic_names else -2
            keep &= self.h["rtopic"][self.first] == tid
        if states:
            keep &= np.isin(self.state, [_CODE[TxnState(s)] for s in states])
        if since is not None or until is not None:
            lo, hi = self._times()
            if since is not None:
                keep &= hi >= since
            if until is not None:
                keep &= lo <= until
        sel = np.flatnonzero(keep)
        return sel[np.argsort(self.h["phys"][self.first[sel]], kind="stable")]

    def _times(self):
        import numpy as np

        sts = self.h["sts"][self.order]
        if not self.ng:
            return sts, sts
        lo = np.minimum.reduceat(sts, self.gstart[:-1])
        hi = np.maximum.reduceat(sts, self.gstart[:-1])
        return lo, hi

    def summary(self) -> tuple[dict[str, int], list[TopicCount]]:
        """Transactions per state, and per real topic and state."""
        total = {s.value: int((self.state == _CODE[s]).sum()) for s in STATES}
        rt = self.h["rtopic"][self.first]
        rows = []
        for t in distinct(rt).tolist():
            m = rt == t
            rows.append(TopicCount(self.real_topic_names[t] if t >= 0 else "?",
                                   {s.value: int((self.state[m] == _CODE[s]).sum()) for s in STATES}))
        rows.sort(key=lambda r: r.topic)
        return total, rows

    def transaction(self, g: int, *, cq_cache: dict | None = None) -> Transaction:
        """Group ``g`` as a row: its text read back from its first record."""
        import numpy as np

        return self._block(np.array([g], dtype=np.int64), cq_cache)[0]

    def _block(self, gs, cq_cache: dict | None) -> list[Transaction]:
        """Groups ``gs`` as rows: the per-group numbers gathered with numpy for the whole block, then one small
        loop (a group of one half, the common case, needs no array of its own)."""
        import numpy as np

        h, e = self.h, self.e
        lo, hi = self.gstart[gs], self.gstart[gs + 1]
        fi = self.order[lo]
        col = {k: h[k][fi].tolist() for k in ("phys", "kind", "rqid", "rtopic", "sts", "checks", "qoff", "tpqo",
                                             "ppos", "plen")}
        nmem = (hi - lo).tolist()
        lo_l = lo.tolist()
        state = self.state[gs].tolist()
        after = self.state_after[gs].tolist() if self.state_after is not None else None
        passed = self.checker_passed[gs].tolist() if self.checker_passed is not None else None
        orphan = self.orphan_copy[gs].tolist()
        e_order, e_sorted = self._ends_index()
        e_lo = np.searchsorted(e_sorted, gs).tolist()
        e_hi = np.searchsorted(e_sorted, gs + 1).tolist()
        gave = self._given_up_index()
        names = [s.value for s in STATES]
        out = []
        for j, g in enumerate(gs.tolist()):
            phys = col["phys"][j]
            conv = STORE_LEVEL if col["kind"][j] == 1 else BROKER_LEVEL
            rq, rt = col["rqid"][j], col["rtopic"][j]
            t = Transaction(phys, conv, names[state[j]], self.real_topic_names[rt] if rt >= 0 else None,
                            rq if rq >= 0 else None)
            if nmem[j] == 1:
                members = None
                t.first_store_time = t.last_store_time = col["sts"][j]
                t.check_count = max(col["checks"][j], 0)
                t.half_queue_offsets = [col["qoff"][j]] if conv == BROKER_LEVEL else []
            else:
                members = self.order[lo_l[j]:lo_l[j] + nmem[j]]
                sts = h["sts"][members]
                t.first_store_time, t.last_store_time = int(sts.min()), int(sts.max())
                t.check_count = int(max(h["checks"][members].max(), 0))
                t.copies = h["phys"][members[1:]].tolist()
                t.half_queue_offsets = h["qoff"][members].tolist() if conv == BROKER_LEVEL else []
            if orphan[j]:
                t.notes.append("the original half is not in the store (deleted by retention): the oldest record "
                               "here is a copy the checker re-appended")
            self._read_text(t, col["ppos"][j], col["plen"][j])
            for i in e_order[e_lo[j]:e_hi[j]].tolist():
                ph = int(e["phys"][i])
                if e["type"][i] == _COMMIT:
                    if t.commit_offset is None:
                        t.commit_offset = ph
                        topic = self.topic_names[int(e["topic"][i])]
                        qid, qoff = int(e["qid"][i]), int(e["qoff"][i])
                        t.commit_queue = f"{topic}/{qid} @ {qoff}"
                        t.commit_cq_entry = self._cq_entry(topic, qid, qoff, ph, cq_cache)
                    else:
                        t.notes.append(f"another COMMIT record at {ph} names it too" + (
                            " (the checker asked again after a crash between commit and op, and the producer "
                            "committed twice)" if conv == BROKER_LEVEL else ""))
                elif t.rollback_offset is None:
                    t.rollback_offset = ph
            if t.commit_offset is not None and t.rollback_offset is not None:
                t.notes.append(f"both a COMMIT ({t.commit_offset}) and a ROLLBACK ({t.rollback_offset}) name it: "
                               "the COMMIT was dispatched, so consumers received the message")
            if conv == BROKER_LEVEL:
                keys = ([col["qoff"][j], col["tpqo"][j]] if members is None else
                        h["qoff"][members].tolist() + h["tpqo"][members].tolist())
                t.op_offset = self._op_of(keys)
                if passed is not None and passed[j] >= 0:
                    t.checker_passed = bool(passed[j])
            t.given_up_offset = gave.get(g)
            if after is not None:
                a = after[j]
                t.state_after_restart = "cut" if a == CUT else names[a]
                if a != state[j]:
                    t.after_restart = self._restart_sentence(t, a)
            out.append(t)
        return out

    def _read_text(self, t: Transaction, ppos: int, plen: int) -> None:
        """Producer group, transaction id, keys and UNIQ_KEY from the half's properties (read where the scan
        found them: no second decode of the record)."""
        import bisect as _b

        files = self.store.commitlog.files
        if not hasattr(self, "_starts"):
            self._starts = [f.start for f in files]
        i = _b.bisect_right(self._starts, ppos) - 1
        if i < 0 or plen < 0:
            t.notes.append("half record unreadable")
            return
        f = files[i]
        self._touched.add(i)
        p = parse_properties(bytes(f.buffer[ppos - f.start:ppos - f.start + plen])) if plen else {}
        t.producer_group = p.get(PROPERTY_PRODUCER_GROUP)
        t.uniq_key = p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        t.transaction_id = p.get(PROPERTY_TRANSACTION_ID) or t.uniq_key
        t.keys = split_keys(p.get(PROPERTY_KEYS))

    def _ends_index(self):
        import numpy as np

        if not hasattr(self, "_e_order"):
            self._e_order = np.argsort(self.e_gid, kind="stable")
            self._e_sorted = self.e_gid[self._e_order]
        return self._e_order, self._e_sorted

    def _given_up_index(self) -> dict[int, int]:
        if not hasattr(self, "_gave"):
            gave: dict[int, int] = {}
            for gg, ph in zip(self.g_gid.tolist(), self.g["phys"].tolist()):
                if gg >= 0:
                    gave.setdefault(gg, ph)
            self._gave = gave
        return self._gave

    def _op_of(self, keys: list[int]) -> int | None:
        """The first op listing any of these half queue offsets."""
        q = self.o_sorted_q
        best = None
        for key in keys:
            if key < 0:
                continue
            i = int(q.searchsorted(key))
            if i < len(q) and q[i] == key:
                ph = int(self.o["phys"][self.o_order[i]])
                best = ph if best is None else min(best, ph)
        return best

    def _cq_entry(self, topic: str, qid: int, qoff: int, phys: int, cache: dict | None) -> list[int] | None:
        key = (topic, qid)
        q = cache.get(key) if cache is not None else None
        if q is None:
            try:
                q = ConsumeQueue.open(self.store.layout.consumequeue_dir, topic, qid)
            except RmqInspectError:
                return None
            if cache is not None:
                if len(cache) >= 64:
                    cache.pop(next(iter(cache))).close()
                cache[key] = q
        # the entry's slot directly (queue offset * 20 in the file that holds it): one look-up per shown row
        at = qoff * CQ_STORE_UNIT_SIZE
        for f in q.files:
            if f.start <= at and at + CQ_STORE_UNIT_SIZE <= f.start + f.size:
                e = q.file_entries(f)[(at - f.start) // CQ_STORE_UNIT_SIZE]
                if int(e["physical_offset"]) == phys:
                    return [qoff, phys, int(e["size"]), int(e["tags_code"])]
                return None
        return None

    def _restart_sentence(self, t: Transaction, after: int) -> str:
        cut = self.truncate_offset
        if after == CUT:
            return f"the half at {t.physical_offset} lies past the recovery's cut at {cut}: the transaction is gone"
        past = [f"{what} at {off}" for what, off in (("the op", t.op_offset), ("the COMMIT", t.commit_offset),
                                                     ("the ROLLBACK", t.rollback_offset),
                                                     ("the given-up copy", t.given_up_offset))
                if off is not None and off >= (cut or 0)]
        now = STATES[after].value
        why = {TxnState.OPEN: "the checker asks the producer again",
               TxnState.IN_DOUBT: "the checker asks the producer again and may write a second commit",
               TxnState.ROLLED_BACK: "consumers never get the message"}.get(STATES[after], "")
        return (f"{now} after restart: {' and '.join(past) or 'a record'} lies past the recovery's cut at {cut}"
                + (f" ({why})" if why else ""))

    def transactions(self, groups=None) -> Iterator[Transaction]:
        """The rows of ``groups`` (default: every transaction, oldest half first), a block at a time."""
        import numpy as np

        gs = self.select() if groups is None else np.asarray(groups, dtype=np.int64)
        cache: dict = {}
        files = self.store.commitlog.files
        try:
            for b in range(0, len(gs), 2048):
                rows = self._block(gs[b:b + 2048], cache)
                # the halves' pages read for this block leave the map (they stay in the page cache): the
                # process keeps no more of the store than a block's worth, however many rows are shown
                for i in self._touched:
                    PageReleaser(files[i].buffer, 0).finish(files[i].size)
                self._touched.clear()
                yield from rows
        finally:
            for q in cache.values():
                q.close()

    # --- per-record look-ups (fate, export) ------------------------------------------------------------
    def group_of_offset(self, offset: int) -> tuple[int, str] | None:
        """(transaction, role) of the record at ``offset``: role half | copy | prepared | commit | rollback | op |
        given_up."""
        import numpy as np

        n = len(self.sorted_phys)
        i = int(np.searchsorted(self.sorted_phys, offset))
        if i < n and self.sorted_phys[i] == offset:
            hi = int(self.by_phys[i])
            g = int(self.gid[hi])
            if self.h["kind"][hi] == 1:
                return g, "prepared"
            return g, ("half" if hi == int(self.order[self.gstart[g]]) else "copy")
        m = np.flatnonzero(self.e["phys"] == offset)
        if len(m) and self.e_gid[m[0]] >= 0:
            return int(self.e_gid[m[0]]), ("commit" if self.e["type"][m[0]] == TransactionType.COMMIT else "rollback")
        m = np.flatnonzero(self.g["phys"] == offset)
        if len(m) and self.g_gid[m[0]] >= 0:
            return int(self.g_gid[m[0]]), "given_up"
        m = np.flatnonzero(self.o["phys"] == offset)
        for q in self.o["hqoff"][m].tolist():
            hit = np.flatnonzero((self.h["kind"] == 0) & ((self.h["qoff"] == q) | (self.h["tpqo"] == q)))
            if len(hit):
                return int(self.gid[hit[0]]), "op"
        return None

    def state_index(self):
        """(offsets, state names) of every record of a transaction, sorted by offset: what ``txn_state`` of a
        row says. An op listing halves of several transactions gets the state of the first it lists."""
        import numpy as np

        names = np.array([s.value for s in STATES], dtype=object)
        parts_o = [self.h["phys"], self.e["phys"][self.e_gid >= 0], self.g["phys"][self.g_gid >= 0]]
        parts_s = [self.state[self.gid], self.state[self.e_gid[self.e_gid >= 0]],
                   self.state[self.g_gid[self.g_gid >= 0]]]
        if len(self.o["phys"]):
            hq = self.h["qoff"].copy()
            hq[self.h["kind"] != 0] = -1
            hs = np.argsort(hq, kind="stable")
            i = np.searchsorted(hq[hs], self.o["hqoff"])
            ok = i < len(hq)
            ok[ok] = hq[hs][i[ok]] == self.o["hqoff"][ok]
            ophys = self.o["phys"][ok]
            ost = self.state[self.gid[hs[i[ok]]]]
            _, firsts = np.unique(ophys, return_index=True)
            parts_o.append(ophys[firsts])
            parts_s.append(ost[firsts])
        offs = np.concatenate(parts_o) if parts_o else np.zeros(0, dtype=np.int64)
        codes = np.concatenate(parts_s).astype(np.int64) if parts_s else np.zeros(0, dtype=np.int64)
        o = np.argsort(offs, kind="stable")
        return offs[o], names[codes[o]]


def checker_progress(store: Store, offsets_path: str | None = None) -> tuple[dict[int, int] | None, str | None]:
    """CID_RMQ_SYS_TRANS's committed offsets on RMQ_SYS_TRANS_HALF_TOPIC, {queue id: offset}, and the file read
    (``TransactionalMessageBridge#fetchConsumeOffset``); (None, None) without consumerOffset.json."""
    from .offsets import read_consumer_offsets

    cfg, table = read_consumer_offsets(store, offsets_path)
    if cfg is None:
        return None, None
    return dict(table.get((RMQ_SYS_TRANS_HALF_TOPIC, CID_SYS_RMQ_TRANS), {})), cfg.source


def _op_offsets(body: bytes, where: str, notes: Notes) -> list[int]:
    """The half queue offsets an op body lists (``offset,`` per half in 5.x, one bare offset in 4.x)."""
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        notes.add("op bodies", f"op message {where}: body is not an ASCII list of queue offsets; ignored")
        return []
    out = []
    for tok in text.split(TRANS_OP_OFFSET_SEPARATOR):
        if not tok:
            continue
        v = _int_or_none(tok)
        if v is None or v < 0:
            notes.add("op bodies", f"op message {where}: {tok[:40]!r} is not a queue offset; that token ignored")
            continue
        out.append(v)
        if len(out) >= MAX_OP_OFFSETS:
            notes.add("op bodies", f"op message {where}: more than {MAX_OP_OFFSETS} offsets (the broker's bodies "
                      "stay under transactionOpMsgMaxSize); the rest is not read")
            break
    return out


# the half columns of _Collect, in the order _collect_special appends them
_HALF_COLUMNS = ("phys", "end", "qid", "qoff", "sts", "checks", "tpqo", "uhash", "rtopic", "rqid", "kind", "ppos",
                 "plen")


def _collect_ends(E: dict, base: int, Re, u8, tt, tids) -> None:
    """COMMIT / ROLLBACK records outside the system topics, a run's worth at once: every field they give is a
    column (no Python per record)."""
    import numpy as np

    pos_e = Re["position"]
    before = PREPARED_TRANSACTION_OFFSET_BEFORE_BODY
    prep = u8[(Re["body_pos"] - before)[:, None] + np.arange(8)].copy().view(">i8").reshape(-1)
    for c, v in (("phys", pos_e + base), ("end", pos_e + base + Re["total_size"]), ("prep", prep),
                 ("type", tt), ("topic", tids), ("qid", Re["queue_id"]),
                 ("qoff", Re["queue_offset"]), ("sts", Re["store_timestamp"])):
        E[c].frombytes(np.ascontiguousarray(v, dtype=np.int64).tobytes())


def _collect_special(col: _Collect, f, S, tids: list[int], topics: dict[str, int], appenders: tuple) -> None:
    """The records of one run whose properties must be read, one at a time (the scan's hot loop: long on purpose,
    a call per record would cost more than the record): halves and PREPARED records into the half columns
    (``appenders``, bound once per scan), op messages into the op offsets, check-max-time records into the
    given-up ones."""
    (h_phys, h_end, h_qid, h_qoff, h_sts, h_checks, h_tpqo, h_uhash, h_rtopic, h_rqid, h_kind, h_ppos,
     h_plen) = appenders
    OP, GV, rtopics = col.op, col.gave, col.real_topics
    compressed = int(SysFlag.COMPRESSED)
    half_id, op_id, max_id = (topics.get(RMQ_SYS_TRANS_HALF_TOPIC, -1), topics.get(RMQ_SYS_TRANS_OP_HALF_TOPIC, -1),
                              topics.get(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, -1))
    names = list(topics)
    base = f.start
    buf = f.buffer
    for pos, total, bpos, blen, sf, qid, qoff, sts, ppos, plen, tid in zip(
            S["position"].tolist(), S["total_size"].tolist(), S["body_pos"].tolist(), S["body_len"].tolist(),
            S["sys_flag"].tolist(), S["queue_id"].tolist(), S["queue_offset"].tolist(),
            S["store_timestamp"].tolist(), S["properties_pos"].tolist(), S["properties_len"].tolist(), tids):
        phys = base + pos
        end = phys + total
        props = parse_properties(bytes(buf[ppos:ppos + plen])) if plen > 0 else {}
        if tid == half_id or tid not in (op_id, max_id):  # a half, or a PREPARED record (4.x)
            broker = tid == half_id
            uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            rt = props.get(PROPERTY_REAL_TOPIC) if broker else names[tid]
            checks = _int_or_none(props.get(PROPERTY_TRANSACTION_CHECK_TIMES))
            tpqo = _int_or_none(props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET))
            rq = _int_or_none(props.get(PROPERTY_REAL_QUEUE_ID)) if broker else qid
            if broker and rt is None:
                col.notes.add("halves without REAL_TOPIC", f"half at {phys}: no REAL_TOPIC property")
            h_phys(phys)
            h_end(end)
            h_qid(qid)
            h_qoff(qoff)
            h_sts(sts)
            h_checks(checks if checks is not None and checks >= 0 else 0)
            h_tpqo(tpqo if tpqo is not None and tpqo >= 0 else -1)
            h_uhash(hash(uniq) if uniq else hash(("no UNIQ_KEY", phys)))
            h_rtopic(rtopics.setdefault(rt, len(rtopics)) if rt is not None else -1)
            h_rqid(rq if rq is not None else -1)
            h_kind(0 if broker else 1)
            h_ppos(base + ppos)
            h_plen(plen)
        elif tid == op_id:
            col.op_records += 1
            where = f"at {phys} ({f.name} position {pos})"
            tag = props.get(PROPERTY_TAGS)
            if tag != TRANS_OP_REMOVE_TAG:
                col.notes.add("op tags", f"op message {where}: tag {tag!r}, not {TRANS_OP_REMOVE_TAG!r}; it "
                              "ends nothing")
                continue
            if sf & compressed:
                col.notes.add("op bodies", f"op message {where}: compressed body (the broker never compresses "
                              "op bodies); ignored")
                continue
            for q in _op_offsets(bytes(buf[bpos:bpos + max(blen, 0)]), where, col.notes):
                OP["hqoff"].append(q)
                OP["phys"].append(phys)
                OP["end"].append(end)
                OP["qid"].append(qid)
        else:  # TRANS_CHECK_MAX_TIME_TOPIC
            uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            GV["phys"].append(phys)
            GV["end"].append(end)
            GV["uhash"].append(hash(uniq) if uniq else hash(("no UNIQ_KEY", phys)))


def scan_transactions(store: Store, *, plan=None, checker_offsets: dict[int, int] | None = None,
                      checker_source: str | None = None) -> TxnScan:
    """One pass over the commit log: every transaction and the records that decide it. ``plan``: a
    ``RecoveryPlan`` (its ``truncate_offset`` decides the verdicts after restart); ``checker_offsets``:
    ``checker_progress``'s {queue id: offset} of the check service."""
    import numpy as np

    cl = store.commitlog
    col = _Collect()
    topics: dict[str, int] = {}
    appenders = tuple(col.half[c].append for c in _HALF_COLUMNS)
    u8_of: dict[str, object] = {}
    special: list[int] = []
    special_lengths = sorted({len(t.encode()) for t in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
                                                        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)})
    for ev in cl.walk(check_crc=False, stop_at_end=False):
        if isinstance(ev, Gap):
            col.notes.add("gaps", f"no commitlog file covers {ev.start}..{ev.end}: transactions there are unknown")
            continue
        if isinstance(ev, Record):
            if ev.kind in DAMAGE_KINDS:
                col.notes.add("damage", f"{ev.file.name} @ {ev.offset}: {ev.kind.value}: {ev.reason} (the rest of "
                              "this file is not read)")
            continue
        if not isinstance(ev, RecordRun):
            continue
        f = ev.file
        u8 = u8_of.get(f.path)
        if u8 is None:
            u8_of.clear()
            u8 = u8_of[f.path] = np.frombuffer(f.buffer, dtype=np.uint8)
        R = ev.records
        # only a record with a transaction type or a topic as long as a transaction system topic can matter: the
        # topics of the others are never told apart (most of a store's records, and most of this pass's time)
        tt_all = R["sys_flag"] & 0xC
        tl = R["topic_len"]
        maybe = tt_all != 0
        for n in special_lengths:
            maybe |= tl == n
        if not maybe.all():
            if not maybe.any():
                continue
            R, tt_all = R[maybe], tt_all[maybe]
        n_before = len(topics)
        ids = topic_ids(u8, R, topics)
        if len(topics) != n_before or not special:
            special = [topics[t] for t in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
                                           RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC) if t in topics]
        mask = np.zeros(len(R), dtype=bool)
        for sid in special:
            mask |= ids == sid
        ends = ((tt_all == TransactionType.COMMIT) | (tt_all == TransactionType.ROLLBACK)) & ~mask
        if ends.any():
            _collect_ends(col.end, f.start, R[ends], u8, tt_all[ends], ids[ends])
        mask |= (tt_all == TransactionType.PREPARED)
        sel = np.flatnonzero(mask)
        if len(sel):
            _collect_special(col, f, R[sel], ids[sel].tolist(), topics, appenders)
    u8_of.clear()
    return TxnScan(store, col, list(topics), truncate_offset=plan.truncate_offset if plan is not None else None,
                   checker_offsets=checker_offsets, checker_source=checker_source)




def txn_states_by_file(store_path: str, starts: list[int], conf: BrokerConf | None = None) -> list[tuple]:
    """For each commitlog file (by start offset, in order): (offsets, states) of its transaction records, the
    ``txn_state`` column of ``export`` and the Spark rows (a store without transactions: empty tuples)."""
    import numpy as np

    st = Store.open(store_path, conf=conf)
    try:
        offs, states = scan_transactions(st).state_index()
    finally:
        st.close()
    if not len(offs):
        return [() for _ in starts]
    bounds = np.searchsorted(offs, np.array(list(starts[1:]), dtype=np.int64)).tolist()
    out = []
    for lo, hi in zip([0] + bounds, bounds + [len(offs)]):
        out.append((tuple(offs[lo:hi].tolist()), tuple(states[lo:hi].tolist())) if hi > lo else ())
    return out




def is_transaction_record(msg) -> bool:
    """A record ``txn`` reads: a half, op or given-up copy (by topic) or a PREPARED/COMMIT/ROLLBACK record."""
    return msg.transaction_type != TransactionType.NOT_TYPE or msg.topic in (
        RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)


def attach_transactions(store: Store, fates: list, *, plan=None, offsets_file: str | None = None) -> None:
    """``fate``: give each fate of a transaction record its transaction (``Transaction.to_dict`` plus ``role``:
    half | copy | prepared | commit | rollback | op | given_up). The commit log is walked once, and only when one
    of the records is a transaction record."""
    wanted = []
    for f in fates:
        try:
            if is_transaction_record(store.commitlog.read_message(f.physical_offset)):
                wanted.append(f)
        except RmqInspectError:
            continue
    if not wanted:
        return
    offsets, source = checker_progress(store, offsets_file)
    scan = scan_transactions(store, plan=plan, checker_offsets=offsets, checker_source=source)
    for f in wanted:
        found = scan.group_of_offset(f.physical_offset)
        if found is None:
            f.notes.append("a transaction record, but no half or PREPARED record in the store belongs to it (see "
                           "`txn`'s notes)")
            continue
        g, role = found
        f.transaction = {"role": role, **scan.transaction(g).to_dict()}



REPORT_ROWS = 200  # transactions the report lists (the rest are in the counts and in `rmqinspect txn`)


@dataclass
class TxnSection:
    """The report's transactions section: the counts, and the transactions to look at (not committed, or
    changed by a restart), at most ``REPORT_ROWS`` of them."""

    counts: dict[str, int]
    by_topic: list[dict]
    changed_by_restart: int
    rows: list[Transaction]
    listed_of: int  # how many transactions qualified for the list
    notes: list[str]

    def to_dict(self) -> dict:
        return {"counts": self.counts, "by_topic": self.by_topic, "changed_by_restart": self.changed_by_restart,
                "rows": [t.to_dict() for t in self.rows], "listed_of": self.listed_of, "notes": self.notes}


def report_section(store: Store, plan=None, offsets_file: str | None = None) -> TxnSection | None:
    """``report``: the transactions section, or None when the store holds no transaction."""
    import numpy as np

    offsets, source = checker_progress(store, offsets_file)
    scan = scan_transactions(store, plan=plan, checker_offsets=offsets, checker_source=source)
    if not len(scan):
        return None
    total, by_topic = scan.summary()
    changed = (scan.state_after != scan.state) if scan.state_after is not None else np.zeros(len(scan), dtype=bool)
    look = changed | (scan.state != _CODE[TxnState.COMMITTED])
    sel = scan.select()
    sel = sel[look[sel]]
    rows = list(scan.transactions(sel[:REPORT_ROWS]))
    return TxnSection(total, [{"topic": r.topic, **r.counts} for r in by_topic], int(changed.sum()), rows,
                      len(sel), scan.notes.all())


__all__ = ["BROKER_LEVEL", "STATES", "STORE_LEVEL", "TopicCount", "Transaction", "TxnScan", "TxnSection",
           "TxnState", "attach_transactions", "checker_progress", "is_transaction_record", "report_section",
           "scan_transactions", "txn_states_by_file"]
