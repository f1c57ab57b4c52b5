"""The source's default packing where users run: a driver started by ``spark-submit`` on the
cluster managers this machine can run besides local (local-cluster, a standalone cluster),
reading a topic of 4 partitions with ``maxPartitions`` unset (eos_kafka_source/source/slots.py;
local, from pyspark's own builder, is tests/spark/test_source_batch.py).

A batch read plans in a Python worker under the driver JVM, as a streaming batch does, so the
number of input partitions it plans is the number of tasks each batch would run. Where the
slots cannot be known the source says so at WARNING, and that line must reach the driver's
log (the job's stderr).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.cluster import SPARK_HOME, SparkCluster, spark_env
from tests.kafka_helpers import create_topic, write_plain

pytestmark = [pytest.mark.spark]

JOB = Path(__file__).with_name("slots_job.py")
PARTITIONS = 4


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """Two workers of one core each."""
    cluster = SparkCluster(tmp_path_factory.mktemp("slots-cluster"), workers=2).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _topic(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        write_plain(bootstrap, topic, [f"r{p}".encode()], partition=p)


def _submit(flags: list[str], bootstrap: str, topic: str,
            work: Path) -> tuple[dict, str]:
    _topic(bootstrap, topic)
    proc = subprocess.run(
        [f"{SPARK_HOME}/bin/spark-submit", *flags, "--conf", "spark.ui.enabled=false",
         str(JOB), bootstrap, topic],
        capture_output=True, text=True, timeout=600, env=spark_env(work), cwd=work)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SLOTS-JOB ")]
    assert proc.returncode == 0 and lines, f"exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1].removeprefix("SLOTS-JOB ")), proc.stderr


def test_local_cluster_plans_one_wave(bootstrap: str, unique: str, tmp_path: Path) -> None:
    out, stderr = _submit(["--master", "local-cluster[2,1,1024]"], bootstrap, unique, tmp_path)
    assert out["partitions"] == 2
    assert "task slots are not known" not in stderr


def test_standalone_reads_total_executor_cores(
        standalone: SparkCluster, bootstrap: str, unique: str, tmp_path: Path) -> None:
    """The user's command: a task per Kafka partition (4) before spark.cores.max was read."""
    out, stderr = _submit(["--master", standalone.url, "--total-executor-cores", "2",
                           "--executor-cores", "1"], bootstrap, unique, tmp_path)
    assert out["partitions"] == 2
    assert "task slots are not known" not in stderr


def test_standalone_without_a_core_cap_warns_in_the_driver_log(
        standalone: SparkCluster, bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Without spark.cores.max the master hands out every worker's cores, which the driver
    cannot see: a task per offset range, and a WARNING naming the option to set."""
    out, stderr = _submit(["--master", standalone.url], bootstrap, unique, tmp_path)
    assert out["partitions"] == PARTITIONS
    said = [ln for ln in stderr.splitlines() if "task slots are not known" in ln]
    assert len(said) == 1 and "maxPartitions" in said[0], stderr[-4000:]
