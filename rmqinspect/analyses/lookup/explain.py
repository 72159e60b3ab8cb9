""""Why can't I find it?": where a key's or a message id's messages are, and what in the index look-up misses
them (the explain-missing diagnosis)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import CorruptDataError
from ...formats.constants import PROPERTY_REAL_TOPIC, RMQ_SYS_SCHEDULE_TOPIC
from ...formats.javahash import build_index_key, index_key_hash
from ...formats.msgid import decode_offset_msg_id
from .fates import (
    FATES_AFTER_RESTART,
    RecoveryView,
    beyond_truncation_text,
    mark_fates,
    offset_fate,
    restore_as_recovered,
)
from .query import (
    DEFAULT_MAX_MSGS_NUM_BATCH,
    JAVA_LONG_MAX,
    IndexFileInfo,
    IndexService,
    QueryMessageResult,
    query_message,
)

if TYPE_CHECKING:
    from ...store.indexfile import IndexFile

MAX_LOCATED = 1000  # bounded memory for the fall-back scan


@dataclass
class Reason:
    code: str
    detail: str


@dataclass
class Located:
    """Where a matching message really is, from the bounded commitlog scan."""

    physical_offset: int
    topic: str
    queue_id: int
    queue_offset: int
    store_timestamp: int
    keys: list[str]
    uniq_key: str | None
    index_items: list[dict] = field(default_factory=list)
    fate: str | None = None  # after restart (offset_fate), with a recovery view


@dataclass
class MissingReport:
    topic: str
    key: str
    kind: str  # key | uniq_key | msg_id
    begin: int
    end: int
    found_by_index: bool = False
    query: QueryMessageResult | None = None
    reasons: list[Reason] = field(default_factory=list)
    located: list[Located] = field(default_factory=list)
    scanned: tuple[int, int] = (0, 0)
    scan_complete: bool = True
    index_files: list[IndexFileInfo] = field(default_factory=list)
    # with a recovery view: the truncation offset, and each broker_result offset's fate after restart
    recovery_truncate_offset: int | None = None
    fates: dict[int, str] = field(default_factory=dict)
    as_recovered: bool = False


def find_index_items(svc: IndexService, key_hash: int, phy_offset: int) -> list[dict]:
    """Every item (any file) whose keyHash and phyOffset are these: vectorised over the item area."""
    import numpy as np

    out = []
    for f in svc.files:
        items = f.items()
        if not len(items):
            continue
        hit = np.flatnonzero((items["key_hash"] == key_hash) & (items["phy_offset"] == phy_offset))
        for i in hit.tolist():
            n = i + 1
            td = int(items["time_diff"][i])
            out.append({"file": f.name, "item": n, "time_diff": td,
                        "time_read": f.header.begin_timestamp + td * 1000,
                        "slot": key_hash % f.slots, "prev_index": int(items["prev_index"][i]),
                        "reachable": _reachable(f, key_hash % f.slots, n)})
    return out


def _reachable(f: IndexFile, slot: int, target: int) -> bool:
    """Whether item ``target`` is on slot ``slot``'s chain (cycle-safe), ignoring time."""
    n = f.slot_value(slot)
    ic = f.header.index_count
    seen = set()
    while n is not None and 0 < n <= ic and n not in seen:
        if n == target:
            return True
        seen.add(n)
        it = f.item(n)
        if it is None or it[2] < 0:
            return False
        n = it[3]
    return False


