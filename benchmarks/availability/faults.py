"""The fault kinds of the availability harness, on a 3-node Apache Kafka (KRaft, combined).

Each kind is a :class:`Fault`: ``begin()`` puts it in place and returns at once (a
roll or a reassignment goes on in a thread), ``lift()`` undoes it once it has lasted
its duration (a killed node starts again, a paused one resumes), ``whole()`` waits
until every partition, internal ones too, has its three replicas in sync again.

- ``none``: no fault, the baseline (a query's own start-up time, the gaps between batches);
- ``kill``: ``kill -9`` the node the moment aims at (a leader or a coordinator), down 15 s;
- ``rolling``: every node in turn, SIGTERM (controlled shutdown), start, next once in sync;
- ``reassign``: ``kafka-reassign-partitions`` of the input and the output: each partition
  drops its leader's replica (the leader moves), then takes it back last in the list
  (the replica is copied again);
- ``election``: ``kafka-leader-election --election-type PREFERRED`` after the cell's set-up
  made every partition's preferred leader another node (a reassignment that only reorders);
- ``controller``: ``kill -9`` the active controller (``kafka-metadata-quorum describe
  --status``), down 15 s: the quorum elects another;
- ``isr``: the output topic has ``min.insync.replicas=3``; one follower is stopped for 30 s
  (Produce: NOT_ENOUGH_REPLICAS);
- ``sigstop``: SIGSTOP the aimed node for 35 s (> ``request.timeout.ms``, 30 s), SIGCONT.
"""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, fetch_metadata, find_coordinator

#: ``none`` is the baseline: the same run with no fault (a query's own start-up, batch gaps).
KINDS = ("none", "kill", "rolling", "reassign", "election", "controller", "isr", "sigstop")
DOWN_S = {"kill": 15.0, "controller": 15.0, "isr": 30.0, "sigstop": 35.0}
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
_IN_SYNC_TIMEOUT_S = 300.0


def wire_for(bootstrap: str) -> KafkaWire:
    return KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap}))


