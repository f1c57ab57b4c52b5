"""docker/docker-compose.yml: parses, and carries what the exactly-once demo needs.

No Docker engine runs on the development machine, so this is what is checked here;
README.md says what was not run.
"""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).parents[2] / "docker" / "docker-compose.yml"


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_kafka_service_is_kraft_with_transactions_usable_on_one_node() -> None:
    kafka = _compose()["services"]["kafka"]
    env = kafka["environment"]
    assert kafka["image"].startswith("apache/kafka:4.")
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    assert int(env["KAFKA_TRANSACTION_MAX_TIMEOUT_MS"]) >= 900_000  # eoskafka's default timeout


def test_spark_service_runs_the_demo_against_the_internal_listener() -> None:
    services = _compose()["services"]
    spark = services["spark"]
    assert "kafka:29092" in spark["command"]
    listeners = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert "INTERNAL://kafka:29092" in listeners
    assert (COMPOSE.parent / spark["build"]["dockerfile"].split("/")[-1]).exists()


def test_kafka_image_is_the_version_the_tests_run() -> None:
    """The compose file once pinned Kafka 4.1.0, which nothing tested."""
    from eos_kafka_source.apache_kafka.jars import DEFAULT_VERSION

    assert _compose()["services"]["kafka"]["image"] == f"apache/kafka:{DEFAULT_VERSION}"


def test_spark_image_builds_on_a_base_that_has_java_17_on_every_arch() -> None:
    """python:3.11-slim became Debian trixie, which has no OpenJDK 17; JAVA_HOME was
    hard-coded for amd64."""
    dockerfile = (COMPOSE.parent / "Dockerfile.spark").read_text()
    base = next(line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM "))
    assert base == "python:3.11-slim-bookworm"
    assert "openjdk-17-jre-headless" in dockerfile
    assert "amd64" not in dockerfile.replace("amd64 and arm64", "")
    assert "$(dpkg --print-architecture)" in dockerfile
    for copied in ("pyproject.toml", "README.md", "LICENSE", "eos_kafka_source",
                   "pyspark_eoskafka"):
        assert (COMPOSE.parents[1] / copied).exists(), copied
