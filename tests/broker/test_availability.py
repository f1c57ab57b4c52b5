"""Cells of the availability harness (``make availability``) on 3-node Kafka.

Each case is one (fault kind, moment) of the harness's schedule reduced to the call at
risk; a case the harness found failing says so and what failed before the fix. Short
request timeouts keep the cases quick; the operations' deadlines stay Kafka's defaults.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.options import SourceOptions
from eos_kafka_source.source.planner import SourcePlanner
from eos_kafka_source.wire import require_topics
from eos_kafka_source.wire.cluster import create_topic
from tests.broker.conftest import in_sync_wire

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

#: Shorter than the harness's 30 s, longer than a paused node takes to be fenced (4 s here).
REQUEST_TIMEOUT_MS = "3000"


def _topic(bootstrap: str, topic: str, partitions: int = 3) -> dict[int, int]:
    """A topic replicated three ways, 30 records in each partition; its leaders."""
    from kafka import KafkaProducer

    with in_sync_wire(bootstrap) as wire:
        create_topic(wire, topic, partitions, replication=3)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(30 * partitions):
            producer.send(topic, value=b"%d" % i, partition=i % partitions)
        producer.flush()
    finally:
        producer.close(timeout=10)
    with in_sync_wire(bootstrap) as wire:
        return dict(require_topics(wire, [topic])[topic].leaders)


def _pause(kafka: KafkaCluster, node: int) -> None:
    os.kill(kafka.node(node).proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]


def _resume(kafka: KafkaCluster, node: int) -> None:
    os.kill(kafka.node(node).proc.pid, signal.SIGCONT)  # type: ignore[union-attr]


def test_planning_rides_out_a_paused_leader(kafka: KafkaCluster, unique: str) -> None:
    """sigstop x planning: the leader of an input partition is paused past
    ``kafka.request.timeout.ms`` while the driver plans. The unanswered Fetch is dropped
    like a lost connection and planning reconnects within ``kafka.default.api.timeout.ms``
    (as the Java consumer): the paused node is fenced, its partitions get new leaders, and
    latestOffset answers (passed before any change: a guard)."""
    bootstrap = kafka.bootstrap_servers
    leaders = _topic(bootstrap, unique)
    options = SourceOptions.parse({
        "kafka.bootstrap.servers": bootstrap, "subscribe": unique,
        "startingOffsets": "earliest", "kafka.request.timeout.ms": REQUEST_TIMEOUT_MS,
    }, streaming=True)
    planner = SourcePlanner(options)
    victim = leaders[0]
    try:
        start = planner.initial_offsets()  # connections to every leader are open
        _pause(kafka, victim)
        began = time.monotonic()
        try:
            latest = planner.latest_offsets(start)
        finally:
            _resume(kafka, victim)
        assert sum(latest.end[tp] - start[tp] for tp in start) == 90
        assert time.monotonic() - began < options.client.api_timeout_s
    finally:
        planner.close()


def test_produce_waits_out_an_isr_below_min_insync_replicas(kafka: KafkaCluster,
                                                           unique: str) -> None:
    """isr x writing: the output needs 3 in-sync replicas and a follower is down. Produce
    answers NOT_ENOUGH_REPLICAS; the task re-sends the same batches (same sequences) until
    the follower is back, within ``kafka.delivery.timeout.ms``, and the records are
    committed once (a guard: passed as is)."""
    from tests.broker.test_leaders_move import _assert_exactly_once, _commit, _rows, _writer

    bootstrap = kafka.bootstrap_servers
    with in_sync_wire(bootstrap) as wire:
        create_topic(wire, unique, 3, replication=3, config={"min.insync.replicas": "3"})
        leaders = dict(require_topics(wire, [unique])[unique].leaders)
    follower = next(n.node_id for n in kafka.nodes if n.node_id != leaders[0])
    kafka.stop_node(follower)  # controlled: only the ISR shrinks
    back = threading.Timer(8.0, kafka.start_node, args=(follower,))
    back.start()
    try:
        with in_sync_wire(bootstrap) as wire:
            writer = _writer(wire, f"{unique}-tid", unique)
            rows = _rows("isr", 3, 100)
            writer.write_batch(rows)
            handoff = writer.handoff()  # flushes: every batch acknowledged by all 3 replicas
            assert writer.pipeline.retries > 0, "no NOT_ENOUGH_REPLICAS: the ISR was never short"
    finally:
        back.join()
    _commit(bootstrap, handoff)
    _assert_exactly_once(bootstrap, unique, [rows])


def test_commit_rides_out_a_paused_transaction_coordinator(kafka: KafkaCluster, unique: str,
                                                           tmp_path) -> None:
    """sigstop x commit: the coordinator of a task's transactional id is paused after the
    tasks wrote, as the driver commits. The unanswered EndTxn is an unknown outcome: the
    driver looks the coordinator up again (the paused node is fenced, another loads the
    transaction from __transaction_state) and retries, and every record is committed once
    (a guard: passed as is)."""
    from collections import Counter

    from eos_kafka_source.client.config import ClientConfig
    from eos_kafka_source.wire import find_coordinator
    from tests.oracle import assert_no_open_transactions
    from tests.sink_harness import Harness, vals

    bootstrap = kafka.bootstrap_servers
    with in_sync_wire(bootstrap) as wire:
        create_topic(wire, unique, 2, replication=3)
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt", timeout_ms=600_000)
    sink.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap,
                                          "kafka.request.timeout.ms": REQUEST_TIMEOUT_MS})
    sink.driver.prepare(new_run=True)
    handoffs = [sink.task(p, vals(f"t{p}")) for p in range(2)]
    with in_sync_wire(bootstrap) as wire:
        victim = find_coordinator(wire, sink.ids.for_task(0))
    _pause(kafka, victim)
    resume = threading.Timer(20.0, _resume, args=(kafka, victim))  # a 20 s pause at most
    resume.start()
    try:
        sink.driver.commit(0, handoffs, tasks=2)
    finally:
        resume.cancel()
        _resume(kafka, victim)
    assert sink.committed() == Counter(vals("t0") + vals("t1"))
    assert_no_open_transactions(bootstrap, unique)


def test_a_paused_bootstrap_server_does_not_stop_the_connection(kafka: KafkaCluster) -> None:
    """sigstop x start: one bootstrap server is paused (a GC pause, a network stall) when a
    query starts. Its TCP port still accepts connections, but nothing answers. Before the
    fix one connection attempt, to a bootstrap server picked at random, had the whole
    ``kafka.socket.connection.setup.timeout.ms``: connecting failed with
    EOSKAFKA_BROKER_UNREACHABLE whenever the paused one came first (the harness: 2 of 2
    starts). Now each bootstrap server gets its share of the deadline, in turn, and the
    cluster's metadata is read through the one that answered. (Still open: a later request
    sent to "any node" can pick the paused broker and wait out its request timeout.)"""
    paused, live = kafka.nodes[0], kafka.nodes[1]
    servers = f"127.0.0.1:{paused.port},127.0.0.1:{live.port}"
    _pause(kafka, paused.node_id)
    try:
        for _ in range(6):  # kafka-python picked at random: the paused one ~ every other try
            with in_sync_wire(servers) as wire:
                assert wire.client is not None  # connected and bootstrapped
    finally:
        _resume(kafka, paused.node_id)


def test_a_task_reads_on_after_its_input_leader_dies(kafka: KafkaCluster, unique: str,
                                                     faults, tmp_path) -> None:  # noqa: ANN001
    """kill x reading: a task has found its input partition's leader when that node is
    killed. Before the fix the task's Fetch failed with EOSKAFKA_CONNECTION_DROPPED, and
    Spark's retries of the task came faster than the controller fences a dead node, so
    all four attempts failed and so did the query (the harness on a quiet machine: 1
    failure where Spark's connector had none). The task now looks the leader up again and
    reads on from where it was, within ``kafka.default.api.timeout.ms``."""
    from eos_kafka_source.datasource import EosKafkaDataSource
    from eos_kafka_source.source.partition_reader import read_partition
    from eos_kafka_source.source.schema import kafka_schema

    bootstrap = kafka.bootstrap_servers
    leaders = _topic(bootstrap, unique, partitions=1)
    reader = EosKafkaDataSource({"kafka.bootstrap.servers": bootstrap,
                                 "subscribe": unique}).reader(kafka_schema(False))
    (part,) = reader.partitions()
    hold = tmp_path / "hold"
    faults(f"read.after_leader=block:{hold}")

    def kill_then_release() -> None:
        while not hold.with_suffix(".started").exists():
            time.sleep(0.01)
        kafka.stop_node(leaders[0], kill=True)
        hold.with_suffix(".release").write_text("")

    killer = threading.Thread(target=kill_then_release)
    killer.start()
    try:
        values = [v for batch in read_partition(part) for v in batch.column("value").to_pylist()]
    finally:
        killer.join()
    assert values == [b"%d" % i for i in range(30)]
