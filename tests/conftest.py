"""Session fixtures: one embedded broker and one SparkSession per test session."""

from __future__ import annotations

import itertools
import logging
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools
from eos_kafka_source.broker import EmbeddedBroker
from tests.brokers import BROKER_KIND, ON_TANSU
from tests.kafka_clusters import kafka_for_tests
from tests.kafka_security import SecureKafka, listener_specs, make_certificates, scram_users
from tests.kerberos_kafka import kerberos_kafka  # noqa: F401 - fixture (Kerberos tests)
from tests.lean_jvm import lean_spark_jvms
from tests.oauth_kafka import oauth_kafka, oidc  # noqa: F401 - fixtures (sign-in tests)
from tests.schema_registry import ApicurioRegistry
from tests.termination import stop_cleanly_on_sigterm

_counter = itertools.count()

# Every Spark JVM the tests start (theirs, a subprocess driver's, a Connect server's) runs lean.
lean_spark_jvms(os.environ)
# SIGTERM (CI's deadline, a `kill`) tears the fixtures down: brokers run in sessions of
# their own, and would outlive the tests otherwise.
stop_cleanly_on_sigterm()

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


_TIMES = os.environ.get("EOSKAFKA_TEST_TIMES")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``EOSKAFKA_TEST_TIMES=FILE``: one line per test phase (seconds, phase, broker,
    outcome, test) appended to FILE, for every pytest run of a `make test` or CI run; where the
    minutes go (CONTRIBUTING.md)."""
    if _TIMES:
        with open(_TIMES, "a") as out:
            out.write(f"{report.duration:.2f}\t{report.when}\t{BROKER_KIND}\t{report.outcome}\t"
                      f"{report.nodeid}\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) the cases written for the other kind of broker."""
    other = "kafka_only" if ON_TANSU else "tansu_only"
    keep = [i for i in items if i.get_closest_marker(other) is None]
    dropped = [i for i in items if i.get_closest_marker(other) is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker | KafkaCluster]:
    """The session's broker: Tansu, or Apache Kafka (one node), per EOSKAFKA_TEST_BROKER;
    Kafka also serves SASL and TLS listeners (tests/kafka_security.py)."""
    if ON_TANSU:
        with EmbeddedBroker() as b:
            yield b
        return
    certs = request.getfixturevalue("kafka_certs")
    with kafka_for_tests(1, listeners=listener_specs(certs), scram_users=scram_users()) as kafka:
        yield kafka
        _assert_nothing_left_open(kafka)


def _assert_nothing_left_open(kafka: KafkaCluster) -> None:
    """After the session, Kafka's own transactions tool finds nothing open and nothing hanging
    (reported as an error in the teardown of the session's last test)."""
    tools = KafkaTools(kafka.bootstrap_servers)
    still_open = tools.open_transactions()
    hanging = tools.hanging_transactions(broker_id=1)
    assert not still_open and not hanging, (
        f"transactions left behind by the test session: open {still_open[:10]}, "
        f"hanging {hanging[:10]}"
    )


@pytest.fixture(scope="session")
def kafka_certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The test CA and the certificates the session's Kafka broker serves."""
    return make_certificates(tmp_path_factory.mktemp("kafka-certs"))


@pytest.fixture(scope="session")
def secure_kafka(broker: EmbeddedBroker | KafkaCluster,
                 kafka_certs: dict[str, Path]) -> SecureKafka:
    """The session Kafka's SASL_PLAINTEXT, SSL, MTLS and SASL_SSL listeners (kafka_only)."""
    assert isinstance(broker, KafkaCluster), "secure_kafka needs a kafka_only test"
    return SecureKafka(broker, kafka_certs)


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker | KafkaCluster) -> str:
    return broker.bootstrap_servers


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[ApicurioRegistry]:
    """A real schema registry (Apicurio Registry, tests/schema_registry.py), started when a
    test first asks for it; ``.url`` is the base of Confluent's API on it."""
    with ApicurioRegistry() as registry:
        yield registry


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Everything logged at DEBUG, kafka-python's request log included (secret checks)."""
    for name in (None, "kafka", "eos_kafka_source"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


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
        # tests/spark/test_differential_*.py compare format("kafka") with format("eoskafka"),
        # tests/formats/ spark-avro's from_avro with valueFormat=avro.
        from eos_kafka_source.apache_kafka.spark_connector import spark_jars

        builder = builder.config("spark.jars", spark_jars(avro=True))
    session = (
        builder.master(os.environ.get("EOSKAFKA_TEST_MASTER", "local[2,3]"))
        .appName("eoskafka-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.triggerAvailableNowWrapper.enabled", "true")
        # A Python worker on a loaded CI machine can take longer than the default 15 s to
        # answer the JVM's handshake ("Python worker failed to connect back").
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
