"""Session fixtures: one embedded broker and one SparkSession per test session."""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.broker import EmbeddedBroker
from tests.brokers import BROKER_KIND, KAFKA_VERSION, ON_TANSU

_counter = itertools.count()

# Fault injection reaches Spark's Python workers through a file named by an env
# var set before the SparkSession (and its workers) start; tests write the spec.
_FAULTS_FILE = Path(tempfile.mkdtemp(prefix="eoskafka-faults-")) / "spec"
_FAULTS_FILE.write_text("")
os.environ["EOSKAFKA_TEST_FAULTS_FILE"] = str(_FAULTS_FILE)


@pytest.fixture
def faults() -> Iterator[Callable[[str], None]]:
    """Arm fault points for this test: ``faults("write.after_flush/1=raise")``."""

    def arm(spec: str) -> None:
        _FAULTS_FILE.write_text(spec)

    yield arm
    _FAULTS_FILE.write_text("")


def pytest_report_header(config: pytest.Config) -> str:
    return f"eoskafka test broker: {BROKER_KIND} (EOSKAFKA_TEST_BROKER)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) the cases written for the other kind of broker."""
    other = "kafka_only" if ON_TANSU else "tansu_only"
    keep = [i for i in items if i.get_closest_marker(other) is None]
    dropped = [i for i in items if i.get_closest_marker(other) is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker | KafkaCluster]:
    """The session's broker: Tansu, or Apache Kafka (one node), per EOSKAFKA_TEST_BROKER."""
    if ON_TANSU:
        with EmbeddedBroker() as b:
            yield b
        return
    with KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker | KafkaCluster) -> str:
    return broker.bootstrap_servers


@pytest.fixture
def unique() -> str:
    """A name no other test in this session uses (topics, transactional ids, paths)."""
    return f"t{next(_counter)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if not ON_TANSU:
        # Spark's own Kafka connector on the classpath (jars only, no cost until used):
        # tests/spark/test_differential_*.py compare format("kafka") with format("eoskafka").
        from eos_kafka_source.apache_kafka.spark_connector import spark_jars

        builder = builder.config("spark.jars", spark_jars())
    session = (
        builder.master(os.environ.get("EOSKAFKA_TEST_MASTER", "local[2,3]"))
        .appName("eoskafka-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.triggerAvailableNowWrapper.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
