"""The settings every Apache Kafka cluster the tests start shares, in one place.

KafkaCluster's own defaults are production-like where it matters (benchmarks and the demo
use it); these trade that for time, which CI's budget needs: cleaners and scheduled log
tasks that start at once, and on three nodes a dead node fenced after 4 s instead of 9,
so its partitions and coordinators move sooner. A single node keeps the default session
timeout: nothing fails over there, and a node starved of CPU on a loaded machine would
fence itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos_kafka_source.apache_kafka import KafkaCluster
from tests.brokers import KAFKA_VERSION

#: Every test cluster.
ALL_NODES = {
    # The log cleaner looks for work every second, not every 15 s (compacted topics).
    "log.cleaner.backoff.ms": "1000",
    # Retention checks and the other scheduled log tasks start now, not 30 s after start.
    "log.initial.task.delay.ms": "0",
}

#: Three nodes: the controller fences a node 4 s after its last heartbeat (default 9 s,
#: heartbeats every 2 s).
FAILOVER = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
}


def kafka_settings(nodes: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``server.properties`` overrides for a test cluster of ``nodes`` nodes (``extra`` last)."""
    return {**ALL_NODES, **(FAILOVER if nodes > 1 else {}), **(extra or {})}


def kafka_for_tests(nodes: int = 1, extra: Mapping[str, str] | None = None,
                    **kwargs: Any) -> KafkaCluster:
    """A KafkaCluster of the session's version (not started) with the test settings, each
    node on a lean JVM (about half the CPU: tests/lean_jvm.py). A node gets 5 minutes to
    come up, as in the chaos harness: on a loaded machine (load 60 on two cores, 2026-11-25)
    node restarts in the fault modules took over the default 90 s."""
    kwargs.setdefault("version", KAFKA_VERSION)
    kwargs.setdefault("lean_jvm", True)
    kwargs.setdefault("ready_timeout_s", 300.0)
    return KafkaCluster(nodes=nodes, broker_config=kafka_settings(nodes, extra), **kwargs)
