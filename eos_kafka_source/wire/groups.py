"""Group offsets (OffsetCommit / OffsetFetch v2-7), for two uses.

eoskafka records which query owns a transactional-id prefix as the metadata
string of a committed offset in a group named after the prefix: any query,
from any checkpoint, can read it, and nothing needs a topic of its own. And a
streaming source with ``kafka.group.id`` commits each batch's end offsets to
that group, so Kafka's tools (``kafka-consumer-groups --describe``) show lag.
Both requests follow their group's coordinator when it moves or is still loading
(NOT_COORDINATOR right after a broker starts, COORDINATOR_LOAD_IN_PROGRESS).

Reads set ``require_stable``: Kafka 4's coordinator otherwise answers from its state at the
offsets partition's high watermark, which a new leader holds back until its followers fetch,
so a read just after the coordinator moved can return an older commit than the last one
acknowledged (tests/broker/test_group_offsets_failover.py). With it, the read waits until
every commit the coordinator holds is committed (the Java consumer sets it for
read_committed). The classic coordinator (Kafka 3.9) reads its whole log either way, and
answers UNSTABLE_OFFSET_COMMIT, retried, while a transactional commit is pending.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from ..errors import for_code
from .connection import KafkaWire
from .coordinated import with_coordinator
from .retry import GROUP, Deadline


def commit_offset(
    wire: KafkaWire, group: str, topic: str, partition: int, offset: int, metadata: str,
    *, deadline: Deadline | float | None = None,
) -> None:
    """A simple (non-member) offset commit carrying ``metadata``."""
    commit_offsets(wire, group, {(topic, partition): offset}, metadata, deadline=deadline)


def commit_offsets(
    wire: KafkaWire, group: str, offsets: Mapping[tuple[str, int], int], metadata: str,
    *, deadline: Deadline | float | None = None,
) -> None:
    """One simple (non-member, generation -1) offset commit for many partitions.

    Kafka accepts it for a group with no joined members (as
    ``kafka-consumer-groups --reset-offsets`` writes); a group whose members are
    joined refuses it with an error code, raised here.
    """
    version = wire.version(OffsetCommitRequest)
    by_topic: dict[str, list[object]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                commit_timestamp=-1, committed_metadata=metadata,
            ))
    request = OffsetCommitRequest[version](
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=parts)
                for t, parts in by_topic.items()],
    )

    def send(node: int) -> None:
        response = wire.request(node, request, f"OffsetCommit {group}")
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise for_code(p.error_code)(
                        f"OffsetCommit {group} {t.name}-{p.partition_index}")

    with_coordinator(wire, group, send, deadline=deadline, key_type=GROUP)


def fetch_offset(
    wire: KafkaWire, group: str, topic: str, partition: int,
    *, deadline: Deadline | float | None = None,
) -> tuple[int, str | None] | None:
    """(offset, metadata) committed by ``group`` for the partition, or None."""
    return fetch_offset_at(wire, group, topic, partition, deadline=deadline)[0]


def fetch_offset_at(
    wire: KafkaWire, group: str, topic: str, partition: int,
    *, node: int | None = None, deadline: Deadline | float | None = None,
) -> tuple[tuple[int, str | None] | None, int]:
    """:func:`fetch_offset` sent first to ``node`` (a coordinator found earlier: one that
    moved answers NOT_COORDINATOR and is looked up again); returns the answer and the
    coordinator that gave it."""
    version = wire.version(OffsetFetchRequest)
    request = OffsetFetchRequest[version](
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic,
                                                           partition_indexes=[partition])],
        require_stable=True,  # read the last acknowledged commit (module docstring)
    )

    def send(node: int) -> tuple[int, str | None] | None:
        response = wire.request(node, request, f"OffsetFetch {group}")
        code = getattr(response, "error_code", 0)
        if code:
            raise for_code(code)(f"OffsetFetch {group}")
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise for_code(p.error_code)(
                        f"OffsetFetch {group} {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    return p.committed_offset, p.metadata
        return None

    return with_coordinator(wire, group, send, deadline=deadline, key_type=GROUP, node=node)
