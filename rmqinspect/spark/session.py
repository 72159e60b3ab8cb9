"""Creating (or reusing) a SparkSession configured for rmqinspect."""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile

from ..errors import SparkUnavailableError
from ..store.scanner import PURE_PYTHON_ENV

DEFAULT_MASTER = "local[*]"


def _package_root() -> str:
    import rmqinspect

    return os.path.dirname(os.path.dirname(os.path.abspath(rmqinspect.__file__)))


def _zip_package() -> str:
    """rmqinspect as a zip for executors that do not have it installed (sc.addPyFile): the Python modules
    and the compiled scanner (``store/_fastscan*.so``, which ``store.scanner`` extracts and loads on the
    executor, because zipimport cannot load shared libraries). An executor whose platform cannot load it
    warns and runs the pure-Python scanner (same results)."""
    import importlib.machinery

    import rmqinspect

    pkg = os.path.dirname(os.path.abspath(rmqinspect.__file__))
    suffixes = (".py", *importlib.machinery.EXTENSION_SUFFIXES)
    fd, path = tempfile.mkstemp(prefix="rmqinspect-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for dirpath, _, names in os.walk(pkg):
            for n in names:
                if n.endswith(suffixes):
                    full = os.path.join(dirpath, n)
                    z.write(full, os.path.relpath(full, os.path.dirname(pkg)))
    return path


def _partition_rows(it):
    return list(it)


def ordered_partitions(rdd, window: int | None = None):
    """Every row of ``rdd``, partition after partition in order, with up to ``window`` partitions computed at once
    (default: the cluster's ``defaultParallelism`` + 1): one job per partition, submitted from driver threads so the
    executors work on the next partitions while the caller consumes this one. ``toLocalIterator`` starts at most
    the next partition's job while this one is consumed (``prefetchPartitions``): eight 0.4 s partitions on
    ``local[2]`` took 3.6 s through it and 1.9 s through this (docs/spark.md); ``collect`` would hold every
    partition's rows in the driver at once. Here at most ``window`` partitions' rows are held. A caller that stops
    early leaves the jobs not yet started unsubmitted; the running ones finish and their rows are dropped."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    sc = rdd.context
    n = rdd.getNumPartitions()
    window = max(1, window or sc.defaultParallelism + 1)
    pool = ThreadPoolExecutor(max_workers=min(window, max(n, 1)), thread_name_prefix="rmqinspect-partition")
    pending: deque = deque()
    nxt = 0
    try:
        while nxt < n or pending:
            while nxt < n and len(pending) < window:
                pending.append(pool.submit(sc.runJob, rdd, _partition_rows, [nxt]))
                nxt += 1
            rows = pending.popleft().result()
            yield from rows
            del rows
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class ScannerTally:
    """Which record scanner every task of a job ran (each per-file task returns ``store.scanner.describe()``
    under ``"scanner"``). ``warn()`` raises a ``RuntimeWarning`` naming the tasks that ran pure Python: an
    executor that received the package without a loadable compiled extension gives the same results, slower,
    and must not do so silently."""

    def __init__(self, job: str):
        self.job = job
        self.counts: dict[str, int] = {}

    def add(self, scanner: str) -> None:
        self.counts[scanner] = self.counts.get(scanner, 0) + 1

    def watch(self, results):
        """Pass ``results`` (dicts with a ``"scanner"`` key) through, counting their scanners."""
        for r in results:
            self.add(r["scanner"])
            yield r

    @property
    def fell_back(self) -> int:
        return sum(n for k, n in self.counts.items() if k != "compiled")

    def warn(self) -> None:
        if self.fell_back:
            import warnings

            other = "; ".join(f"{n} task(s): {k}" for k, n in sorted(self.counts.items()) if k != "compiled")
            warnings.warn(f"rmqinspect {self.job}: {self.fell_back} of {sum(self.counts.values())} Spark task(s) "
                          f"ran the pure-Python record scanner ({other}); ship the compiled scanner to the "
                          "executors (docs/spark.md, 'Executors and the compiled scanner')", RuntimeWarning,
                          stacklevel=3)


def _executor_scanner(spark) -> str:
    """Which record scanner a Python worker runs (``store.scanner.describe()`` on an executor)."""

    def probe(_):
        from rmqinspect.store import scanner

        yield scanner.describe()

    return spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]


def get_session(master: str | None = None, app_name: str = "rmqinspect", conf: dict | None = None,
                ship_package: bool | None = None):
    """A SparkSession with the ``rocketmq`` data source registered.

    ``master`` None keeps whatever spark-submit configured, else ``local[*]``. Local masters make the
    Python workers import the same rmqinspect as the driver (PYTHONPATH); for cluster masters the package
    is shipped as a zip with ``addPyFile`` unless ``ship_package`` is False (e.g. installed on every node).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SparkUnavailableError("pyspark is not installed: pip install 'rmqinspect[spark]'") from e
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = _package_root()
    pp = os.environ.get("PYTHONPATH", "")
    if root not in pp.split(os.pathsep):
        # workers must import the driver's rmqinspect, not another installed copy
        os.environ["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
    builder = SparkSession.builder.appName(app_name)
    active = SparkSession.getActiveSession()
    # under spark-submit the JVM gateway already exists (PYSPARK_GATEWAY_PORT) and carries --master
    if master is None and active is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = DEFAULT_MASTER
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.sql.sources.partitionOverwriteMode": "static",
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        # the tasks import numpy and never call BLAS: no spinning OpenBLAS threads per Python worker (cli.main)
        "spark.executorEnv.OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
    }
    if os.environ.get(PURE_PYTHON_ENV):
        settings[f"spark.executorEnv.{PURE_PYTHON_ENV}"] = os.environ[PURE_PYTHON_ENV]
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - Java missing / failing to start surfaces as many types
        raise SparkUnavailableError(f"cannot start Spark (Java 17+ required; check `java -version`): {e}") from e
    eff_master = spark.sparkContext.master
    if ship_package or (ship_package is None and not eff_master.startswith("local")):
        spark.sparkContext.addPyFile(_zip_package())
        where = _executor_scanner(spark)
        if where != "compiled":
            import warnings

            warnings.warn(f"rmqinspect on the Spark executors runs the {where} scanner", RuntimeWarning, stacklevel=2)
    from .datasource import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
    return spark
