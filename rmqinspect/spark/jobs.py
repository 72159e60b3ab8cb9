"""Fleet jobs on Spark: export, stats, find, verify, diff. Each takes a SparkSession and store paths, returns
plain data (lists of dicts / dataclasses); the CLI renders them."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..analyses.export import ExportResult, check_output_dir, file_tasks, write_file_task
from ..analyses.fileverify import verify_file
from ..analyses.rows import RowFilter
from ..store.broker_conf import BrokerConf
from .session import ScannerTally


def messages_df(spark, stores: Sequence[str], *, labels: Sequence[str] | None = None, with_body: bool = False,
                flt: RowFilter | None = None, conf: BrokerConf | None = None):
    """The ``rocketmq`` data source over several stores (one Spark partition per commitlog file)."""
    # a missing store or bad labels fail here, with file and exit code, not in Spark
    file_tasks(stores, labels, conf=conf)
    r = spark.read.format("rocketmq").option("paths", json.dumps([os.path.abspath(s) for s in stores]))
    if labels:
        r = r.option("labels", json.dumps(list(labels)))
    r = r.option("withBody", "true" if with_body else "false")
    if flt is not None:
        if flt.topics is not None:
            r = r.option("topics", json.dumps(sorted(flt.topics)))
        if flt.since is not None:
            r = r.option("since", str(flt.since))
        if flt.until is not None:
            r = r.option("until", str(flt.until))
    return r.load()


def export_spark(spark, stores: Sequence[str], out: str, *, labels=None, with_body: bool = False,
                 flt: RowFilter | None = None, conf: BrokerConf | None = None) -> ExportResult:
    """The same Parquet dataset as ``export_local``: N commitlog files = N Spark tasks, each scanning its file
    once and writing its rows with pyarrow straight from the Python worker (no row conversion through the
    JVM), returning its row count and the damage it met."""
    check_output_dir(out, stores, conf)
    tasks = file_tasks(stores, labels, txn_states=True, conf=conf)
    # a Hadoop URI (hdfs://, s3a://) is passed through; a local path is made absolute for the executors
    target = out if "://" in out else os.path.abspath(out)
    if "://" not in out:
        os.makedirs(target, exist_ok=True)

    def run(item):
        from rmqinspect.store.scanner import describe

        n, task = item
        r = write_file_task(n, task, target, with_body=with_body, flt=flt)
        return {"rows": r.rows, "damage": r.damage, "scanner": describe()}

    tally = ScannerTally("export")
    rdd = spark.sparkContext.parallelize(list(enumerate(tasks)), max(len(tasks), 1))
    done = list(tally.watch(rdd.map(run).collect()))
    tally.warn()
    return ExportResult("spark", target, [t.store_path for t in tasks if t.index == 0], len(tasks),
                        sum(d["rows"] for d in done), [x for d in done for x in d["damage"]], dict(tally.counts))


# --- stats ----------------------------------------------------------------------------------------

STATS_PERCENTILES = (0.5, 0.9, 0.99)


def stats(spark, stores: Sequence[str], *, labels=None, flt: RowFilter | None = None) -> list[dict]:
    """Per source, topic, queue and store hour: messages, bytes, and store lag (store - born time, ms)
    percentiles (exact, linear interpolation like numpy.percentile)."""
    from pyspark.sql import functions as F

    df = messages_df(spark, stores, labels=labels, flt=flt)
    lag = (F.col("store_timestamp_ms") - F.col("born_timestamp_ms"))
    hour = F.date_format(F.date_trunc("hour", F.col("store_timestamp")), "yyyy-MM-dd'T'HH:00'Z'")
    g = (df.withColumn("lag_ms", lag).withColumn("hour", hour)
         .groupBy("source", "topic", "queue_id", "hour")
         .agg(F.count(F.lit(1)).alias("messages"), F.sum("total_size").alias("bytes"),
              F.sum("body_size").alias("body_bytes"),
              F.percentile("lag_ms", list(STATS_PERCENTILES)).alias("lag_pct"),
              F.max("lag_ms").alias("lag_max_ms"), F.min("queue_offset").alias("min_queue_offset"),
              F.max("queue_offset").alias("max_queue_offset"))
         .orderBy("source", "topic", "queue_id", "hour"))
    out = []
    for r in g.collect():
        d = r.asDict()
        pct = d.pop("lag_pct")
        for p, v in zip(STATS_PERCENTILES, pct):
            d[f"lag_p{int(p * 100)}_ms"] = v
        d["lag_max_ms"] = d.pop("lag_max_ms")
        out.append(d)
    return out


# --- find -----------------------------------------------------------------------------------------

FIND_COLUMNS = ("source", "file", "physical_offset", "topic", "queue_id", "queue_offset", "store_timestamp_ms",
                "tags", "keys", "uniq_key", "offset_msg_id", "body_size", "crc_ok")


def find(spark, stores: Sequence[str], values: Sequence[str], *, by: str = "any", labels=None,
         flt: RowFilter | None = None) -> list[dict]:
    """Messages whose KEYS token (key), UNIQ_KEY (uniq) or offsetMsgId (msgid) equals one of ``values``,
    across every store; ``any`` tries all three. Sorted by source and physical offset."""
    from pyspark.sql import functions as F

    df = messages_df(spark, stores, labels=labels, flt=flt)
    vals = list(values)
    conds = []
    if by in ("key", "any"):
        conds.append(F.arrays_overlap(F.col("keys"), F.array(*[F.lit(v) for v in vals])))
    if by in ("uniq", "any"):
        conds.append(F.col("uniq_key").isin(vals))
    if by in ("msgid", "any"):
        conds.append(F.col("offset_msg_id").isin([v.upper() for v in vals]))
    cond = conds[0]
    for c in conds[1:]:
        cond = cond | c
    rows = df.where(cond).select(*FIND_COLUMNS).orderBy("source", "physical_offset").collect()
    out = []
    for r in rows:
        d = r.asDict()
        matched = set()
        for v in vals:
            if by in ("key", "any") and v in (d["keys"] or []):
                matched.add("key")
            if by in ("uniq", "any") and v == d["uniq_key"]:
                matched.add("uniq_key")
            if by in ("msgid", "any") and v.upper() == d["offset_msg_id"]:
                matched.add("msgid")
        d["matched"] = sorted(matched)
        out.append(d)
    return out


# --- verify ---------------------------------------------------------------------------------------


def verify(spark, stores: Sequence[str], *, labels=None, conf: BrokerConf | None = None) -> dict:
    """The per-file record checks (``analyses.fileverify``) as one Spark task per commitlog file, plus the
    store-level geometry checks on the driver, gathered into one report."""
    from ..analyses.fileverify import store_level_problems

    tasks = file_tasks(stores, labels, conf=conf)
    rdd = spark.sparkContext.parallelize(tasks, max(len(tasks), 1))
    tally = ScannerTally("spark verify")
    files = [d["file"] for d in tally.watch(rdd.map(_verify_task).collect())]
    tally.warn()
    problems = []
    for first in (t for t in tasks if t.index == 0):
        problems.extend(store_level_problems([t for t in tasks if t.store_path == first.store_path]))
    for f in files:
        problems.extend(f.problems)
    return {"files": [f.to_dict() for f in files], "problems": problems,
            "messages": sum(f.messages for f in files), "ok": not problems, "scanners": dict(tally.counts)}


def _verify_task(task) -> dict:
    from rmqinspect.store.scanner import describe

    return {"file": verify_file(task), "scanner": describe()}


# --- diff -----------------------------------------------------------------------------------------


@dataclass
class DiffReport:
    replicas: list[dict]
    first_divergence: int | None  # smallest physical offset where the replicas disagree
    by_offset: list[dict] = field(default_factory=list)  # offsets where they differ
    by_uniq_key: list[dict] = field(default_factory=list)  # UNIQ_KEYs not on every replica

    def to_dict(self) -> dict:
        return {"replicas": self.replicas, "first_divergence": self.first_divergence,
                "by_offset": self.by_offset, "by_uniq_key": self.by_uniq_key}


def diff(spark, stores: Sequence[str], *, labels=None, limit: int | None = None, conf: BrokerConf | None = None
         ) -> DiffReport:
    """Replicas of one broker (master/slaves): HA copies commitlog bytes, so the same physical offset must hold
    the same record (compared by whole-record crc32). Reports per offset which replicas hold which record, the
    first offset where they stop agreeing, and per UNIQ_KEY the replicas missing it."""
    from pyspark.sql import functions as F

    if len(stores) < 2:
        raise ValueError("diff needs at least two replicas")
    df = messages_df(spark, stores, labels=labels, conf=conf).select(
        "source", "physical_offset", "total_size", "record_crc32", "topic", "queue_id", "queue_offset",
        "uniq_key").cache()
    try:
        labels_ = [t.source for t in file_tasks(stores, labels, conf=conf) if t.index == 0]
        n = len(labels_)
        per = {r["source"]: r.asDict() for r in df.groupBy("source").agg(
            F.count(F.lit(1)).alias("messages"),
            F.max(F.col("physical_offset") + F.col("total_size")).alias("data_end"),
            F.min("physical_offset").alias("min_offset")).collect()}
        replicas = [{"source": s, "messages": per.get(s, {}).get("messages", 0),
                     "min_offset": per.get(s, {}).get("min_offset"), "data_end": per.get(s, {}).get("data_end")}
                    for s in labels_]
        grouped = (df.groupBy("physical_offset")
                   .agg(F.sort_array(F.collect_list(F.struct("source", "record_crc32", "total_size", "topic",
                                                              "queue_id", "queue_offset", "uniq_key"))).alias("h"))
                   .where((F.size("h") < n) |
                          (F.size(F.array_distinct(F.transform("h", lambda x: x["record_crc32"]))) > 1))
                   .orderBy("physical_offset"))
        if limit:
            grouped = grouped.limit(limit)
        by_offset = []
        first = None
        for r in grouped.toLocalIterator():
            holders = [h.asDict() for h in r["h"]]
            have = {h["source"] for h in holders}
            variants: dict[int, dict] = {}
            for h in holders:
                v = variants.setdefault(h["record_crc32"], {k: h[k] for k in (
                    "record_crc32", "total_size", "topic", "queue_id", "queue_offset", "uniq_key")} | {"sources": []})
                v["sources"].append(h["source"])
            by_offset.append({"physical_offset": r["physical_offset"], "missing_on": [s for s in labels_ if s not in
                                                                                      have],
                              "variants": list(variants.values())})
            if first is None:
                first = r["physical_offset"]
        uk = (df.where(F.col("uniq_key").isNotNull())
              .groupBy("uniq_key").agg(F.sort_array(F.collect_set("source")).alias("on"),
                                       F.min("physical_offset").alias("physical_offset"),
                                       F.first("topic").alias("topic"))
              .where(F.size("on") < n).orderBy("physical_offset", "uniq_key"))
        if limit:
            uk = uk.limit(limit)
        by_uniq = [{"uniq_key": r["uniq_key"], "topic": r["topic"], "physical_offset": r["physical_offset"],
                    "on": list(r["on"]), "missing_on": [s for s in labels_ if s not in r["on"]]}
                   for r in uk.toLocalIterator()]
        return DiffReport(replicas, first, by_offset, by_uniq)
    finally:
        df.unpersist()


# --- dledger-peers over many groups -------------------------------------------------------------------------


@dataclass
class DLedgerGroup:
    """One DLedger group to compare: its name and its members' store copies, as the user wrote the paths
    (they become the peer labels, exactly as ``rmqinspect dledger-peers PEER...`` labels them)."""
    name: str
    peers: list[str]


def dledger_group_dir(path: str, conf: BrokerConf | None = None) -> DLedgerGroup:
    """A directory holding one group's member copies: when it holds ``dledger-<selfId>`` member directories
    itself (every member's storePathRootDir on one host), those are the peers; otherwise each subdirectory is
    one peer's copy (a store root or its ``dledger-<selfId>`` directory), sorted by name. The group is named
    after the directory."""
    from ..errors import StoreNotFoundError
    from ..store.layout import dledger_members

    path = os.path.normpath(path)
    if not os.path.isdir(path):
        raise StoreNotFoundError("no such directory (a group directory holds its peers' store copies)", path)
    peers = dledger_members(path, conf) or [os.path.join(path, n) for n in sorted(os.listdir(path))
                                      if os.path.isdir(os.path.join(path, n))]
    return DLedgerGroup(os.path.basename(os.path.abspath(path)), peers)


def dledger_peers(spark, groups: Sequence[DLedgerGroup], conf: BrokerConf | None = None) -> list[dict]:
    """``analyses.dledger.compare_peers`` for every group as one Spark task per group; one row per group:
    ``{"group": name, **PeersReport.to_dict()}`` - the document ``rmqinspect dledger-peers`` prints for the
    same peer paths - in the order given. Every peer's layout is checked on the driver first (a missing path
    or a store not in DLedger mode fails here, naming the path); the executors open the absolute paths (with
    ``conf``, the broker.conf given, handed to them with each group) and
    the report keeps the paths as written. A group whose data cannot be read gives a row with ``error`` (the
    message) and ``exit_code`` instead of the comparison."""
    from ..errors import StoreNotFoundError
    from ..store.layout import StoreLayout

    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise ValueError(f"group names repeat: {', '.join(sorted(n for n in set(names) if names.count(n) > 1))}")
    work = []
    for g in groups:
        if len(g.peers) < 2:
            raise ValueError(f"group {g.name}: {len(g.peers)} peer(s); a comparison needs two or more")
        roots = []
        for p in g.peers:
            lay = StoreLayout.open(p, conf)
            if lay.dledger is None:
                raise StoreNotFoundError("not a DLedger-mode store (no dledger-<selfId>/data)", lay.root)
            roots.append(lay.root)
        work.append((g.name, list(g.peers), [os.path.abspath(p) for p in g.peers], roots, conf))
    if not work:
        return []
    return spark.sparkContext.parallelize(work, len(work)).map(_dledger_group_task).collect()


def _dledger_group_task(item) -> dict:
    from rmqinspect.analyses.dledger import compare_peers
    from rmqinspect.errors import RmqInspectError
    from rmqinspect.store import Store

    name, labels, paths, roots, conf = item
    opened = []
    try:
        for p in paths:
            opened.append(Store.open(p, conf=conf))
        rep = compare_peers(opened, labels=labels)
    except RmqInspectError as e:
        return {"group": name, "error": str(e), "exit_code": e.exit_code}
    finally:
        for st in opened:
            st.close()
    for peer, root in zip(rep.peers, roots):
        peer.root = root  # the path as the user wrote it, not the executor's absolute path
    return {"group": name, **rep.to_dict()}
