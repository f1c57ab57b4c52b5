"""Invariant 7: two queries never share a transactional-id prefix.

A prefix derived from the checkpoint location is distinct per query by
construction. A user-chosen prefix is claimed on the broker: the owning
query's fingerprint is stored as offset metadata of group
``eoskafka-claim.<prefix>`` on partition 0 of the sink topic (in the offset
itself, as Tansu drops offset metadata; in the metadata too); another query
finding a different owner there is refused.
Runs on: the driver's planning worker.
"""

from __future__ import annotations

from ..errors import IdPrefixClashError
from ..wire import KafkaWire
from ..wire.groups import commit_offset, fetch_offset


def claim_prefix(wire: KafkaWire, prefix: str, owner: str, topic: str) -> None:
    """Register ``owner`` for ``prefix``, or raise if another query holds it."""
    group = f"eoskafka-claim.{prefix}"
    current = fetch_offset(wire, group, topic, 0)
    token = _token(owner)
    holder = None if current is None else current[1] or f"#{current[0]}"
    if current is not None and current[0] != token:
        raise IdPrefixClashError(
            f"transactionalIdPrefix {prefix!r} is already used by another query (checkpoint "
            f"fingerprint {holder}, this query is {owner}); two queries sharing transactional "
            "ids would fence and abort each other's transactions. Give each query its own "
            f"prefix, or, if the other query is gone for good, delete consumer group {group!r}"
        )
    if current is None:
        commit_offset(wire, group, topic, 0, token, owner)


def _token(owner: str) -> int:
    """The owner's fingerprint as a non-negative int64 (what an offset can hold)."""
    import hashlib

    return int(hashlib.sha256(owner.encode()).hexdigest()[:15], 16)


def mark_write_aborted(wire: KafkaWire, prefix: str, topic: str) -> None:
    """Record on the broker that the batch write using ``prefix`` was aborted.

    Written before the driver fences the write's ids: a task that initialises its
    id after that fence then finds the mark and aborts its own transaction, so a
    task Spark launched just before the job failed cannot leave one open.
    """
    commit_offset(wire, f"eoskafka-aborted.{prefix}", topic, 0, 1, "aborted")


def write_aborted(wire: KafkaWire, prefix: str, topic: str) -> bool:
    return fetch_offset(wire, f"eoskafka-aborted.{prefix}", topic, 0) is not None