def explain_missing(store, svc: IndexService, topic: str, key: str, kind: str = "key", begin: int = 0,
                    end: int = JAVA_LONG_MAX, max_num: int = DEFAULT_MAX_MSGS_NUM_BATCH,
                    max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH,
                    scan_bytes: int | None = None, view: RecoveryView | None = None,
                    as_recovered: bool = False) -> MissingReport:
    """Why the broker's look-up does not return a message. With a recovery ``view`` the broker's result carries
    each offset's fate after restart; ``as_recovered`` explains the answer of the broker once it has recovered
    this directory (hits beyond the truncation or from a deleted, not re-dispatched index file are gone, and a
    message found on disk past the truncation is said to be lost to the recovery)."""
    if as_recovered and view is None:
        raise ValueError("as_recovered needs the recovery view")
    cl = store.commitlog
    rep = MissingReport(topic, key, kind, begin, end, index_files=svc.infos, as_recovered=as_recovered,
                        recovery_truncate_offset=view.truncate_offset if view else None)
    if kind == "msg_id":
        return _explain_msg_id(store, rep, view)
    q = query_message(svc, cl, topic, key, max_num, begin, end, max_msgs_num_batch)
    mark_fates(q, view)
    if view is not None:
        rep.fates = {h.physical_offset: h.fate for h in q.hits}
    if as_recovered:
        lost = [h for h in q.hits if h.has_key and h.fate not in FATES_AFTER_RESTART]
        restore_as_recovered(q, cl, view)
        for h in lost:
            rep.reasons.append(Reason("lost_to_recovery", f"on-disk hit {h.physical_offset} ({h.index_file}) is "
                                                          f"{h.fate.replace('_', ' ')}: the recovered broker does "
                                                          "not return it"))
    rep.query = q
    # an unreadable (torn) record the index still points to, past the truncation: the recovery is what removes it
    gone = {off for rnd, off, _ in q.unreadable if view is not None and rnd == 1 and off >= view.truncate_offset}
    for off in sorted(gone):
        assert view is not None
        rep.fates.setdefault(off, "beyond_truncation")
        if as_recovered:
            rep.reasons.append(Reason("beyond_truncation", f"the index points to {off}, whose record is not readable "
                                      "(torn or damaged); " + beyond_truncation_text(off, view)))
    if q.verified:
        rep.found_by_index = True
        if q.collisions:
            rep.reasons.append(Reason("hash_collision", f"{len(q.collisions)} of {len(q.hits)} index hits are other "
                                                        "keys with the same 32-bit hash; drop them client-side"))
        if len(q.raw) < q.max_num:
            return rep
    # The broker found nothing (or only collisions, or hit the result cap). Diagnose.
    _index_reasons(rep, svc, q, gone)
    _scan_commitlog(rep, cl, svc, q, view, scan_bytes, max_msgs_num_batch)
    return rep


def _index_reasons(rep: MissingReport, svc: IndexService, q: QueryMessageResult, gone: set[int]) -> None:
    """What on the index side keeps the broker from answering: no index files, damaged ones, collisions only, hits
    whose record is not readable (``gone``: those already explained by the recovery's truncation)."""
    as_recovered = rep.as_recovered
    if not svc.infos:
        rep.reasons.append(Reason("no_index_files", f"no index files in {svc.index_dir}: messageIndexEnable=false, "
                                                    "or the index directory was deleted"))
    for info in svc.infos:
        if info.error:
            rep.reasons.append(Reason("index_file_damaged", f"{info.name}: {info.error}"))
    if q.collisions:
        rep.reasons.append(Reason("hash_collision", f"all {len(q.collisions)} index hits are other keys with the "
                                                    "same hash (topic#key collision), none is the message"))
    dropped = {i.name for i in svc.infos if i.dropped_on_abnormal_restart}
    for n in q.notes:
        if as_recovered and any(n.startswith(f"round 1: offset {off} ") for off in gone):
            continue  # explained above as the recovery's truncation
        if n.startswith("round 1:") and "not readable" in n:
            extra = ""
            if svc.abort_present and any(d in n for d in dropped):
                extra = ("; the abort file is present and this index file is newer than checkpoint.indexMsgTimestamp: "
                         "the broker deletes it on restart and recovery truncates the damaged record")
            rep.reasons.append(Reason("hit_not_readable", n[len("round 1: "):] + extra))


