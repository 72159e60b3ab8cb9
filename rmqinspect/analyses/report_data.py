"""What `rmqinspect report` draws, collected from the analyses the other commands use.

``collect_store_report`` runs ``summarize`` (file map, per-queue commit-log counts, version evidence),
``verify`` (every problem range), ``plan_recovery`` (truncation point, queues cut and re-dispatched, index
files dropped, what lies past the truncation point), ``queue_bounds`` (consume-queue entries, as ``cq --all``),
the index-file headers and ``lost_window`` (consumer offsets, as ``recover --consumers``), and adds the one
thing no command computes: messages and bytes per topic per store-time bucket, from the same record walk
(``walk_batches``). Nothing here renders; the result is a dataclass the HTML renderer (and tests) read.

Downsampling is by time bucket only: the traffic series has at most ``max_buckets`` buckets, while every
damaged range, finding and queue is kept.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..errors import RmqInspectError
from ..store import Store
from ..store.batch import BatchConsumeQueue, list_batch_queues
from ..store.broker_conf import configured
from ..store.commitlog import prove_file_size
from ..store.consumequeue import ConsumeQueue, list_queues
from ..store.indexfile import IndexFile
from ..store.rocksdb_cq import ConsumeQueues
from ..store.version import BrokerVersion
from ..store.walk.records import RecordRun
from ..store.walk.resync import walk_batches
from .compare.cq_vs_commitlog import queue_bounds
from .offsets import LostWindowReport, lost_window
from .recovery import RecoveryOptions, RecoveryPlan, plan_recovery
from .recovery.walked import WalkedRun, WalkedRuns, walked_run
from .rows import topic_ids
from .summary import StoreSummary, count_named_run, count_run, summarize
from .txn import TxnSection, report_section
from .verify import RunColumns, VerifyReport, read_bytes, store_time_candidates, verify

# bucket widths the traffic chart may use, in ms: the smallest that keeps the series within max_buckets
BUCKET_STEPS_MS = (1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
                   1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000)
# distinct (second, topic) cells kept while walking before the walk coarsens them to minutes (bounded memory)
MAX_FINE_CELLS = 2_000_000
OTHER = "(other topics)"
LAYOUT_KINDS = ("records", "blank_tail", "zero_tail", "gap")  # map segments that are not damage


@dataclass
class Segment:
    """A stretch of the commit-log offset axis: records, blank tail, zero tail, a missing file or damage."""

    kind: str  # records | blank_tail | zero_tail | gap | damage kinds (torn_tail, crc_mismatch, zero_page, ...)
    start: int
    end: int
    file: str | None
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Traffic:
    """Messages and bytes per topic per store-time bucket ``[start_ms + i * bucket_ms, ... + bucket_ms)``."""

    start_ms: int | None
    bucket_ms: int
    topics: list[str]  # the top topics by messages, then OTHER when more topics exist
    messages: dict[str, list[int]] = field(default_factory=dict)
    bytes: dict[str, list[int]] = field(default_factory=dict)
    records: int = 0
    excluded: int = 0  # records left off the time axis: their store time is a damaged field (verify)

    def to_dict(self) -> dict:
        # asdict's answer without its deep copy of each count, one at a time (topics x buckets of them: ~15 ms of
        # the page's rendering for a day of traffic)
        return {"start_ms": self.start_ms, "bucket_ms": self.bucket_ms, "topics": list(self.topics),
                "messages": {t: list(v) for t, v in self.messages.items()},
                "bytes": {t: list(v) for t, v in self.bytes.items()}, "records": self.records,
                "excluded": self.excluded}


@dataclass
class QueueRow:
    topic: str
    queue_id: int
    cq_type: str | None  # SimpleCQ | BatchCQ | RocksDBCQ; None when the queue has records but no consume queue
    min_offset: int | None
    max_offset: int | None  # exclusive, on disk
    entries: int
    commitlog_messages: int  # records of this topic and queue id in the commit log (summary)
    cq_behind: int  # records with no entry (verify cq_behind)
    cq_bad_entries: int  # entries verify flags (ahead, dangling, pointing to damage, wrong size/queue/offset)
    max_offset_after_load: int | None
    max_offset_after_start: int | None
    entries_cut: int
    redispatched: int
    files_deleted: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class IndexFileRow:
    name: str
    begin_timestamp: int | None
    end_timestamp: int | None
    begin_phy_offset: int | None
    end_phy_offset: int | None
    index_count: int | None
    max_items: int | None
    hash_slot_count: int | None
    slots: int | None
    geometry_source: str | None
    dropped_on_restart: bool
    problem: str = ""

    @property
    def fill(self) -> float | None:
        """indexCount against maxIndexNum: the file is full (a new one is created) at 1."""
        if self.index_count is None or not self.max_items:
            return None
        return self.index_count / self.max_items

    @property
    def slot_load(self) -> float | None:
        """Used hash slots against maxHashSlotNum."""
        if self.hash_slot_count is None or not self.slots:
            return None
        return self.hash_slot_count / self.slots

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fill"] = self.fill
        d["slot_load"] = self.slot_load
        return d


@dataclass
class Finding:
    """One problem to look at: where it is, why, and the command that shows its bytes."""

    source: str  # verify | recover
    check: str
    kind: str
    start: int
    end: int
    file: str | None
    position: int | None
    reason: str
    count: int
    axis: str  # commitlog (physical offsets) | consumequeue | index | checkpoint: which chart region it is on
    command: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class StoreReport:
    root: str
    summary: StoreSummary
    verify: VerifyReport
    plan: RecoveryPlan
    geometry: dict  # mappedFileSizeCommitLog and where it came from
    segments: list[Segment]
    traffic: Traffic
    queues: list[QueueRow]
    consumers: LostWindowReport | None
    index_files: list[IndexFileRow]
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    transactions: TxnSection | None = None  # analyses.txn: only when the store holds a transaction

    @property
    def damage(self) -> list[Segment]:
        return [s for s in self.segments if s.kind not in LAYOUT_KINDS]


@dataclass
class ReportData:
    """The whole report: one StoreReport per store, and how it was made (for the header)."""

    stores: list[StoreReport]
    rmqinspect_version: str
    command_line: str
    generated_at_ms: int  # --as-of when given, else the time the report was made
    as_of_given: bool
    replicas: dict | None = None  # analyses.peers.PeersReport.to_dict() when the stores are replicas of one group


# each pass's share of the report's progress bar: what it took of the collection on the 1 GiB crashed store of
# benchmarks/bench_real_store.py (summary 0.6 s, verify 1.3 s, recovery 2.1 s, traffic 0.8 s); summary, verify and
# traffic share one walk (``summary_beside_verify``) when V2 records are accepted, and the recovery plan runs beside
# that walk (``BesideTheWalk``): one phase, the bar at the sum of each pass's share of what it has read
REPORT_PHASES = (("summary", 0.12), ("verify", 0.27), ("recovery", 0.44), ("traffic", 0.17))


def report_read_bytes(store: Store) -> int:
    """The bytes the report reads from ``store``, each once: the commit log, consume queues and index items."""
    return sum(read_bytes(store).values())


def collect_store_report(store: Store, *, broker_version: BrokerVersion | None = None, accept_v2: bool = True,
                         offsets_file: str | None = None, top_topics: int = 8, max_buckets: int = 1200,
                         progress: Callable[[int], None] | None = None, jobs: int | None = None) -> StoreReport:
    """Everything the report shows about one store. ``progress(done, phase)`` gets how far the report has come, in
    bytes out of ``report_read_bytes(store)`` (the commit log, consume queues and index items, each counted once):
    the passes share that total in proportion to what each costs (``REPORT_PHASES``), each moving through its
    share as it reads. ``jobs``: worker processes of verify's walk (``store.walk.parallel.resolve_jobs``; the
    recovery plan's scan takes that walk's runs where they are its own and walks the rest in this process)."""
    cl = store.commitlog
    sizes = read_bytes(store)
    span = sizes["commitlog"]
    total = sum(sizes.values())
    tick = progress or (lambda done, phase=None: None)

    def phase(name: str, at: float, width: float, of: int, label: str):
        """The progress callback of one pass: ``done`` bytes of its ``of`` into its share of the total."""
        base, share = int(total * at), total * width
        tick(base, label)
        return lambda done: tick(base + int(share * min(max(done, 0), of) / max(of, 1)))

    shares = dict(REPORT_PHASES)
    at = 0.0
    tally = None
    if accept_v2:  # summary's and traffic's own walks check CRCs and accept V2 records: verify's walk is the same
        tally = TrafficTally()
        width = shares["summary"] + shares["verify"] + shares["traffic"]
        tick(0, "report: verify and recovery")  # the summary and traffic are counted from verify's walk
        walked = [0]
        # the plan's scan takes the runs of verify's walk (CRC checked) where they are its own
        handed = WalkedRuns(True)
        beside = BesideTheWalk(store, broker_version, cl.min_offset, handed)

        def both(done: int | None = None) -> None:
            """The bar at the walk's share of what it read plus the plan's share of what its scan reached."""
            if done is not None:
                walked[0] = done
            tick(int(total * width * min(walked[0], total) / max(total, 1)
                     + total * shares["recovery"] * min(beside.reached, span) / max(span, 1)))

        summary, rep = summary_beside_verify(store, broker_version, accept_v2, both, traffic=tally, jobs=jobs,
                                             beside=beside.start, walked=handed)
        beside.start()  # when the walk handed no item (no commit-log record), it starts now
        plan, bounds = beside.result(both)
        at += width + shares["recovery"]
    else:
        step = phase("summary", at, shares["summary"], span, "report: summary")
        summary = summarize(store, progress=step, broker_version=broker_version)
        at += shares["summary"]
        step = phase("verify", at, shares["verify"], total, "report: verify")
        rep = verify(store, accept_v2=accept_v2, read_progress=step, jobs=jobs)
        at += shares["verify"]
        _give_back_freed_memory()
        step = phase("recovery", at, shares["recovery"], span, "report: recovery")
        plan = plan_recovery(store, RecoveryOptions(version=broker_version, keep_redispatch=False, tags_codes=False,
                                                    progress=lambda off: step(off - cl.min_offset)))
        at += shares["recovery"]
        bounds = list(all_queue_bounds(store))
    index_files = index_file_rows(store, plan, rep)
    outliers = [p.start for p in rep.problems if p.kind == "store_time_outlier"]
    if tally is not None:
        traffic = tally.traffic(outliers, top_topics=top_topics, max_buckets=max_buckets)
        del tally  # its buffers go back to the system with the plan's arrays, before the rows and the page
    else:
        step = phase("traffic", at, 1.0 - at, span, "report: traffic")
        traffic = store_traffic(store, outliers, top_topics=top_topics, max_buckets=max_buckets,
                                progress=lambda off: step(off - cl.min_offset))
    tick(total)
    after = plan.consume_queue_max_offsets_after_start or plan.consume_queue_max_offsets
    consumers = lost_window(store, plan.consume_queue_max_offsets_before, after, offsets_file)
    if consumers.source is None and not consumers.rows:
        consumers = None if offsets_file is None else consumers
    _give_back_freed_memory()
    return StoreReport(
        root=store.root, summary=summary, verify=rep, plan=plan, geometry=commitlog_geometry(store),
        segments=commitlog_segments(summary, rep, plan), traffic=traffic,
        queues=queue_rows(bounds, summary, rep, plan), consumers=consumers,
        index_files=index_files, findings=findings(store.root, rep, plan),
        notes=list(dict.fromkeys(summary.notes + rep.notes + plan.notes)),
        transactions=report_section(store, plan, offsets_file) if may_hold_transactions(store, rep)
        else no_transaction_section(store, offsets_file))


class BesideTheWalk:
    """The report's passes beside verify's walk, in two threads: ``plan_recovery`` (the consume queues, its scan
    from the start file taking the runs verify's walk hands over, ``walked``, where they are its own, the index
    headers) in one; every queue's bounds (as ``cq --all``) in the other (the index files' rows come after the
    walk, from the geometries verify proved). Two threads, because the plan follows the walk to its end and the
    bounds would otherwise follow it. The plan is the object ``plan_recovery`` returns when run alone; what its
    scan walks itself it walks in this process (``jobs=1``: no process is forked from a thread). ``reached``: the
    commit-log bytes the plan's scan has passed, for the progress bar."""

    def __init__(self, store: Store, broker_version: BrokerVersion | None, min_offset: int,
                 walked: WalkedRuns | None = None):
        from ..store.walk.parallel import Beside

        self.reached = 0
        opts = RecoveryOptions(version=broker_version, keep_redispatch=False, tags_codes=False, jobs=1,
                               progress=lambda off: setattr(self, "reached", off - min_offset), walked=walked)
        self.plan = Beside(plan_recovery, store, opts, name="report-recovery")
        self.rows = Beside(all_queue_bounds_of, store, name="report-rows")

    def start(self) -> None:
        """Start the threads once: called when verify's walk has begun, after its workers are forked."""
        self.plan.start()
        self.rows.start()

    def result(self, tick: Callable[[], None]) -> tuple:
        """(plan, queue bounds), ``tick()`` called about four times a second while a thread still runs. An error
        is raised as it would have been in order: the plan's first."""
        for t in (self.plan, self.rows):
            while t.alive():
                t.wait(0.25)
                tick()
        return self.plan.result(), self.rows.result()


