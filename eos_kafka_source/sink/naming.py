"""Transactional-id naming: one id per Spark task partition under a per-query prefix.

Every attempt of task partition ``p`` uses ``<prefix>-<p>``, so a retry's
InitProducerId fences the attempt it replaces (Kafka's own zombie fencing) and
the pool of ids is bounded by the number of task partitions, never by batches.
The prefix is stable across restarts of one query (derived from its checkpoint
location) and distinct between queries; a user-chosen prefix is checked for
clashes by the driver (see ``claims``).
"""

from __future__ import annotations

import hashlib
import re

_VALID = re.compile(r"[A-Za-z0-9._-]+")


def fingerprint(location: str) -> str:
    """A short stable hash of a checkpoint (or decision-log) location."""
    normalized = location.rstrip("/")
    if "://" not in normalized:
        import os

        normalized = "file://" + os.path.abspath(normalized)
    return hashlib.sha256(normalized.encode()).hexdigest()[:16]


def default_prefix(location: str) -> str:
    return f"eoskafka-{fingerprint(location)}"


class TransactionalIdFactory:
    """Builds ``<prefix>-<task partition>`` ids and enumerates the pool."""

    def __init__(self, prefix: str) -> None:
        if not _VALID.fullmatch(prefix):
            raise ValueError(f"invalid transactional id prefix {prefix!r}")
        self.prefix = prefix

    def for_task(self, task_partition: int) -> str:
        return f"{self.prefix}-{task_partition}"

    def pool(self, size: int) -> list[str]:
        return [self.for_task(p) for p in range(size)]

    def task_of(self, transactional_id: str) -> int | None:
        head, _, tail = transactional_id.rpartition("-")
        if head != self.prefix or not tail.isdigit():
            return None
        return int(tail)
