"""Group offsets, used as a small broker-side registry (OffsetCommit / OffsetFetch v2-7).

eoskafka records which query owns a transactional-id prefix as the metadata
string of a committed offset in a group named after the prefix: any query,
from any checkpoint, can read it, and nothing needs a topic of its own.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from ..errors import raise_for_code
from .cluster import find_coordinator
from .connection import KafkaWire


def commit_offset(
    wire: KafkaWire, group: str, topic: str, partition: int, offset: int, metadata: str
) -> None:
    """A simple (non-member) offset commit carrying ``metadata``."""
    node = find_coordinator(wire, group, key_type=0)
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
    response = wire.request(node, request, f"OffsetCommit {group}")
    for t in response.topics:
        for p in t.partitions:
            raise_for_code(p.error_code, f"OffsetCommit {group} {t.name}-{p.partition_index}")


def fetch_offset(
    wire: KafkaWire, group: str, topic: str, partition: int
) -> tuple[int, str | None] | None:
    """(offset, metadata) committed by ``group`` for the partition, or None."""
    node = find_coordinator(wire, group, key_type=0)
    version = wire.version(OffsetFetchRequest)
    request = OffsetFetchRequest[version](
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic,
                                                           partition_indexes=[partition])],
        require_stable=False,
    )
    response = wire.request(node, request, f"OffsetFetch {group}")
    raise_for_code(getattr(response, "error_code", 0), f"OffsetFetch {group}")
    for t in response.topics:
        for p in t.partitions:
            raise_for_code(p.error_code, f"OffsetFetch {group} {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                return p.committed_offset, p.metadata
    return None