def settled(bootstrap: str, what: str, call: Callable[[KafkaWire], object],
            timeout_s: float = 90.0) -> object:
    """``call(wire)`` on a fresh connection, retried while the cluster settles."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with wire_for(bootstrap) as w:
                return call(w)
        except Exception as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: {exc}") from exc
            time.sleep(0.5)


def out_of_sync(wire: KafkaWire) -> list[str]:
    version = min(wire.version(MetadataRequest), 9)
    response = wire.request(wire.any_node(), MetadataRequest[version](
        topics=None, allow_auto_topic_creation=False), "Metadata (ISR)")
    return [f"{t.name}-{p.partition_index}" for t in response.topics for p in t.partitions
            if p.leader_id < 0 or len(p.isr_nodes) < 3]


def wait_whole(kafka: KafkaCluster) -> float:
    """Start any stopped node, resume any paused one; wait for every replica in sync."""
    started = time.monotonic()
    for node in kafka.nodes:
        if node.running:
            os.kill(node.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
        else:
            kafka.start_node(node.node_id)
    while True:
        short = settled(kafka.bootstrap_servers, "ISR", out_of_sync)
        if not short:
            return time.monotonic() - started
        if time.monotonic() - started > _IN_SYNC_TIMEOUT_S:
            raise RuntimeError(f"replicas out of sync after {_IN_SYNC_TIMEOUT_S:.0f}s: {short}")
        time.sleep(0.5)


def leader_of(kafka: KafkaCluster, topic: str, partition: int) -> int:
    def leader(w: KafkaWire) -> int:
        node = fetch_metadata(w, [topic])[topic].leaders[partition]
        if node < 0:
            raise RuntimeError(f"{topic}-{partition} has no leader")
        return node
    return int(settled(kafka.bootstrap_servers, f"leader of {topic}-{partition}", leader))


def replicas_of(kafka: KafkaCluster, topic: str) -> dict[int, list[int]]:
    def replicas(w: KafkaWire) -> dict[int, list[int]]:
        version = min(w.version(MetadataRequest), 9)
        response = w.request(w.any_node(), MetadataRequest[version](
            topics=[MetadataRequest[version].MetadataRequestTopic(name=topic)]
            if version >= 1 else [topic], allow_auto_topic_creation=False), "Metadata")
        return {p.partition_index: list(p.replica_nodes) for t in response.topics
                for p in t.partitions}
    return dict(settled(kafka.bootstrap_servers, f"replicas of {topic}", replicas))  # type: ignore[call-overload]


def coordinator_of(kafka: KafkaCluster, transactional_id: str) -> int:
    return int(settled(kafka.bootstrap_servers, f"coordinator of {transactional_id}",
                       lambda w: find_coordinator(w, transactional_id)))


def active_controller(kafka: KafkaCluster) -> int:
    text = KafkaTools(kafka.bootstrap_servers).run(QUORUM, "describe", "--status")
    found = re.search(r"LeaderId:\s*(\d+)", text)
    if not found:
        raise RuntimeError(f"no LeaderId in kafka-metadata-quorum's answer: {text[:500]}")
    return int(found.group(1))


def reassign(kafka: KafkaCluster, plan: dict[tuple[str, int], list[int]]) -> None:
    """Run ``kafka-reassign-partitions --execute`` and ``--verify`` until it is complete."""
    body = {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(plan.items())]}
    tools = KafkaTools(kafka.bootstrap_servers)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(body, f)
    try:
        tools.run(REASSIGN, "--reassignment-json-file", f.name, "--execute")
        deadline = time.monotonic() + 180
        while "is still in progress" in tools.run(REASSIGN, "--reassignment-json-file",
                                                   f.name, "--verify"):
            if time.monotonic() > deadline:
                raise RuntimeError("reassignment still in progress after 180 s")
            time.sleep(1)
    finally:
        Path(f.name).unlink()


class Fault:
    """One fault of one kind against ``node`` (the node the moment aims at)."""

    def __init__(self, kind: str, kafka: KafkaCluster, node: int, topics: list[str]) -> None:
        self.kind, self.kafka, self.node, self.topics = kind, kafka, node, topics
        self.detail = ""
        self.began = self.lifted = 0.0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- set-up before the cell's query runs ---------------------------------------------------

    def prepare(self) -> None:
        """``election``: make another replica each partition's preferred leader (metadata only,
        no leader moves until the election)."""
        if self.kind != "election":
            return
        plan = {}
        for topic in self.topics:
            for p, replicas in replicas_of(self.kafka, topic).items():
                plan[(topic, p)] = replicas[1:] + replicas[:1]
        reassign(self.kafka, plan)

    # -- the fault -------------------------------------------------------------------------------

    def begin(self) -> None:
        self.began = time.time()
        kafka, node = self.kafka, self.node
        if self.kind == "none":
            self.detail = "no fault"
        elif self.kind in ("kill", "controller"):
            if self.kind == "controller":
                self.node = node = active_controller(kafka)
            kafka.stop_node(node, kill=True)
            self.detail = f"node {node} SIGKILLed, down {DOWN_S[self.kind]:.0f} s"
        elif self.kind == "isr":
            kafka.stop_node(node)  # controlled shutdown: only the ISR shrinks below 3
            self.detail = f"follower node {node} stopped {DOWN_S['isr']:.0f} s (min.isr 3)"
        elif self.kind == "sigstop":
            os.kill(kafka.node(node).proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            self.detail = f"node {node} SIGSTOPped {DOWN_S['sigstop']:.0f} s"
        elif self.kind == "election":
            KafkaTools(kafka.bootstrap_servers).run(
                ELECTION, "--election-type", "PREFERRED", "--all-topic-partitions")
            self.detail = "preferred-leader election, every partition"
        elif self.kind in ("rolling", "reassign"):
            self._thread = threading.Thread(target=self._background, daemon=True)
            self._thread.start()
        else:
            raise ValueError(f"unknown fault kind {self.kind!r}")

    def _background(self) -> None:
        try:
            if self.kind == "rolling":
                for n in self.kafka.nodes:
                    self.kafka.stop_node(n.node_id)
                    self.kafka.start_node(n.node_id)
                    wait_whole(self.kafka)
                self.detail = "nodes 1, 2, 3 restarted in turn (controlled shutdown)"
            else:
                shrink, grow = {}, {}
                for topic in self.topics:
                    for p, replicas in replicas_of(self.kafka, topic).items():
                        leader = leader_of(self.kafka, topic, p)
                        kept = [r for r in replicas if r != leader]
                        shrink[(topic, p)], grow[(topic, p)] = kept, [*kept, leader]
                reassign(self.kafka, shrink)
                reassign(self.kafka, grow)
                self.detail = (f"{len(shrink)} partitions reassigned off their leader "
                               "and back (replica copied again)")
        except BaseException as exc:  # noqa: BLE001 - reported by lift()
            self._error = exc

    def lift(self) -> None:
        """Once the fault has lasted its time: undo it (returns when it is undone)."""
        if self.kind in DOWN_S:
            time.sleep(max(0.0, self.began + DOWN_S[self.kind] - time.time()))
            if self.kind == "sigstop":
                os.kill(self.kafka.node(self.node).proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
            else:
                self.kafka.start_node(self.node)
        if self._thread is not None:
            self._thread.join()
        self.lifted = time.time()
        if self._error is not None:
            raise RuntimeError(f"{self.kind}: {self._error}") from self._error

    def whole(self) -> float:
        return wait_whole(self.kafka)
