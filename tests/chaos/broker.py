"""The durable broker: Tansu with ``s3://`` storage on a local moto S3 server, or Kafka.

docs/compatibility.md: this survives ``kill -9`` with records, open transactions,
producer epochs and group offsets intact. The S3 server keeps its state in
memory for the whole run (it is never killed); only the broker is.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.broker import EmbeddedBroker, free_port
from tests.kafka_clusters import kafka_settings

BUCKET = "tansu"


class S3Server:
    """``moto_server`` on a free loopback port, with the broker's bucket created."""

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.work = work
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> S3Server:
        moto = Path(sys.executable).with_name("moto_server")
        log = open(self.work / "moto.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(self.port)],
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto_server exited; see {self.work / 'moto.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.05)
        request = urllib.request.Request(f"{self.endpoint}/{BUCKET}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200, response.status
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)


@contextmanager
def s3_for_pyarrow(work: Path) -> Iterator[S3Server]:
    """A started :class:`S3Server`, with the environment pyarrow's S3 filesystem reads (in
    this process and the children it starts) pointing at it; both undone on exit."""
    server = S3Server(work).start()
    env = {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def durable_broker(s3: S3Server, work: Path) -> EmbeddedBroker:
    """A Tansu broker on a fixed port (kept across restarts) storing in ``s3://tansu/``."""
    env = {
        "AWS_ENDPOINT": s3.endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
    }
    return EmbeddedBroker(storage=f"s3://{BUCKET}/", env=env, log_path=str(work / "tansu.log"))


def kafka_cluster(work: Path, short_id_expiry_ms: int | None = None,
                  version: str | None = None) -> KafkaCluster:
    """Three Apache Kafka nodes (KRaft, each broker and controller), replication 3 with
    min.insync.replicas 2 (acknowledged writes survive one node's kill -9), logs under
    ``work/kafka``. The transaction maximum stays Kafka's default (15 minutes). A node
    gets 5 minutes to come up: on a loaded machine a restart took over 90 s.
    ``short_id_expiry_ms``: Kafka forgets idle transactional ids after that (7 days by
    default), checked every second (operator chaos: ids expire while the driver is down).
    The tests' shared cluster settings (tests/kafka_clusters.py): a killed node is fenced
    after 4 s, so its partitions and coordinators move sooner. ``version``: a pinned
    Apache Kafka release line (``"4.3"``; default the reference, 4.4)."""
    config = {} if short_id_expiry_ms is None else {
        "transactional.id.expiration.ms": str(short_id_expiry_ms),
        "transaction.remove.expired.transaction.cleanup.interval.ms": "1000"}
    return KafkaCluster(nodes=3, workdir=str(work / "kafka"), ready_timeout_s=300,
                        broker_config=kafka_settings(3, config), lean_jvm=True,
                        version=version)