def all_queue_bounds_of(store: Store) -> list:
    """``all_queue_bounds``, gathered."""
    return list(all_queue_bounds(store))


def summary_beside_verify(store: Store, broker_version, accept_v2: bool,
                          read_progress: Callable[[int], None] | None = None, *,
                          traffic: TrafficTally | None = None, jobs: int | None = None,
                          beside: Callable[[], None] | None = None,
                          walked: WalkedRuns | None = None) -> tuple[StoreSummary, VerifyReport]:
    """``summarize`` and ``verify`` (every check) over one commit-log walk: verify's walk also converts each run
    for the summary (``verify``'s ``tap``), and a thread runs ``summarize`` over those items as they come,
    through a bounded queue (the items are small; memory stays flat). Both answers are those of their own walks:
    the summary's walk is ``walk_batches`` with CRC check and V2 records, as verify's is here. ``traffic``: the
    same thread also adds each run's traffic cells to it (``TrafficTally``, ``store_traffic``'s walk being that
    one too). ``beside()`` is called once the walk has begun, its worker processes forked (a thread started before
    the fork would be copied into them mid-step). ``walked``: where each run's ``WalkedRun`` goes as the walk hands
    it (from this thread, never waiting), finished when the walk ends."""
    import contextvars
    import queue
    import threading

    items: queue.Queue = queue.Queue(maxsize=64)
    end = object()
    out: dict = {}

    def pulled():
        while True:
            ev = items.get()
            if ev is end:
                return
            if type(ev) is CountsAndTraffic:
                traffic.add(ev.traffic)
                ev = ev.counts
            yield ev

    def run() -> None:
        try:
            out["summary"] = summarize(store, broker_version=broker_version, events=pulled())
        except BaseException as e:  # handed to the caller; the rest is drained so verify's walk never blocks
            out["error"] = e
            for ev in iter(items.get, end):
                del ev
    # the thread sees the command's settings (the broker.conf context), and starts with the walk's first item:
    # the walk's worker processes are forked before it exists
    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), name="report-summary",
                              daemon=True)

    def feed(ev) -> None:
        if thread.ident is None:
            thread.start()
        if type(ev) is CountsAndTraffic and ev.walked is not None:
            if walked is not None:
                walked.put(ev.walked)
            ev.walked = None
        items.put(ev)

    try:
        rep = verify(store, accept_v2=accept_v2, read_progress=read_progress, jobs=jobs,
                     tap=(count_run if traffic is None else count_run_and_traffic, feed), on_start=beside)
    finally:
        if walked is not None:
            walked.finish()
        if thread.ident is None:
            thread.start()
        items.put(end)
        thread.join()
    if "error" in out:
        raise out["error"]
    return out["summary"], rep


