"""A group offset read right after its coordinator moved (5-node Apache Kafka).

eoskafka keeps prefix claims and batch-abort marks in group offsets (wire/groups.py), so a
read must return the last acknowledged commit. Found by CI: right after the group
coordinator was killed, a read returned an older value. Kafka 4's group coordinator answers
a plain OffsetFetch from its state at the partition's high watermark, and a new leader's
watermark lags the records it holds until every in-sync follower has fetched from it.

The case makes that lag last: one follower is paused (SIGSTOP) after the kill, while it is
still in the ISR, so the new leader's watermark cannot move until the paused node is fenced
too. Five nodes, because a dead and a paused node of three would stop the KRaft quorum.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import MetadataRequest

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools
from eos_kafka_source.wire import KafkaWire
from eos_kafka_source.wire.cluster import create_topic, find_coordinator
from eos_kafka_source.wire.groups import commit_offset, fetch_offset
from eos_kafka_source.wire.retry import GROUP
from tests.broker.conftest import in_sync_wire
from tests.kafka_clusters import kafka_for_tests

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

#: How long the new leader's watermark is held back: the follower is paused this long after
#: the kill, and is fenced 4 s after its pause (tests/kafka_clusters.py), 2.5 s after the dead
#: node is. Long enough for the read's retries (at most 1 s apart) to land inside.
PAUSE_AFTER_KILL_S = 2.5


@pytest.fixture(scope="module")
def kafka5() -> Iterator[KafkaCluster]:
    with kafka_for_tests(5) as cluster:
        yield cluster
        # SIGKILL, no controlled shutdown: with the test's node dead, the last ones stopping
        # lose the quorum and each waited out its 60 s grace (120 s a run in CI).
        for node in cluster.nodes:
            if node.running:
                cluster.stop_node(node.node_id, kill=True)


def _java_hash(text: str) -> int:
    """Java's String.hashCode: Kafka places a group on a __consumer_offsets partition by it."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _offsets_replicas(wire: KafkaWire, group: str) -> list[int]:
    """The replicas of the group's __consumer_offsets partition in assignment order (KRaft
    elects the first live one of the ISR)."""
    version = wire.version(MetadataRequest)
    response = wire.request(wire.any_node(), MetadataRequest[version](
        topics=[MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")],
        allow_auto_topic_creation=False), "Metadata")
    (topic,) = response.topics
    h = _java_hash(group)
    index = (0 if h == -(1 << 31) else abs(h)) % len(topic.partitions)
    (partition,) = [p for p in topic.partitions if p.partition_index == index]
    return list(partition.replica_nodes)


def _quorum_leader(bootstrap: str) -> int:
    """The active KRaft controller: killing it first elects a controller, and the new one
    starts every node's session again, which would move the election past the pause."""
    status = KafkaTools(bootstrap).run("org.apache.kafka.tools.MetadataQuorumCommand",
                                       "describe", "--status")
    found = re.search(r"LeaderId:\s*(\d+)", status)
    assert found, status
    return int(found.group(1))


def test_a_group_offset_read_just_after_its_coordinator_died_is_not_stale(
        kafka5: KafkaCluster, unique: str) -> None:
    """Measured before the fix (``require_stable=False``): the read returned ``(6, "warm")``,
    the commit before the last, in 2 runs of 2. A stale claim lets a second query take a
    claimed prefix; a stale abort mark lets a batch write commit what its driver aborted.
    With ``require_stable`` the coordinator answers from every record it holds, once they
    are committed: the read waits out the lag and returns the last commit."""
    bootstrap = kafka5.bootstrap_servers
    controller = _quorum_leader(bootstrap)
    with in_sync_wire(bootstrap) as wire:
        create_topic(wire, unique, 1, replication=3)
        commit_offset(wire, f"{unique}-first", unique, 0, 0, "")  # creates __consumer_offsets
        for i in range(100):  # a group whose coordinator and paused follower are not it
            group = f"{unique}-group-{i}"
            replicas = _offsets_replicas(wire, group)
            if controller not in (replicas[0], replicas[-1]):
                break
        commit_offset(wire, group, unique, 0, 6, "warm")
        coordinator = find_coordinator(wire, group, GROUP)
        assert coordinator == replicas[0]  # the preferred leader leads (a fresh cluster)
        follower = replicas[-1]  # in the ISR, and not the next leader
        commit_offset(wire, group, unique, 0, 7, "first")  # acknowledged by every replica
        kafka5.stop_node(coordinator, kill=True)
        time.sleep(PAUSE_AFTER_KILL_S)  # the fault schedule, not a wait for a state
        os.kill(kafka5.node(follower).proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
        try:
            assert fetch_offset(wire, group, unique, 0) == (7, "first")
        finally:
            os.kill(kafka5.node(follower).proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
