"""Cells of the availability harness (issue 16, ``make availability``) on 3-node Kafka.

Each case is one (fault kind, moment) of the harness's schedule reduced to the call at
risk; a case the harness found failing says so and what failed before the fix. Short
request timeouts keep the cases quick; the operations' deadlines stay Kafka's defaults.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.options import SourceOptions
from eos_kafka_source.source.planner import SourcePlanner
from eos_kafka_source.wire import require_topics
from eos_kafka_source.wire.cluster import create_topic
from tests.broker.conftest import in_sync_wire

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

#: Shorter than the harness's 30 s, longer than a paused node takes to be fenced (4 s here).
REQUEST_TIMEOUT_MS = "3000"


def _topic(bootstrap: str, topic: str, partitions: int = 3) -> dict[int, int]:
    """A topic replicated three ways, 30 records in each partition; its leaders."""
    from kafka import KafkaProducer

    with in_sync_wire(bootstrap) as wire:
        create_topic(wire, topic, partitions, replication=3)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(30 * partitions):
            producer.send(topic, value=b"%d" % i, partition=i % partitions)
        producer.flush()
    finally:
        producer.close(timeout=10)
    with in_sync_wire(bootstrap) as wire:
        return dict(require_topics(wire, [topic])[topic].leaders)


def _pause(kafka: KafkaCluster, node: int) -> None:
    os.kill(kafka.node(node).proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]


def _resume(kafka: KafkaCluster, node: int) -> None:
    os.kill(kafka.node(node).proc.pid, signal.SIGCONT)  # type: ignore[union-attr]


def test_planning_rides_out_a_paused_leader(kafka: KafkaCluster, unique: str) -> None:
    """sigstop x planning: the leader of an input partition is paused past
    ``kafka.request.timeout.ms`` while the driver plans. The unanswered Fetch is dropped
    like a lost connection and planning reconnects within ``kafka.default.api.timeout.ms``
    (as the Java consumer): the paused node is fenced, its partitions get new leaders, and
    latestOffset answers (passed before any change: a guard)."""
    bootstrap = kafka.bootstrap_servers
    leaders = _topic(bootstrap, unique)
    options = SourceOptions.parse({
        "kafka.bootstrap.servers": bootstrap, "subscribe": unique,
        "startingOffsets": "earliest", "kafka.request.timeout.ms": REQUEST_TIMEOUT_MS,
    }, streaming=True)
    planner = SourcePlanner(options)
    victim = leaders[0]
    try:
        start = planner.initial_offsets()  # connections to every leader are open
        _pause(kafka, victim)
        began = time.monotonic()
        try:
            latest = planner.latest_offsets(start)
        finally:
            _resume(kafka, victim)
        assert sum(latest.end[tp] - start[tp] for tp in start) == 90
        assert time.monotonic() - began < options.client.api_timeout_s
    finally:
        planner.close()
