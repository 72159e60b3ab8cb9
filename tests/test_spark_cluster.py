"""The Spark engine on a real standalone cluster: a master and two workers started from pyspark's own
distribution on loopback (rmqinspect.spark.standalone), one cluster for the module, stopped at the end.

Executors are JVMs of their own whose Python workers import rmqinspect from the zip the driver ships (the
cluster's processes do not get the driver's PYTHONPATH), so these tests show the compiled scanner reaching them:
every task reports the scanner it ran. ``export``, ``rebuild --engine spark`` and ``spark verify``/``stats``
on the cluster are compared with the local engine (worker processes, ``--jobs 2``).

Starting the cluster costs about a minute on a busy 2-core machine, so the cluster tests carry the
``spark_cluster`` mark: the default ``pytest`` run leaves them out, ``.ci/run`` runs them
(``python -m pytest -m spark_cluster``). Skipped, with the reason, only when Java or pyspark is absent.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
from click.testing import CliRunner

from rmqinspect.spark.session import ScannerTally
from support import tree_hashes
from support.recover_fixtures import build_store

cluster_only = pytest.mark.spark_cluster


def test_tally_warns_when_a_task_ran_pure_python():
    t = ScannerTally("export")
    list(t.watch([{"scanner": "compiled"}, {"scanner": "pure-python (extension not available: x)"}]))
    assert t.counts == {"compiled": 1, "pure-python (extension not available: x)": 1} and t.fell_back == 1
    with pytest.warns(RuntimeWarning, match=r"export: 1 of 2 Spark task\(s\) ran the pure-Python record scanner"):
        t.warn()
    ok = ScannerTally("rebuild")
    list(ok.watch([{"scanner": "compiled"}] * 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok.warn()  # all compiled: silent


def _store(tmp, name="cluster"):
    """Eight commitlog files, damage in a middle one (a CRC flip and a torn stretch)."""
    f = build_store(tmp / name, n=240, file_size=8192, preallocate=True)
    names = f.file_names()
    mid = [r for r in f.records if f.file_of(r.offset) == names[len(names) // 2]]
    f.patch(mid[1].offset + mid[1].size - 30, b"\xff\xee")
    f.zero(mid[3].offset + 40, mid[3].end + 10)
    return f


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from rmqinspect.spark.standalone import StandaloneCluster, java_missing

    why = java_missing()
    if why:
        pytest.skip(why)
    from pyspark import SparkContext

    from rmqinspect.spark.session import get_session

    if SparkContext._active_spark_context is not None:  # another module's local session: one per process
        SparkContext._active_spark_context.stop()
    c = StandaloneCluster(workers=2, cores=1, memory="1g").start()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            spark = get_session(c.master_url, "rmqinspect-cluster-tests",
                                {"spark.executor.memory": "512m", "spark.default.parallelism": "2",
                                 "spark.sql.shuffle.partitions": "2", "spark.executor.cores": "1"})
        assert not [x for x in w if "scanner" in str(x.message)], [str(x.message) for x in w]
        spark.sparkContext.setLogLevel("ERROR")
        yield c, spark
        spark.stop()
    finally:
        c.stop()


@cluster_only
def test_executors_import_the_shipped_package_and_run_the_compiled_scanner(cluster):
    def probe(_):  # nested: pickled by value (this test module is not on the executors)
        import os

        import rmqinspect
        from rmqinspect.store import scanner

        yield rmqinspect.__file__, scanner.describe(), os.getpid()

    c, spark = cluster
    assert spark.sparkContext.master == c.master_url and c.registered_workers() == 2
    # the driver and one executor per worker
    assert spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() == 3
    got = spark.sparkContext.parallelize(range(4), 4).mapPartitions(probe).collect()
    for path, scanner, pid in got:
        assert ".zip" in path, path  # from what the driver shipped, not from the driver's tree
        assert scanner == "compiled"
        assert pid != os.getpid()


@cluster_only
def test_export_on_the_cluster_equals_the_local_engine(cluster, tmp_path):
    from rmqinspect.analyses.export import export_local, read_dataset
    from rmqinspect.spark.jobs import export_spark

    _, spark = cluster
    root = _store(tmp_path).root
    before = tree_hashes(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no task fell back to pure Python
        res = export_spark(spark, [root], str(tmp_path / "spark"))
    loc = export_local([root], str(tmp_path / "local"), jobs=2)
    n = len(os.listdir(os.path.join(root, "commitlog")))
    assert res.scanners == {"compiled": n} and res.files == loc.files == n
    assert res.rows == loc.rows > 0 and [d.to_dict() for d in res.damage] == [d.to_dict() for d in loc.damage]
    assert res.damage  # the damaged file's records are reported, not exported
    key = ["physical_offset"]
    a = read_dataset(str(tmp_path / "spark")).sort_by([(k, "ascending") for k in key])
    b = read_dataset(str(tmp_path / "local")).sort_by([(k, "ascending") for k in key])
    assert a.equals(b)
    assert tree_hashes(root) == before


@cluster_only
def test_rebuild_engine_spark_on_the_cluster_same_bytes(cluster, tmp_path):
    from rmqinspect.cli.main import cli

    c, _ = cluster
    root = _store(tmp_path).root
    geo = ["--cq-file-size", "400", "--index-slots", "16", "--index-max", "80"]
    docs = {}
    for engine, extra in (("spark", ["--master", c.master_url]), ("local", ["--jobs", "2"])):
        r = CliRunner().invoke(cli, ["rebuild", root, "--out", str(tmp_path / engine), *geo, "--engine", engine,
                                     *extra, "--format", "json"])
        assert r.exit_code in (0, 1), r.output
        docs[engine] = json.loads(r.stdout)
    for d in docs.values():
        d.pop("out")
    assert docs["spark"] == docs["local"] and docs["local"]["messages"] > 0
    files = {}
    for engine in docs:
        out = tmp_path / engine
        files[engine] = {os.path.relpath(os.path.join(dp, n), out): open(os.path.join(dp, n), "rb").read()
                         for dp, _, ns in os.walk(out) for n in ns if n != "rebuild.json"}
    assert files["spark"] == files["local"] and len(files["local"]) > 4


@cluster_only
def test_spark_jobs_on_the_cluster_equal_the_local_engine(cluster, tmp_path):
    from rmqinspect.analyses.export import export_local, file_tasks
    from rmqinspect.analyses.fileverify import store_level_problems, verify_file
    from rmqinspect.analyses.summary import summarize
    from rmqinspect.spark.jobs import find, stats, verify
    from rmqinspect.store import Store

    _, spark = cluster
    fx = _store(tmp_path)
    root = fx.root
    rep = verify(spark, [root])
    tasks = file_tasks([root])
    local = [verify_file(t) for t in tasks]
    assert rep["scanners"] == {"compiled": len(tasks)}
    assert rep["files"] == [f.to_dict() for f in local]
    assert rep["problems"] == store_level_problems(tasks) + [p for f in local for p in f.problems]
    assert not rep["ok"]
    rows = stats(spark, [root])
    exported = export_local([root], str(tmp_path / "local"), jobs=2)
    assert sum(r["messages"] for r in rows) == exported.rows > 200
    assert sum(r["bytes"] for r in rows) <= summarize(Store.open(root), jobs=2).message_bytes
    hit = find(spark, [root], ["k-7", "k-200"], by="key")
    assert [h["physical_offset"] for h in hit] == [fx.records[7].offset, fx.records[200].offset]


@cluster_only
def test_a_task_on_pure_python_makes_the_job_warn(cluster, tmp_path):
    """Executors told to run the pure-Python scanner (RMQINSPECT_PURE_PYTHON=1, as an executor without the
    compiled extension would): same rows, and the job says how many tasks fell back. Runs last: it replaces the
    module's session with one whose executors have that environment."""
    from rmqinspect.analyses.export import export_local
    from rmqinspect.spark.jobs import export_spark
    from rmqinspect.spark.session import get_session

    c, spark = cluster
    spark.stop()
    with pytest.warns(RuntimeWarning, match="pure-python"):
        pure = get_session(c.master_url, "rmqinspect-cluster-pure", {
            "spark.executorEnv.RMQINSPECT_PURE_PYTHON": "1", "spark.executor.memory": "512m",
            "spark.executor.cores": "1"})
    root = _store(tmp_path).root
    n = len(os.listdir(os.path.join(root, "commitlog")))
    with pytest.warns(RuntimeWarning, match=rf"export: {n} of {n} Spark task\(s\) ran the pure-Python"):
        res = export_spark(pure, [root], str(tmp_path / "spark"))
    assert res.scanners == {"pure-python (selected)": n}
    assert res.rows == export_local([root], str(tmp_path / "local")).rows
    pure.stop()
