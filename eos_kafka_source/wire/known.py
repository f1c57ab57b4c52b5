"""What this process's wires learned of a cluster: coordinators and partition leaders.

Spark reuses its Python workers from task to task and from batch to batch, and each worker
keeps its Kafka connections (:mod:`.kept`). Without this module every exactly-once task asked
again, each time: FindCoordinator for its transactional id and for its query's abort-mark
group, Metadata for the topic; the driver's workers looked up the prefix claim's group and
every transaction's coordinator before every batch. What a wire learns is kept here, per
client configuration, for :data:`KEEP_S`, and read through :class:`~.connection.KafkaWire`
(``known_coordinator``, ``known_topic``): the wire layer learns every FindCoordinator and
Metadata answer, and forgets a coordinator that answered NOT_COORDINATOR (or whose connection
dropped) and a topic whose leader answered NOT_LEADER_OR_FOLLOWER.

Nothing here is trusted beyond a hint, so a stale entry costs a round trip, never a wrong
outcome: the request sent to a node that moved is answered with that error and looked up
again. Runs on: executors (the tasks' Python workers) and the driver.
"""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

from ..client.config import ClientConfig

#: Seconds an answer is kept (as long as a kept connection: :mod:`.kept`).
KEEP_S = 60.0

K = TypeVar("K")
V = TypeVar("V")


class Known(Generic[K, V]):
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


#: The coordinator per (FindCoordinator key type, key): a transactional id or a group.
COORDINATORS: Known[tuple[int, str], int] = Known()
#: Topic metadata (partitions and their leaders) per topic: a ``cluster.TopicInfo``.
TOPICS: Known[str, object] = Known()


def forget_all() -> None:
    """Tests: start from nothing known."""
    COORDINATORS.clear()
    TOPICS.clear()