def may_hold_transactions(store: Store, rep: VerifyReport) -> bool:
    """Whether ``txn``'s walk could meet a half (RMQ_SYS_TRANS_HALF_TOPIC) or a PREPARED record, from what verify's
    walk saw: its valid records (``transaction_records``), and the records inside its damaged ranges read without
    CRC check (txn reads CRC-damaged records; past structural damage it reads nothing more of the file). False
    means the transactions section is empty, without the walk (~0.5 s a GiB)."""
    if rep.transaction_records is None or rep.transaction_records:
        return True
    from ..formats.constants import RMQ_SYS_TRANS_HALF_TOPIC, TRANSACTION_MASK, TransactionType
    from .recovery.redispatch import records_with_topic

    half = np.frombuffer(RMQ_SYS_TRANS_HALF_TOPIC.encode(), dtype=np.uint8)
    for a, b in rep.damaged:
        for ev in store.commitlog.walk(a, b, check_crc=False, stop_at_end=False):
            if type(ev) is not RecordRun or not len(ev):
                continue
            r = ev.records
            if ((r["sys_flag"] & TRANSACTION_MASK) == int(TransactionType.PREPARED)).any():
                return True
            if records_with_topic(np.frombuffer(ev.file.buffer, dtype=np.uint8), r, half).any():
                return True
    return False


