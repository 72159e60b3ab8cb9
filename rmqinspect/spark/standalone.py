"""A Spark standalone cluster on loopback, started from pyspark's own distribution: one master and N workers
(``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on free ports, each a child
process of this one, stopped by ``stop()``. For the tests and benchmarks that run the Spark jobs on a real
cluster master (``spark://``) instead of ``local[*]``, and for trying cluster mode on one machine:

    with StandaloneCluster(workers=2) as c:
        spark = get_session(c.master_url)

Executors are separate JVMs started by the workers, whose Python workers import rmqinspect the way a remote
node does: from the zip ``get_session`` ships (``SparkContext.addPyFile``), or from an installation on the node.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from ..errors import ClusterUnavailableError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    """pyspark's own distribution (bin/spark-class and jars/)."""
    try:
        import pyspark
    except ImportError as e:
        raise ClusterUnavailableError("pyspark is not installed: pip install 'rmqinspect[spark]'") from e
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def java_missing() -> str | None:
    """Why Java cannot run Spark here, or None when it can."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which(
        "java")
    if not java or not os.path.exists(java):
        return "Java is not installed (Spark needs Java 17+): no java on PATH or in JAVA_HOME"
    return None


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores and ``memory`` each) on 127.0.0.1."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", work_dir: str | None = None):
        self.workers, self.cores, self.memory = workers, cores, memory
        self.work_dir = work_dir or tempfile.mkdtemp(prefix="rmqinspect-spark-cluster-")
        os.makedirs(self.work_dir, exist_ok=True)
        self.master_url = ""
        self.procs: list[subprocess.Popen] = []
        self.logs: list[str] = []

    def _spawn(self, name: str, args: list[str], env: dict) -> None:
        log = os.path.join(self.work_dir, f"{name}.log")
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), *args], env=env,
                                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               cwd=self.work_dir))

    def _env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_GATEWAY", "SPARK_"))}
        # a remote node knows nothing of the driver's source tree: executors import rmqinspect from what the
        # driver ships (or from their own installation), never through the driver's PYTHONPATH
        env.pop("PYTHONPATH", None)
        env.update({"SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": self.work_dir,
                    "SPARK_LOG_DIR": self.work_dir, "SPARK_WORKER_DIR": os.path.join(self.work_dir, "work")})
        return env

    def start(self, timeout: float = 120) -> StandaloneCluster:
        why = java_missing()
        if why:
            raise ClusterUnavailableError(why)
        env = self._env()
        port = free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                               "--webui-port", str(free_port())], env)
        for i in range(self.workers):
            self._spawn(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host",
                                        "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
                                        "--cores", str(self.cores), "--memory", self.memory, "--work-dir",
                                        os.path.join(self.work_dir, f"work-{i}")], env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                self.stop()
                raise ClusterUnavailableError(f"a cluster process exited ({dead[0].args[1]}): see {self.work_dir}")
            if self.registered_workers() >= self.workers:
                return self
            time.sleep(0.25)
        self.stop()
        raise ClusterUnavailableError(f"{self.workers} worker(s) did not register within {timeout:.0f} s: see "
                                      f"{self.work_dir}")

    def registered_workers(self) -> int:
        """Distinct workers the master has registered ("Registering worker HOST:PORT with ..." in its log; a
        worker that re-registers after a missed heartbeat counts once)."""
        import re

        try:
            with open(self.logs[0], encoding="utf-8", errors="replace") as f:
                return len(set(re.findall(r"Registering worker (\S+) with", f.read())))
        except OSError:
            return 0

    def stop(self) -> None:
        """Stop the workers, then the master (each by its own process handle)."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
