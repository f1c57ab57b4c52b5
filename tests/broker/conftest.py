"""Fixtures shared by the broker tests: the sink harness, and a 3-node Apache Kafka."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire
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


@pytest.fixture(scope="module")
def kafka3() -> Iterator[KafkaCluster]:
    """A 3-node Apache Kafka for a module that kills, pauses or moves its nodes (leaders
    move, coordinator failover, availability), shared by its tests. One per module: shared
    by the whole session, what one module's kills and pauses left (leaders crowded on the
    surviving nodes, a group coordinator moved) failed three cases of the next modules in
    two runs out of two. Each test names its topics and ids with ``unique``. Besides the
    shared test settings
    (tests/kafka_clusters.py: a dead node fenced after 4 s), requests of at most 2 MiB
    (``socket.request.max.bytes``, 100 MiB by default), so that a Produce request packed
    past ``max.request.size`` fails visibly."""
    with kafka_for_tests(3, {"socket.request.max.bytes": str(2 << 20)}) as cluster:
        yield cluster


@pytest.fixture
def kafka(kafka3: KafkaCluster) -> Iterator[KafkaCluster]:
    """The 3-node cluster, whole again after the test (every node up and running, every
    replica in sync)."""
    yield kafka3
    for node in kafka3.nodes:
        if node.running:
            os.kill(node.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
        else:
            kafka3.start_node(node.node_id)
    await_in_sync(kafka3.bootstrap_servers)


def in_sync_wire(bootstrap: str) -> KafkaWire:
    return KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap}))


def await_in_sync(bootstrap: str, timeout_s: float = 120) -> None:
    """Until every partition (internal ones too) has all three replicas in sync."""
    deadline = time.monotonic() + timeout_s
    with in_sync_wire(bootstrap) as wire:
        while True:
            version = wire.version(MetadataRequest)
            response = wire.request(wire.any_node(), MetadataRequest[version](
                topics=None, allow_auto_topic_creation=False), "Metadata")
            lagging = [f"{t.name}-{p.partition_index}" for t in response.topics
                       for p in t.partitions if len(p.isr_nodes) < 3]
            if not lagging:
                return
            assert time.monotonic() < deadline, f"replicas still out of sync: {lagging[:10]}"
            time.sleep(0.2)