def _scan_commitlog(rep: MissingReport, cl, svc: IndexService, q: QueryMessageResult, view: RecoveryView | None,
                    scan_bytes: int | None, max_msgs_num_batch: int) -> None:
    """The bounded scan of the commit log for the message itself, and why the index look-up misses each one
    found (``_diagnose_located``); when none is found, why not."""
    topic, key, kind, as_recovered = rep.topic, rep.key, rep.kind, rep.as_recovered
    start = cl.min_offset
    stop = cl.end_offset if scan_bytes is None else min(cl.end_offset, start + scan_bytes)
    rep.scanned = (start, stop)
    rep.scan_complete = stop >= cl.end_offset
    key_hash = index_key_hash(build_index_key(topic, key))
    for msg in cl.messages(start, stop, keep_going=True):
        if kind == "uniq_key":
            if msg.uniq_key != key:
                continue
        elif key not in msg.keys and msg.uniq_key != key and key not in msg.properties.values():
            # a key put in a user property (or the whole KEYS string) is matched too: it was never indexed
            continue
        if len(rep.located) >= MAX_LOCATED:
            rep.reasons.append(Reason("many_matches", f"more than {MAX_LOCATED} messages match; the rest are not "
                                                      "listed (narrow with --scan-bytes or a rarer key)"))
            break
        loc = Located(msg.physical_offset, msg.topic, msg.queue_id, msg.queue_offset, msg.store_timestamp,
                      msg.keys, msg.uniq_key, fate=offset_fate(msg.physical_offset, view))
        rep.located.append(loc)
        if as_recovered and loc.fate == "beyond_truncation":
            assert view is not None
            rep.reasons.append(Reason("beyond_truncation", f"the message (topic {msg.topic!r}) is on disk, but "
                                      + beyond_truncation_text(msg.physical_offset, view)))
            continue
        _diagnose_located(rep, svc, msg, loc, topic, key, key_hash, q, max_msgs_num_batch)
        if (view is not None and rep.reasons and rep.reasons[-1].code == "index_behind"
                and view.reindexes(msg.physical_offset)):
            rep.reasons[-1].detail += ("; the broker indexes it when it restarts (the restart dispatches it past the "
                                       f"surviving index's endPhyOffset {view.index_end_phy_offset})")
    if not rep.located:
        where = f"[{start}, {stop})"
        rep.reasons.append(Reason("not_on_disk" if rep.scan_complete else "not_in_scanned_range",
                                  f"no message with this {kind.replace('_', ' ')} in the commitlog {where}"
                                  + ("" if rep.scan_complete else "; raise --scan-bytes to look further")
                                  + (f"; the commitlog starts at {start}: older files were deleted (retention)"
                                     if start > 0 else "")))
        expired = [o for o in q.raw if o < cl.min_offset]
        if expired:
            rep.reasons.append(Reason("commitlog_expired", f"the index still points to {expired}, below the first "
                                                           f"commitlog file: the message expired"))


def _diagnose_located(rep, svc, msg, loc, topic, key, key_hash, q, max_batch) -> None:
    from ..dispatch_rules import goes_to_index, index_keys

    at = f"message at {msg.physical_offset} (topic {msg.topic!r}, store time {msg.store_timestamp})"
    if msg.topic != topic:
        real = msg.properties.get(PROPERTY_REAL_TOPIC)
        if msg.topic == RMQ_SYS_SCHEDULE_TOPIC and real == topic:
            rep.reasons.append(Reason("delayed_message", f"{at} is a delayed message: until delivered it is stored and "
                                                         f"indexed under {RMQ_SYS_SCHEDULE_TOPIC}; query that topic"))
        else:
            rep.reasons.append(Reason("other_topic", f"{at}: the key exists under topic {msg.topic!r}, not {topic!r} "
                                                     f"(the index key is topic#key)"))
        return
    if not goes_to_index(msg.sys_flag):
        rep.reasons.append(Reason("not_indexed_rollback", f"{at} is a ROLLBACK record: never indexed"))
        return
    if key not in index_keys(msg.properties):
        rep.reasons.append(Reason("key_not_in_keys", f"{at}: {key!r} is not a KEYS token nor the UNIQ_KEY "
                                                     f"(KEYS={msg.keys_string!r}); it was never indexed"))
        return
    items = find_index_items(svc, key_hash, msg.physical_offset)
    loc.index_items = items
    if not items:
        covering = [i for i in svc.infos
                    if not i.error and i.begin_phy_offset <= msg.physical_offset <= i.end_phy_offset]
        newest_end = max((i.end_phy_offset for i in svc.infos if not i.error), default=-1)
        if msg.physical_offset > newest_end:
            rep.reasons.append(Reason("index_behind", f"{at} lies after the newest index entry (endPhyOffset "
                                                      f"{newest_end}): not dispatched to the index yet, or the index "
                                                      "file holding it was destroyed (abnormal restart / deleted)"))
        elif not covering:
            spans = ", ".join(f"{i.name} [{i.begin_timestamp}, {i.end_timestamp}]" for i in svc.infos if not i.error)
            in_time = [i.name for i in svc.infos if not i.error and i.begin_timestamp <= msg.store_timestamp
                       <= i.end_timestamp]
            rep.reasons.append(Reason("index_gap", f"{at}: no index file covers its offset"
                                                   + ("" if in_time else " nor its store time")
                                                   + f" (index files cover {spans}): the index file for that period "
                                                   "was destroyed or never written"))
        else:
            rep.reasons.append(Reason("not_indexed", f"{at}: {covering[0].name} covers its offset but holds no item "
                                                     "for it (indexing was off when it was written, or the file is "
                                                     "damaged)"))
        return
    if msg.physical_offset in q.phy_offsets:
        return
    if msg.problems:
        rep.reasons.append(Reason("record_damaged", f"{at} is damaged ({'; '.join(msg.problems)}): the broker "
                                                    "cannot return it (a crash recovery truncates it)"))
        return
    for it in items:
        info = svc.info_for(it["file"])
        if not (rep.begin <= it["time_read"] <= rep.end):
            skew = "" if rep.begin <= msg.store_timestamp <= rep.end else " (its store time is outside the window too)"
            rep.reasons.append(Reason("time_window", f"{at}: the index records time {it['time_read']} (whole seconds "
                                                     f"after the file's beginTimestamp), outside [{rep.begin}, "
                                                     f"{rep.end}]{skew}; clock skew between producer and broker, or "
                                                     "a window narrower than a second"))
        elif not it["reachable"]:
            rep.reasons.append(Reason("chain_broken", f"{at}: item {it['item']} of {it['file']} is not reachable "
                                                      f"from slot {it['slot']} (corrupt prevIndex chain)"))
        elif len(q.raw) >= q.max_num:
            rep.reasons.append(Reason("result_cap", f"{at}: the look-up stopped at {q.max_num} results "
                                                    f"(maxNum capped by maxMsgsNumBatch={max_batch}); newer hits "
                                                    "filled the list; narrow the time window"))
        elif info is not None and not _file_consulted(q, it["file"]):
            rep.reasons.append(Reason("file_not_consulted", f"{at}: {it['file']} was not searched (its time range "
                                                            "does not overlap the window, or an earlier stop)"))
        else:
            rep.reasons.append(Reason("unexplained", f"{at}: indexed at item {it['item']} of {it['file']} but not "
                                                     "returned"))


