"""Group offsets, used as a small broker-side registry (OffsetCommit / OffsetFetch v2-7).

eoskafka records which query owns a transactional-id prefix as the metadata
string of a committed offset in a group named after the prefix: any query,
from any checkpoint, can read it, and nothing needs a topic of its own.
Both requests follow their group's coordinator when it moves or is still loading
(NOT_COORDINATOR right after a broker starts, COORDINATOR_LOAD_IN_PROGRESS).
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from ..errors import for_code
from .connection import KafkaWire
from .retry import GROUP, Deadline, with_coordinator


def commit_offset(
    wire: KafkaWire, group: str, topic: str, partition: int, offset: int, metadata: str,
    *, deadline: Deadline | float = 30.0,
) -> None:
    """A simple (non-member) offset commit carrying ``metadata``."""
    version = wire.version(OffsetCommitRequest)
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
        commit_timestamp=-1, committed_metadata=metadata,
    )
    request = OffsetCommitRequest[version](
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[part])],
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
    *, deadline: Deadline | float = 30.0,
) -> tuple[int, str | None] | None:
    """(offset, metadata) committed by ``group`` for the partition, or None."""
    version = wire.version(OffsetFetchRequest)
    request = OffsetFetchRequest[version](
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic,
                                                           partition_indexes=[partition])],
        require_stable=False,
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

    return with_coordinator(wire, group, send, deadline=deadline, key_type=GROUP)[0]
