"""A Spark Connect server as its own JVM on a free loopback port, from the pyspark package.

The pyspark wheel ships the server (``spark-connect_2.13-*.jar``) and
``bin/spark-submit``; ``sbin/start-connect-server.sh`` only wraps
``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``,
which is what this runs. A server of its own (rather than
``SparkSession.builder.remote("local[2]")``, which always listens on port 15002)
lets tests run next to other Spark jobs on the machine, and its Python workers
use this venv (``PYSPARK_PYTHON``), as a real server's would use its own.

``hide_static=True`` starts the server with a Python whose static data source
lookup (``pyspark.sql.worker.lookup_data_sources``) runs without site-packages,
so the lookup finds no ``pyspark_*`` package: a server on which only a runtime
``spark.dataSource.register(...)`` can make ``format("eoskafka")`` work.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from eos_kafka_source.broker import free_port

SPARK_HOME = str(Path(pyspark.__file__).parent)
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _no_static_lookup_python(work: Path) -> str:
    """A python wrapper that runs Spark's static data source lookup with ``-S``."""
    shim = work / "python-no-static-lookup"
    shim.write_text(
        "#!/bin/sh\n"
        'case "$*" in *lookup_data_sources*) exec ' + sys.executable + ' -S "$@";; esac\n'
        "exec " + sys.executable + ' "$@"\n'
    )
    shim.chmod(0o755)
    return str(shim)


class ConnectServer:
    """``with ConnectServer(tmp_path) as server: ... remote(server.url)``."""

    def __init__(self, work: Path, *, master: str = "local[2]", hide_static: bool = False) -> None:
        self.work = work
        self.master = master
        self.hide_static = hide_static
        self.port = free_port()
        self.log_path = work / "connect-server.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 240) -> ConnectServer:
        self.work.mkdir(parents=True, exist_ok=True)
        python = _no_static_lookup_python(self.work) if self.hide_static else sys.executable
        env = {**os.environ, "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
        args = [
            f"{SPARK_HOME}/bin/spark-submit", "--class", SERVER_CLASS, "--master", self.master,
            "--name", "eoskafka-connect-test",
            "--conf", f"spark.connect.grpc.binding.port={self.port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", "spark.sql.streaming.triggerAvailableNowWrapper.enabled=true",
        ]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, cwd=self.work)
        deadline = time.monotonic() + timeout_s
        while not self._listening():
            if self._proc.poll() is not None:
                raise RuntimeError(f"Spark Connect server exited ({self._proc.returncode}); "
                                   f"see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Spark Connect server not ready in {timeout_s}s; "
                                   f"see {self.log_path}")
            time.sleep(0.5)  # polling a readiness condition under a deadline
        return self

    def _listening(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(1)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
        self._proc = None

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
