"""Fixtures shared by the sink's broker tests, and the 3-node cluster of the fault modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from tests.kafka_clusters import kafka_for_tests
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness


@pytest.fixture
def sink(bootstrap: str, unique: str, tmp_path: Path) -> Harness:
    """A two-partition topic and a prepared sink with its decision log (the session's
    broker); modules with their own cluster define their own ``sink``."""
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    h.driver.prepare(new_run=True)
    return h


@pytest.fixture(scope="session")
def kafka3() -> Iterator[KafkaCluster]:
    """Three Apache Kafka nodes, shared by the fault modules that kill and move nodes
    (test_leaders_move, test_sink_coordinator_failover): one start-up, not one a module.
    Each test names its topics and ids with ``unique`` and leaves every node running.
    Requests of at most 2 MiB (``socket.request.max.bytes``, 100 MiB by default), so that
    a Produce request packed past ``max.request.size`` fails visibly."""
    with kafka_for_tests(3, {"socket.request.max.bytes": str(2 << 20)}) as cluster:
        yield cluster