def no_transaction_section(store: Store, offsets_file: str | None) -> None:
    """``report_section`` of a store without a transaction record: None (the check service's offsets are still
    read, so a bad ``--offsets`` file is the same error)."""
    from .txn import checker_progress

    checker_progress(store, offsets_file)
    return None


def _give_back_freed_memory() -> None:
    """glibc's malloc_trim: the pages verify's windows freed go back to the system before the next pass (glibc
    raises its mmap threshold after the first large free, so later large arrays come from the heap, and the freed
    heap stays resident: at 4 GiB the report kept ~20 MB more than at 1 GiB, none of it data). Called again once
    the plan and the traffic cells are freed, before the rows and the page (90 MiB peak at 4 GiB, not 94)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def commitlog_geometry(store: Store) -> dict:
    """mappedFileSizeCommitLog in use and its source: --broker-config, else proven from the files."""
    conf = configured(store.conf, "mappedFileSizeCommitLog")
    if conf is not None:
        return {"mapped_file_size": store.commitlog.file_size, "source": "config", "detail": conf.detail}
    got = prove_file_size(store.commitlog.files)
    return {"mapped_file_size": store.commitlog.file_size, "source": got.source, "detail": got.detail}


def commitlog_segments(summary: StoreSummary, rep: VerifyReport, plan: RecoveryPlan) -> list[Segment]:
    """The commit-log map: per file its records, blank tail and zero tail; the missing files; every damaged
    range verify found, and the regions past the truncation point as the recovery classifies them (torn tail,
    zero page, CRC, stale) - those take the recovery's kind where both name the same range."""
    out: list[Segment] = []
    for f in summary.files:
        end = f.start_offset + f.size
        data_end = f.data_end if f.data_end is not None else f.start_offset
        if data_end > f.start_offset:
            out.append(Segment("records", f.start_offset, data_end, f.name, f"{f.records} records"))
        if f.blank_at is not None:
            out.append(Segment("blank_tail", f.blank_at, end, f.name, f"blank record of {f.blank_size} bytes"))
        if f.zero_tail_at is not None and f.zero_tail_size:
            out.append(Segment("zero_tail", f.zero_tail_at, f.zero_tail_at + f.zero_tail_size, f.name,
                               "zero-filled space after the last record"))
    for g in summary.gaps:
        out.append(Segment("gap", g["start"], g["end"], None, f"no commit-log file covers {g['size']} bytes"))
    damage: dict[tuple[int, int], Segment] = {}
    for p in rep.problems:
        # the log's files: commitlog/, or a DLedger member's data/ (its entries hold the records)
        if p.check in ("structure", "crc") and p.file and (p.file.startswith("commitlog")
                                                           or p.file.replace(os.sep, "/").startswith("dledger-")):
            damage[(p.start, p.end)] = Segment(p.kind, p.start, p.end, os.path.basename(p.file), p.reason)
    for r in plan.messages_lost.get("regions", []):
        damage[(r["start"], r["end"])] = Segment(r["kind"], r["start"], r["end"], r.get("file"), r.get("reason", ""))
    out.extend(sorted(damage.values(), key=lambda s: (s.start, s.end)))
    return out


def store_traffic(store: Store, outlier_offsets: list[int], *, top_topics: int = 8, max_buckets: int = 1200,
                  progress: Callable[[int], None] | None = None) -> Traffic:
    """Messages and bytes per topic per store-time bucket over every valid record (the records decode-commitlog
    and verify see). Records whose store time verify flags as a damaged field are counted in ``excluded``."""
    topics: dict[str, int] = {}
    cells = TrafficCells()  # (unit index << 20 | topic id) -> messages, bytes
    unit = 1_000
    skip = np.array(sorted(outlier_offsets), dtype=np.int64)
    n = excluded = 0
    last_file = None
    for ev in walk_batches(store):
        if type(ev) is not RecordRun or not len(ev):
            continue
        r = ev.records
        if ev.file is not last_file:
            last_file = ev.file
            u8 = np.frombuffer(ev.file.buffer, dtype=np.uint8)
        if progress is not None:
            progress(ev.file.start + ev.end)
        tids = np.asarray(topic_ids(u8, ev.rows, topics), dtype=np.int64)
        ts = r["store_timestamp"].astype(np.int64)
        size = r["total_size"].astype(np.int64)
        keep = np.ones(len(r), bool)
        if skip.size:
            keep &= ~np.isin(r["position"].astype(np.int64) + ev.base, skip)
        excluded += int((~keep).sum())
        ts, size, tids = ts[keep], size[keep], tids[keep]
        n += len(ts)
        cells.add(*run_cells(ts, tids, size, unit))
        if len(cells) > MAX_FINE_CELLS:
            unit = cells.coarsen(unit, unit * 60)
    return traffic_series(cells, unit, list(topics), n, excluded, top_topics, max_buckets)


