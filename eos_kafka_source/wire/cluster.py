"""Cluster metadata: topics, partition leaders, coordinators, and topic admin."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from ..errors import (
    KafkaProtocolError,
    TimeoutError_,
    TopicNotFoundError,
    for_code,
    raise_for_code,
)
from ..kafka_codes import Code
from .connection import KafkaWire
from .retry import LOST_NODE, Deadline

TopicPartition = tuple[str, int]

_TOPIC_RESOURCE = 2
#: FindCoordinator key types, as the refusal names them.
_KEY_KIND = {0: "group", 1: "transactional id"}


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
    response = wire.request_any(request, "Metadata")
    wire.update_cluster(response)
    out: dict[str, TopicInfo] = {}
    for topic in response.topics:
        if topic.error_code == Code.UNKNOWN_TOPIC_OR_PARTITION:
            continue
        raise_for_code(topic.error_code, f"Metadata for topic {topic.name!r}")
        if topic.name.startswith("__"):
            continue  # internal topics never match a subscription
        out[topic.name] = TopicInfo(
            topic.name, {p.partition_index: p.leader_id for p in topic.partitions}
        )
        wire.learn_topic(topic.name, out[topic.name])
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


def leader_of(info: Mapping[str, TopicInfo], tp: TopicPartition) -> int:
    topic, partition = tp
    try:
        leader = info[topic].leaders[partition]
    except KeyError:
        raise TopicNotFoundError(f"partition {topic}-{partition} does not exist") from None
    if leader < 0:
        raise for_code(Code.LEADER_NOT_AVAILABLE)(f"partition {topic}-{partition} has no leader")
    return leader


def find_coordinator(wire: KafkaWire, key: str, key_type: int = 1, *,
                     deadline: Deadline | float | None = None) -> int:
    """Node id of the transaction (key_type=1) or group (0) coordinator for ``key``."""
    return find_coordinators(wire, [key], key_type, deadline=deadline)[key]


def find_coordinators(wire: KafkaWire, keys: Sequence[str], key_type: int = 1, *,
                      deadline: Deadline | float | None = None) -> dict[str, int]:
    """Coordinators for many keys: one batched request (v4+) or pipelined ones.

    Retries, until ``deadline``, the codes that say "not yet" (COORDINATOR_NOT_AVAILABLE while
    ``__consumer_offsets`` or ``__transaction_state`` is being created or moved) and a broker
    that dropped the connection (the next attempt asks another one).
    """
    deadline = Deadline.of(deadline, wire)
    pending = sorted(set(keys))
    out: dict[str, int] = {}
    while pending:
        try:
            found = _find_once(wire, pending, key_type)
        except LOST_NODE:
            if deadline.expired:
                raise
            found = {}
        for key, (code, node) in found.items():
            if not code:
                out[key] = node
                wire.learn_coordinator(key, node, key_type)
                continue
            err = for_code(code)
            if not err.retriable or deadline.expired:
                raise err(f"FindCoordinator for {_KEY_KIND.get(key_type, 'key')} {key!r}")
        pending = [k for k in pending if k not in out]
        if pending:
            if deadline.expired:
                raise TimeoutError_(f"no coordinator for {', '.join(map(repr, pending))} "
                                    f"within {deadline.seconds:.0f}s")
            deadline.pause()
    if any(wire.client.cluster.broker_metadata(node) is None for node in out.values()):
        fetch_metadata(wire, [])  # a coordinator we have no address for yet
    return out


def _find_once(wire: KafkaWire, keys: list[str], key_type: int) -> dict[str, tuple[int, int]]:
    """One FindCoordinator round: (error code, node id) per key."""
    version = wire.version(FindCoordinatorRequest)
    if version >= 4:
        request = FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=keys)
        response = wire.request_any(request, f"FindCoordinator ({len(keys)} keys)")
        return {e.key: (e.error_code, int(e.node_id)) for e in response.coordinators}
    node = wire.any_node()
    calls = [(node, FindCoordinatorRequest[version](key=k, key_type=key_type)) for k in keys]
    responses = wire.request_many(calls, f"FindCoordinator ({len(keys)} keys)")
    return {k: (r.error_code, int(r.node_id)) for k, r in zip(keys, responses, strict=True)}


def fresh_leaders(wire: KafkaWire, topics: list[str], *,
                  deadline: Deadline | float | None = None) -> dict[str, TopicInfo]:
    """Metadata for ``topics`` once every partition has a leader, asking again (another broker
    when one dropped the connection) until ``deadline``: what a producer does after
    NOT_LEADER_OR_FOLLOWER or a lost leader."""
    deadline = Deadline.of(deadline, wire)
    while True:
        try:
            found = require_topics(wire, topics)
            if all(leader >= 0 for info in found.values() for leader in info.leaders.values()):
                return found
            problem: BaseException = for_code(Code.LEADER_NOT_AVAILABLE)(
                f"Metadata for {', '.join(topics)}")
        except (KafkaProtocolError, *LOST_NODE) as exc:
            if isinstance(exc, KafkaProtocolError) and not exc.retriable:
                raise
            problem = exc
        if deadline.expired:
            raise problem
        deadline.pause()


def topic_configs(wire: KafkaWire, topic: str, keys: Sequence[str]) -> dict[str, str]:
    """The topic's effective settings ``keys`` (DescribeConfigs: its own or the broker default).

    Empty when the broker does not serve DescribeConfigs (callers then assume Kafka's
    defaults); an error code for the topic raises. Asks for every setting and filters here:
    Tansu 0.6 drops the connection when the request names keys.
    """
    try:
        version = wire.version(DescribeConfigsRequest)
    except KafkaProtocolError:
        return {}
    request = DescribeConfigsRequest[version](
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=_TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)],
        include_synonyms=False, include_documentation=False,
    )
    response = wire.request_any(request, f"DescribeConfigs {topic}")
    result = response.results[0]
    raise_for_code(result.error_code, f"DescribeConfigs {topic}")
    return {c.name: c.value for c in result.configs if c.name in keys and c.value is not None}


def create_topic(
    wire: KafkaWire,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    config: dict[str, str] | None = None,
    *,
    exist_ok: bool = False,
    replicas: Sequence[Sequence[int]] | None = None,
) -> None:
    """Create a topic and wait until its metadata shows every partition. ``replicas``: each
    partition's replicas by node id, the first its preferred leader (then ``partitions`` and
    ``replication`` follow from it): the brokers place them otherwise."""
    version = wire.version(CreateTopicsRequest)
    Topic = CreateTopicsRequest.CreatableTopic
    if replicas is not None:
        partitions = len(replicas)
    topic = Topic(
        name=name,
        num_partitions=-1 if replicas is not None else partitions,
        replication_factor=-1 if replicas is not None else replication,
        assignments=[Topic.CreatableReplicaAssignment(partition_index=i, broker_ids=list(nodes))
                     for i, nodes in enumerate(replicas or ())],
        configs=[
            Topic.CreatableTopicConfig(name=k, value=v) for k, v in (config or {}).items()
        ],
    )
    request = CreateTopicsRequest[version](topics=[topic], timeout_ms=30000, validate_only=False)
    response = wire.request_any(request, f"CreateTopics {name}", resend=False)
    result = response.topics[0]
    if result.error_code == Code.TOPIC_ALREADY_EXISTS and exist_ok:
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
    response = wire.request_any(request, f"CreatePartitions {name}", resend=False)
    raise_for_code(response.results[0].error_code, f"CreatePartitions {name}")
    _wait_partitions(wire, name, total)


def _wait_partitions(wire: KafkaWire, name: str, partitions: int, timeout_s: float = 30) -> None:
    deadline = Deadline(timeout_s)
    while True:
        info = fetch_metadata(wire, [name]).get(name)
        if info and len(info.leaders) >= partitions and min(info.leaders.values()) >= 0:
            return
        if not deadline.pause():
            break
    raise TimeoutError_(f"topic {name} did not show {partitions} partitions in {timeout_s}s")