def _file_consulted(q: QueryMessageResult, name: str) -> bool:
    return any(w.file == name and w.consulted for r in q.rounds for w in r.walks)


def _explain_msg_id(store, rep: MissingReport, view: RecoveryView | None) -> MissingReport:
    cl = store.commitlog
    try:
        o = decode_offset_msg_id(rep.key)
    except ValueError as e:
        rep.reasons.append(Reason("bad_msg_id", str(e)))
        return rep
    off = o.physical_offset
    fate = offset_fate(off, view)
    if fate is not None:
        rep.fates[off] = fate
    if rep.as_recovered and fate == "beyond_truncation" and off < cl.end_offset:
        assert view is not None
        rep.reasons.append(Reason("beyond_truncation", beyond_truncation_text(off, view)))
    elif off < cl.min_offset:
        rep.reasons.append(Reason("commitlog_expired", f"offset {off} is below the first commitlog file "
                                                       f"({cl.files[0].name}): expired and deleted"))
    elif off >= cl.end_offset:
        rep.reasons.append(Reason("beyond_commitlog", f"offset {off} is beyond the end of the commitlog "
                                                      f"({cl.end_offset}): wrong store/broker ({o.store_host}?) or "
                                                      "data lost in a crash"))
    else:
        try:
            msg = cl.read_message(off)
        except CorruptDataError as e:
            rep.reasons.append(Reason("no_record_there", str(e)))
        else:
            rep.located.append(Located(msg.physical_offset, msg.topic, msg.queue_id, msg.queue_offset,
                                       msg.store_timestamp, msg.keys, msg.uniq_key, fate=fate))
            rep.found_by_index = True
            if msg.topic != rep.topic:
                rep.reasons.append(Reason("other_topic", f"the record at {off} belongs to topic {msg.topic!r}"))
            if msg.offset_msg_id != rep.key.upper():
                rep.reasons.append(Reason("msg_id_mismatch", f"the record at {off} has offsetMsgId "
                                                             f"{msg.offset_msg_id} (other store host or a record "
                                                             "moved by a crash)"))
    return rep