def run_cells(ts: np.ndarray, tids: np.ndarray, size: np.ndarray, unit: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One run's traffic cells: the distinct keys (store time // ``unit`` << 20 | topic id), sorted, with the
    messages and bytes of each. A run's records mostly lie within seconds of each other, so where the grid of
    (time unit, topic) over its span is small the cells are counted on that grid (no sort): the grid's order is
    the keys' order, and each cell adds its records in the order the sort would."""
    sec = ts // unit
    if len(sec):
        lo, hi, ntop = int(sec.min()), int(sec.max()), int(tids.max()) + 1
        grid = (hi - lo + 1) * ntop
        if int(tids.min()) >= 0 and ntop <= 1 << 20 and grid <= max(4 * len(sec), 1 << 16):
            at = (sec - lo) * ntop + tids
            counts = np.bincount(at, minlength=grid)
            cells = np.flatnonzero(counts)
            keys = ((cells // ntop + lo) << 20) | (cells % ntop)
            return keys.astype(np.result_type(sec, tids)), counts[cells], np.bincount(at, weights=size,
                                                                                       minlength=grid)[cells]
    uniq, inv = np.unique((sec << 20) | tids, return_inverse=True)
    counts = np.bincount(inv.ravel(), minlength=len(uniq))
    sums = np.bincount(inv.ravel(), weights=size, minlength=len(uniq))
    return uniq, counts, sums


def traffic_series(cells: TrafficCells, unit: int, names: list[str], n: int, excluded: int, top_topics: int,
                   max_buckets: int) -> Traffic:
    """The chart's series from the walk's cells (``unit`` ms each, topic ids into ``names``). The cells are first
    coarsened until at most MAX_FINE_CELLS remain: the unit is then the finest that holds every counted record's
    cell within the cap, whatever the runs the walk came in and whenever it coarsened on the way (a walk
    coarsens only when its records so far already exceed the cap at that unit)."""
    while len(cells) > MAX_FINE_CELLS:
        unit = cells.coarsen(unit, unit * 60)
    if not len(cells):
        return Traffic(None, BUCKET_STEPS_MS[0], [], records=n, excluded=excluded)
    keys, vals = cells.arrays()
    t_unit, tid = keys >> 20, keys & ((1 << 20) - 1)
    t_ms = t_unit * unit
    lo, hi = int(t_ms.min()), int(t_ms.max()) + unit
    bucket = next((b for b in BUCKET_STEPS_MS if b >= unit and (hi - lo) / b <= max_buckets),
                  max(BUCKET_STEPS_MS[-1], -(-(hi - lo) // max_buckets)))
    start = lo - lo % bucket
    nb = (hi - start + bucket - 1) // bucket
    bi = (t_ms - start) // bucket
    per_topic = np.bincount(tid, weights=vals[:, 0])
    order = [int(t) for t in np.argsort(-per_topic, kind="stable") if per_topic[t] > 0]
    top = order[:top_topics]
    rest = order[top_topics:]
    out = Traffic(start, bucket, [names[t] for t in top] + ([OTHER] if rest else []), records=n, excluded=excluded)
    for label, ids in [(names[t], [t]) for t in top] + ([(OTHER, rest)] if rest else []):
        sel = np.isin(tid, ids)
        out.messages[label] = np.bincount(bi[sel], weights=vals[sel, 0], minlength=nb).astype(np.int64).tolist()
        out.bytes[label] = np.bincount(bi[sel], weights=vals[sel, 1], minlength=nb).astype(np.int64).tolist()
    return out


@dataclass
class TrafficRun:
    """What one run of valid records adds to the traffic (``count_run_and_traffic``, in the walk's own process):
    its cells at 1 s, and apart from them the records whose store time verify may yet flag (``held``)."""

    topics: list[str]  # the run's topics in order of first appearance: the topic ids below index it
    keys: np.ndarray  # (store second << 20 | topic id), distinct and sorted, over the run's records but the held
    counts: np.ndarray  # messages per key (int64)
    sums: np.ndarray  # bytes per key (float64, whole: bincount's)
    held: np.ndarray  # int64 rows (physical offset, store timestamp, topic id, total size)


@dataclass
class CountsAndTraffic:
    """What ``count_run_and_traffic`` makes of a run: the summary's counts and the traffic's cells."""

    counts: object  # summary.count_run's item
    traffic: TrafficRun
    walked: WalkedRun | None = None  # the run for the recovery plan's scan, where verify's check made its columns


def count_run_and_traffic(ev, named: RunColumns | None = None) -> CountsAndTraffic:
    """verify's tap for the report: ``count_run``'s counts of the run, and its ``TrafficRun``. The records kept
    apart are those ``store_time_candidates`` lists (outside the calendar, far from both neighbours, the first and
    last two, whose neighbours lie in other runs): every record verify flags ``store_time_outlier`` is one, and
    the traffic leaves those out, which is known only after the walk. ``named``: what verify's check already made
    of the run (its topic ids and names as ``topic_ids`` numbers them, the columns and __CRC32# trailers the
    recovery plan's ``WalkedRun`` takes), or None."""
    r = ev.records
    if named is None:
        topics: dict[str, int] = {}
        tids = np.asarray(topic_ids(np.frombuffer(ev.file.buffer, dtype=np.uint8), ev.rows, topics), dtype=np.int64)
        names = list(topics)
    else:
        tids, names = named.tids.astype(np.int64), named.topics
    ts = r["store_timestamp"].astype(np.int64)
    size = r["total_size"].astype(np.int64)
    pos = r["position"].astype(np.int64)
    held = np.zeros(len(r), dtype=bool)
    at = [c[1] for part in store_time_candidates(r) for c in part]
    if at:
        held[np.searchsorted(pos, np.array(at, dtype=np.int64))] = True
    rows = np.stack([pos[held] + ev.base, ts[held], tids[held], size[held]], axis=1)
    kept = ~held
    uniq, counts, sums = run_cells(ts[kept], tids[kept], size[kept], 1_000)
    walked = walked_run(ev, named.columns, names, named.crc32_trailers) if named is not None else None
    return CountsAndTraffic(count_named_run(ev, tids, names), TrafficRun(names, uniq, counts, sums, rows), walked)


class TrafficTally:
    """``store_traffic``'s cells, added up from another walk's ``TrafficRun``s (verify's, in the report): the same
    ``Traffic`` as ``store_traffic`` gives, whatever runs or chunks the walk came in. The runs' cells wait in a
    list (24 bytes a cell, nothing reallocated while verify's walk holds its own peak) and join the sorted cells
    when ``PENDING_MAX`` of them wait, and at the end. The held records wait until the store-time outliers are
    known; the cells so far are a subset of the counted records', so a coarsening on the way is one
    ``traffic_series`` would make anyway."""

    PENDING_MAX = 1 << 18  # cells waiting in the list (~6 MB): a store's days of 1 s cells, on a broker's topics

    def __init__(self) -> None:
        self.topics: dict[str, int] = {}  # in order of first appearance over the walk, as store_traffic numbers them
        self.cells = TrafficCells()
        self.unit = 1_000
        self.records = 0
        self.held: list[np.ndarray] = []
        # the waiting cells (key at self.unit, messages, bytes) in one buffer mapped once: small arrays kept
        # through the walk would pin the heap pages verify's freed arrays leave (~20 MB more at 4 GiB)
        self.pending = np.zeros((self.PENDING_MAX, 2), dtype=np.float64)
        self.pending_keys = np.zeros(self.PENDING_MAX, dtype=np.int64)
        self.pending_n = 0

    def add(self, run: TrafficRun) -> None:
        lut = np.array([self.topics.setdefault(t, len(self.topics)) for t in run.topics], dtype=np.int64)
        self.records += int(run.counts.sum()) + len(run.held)
        if len(run.held):
            held = run.held.copy()
            held[:, 2] = lut[held[:, 2]]
            self.held.append(held)
        if not len(run.keys):
            return
        t = (run.keys >> 20) // (self.unit // 1_000)
        self._wait(((t << 20) | lut[run.keys & ((1 << 20) - 1)]), run.counts, run.sums)

    def _wait(self, keys: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> None:
        n = len(keys)
        if self.pending_n + n > self.PENDING_MAX:
            self._join()
        if n > self.PENDING_MAX:
            self._join_cells(keys, counts.astype(np.float64), sums)
            return
        at = self.pending_n
        self.pending_keys[at:at + n] = keys
        self.pending[at:at + n, 0] = counts
        self.pending[at:at + n, 1] = sums
        self.pending_n += n

    def _join(self) -> None:
        """The waiting cells into the sorted ones (one merge of the arrays)."""
        n, self.pending_n = self.pending_n, 0
        if n:
            self._join_cells(self.pending_keys[:n], self.pending[:n, 0], self.pending[:n, 1])

    def _join_cells(self, keys: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> None:
        """Cells into the sorted ones, then a coarsening if they exceed MAX_FINE_CELLS."""
        self.cells.add_all(keys, counts, sums)
        if len(self.cells) > MAX_FINE_CELLS:
            self.unit = self.cells.coarsen(self.unit, self.unit * 60)

    def traffic(self, outlier_offsets: list[int], *, top_topics: int = 8, max_buckets: int = 1200) -> Traffic:
        """The series, without the records at ``outlier_offsets`` (verify's store-time outliers)."""
        held = np.concatenate(self.held) if self.held else np.zeros((0, 4), dtype=np.int64)
        self.held = []
        skip = np.array(sorted(outlier_offsets), dtype=np.int64)
        out = np.isin(held[:, 0], skip) if skip.size else np.zeros(len(held), dtype=bool)
        kept = held[~out]
        if len(kept):
            self._wait(((kept[:, 1] // self.unit) << 20) | kept[:, 2], np.ones(len(kept)),
                       kept[:, 3].astype(np.float64))
        self._join()
        self.pending = self.pending_keys = np.zeros(0)
        excluded = int(out.sum())
        return traffic_series(self.cells, self.unit, list(self.topics), self.records - excluded, excluded,
                              top_topics, max_buckets)


class TrafficCells:
    """``store_traffic``'s cells, (time unit index << 20 | topic id) -> [messages, bytes], held compactly: the keys
    in a sorted int64 array with their sums (24 bytes a cell, where a dict of lists took ~200: a store spanning
    months reaches the 2 M cells of MAX_FINE_CELLS), and the keys new since the last merge in a small dict.
    ``len`` is the number of distinct keys at every step, as the dict of every cell had it, so the coarsening
    happens after the same run."""

    _MERGE = 1 << 16  # new keys held in the dict before they join the arrays

    def __init__(self):
        self.keys = np.zeros(0, dtype=np.int64)
        self.vals = np.zeros((0, 2), dtype=np.int64)
        self.new: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.keys) + len(self.new)

    def add(self, uniq: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> None:
        """One run's cells: its distinct keys (sorted), their message counts and byte sums (float, whole)."""
        rest = np.ones(len(uniq), dtype=bool)
        if len(self.keys) and len(uniq):
            i = np.minimum(np.searchsorted(self.keys, uniq), len(self.keys) - 1)
            hit = self.keys[i] == uniq
            j = i[hit]  # distinct: uniq is
            self.vals[j, 0] += counts[hit]
            self.vals[j, 1] += sums[hit].astype(np.int64)
            rest = ~hit
        new = self.new
        for k, c, b in zip(uniq[rest].tolist(), counts[rest].tolist(), sums[rest].tolist()):
            cell = new.get(k)
            if cell is None:
                new[k] = [c, int(b)]
            else:
                cell[0] += c
                cell[1] += int(b)
        if len(new) > self._MERGE:
            self._merge()

    def _merge(self) -> None:
        if not self.new:
            return
        k = np.fromiter(self.new.keys(), dtype=np.int64, count=len(self.new))
        v = np.array(list(self.new.values()), dtype=np.int64).reshape(-1, 2)
        self.new = {}
        keys = np.concatenate([self.keys, k])
        order = np.argsort(keys, kind="stable")
        self.keys, self.vals = keys[order], np.concatenate([self.vals, v])[order]

    def add_all(self, keys: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> None:
        """Cells in any order, a key maybe more than once (messages and bytes as float, whole), joined with the
        arrays in one merge."""
        self._merge()
        u, inv = np.unique(np.concatenate([self.keys, keys]), return_inverse=True)
        inv = inv.ravel()
        vals = np.zeros((len(u), 2), dtype=np.int64)
        n = len(self.keys)
        vals[inv[:n]] = self.vals  # the arrays' keys are distinct
        vals[:, 0] += np.bincount(inv[n:], weights=counts, minlength=len(u)).astype(np.int64)
        vals[:, 1] += np.bincount(inv[n:], weights=sums, minlength=len(u)).astype(np.int64)
        self.keys, self.vals = u, vals

    def coarsen(self, unit: int, new_unit: int) -> int:
        """Every cell into the coarser time unit (``new_unit`` a multiple of ``unit``); returns the new unit."""
        self._merge()
        factor = new_unit // unit
        mask = (1 << 20) - 1
        nk = (((self.keys >> 20) // factor) << 20) | (self.keys & mask)
        u, inv = np.unique(nk, return_inverse=True)
        vals = np.zeros((len(u), 2), dtype=np.int64)
        np.add.at(vals, inv.ravel(), self.vals)
        self.keys, self.vals = u, vals
        return new_unit

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, [[messages, bytes]]) of every cell."""
        self._merge()
        return self.keys, self.vals


def _queue_key(path: str | None) -> str | None:
    """``topic/queue`` from a verify problem's file: consumequeue/T/Q[/file] or "consumequeue (RocksDB) T/Q"."""
    if not path:
        return None
    if path.startswith("consumequeue (RocksDB) "):
        return path[len("consumequeue (RocksDB) "):]
    parts = path.replace(os.sep, "/").split("/")
    if parts[0] in ("consumequeue", "batchconsumequeue") and len(parts) >= 3:
        return f"{parts[1]}/{parts[2]}"
    return None


def queue_rows(bounds_of_queues: list, summary: StoreSummary, rep: VerifyReport,
               plan: RecoveryPlan) -> list[QueueRow]:
    """Per queue: its entries (``queue_bounds``, as ``cq --all``), the commit log's records for it (summary),
    what verify flags, and what the recovery cuts and re-dispatches."""
    bounds = {f"{b.topic}/{b.queue_id}": b for b in bounds_of_queues}
    commitlog = {f"{q.topic}/{q.queue_id}": q.messages for q in summary.queues}
    behind: dict[str, int] = {}
    bad: dict[str, int] = {}
    for p in rep.problems:
        if p.check != "cq":
            continue
        k = _queue_key(p.file)
        if k is None:
            continue
        target = behind if p.kind == "cq_behind" else bad
        target[k] = target.get(k, 0) + p.count
    recovered = {q.key: q for q in plan.queues}
    after_load = plan.consume_queue_max_offsets
    after_start = plan.consume_queue_max_offsets_after_start or after_load
    keys = set(bounds) | set(recovered) | set(after_load) | set(after_start) | set(behind) | set(bad)
    keys |= {k for k in commitlog if not k.startswith("SCHEDULE_TOPIC_XXXX/") or k in bounds}
    rows = []
    for k in sorted(keys, key=lambda k: (k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1]))):
        topic, qid = k.rsplit("/", 1)
        b = bounds.get(k)
        q = recovered.get(k)
        rows.append(QueueRow(topic, int(qid), b.cq_type if b else None, b.min_offset if b else None,
                             b.max_offset if b else None, b.entries if b else 0, commitlog.get(k, 0),
                             behind.get(k, 0), bad.get(k, 0), after_load.get(k), after_start.get(k),
                             q.entries_cut if q else 0, q.redispatched if q else 0,
                             list(q.files_deleted) if q else []))
    return rows


def all_queue_bounds(store: Store):
    try:
        clmin = store.commitlog.min_offset
    except RmqInspectError:
        clmin = None
    d = store.layout.consumequeue_dir
    batch = [BatchConsumeQueue(t, q, p, store.conf) for t, q, p in list_batch_queues(store.root)]
    if not os.path.isdir(d):
        yield from queue_bounds(batch, clmin)
        return
    with ConsumeQueues(d, conf=store.conf) as queues:
        qs = ([ConsumeQueue(q.topic, q.queue_id, q.path) for q in list_queues(d)] if queues.kind == "file"
              else list(queues))
        yield from queue_bounds(qs + batch, clmin)


def index_file_rows(store: Store, plan: RecoveryPlan, rep: VerifyReport | None = None) -> list[IndexFileRow]:
    """Every index file's header (time and physical-offset ranges, indexCount, hashSlotCount) with its geometry
    (flag > --broker-config > proven from the file, as verify reads it) and whether a restart drops it. ``rep``:
    verify's report on the store (its index check, without geometry flags), whose proven geometries are taken
    instead of proving each file's again (a full-size file's proof reads its data: ~50 ms)."""
    from ..store.indexfile import IndexGeometry

    proven = {} if rep is None else {n: IndexGeometry.from_dict(g) for n, g in rep.index_geometry.items()
                                     if g["source"] in ("inferred", "ambiguous")}  # a proof's, not a flag's
    return index_rows_marked(index_file_headers(store, proven), plan)


def index_rows_marked(rows: list[IndexFileRow], plan: RecoveryPlan) -> list[IndexFileRow]:
    """``rows`` with the files the plan's restart drops marked."""
    dropped = set(plan.index_files_dropped)
    return [replace(r, dropped_on_restart=r.name in dropped) for r in rows]


def index_file_headers(store: Store, proven: dict | None = None) -> list[IndexFileRow]:
    """``index_file_rows`` before the plan: no file marked as dropped. ``proven``: index file name -> the geometry
    this command already proved for it (``IndexFile``'s ``proven``)."""
    d = store.layout.index_dir
    if not os.path.isdir(d):
        return []
    rows = []
    for name in sorted(n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n))):
        try:
            idx = IndexFile(os.path.join(d, name), conf=store.conf, proven=(proven or {}).get(name))
        except RmqInspectError as e:
            rows.append(IndexFileRow(name, None, None, None, None, None, None, None, None, None, False, e.message))
            continue
        try:
            h = idx.header
            rows.append(IndexFileRow(name, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
                                     h.index_count, idx.max_items, h.hash_slot_count, idx.slots,
                                     idx.geometry.source, False,
                                     "file shorter than its geometry" if idx.truncated else ""))
        finally:
            idx.close()
    return rows


def _command(root: str, check: str, kind: str, start: int, end: int, file: str | None) -> tuple[str, str]:
    """(chart axis, the command that shows the problem's bytes or entries)."""
    root = shlex.quote(root)
    if check in ("structure", "crc", "recover"):
        return "commitlog", f"rmqinspect dump {root} --offset {start} --length {min(max(end - start, 1), 4096)}"
    if check == "cq":
        k = _queue_key(file)
        if k is not None and kind != "cq_behind":
            topic, qid = k.rsplit("/", 1)
            return "consumequeue", (f"rmqinspect cq {root} --topic {shlex.quote(topic)} --queue {qid} "
                                    f"--from {start // 20} --count 1 --join")
        return "commitlog", f"rmqinspect dump {root} --offset {start} --length {min(max(end - start, 1), 4096)}"
    if check == "index":
        return "index", f"rmqinspect verify {root} --checks index"
    return check, f"rmqinspect verify {root} --checks {check}"


def findings(root: str, rep: VerifyReport, plan: RecoveryPlan) -> list[Finding]:
    """verify's problems, then what the recovery throws away: the truncation point and each region past it."""
    out = []
    for p in rep.problems:
        axis, cmd = _command(root, p.check, p.kind, p.start, p.end, p.file)
        out.append(Finding("verify", p.check, p.kind, p.start, p.end, p.file, p.position, p.reason, p.count, axis,
                           cmd))
    cl_end = plan.truncate_offset
    lost = plan.messages_lost or {}
    if lost.get("count") or lost.get("regions"):
        axis, cmd = _command(root, "recover", "truncation", cl_end, cl_end + 1, plan.stop_file)
        out.append(Finding("recover", "recover", "truncation", cl_end, cl_end, plan.stop_file, plan.stop_position,
                           f"a restart truncates the commit log here ({plan.stop_kind}: {plan.stop_reason}); "
                           f"{lost.get('count', 0)} records ({lost.get('bytes', 0)} bytes) past it are discarded",
                           lost.get("count", 0), axis, cmd))
    for r in lost.get("regions", []):
        axis, cmd = _command(root, "recover", r["kind"], r["start"], r["end"], r.get("file"))
        out.append(Finding("recover", "recover", r["kind"], r["start"], r["end"], r.get("file"), r.get("position"),
                           f"past the truncation point: {r.get('reason', '')}", 1, axis, cmd))
    return out
