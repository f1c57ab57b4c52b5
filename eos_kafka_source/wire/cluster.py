"""Cluster metadata: topics, partition leaders, coordinators, and topic admin."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from ..errors import TimeoutError_, TopicNotFoundError, for_code, raise_for_code
from .connection import KafkaWire

TopicPartition = tuple[str, int]

_UNKNOWN_TOPIC = 3
_TOPIC_EXISTS = 36


@dataclass(frozen=True)
class TopicInfo:
    name: str
    leaders: dict[int, int]  # partition -> leader node id (-1 while electing)

    @property
    def partitions(self) -> list[int]:
        return sorted(self.leaders)


def fetch_metadata(wire: KafkaWire, topics: list[str] | None) -> dict[str, TopicInfo]:
    """Topics (all when ``topics`` is None) with their partition leaders; absent topics omitted."""
    version = wire.version(MetadataRequest)
    req_topics = (
        None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    )
    request = MetadataRequest[version](topics=req_topics, allow_auto_topic_creation=False)
    response = wire.request(wire.any_node(), request, "Metadata")
    wire.update_cluster(response)
    out: dict[str, TopicInfo] = {}
    for topic in response.topics:
        if topic.error_code == _UNKNOWN_TOPIC:
            continue
        raise_for_code(topic.error_code, f"Metadata for topic {topic.name!r}")
        if topic.name.startswith("__"):
            continue  # internal topics never match a subscription
        out[topic.name] = TopicInfo(
            topic.name, {p.partition_index: p.leader_id for p in topic.partitions}
        )
    return out


def require_topics(wire: KafkaWire, topics: list[str]) -> dict[str, TopicInfo]:
    """Metadata for ``topics``; TopicNotFoundError naming every missing one."""
    found = fetch_metadata(wire, topics)
    missing = [t for t in topics if t not in found]
    if missing:
        raise TopicNotFoundError(
            f"topic(s) {', '.join(sorted(missing))} do not exist on "
            f"{','.join(wire.config.bootstrap_servers)}; create them first "
            "(eoskafka never auto-creates topics)"
        )
    return found


def matching_topics(wire: KafkaWire, pattern: str) -> dict[str, TopicInfo]:
    regex = re.compile(pattern)
    return {n: t for n, t in fetch_metadata(wire, None).items() if regex.fullmatch(n)}


def leader_of(info: dict[str, TopicInfo], tp: TopicPartition) -> int:
    topic, partition = tp
    try:
        leader = info[topic].leaders[partition]
    except KeyError:
        raise TopicNotFoundError(f"partition {topic}-{partition} does not exist") from None
    if leader < 0:
        raise for_code(5)(f"partition {topic}-{partition} has no leader")
    return leader


def find_coordinator(wire: KafkaWire, key: str, key_type: int = 1, retries: int = 20) -> int:
    """Node id of the transaction (key_type=1) or group (0) coordinator for ``key``."""
    version = wire.version(FindCoordinatorRequest)
    for attempt in range(retries):
        if version >= 4:
            request = FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=[key])
            response = wire.request(wire.any_node(), request, "FindCoordinator")
            entry = response.coordinators[0]
            code, node = entry.error_code, entry.node_id
        else:
            request = FindCoordinatorRequest[version](key=key, key_type=key_type)
            response = wire.request(wire.any_node(), request, "FindCoordinator")
            code, node = response.error_code, response.node_id
        if not code:
            _remember_node(wire, response, version)
            return int(node)
        err = for_code(code)
        if not err.retriable or attempt == retries - 1:
            raise err(f"FindCoordinator for {key!r}")
        time.sleep(min(0.05 * (attempt + 1), 0.5))
    raise TimeoutError_(f"no coordinator for {key!r}")


def find_coordinators(wire: KafkaWire, keys: list[str], key_type: int = 1) -> dict[str, int]:
    """Transaction coordinators for many keys: one batched request (v4+) or pipelined ones."""
    keys = sorted(set(keys))
    if not keys:
        return {}
    version = wire.version(FindCoordinatorRequest)
    if version < 4:
        return {key: find_coordinator(wire, key, key_type) for key in keys}
    request = FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=keys)
    response = wire.request(wire.any_node(), request, f"FindCoordinator ({len(keys)} keys)")
    out: dict[str, int] = {}
    for entry in response.coordinators:
        if entry.error_code:
            out[entry.key] = find_coordinator(wire, entry.key, key_type)  # retries one by one
        else:
            out[entry.key] = int(entry.node_id)
    if any(wire.client.cluster.broker_metadata(node) is None for node in out.values()):
        fetch_metadata(wire, [])
    return out


def _remember_node(wire: KafkaWire, response: object, version: int) -> None:
    # The coordinator is usually a broker we already know from Metadata; refresh if not.
    cluster = wire.client.cluster
    node = response.coordinators[0].node_id if version >= 4 else response.node_id  # type: ignore[attr-defined]
    if cluster.broker_metadata(node) is None:
        fetch_metadata(wire, [])


def create_topic(
    wire: KafkaWire,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    config: dict[str, str] | None = None,
    *,
    exist_ok: bool = False,
) -> None:
    """Create a topic and wait until its metadata shows every partition."""
    version = wire.version(CreateTopicsRequest)
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[],
        configs=[
            CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
            for k, v in (config or {}).items()
        ],
    )
    request = CreateTopicsRequest[version](topics=[topic], timeout_ms=30000, validate_only=False)
    response = wire.request(wire.any_node(), request, f"CreateTopics {name}")
    result = response.topics[0]
    if result.error_code == _TOPIC_EXISTS and exist_ok:
        return
    raise_for_code(result.error_code, f"CreateTopics {name}")
    _wait_partitions(wire, name, partitions)


def create_partitions(wire: KafkaWire, name: str, total: int) -> None:
    """Grow a topic to ``total`` partitions."""
    version = wire.version(CreatePartitionsRequest)
    request = CreatePartitionsRequest[version](
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=name, count=total, assignments=None)],
        timeout_ms=30000,
        validate_only=False,
    )
    response = wire.request(wire.any_node(), request, f"CreatePartitions {name}")
    raise_for_code(response.results[0].error_code, f"CreatePartitions {name}")
    _wait_partitions(wire, name, total)


def _wait_partitions(wire: KafkaWire, name: str, partitions: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = fetch_metadata(wire, [name]).get(name)
        if info and len(info.leaders) >= partitions and min(info.leaders.values()) >= 0:
            return
        time.sleep(0.02)
    raise TimeoutError_(f"topic {name} did not show {partitions} partitions in {timeout_s}s")
