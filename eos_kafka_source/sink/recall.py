"""Answers a sink's Python worker looked up before, kept for its next task or batch.

Spark reuses its Python workers from task to task and from batch to batch, and each worker
keeps its Kafka connections (``wire/kept.py``). Without this module every exactly-once task
still asked, each time: FindCoordinator for its transactional id, FindCoordinator for its
query's abort-mark group (``driver/claims.py``; one group per query), Metadata for the topic
and DescribeConfigs for its ``max.message.bytes``: four round trips before its first record,
each giving the answer the previous task got. The driver's planning worker looked up the
prefix claim's group coordinator before every batch, and its commit worker every
transaction's coordinator. Kept here for :data:`KEEP_S`, each is asked once per worker.

Nothing here is trusted beyond a hint, so a stale entry costs a round trip, never a wrong
outcome: a coordinator that moved answers NOT_COORDINATOR (or its connection fails) and the
request looks it up again (``wire/coordinated.py``; the liveness check, ``driver/committer.py``),
which replaces the entry; a leader that moved answers NOT_LEADER_OR_FOLLOWER and the task
refreshes its leaders (``task/produce.py``). A topic whose ``max.message.bytes`` was lowered
in the last minute refuses a batch with RECORD_TOO_LARGE, as it would a Java producer's
(which never reads the setting).
Runs on: executors (the tasks' Python workers) and the driver (planning and commit workers).
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

from ..client.config import ClientConfig
from ..wire import KafkaWire, TopicInfo

#: Seconds an answer is kept (as long as a kept connection: ``wire/kept.py``).
KEEP_S = 60.0

K = TypeVar("K")
V = TypeVar("V")


class Recall(Generic[K, V]):
    """Answers per (client configuration, key), each kept :data:`KEEP_S` seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[ClientConfig, K], tuple[V, float]] = {}

    def get(self, config: ClientConfig, key: K) -> V | None:
        with self._lock:
            found = self._kept.get((config, key))
        if found is None or time.monotonic() - found[1] >= KEEP_S:
            return None
        return found[0]

    def put(self, config: ClientConfig, key: K, value: V) -> None:
        with self._lock:
            self._kept[(config, key)] = (value, time.monotonic())

    def forget(self, config: ClientConfig, key: K) -> None:
        with self._lock:
            self._kept.pop((config, key), None)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


#: Transaction coordinator per transactional id (tasks; the driver's liveness check).
TXN_COORDINATORS: Recall[str, int] = Recall()
#: Group coordinator per group (a query's abort-mark group, a prefix's claim group:
#: ``driver/claims.py``).
GROUP_COORDINATORS: Recall[str, int] = Recall()
#: Topic metadata (partitions and leaders) per topic.
TOPICS: Recall[str, TopicInfo] = Recall()
#: The topic's ``max.message.bytes`` per topic (``TaskWriter._batch_limit``).
MAX_MESSAGE_BYTES: Recall[str, int] = Recall()


def forget_all() -> None:
    """Tests: start from nothing kept."""
    for recall in (TXN_COORDINATORS, GROUP_COORDINATORS, TOPICS, MAX_MESSAGE_BYTES):
        recall.clear()


def reachable(wire: KafkaWire, node: int) -> bool:
    """Whether ``wire`` knows where broker ``node`` is (a kept coordinator is used only then:
    a fresh wire's metadata may not list it yet)."""
    return wire.client.cluster.broker_metadata(node) is not None
