"""A Spark standalone cluster on loopback, started from the pyspark package itself.

The pyspark wheel ships ``bin/spark-class`` (and ``sbin/spark-daemon.sh``) but
not ``sbin/start-master.sh`` / ``start-worker.sh``; those only wrap
``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``,
which is what this runs, each in its own session so it can be killed alone.
Executors are separate JVMs (``CoarseGrainedExecutorBackend``) launched by the
workers; a killed executor is replaced by its worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from eos_kafka_source.broker import free_port
from tests.lean_jvm import lean_spark_jvms

SPARK_HOME = str(Path(pyspark.__file__).parent)
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_env(work: Path) -> dict[str, str]:
    """Environment for every Spark JVM and Python worker of the cluster."""
    return lean_spark_jvms({
        **os.environ,
        "SPARK_HOME": SPARK_HOME,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "spark-logs"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })


@dataclass
class SparkCluster:
    work: Path
    workers: int = 2
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self._procs[name] = subprocess.Popen(
                [f"{SPARK_HOME}/bin/spark-class", *args], env=spark_env(self.work),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        finally:
            log.close()

    def start(self, timeout_s: float = 120) -> SparkCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self._spawn("spark-master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.master_port), "--webui-port", str(self.ui_port),
        ])
        for i in range(self.workers):
            self._spawn(f"spark-worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                "--cores", "1", "--memory", self.worker_memory,
                "--webui-port", str(free_port()), "--work-dir", str(self.work / f"worker-{i}"),
                self.url,
            ])
        deadline = time.monotonic() + timeout_s
        while self.alive_workers() < self.workers:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}); see {self.work}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark cluster not ready in {timeout_s}s; see {self.work}")
            time.sleep(0.5)
        return self

    def alive_workers(self) -> int:
        """Workers registered with the master (its JSON status page)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def worker_pids(self) -> set[int]:
        return {p.pid for n, p in self._procs.items() if n.startswith("spark-worker")}

    def executor_pids(self) -> list[int]:
        """Executor JVMs launched by this cluster's workers."""
        workers = self.worker_pids()
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if EXECUTOR_CLASS.encode() in cmdline and ancestors(int(entry.name)) & workers:
                out.append(int(entry.name))
        return sorted(out)

    def stop(self) -> None:
        for proc in self._procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._procs.clear()


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def ancestors(pid: int) -> set[int]:
    out: set[int] = set()
    parent = parent_of(pid)
    while parent is not None and parent > 1 and parent not in out:
        out.add(parent)
        parent = parent_of(parent)
    return out


def java_ancestor(pid: int) -> int | None:
    """The nearest ancestor of ``pid`` that is a JVM (a Python worker's executor)."""
    current = parent_of(pid)
    while current is not None and current > 1:
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
        except OSError:
            return None
        if stat[stat.index("(") + 1 : stat.rindex(")")] == "java":
            return current
        current = parent_of(current)
    return None
