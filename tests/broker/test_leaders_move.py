"""Leaders and coordinators move while tasks write (a 3-node Apache Kafka cluster).

Each case drives a TaskWriter directly, kills or misdirects a broker at a chosen point
(between two produce rounds, before InitProducerId, between two AddPartitionsToTxn), lets
the driver commit, and checks every record is committed exactly once with both the
marker-resolving oracle and Kafka's own read_committed console consumer.

The cluster (``kafka3``, shared with the other 3-node modules: tests/broker/conftest.py)
fences a dead broker after 4 s (``broker.session.timeout.ms``) instead of 9, and takes
requests of at most 2 MiB (``socket.request.max.bytes``, 100 MiB by default), so that a
Produce request packed past ``max.request.size`` fails visibly.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from eos_kafka_source.apache_kafka import KafkaCluster, KafkaTools
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.task.context import WriterContext
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import KafkaWire, ProducerIdentity, TopicInfo, end_txns
from eos_kafka_source.wire.cluster import create_topic, find_coordinator
from eos_kafka_source.wire.coordinated import with_coordinator
from eos_kafka_source.wire.groups import commit_offset, fetch_offset
from eos_kafka_source.wire.retry import GROUP
from tests.broker.conftest import in_sync_wire as _wire
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.waiting import until

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

def _create(bootstrap: str, topic: str, partitions: int) -> None:
    """A topic replicated three ways (``min.insync.replicas=2``): it survives one dead broker."""
    with _wire(bootstrap) as wire:
        create_topic(wire, topic, partitions, replication=3)


def _writer(wire: KafkaWire, tid: str, topic: str, batch_records: int = 50) -> TaskWriter:
    writer = TaskWriter(wire, transactional_id=tid, topic=topic, transaction_timeout_ms=120000,
                        batch_records=batch_records, context=WriterContext(task_partition=0))
    writer.open()
    return writer


def _rows(tag: str, partitions: int, per_partition: int, size: int = 100) -> pa.RecordBatch:
    values = [f"{tag}-{p}-{i}-".encode().ljust(size, b".")
              for i in range(per_partition) for p in range(partitions)]
    parts = [p for _ in range(per_partition) for p in range(partitions)]
    return pa.RecordBatch.from_pydict({"value": values,
                                       "partition": pa.array(parts, pa.int32())})


def _commit(bootstrap: str, handoff: TxnHandoff) -> None:
    """The driver's EndTxn, following the coordinator if it moved."""
    tid = handoff.transactional_id
    who = ProducerIdentity(handoff.producer_id, handoff.epoch)
    with _wire(bootstrap) as wire:
        def send(node: int) -> None:
            (outcome,) = end_txns(wire, {tid: node}, [(tid, who)], commit=True, deadline_s=10)
            if not outcome.ok:
                assert outcome.error is not None
                raise outcome.error

        with_coordinator(wire, tid, send, deadline=90)


def _assert_exactly_once(bootstrap: str, topic: str, batches: list[pa.RecordBatch]) -> None:
    """The oracle finds every record committed once and nothing open; Kafka's own
    read_committed consumer reads exactly those records (extras would show in the oracle)."""
    expected = Counter(v for b in batches for v in b.column("value").to_pylist())
    await_markers(bootstrap, topic)
    oracle = Counter(v for pv in committed_view(bootstrap, topic).values()
                     for v in pv.committed_values)
    assert oracle == expected, (
        f"oracle: missing {sum((expected - oracle).values())}, "
        f"extra {sum((oracle - expected).values())}")
    assert_no_open_transactions(bootstrap, topic)
    consumed = KafkaTools(bootstrap).consume(topic, read_committed=True, idle_timeout_ms=60000,
                                             max_messages=sum(expected.values()))
    java = Counter(r.value for r in consumed)
    assert java == expected, (
        f"Kafka's read_committed consumer: missing {sum((expected - java).values())}, "
        f"extra {sum((java - expected).values())}")


def _create_led_by(kafka: KafkaCluster, topic: str, leaders: dict[int, int]) -> dict[int, int]:
    """A topic with a replica on every node whose partition ``p`` is led by ``leaders[p]``: a
    new partition's leader is the first in-sync replica of its assignment, and the ``kafka``
    fixture leaves every node in sync. Returns the leaders once metadata names them."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    nodes = [n.node_id for n in kafka.nodes]
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={
            p: [leader, *(n for n in nodes if n != leader)] for p, leader in leaders.items()})])
    finally:
        admin.close()
    return until(lambda: _leaders(kafka.bootstrap_servers, topic), lambda got: got == leaders,
                 what=f"{topic}'s leaders as assigned", timeout_s=30)


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    with _wire(bootstrap) as wire:
        from eos_kafka_source.wire import require_topics

        return require_topics(wire, [topic])[topic].leaders


# -- leaders ---------------------------------------------------------------------------------


def test_produce_to_a_stale_leader_refreshes_and_resends(kafka: KafkaCluster,
                                                        unique: str) -> None:
    """What failed on a task's first Produce to a just-created topic: its metadata named a
    broker that was not (or no longer) the leader; NOT_LEADER_OR_FOLLOWER failed the task.
    Here the stale metadata is deterministic: every partition points at a follower."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 3)
    leaders = _leaders(bootstrap, unique)
    followers = {p: next(n.node_id for n in kafka.nodes if n.node_id != leader)
                 for p, leader in leaders.items()}
    rows = _rows("stale", 3, 200)
    with _wire(bootstrap) as wire:
        writer = _writer(wire, f"{unique}-tid", unique)
        writer._topics[unique] = TopicInfo(unique, followers)
        writer.write_batch(rows)
        handoff = writer.handoff()
        assert writer.pipeline.retries > 0  # the followers refused, the leaders took them
    assert handoff.records == 600
    _commit(bootstrap, handoff)
    _assert_exactly_once(bootstrap, unique, [rows])


def test_leader_killed_between_produce_rounds(kafka: KafkaCluster, unique: str) -> None:
    """Round 1 is still in flight (five requests a leader) when the leader of a partition is
    killed: its unacknowledged batches are re-sent, same sequences, to the new leader, some
    perhaps already replicated (DUPLICATE_SEQUENCE / duplicate ack); round 2 follows them."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 3)
    tid = f"{unique}-tid"
    with _wire(bootstrap) as wire:
        coordinator = find_coordinator(wire, tid)
        victim = next(leader for leader in _leaders(bootstrap, unique).values()
                      if leader != coordinator)
        writer = _writer(wire, tid, unique, batch_records=20)
        first = _rows("r1", 3, 400)
        writer.write_batch(first)  # 20 batches a partition: pipelined, not yet acknowledged
        kafka.stop_node(victim, kill=True)
        second = _rows("r2", 3, 400)
        writer.write_batch(second)
        handoff = writer.handoff()
        assert writer.pipeline.retries > 0
    assert handoff.records == 2400
    _commit(bootstrap, handoff)
    _assert_exactly_once(bootstrap, unique, [first, second])


def test_requests_stay_under_the_brokers_request_limit(kafka: KafkaCluster,
                                                      unique: str) -> None:
    """90 partitions of 80 KB each: one request per leader held ~2.4 MB, over this cluster's
    socket.request.max.bytes (2 MiB), and the broker closed the connection."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 90)
    rows = _rows("wide", 90, 80, size=1000)
    with _wire(bootstrap) as wire:
        writer = _writer(wire, f"{unique}-tid", unique, batch_records=10_000)
        writer.write_batch(rows)
        handoff = writer.handoff()
    _commit(bootstrap, handoff)
    _assert_exactly_once(bootstrap, unique, [rows])


# -- coordinators ----------------------------------------------------------------------------


def test_transaction_coordinator_killed_before_init_producer_id(kafka: KafkaCluster,
                                                                unique: str) -> None:
    """The task's InitProducerId meets a dead coordinator (dropped connection, then
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while the new one loads the log)."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 3)
    tid = f"{unique}-tid"
    with _wire(bootstrap) as wire:
        kafka.stop_node(find_coordinator(wire, tid), kill=True)
        writer = _writer(wire, tid, unique)
        rows = _rows("init", 3, 100)
        writer.write_batch(rows)
        handoff = writer.handoff()
    _commit(bootstrap, handoff)
    _assert_exactly_once(bootstrap, unique, [rows])


def test_transaction_coordinator_killed_between_add_partitions(kafka: KafkaCluster,
                                                               unique: str) -> None:
    """Partition 0 joined the transaction at the old coordinator; partition 1 joins at the new
    one, which loaded the open transaction from the replicated __transaction_state."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 2)
    tid = f"{unique}-tid"
    with _wire(bootstrap) as wire:
        writer = _writer(wire, tid, unique)
        old = writer.coordinator
        assert old is not None
        first = pa.RecordBatch.from_pydict({"value": [f"p0-{i}".encode() for i in range(100)],
                                            "partition": pa.array([0] * 100, pa.int32())})
        writer.write_batch(first)
        writer.flush()
        kafka.stop_node(old, kill=True)
        second = pa.RecordBatch.from_pydict({"value": [f"p1-{i}".encode() for i in range(100)],
                                             "partition": pa.array([1] * 100, pa.int32())})
        writer.write_batch(second)  # AddPartitionsToTxn for partition 1: the coordinator moved
        handoff = writer.handoff()
        assert writer.coordinator not in (None, old)
    _commit(bootstrap, handoff)
    _assert_exactly_once(bootstrap, unique, [first, second])


def test_group_offsets_follow_a_killed_group_coordinator(kafka: KafkaCluster,
                                                         unique: str) -> None:
    """The prefix claims and the batch-abort marks are group offsets: their requests must
    survive the group coordinator going away (NOT_COORDINATOR, a dropped connection)."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 1)
    group = f"{unique}-group"
    with _wire(bootstrap) as wire:
        commit_offset(wire, group, unique, 0, 7, "first")
        coordinator = find_coordinator(wire, group, GROUP)
        kafka.stop_node(coordinator, kill=True)
        assert fetch_offset(wire, group, unique, 0) == (7, "first")
        commit_offset(wire, group, unique, 0, 8, "second")
        assert find_coordinator(wire, group, GROUP) != coordinator
        assert fetch_offset(wire, group, unique, 0) == (8, "second")


# -- starting while a broker is down ------------------------------------------------------------


def test_a_query_starts_while_one_broker_of_three_is_down(kafka: KafkaCluster, unique: str,
                                                          tmp_path) -> None:
    """Measured before the fix: a streaming query started during a broker kill failed in
    initialOffset with EOSKAFKA_CONNECTION_DROPPED after 10 s (the "never reached a broker"
    fail-fast took one dead leader for an unreachable cluster), while Spark's connector
    retries. Planning, the writer's preflight, the driver's fencing at start, a task and the
    commit now all go on: the dead broker's partitions and coordinators move to the others."""
    from eos_kafka_source.options import SourceOptions
    from eos_kafka_source.source.planner import SourcePlanner
    from tests.sink_harness import Harness, vals

    bootstrap = kafka.bootstrap_servers
    src, out = f"{unique}-in", f"{unique}-out"
    _create(bootstrap, src, 3)
    _create(bootstrap, out, 3)
    with _wire(bootstrap) as wire:
        writer = _writer(wire, f"{unique}-feed", src)
        rows = _rows("in", 3, 50)
        writer.write_batch(rows)
        handoff = writer.handoff()
    _commit(bootstrap, handoff)
    victim = _leaders(bootstrap, src)[0]
    kafka.stop_node(victim, kill=True)  # before anything of the query starts

    options = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": src,
                                   "startingOffsets": "earliest"}, streaming=True)
    planner = SourcePlanner(options)
    try:
        start = planner.initial_offsets()
        assert sorted(start) == [(src, 0), (src, 1), (src, 2)]
        # Spark asks again each trigger: a partition on the dead node comes in once its
        # leadership moved (4 s after the kill when idle; CI on two cores once took longer).
        until(lambda: planner.latest_offsets(start),
              lambda latest: sum(latest.end[tp] - start[tp] for tp in start) >= 150,
              what="every partition's end offset, the dead node's moved", timeout_s=120)
    finally:
        planner.close()

    sink = Harness(bootstrap, out, unique, tmp_path / "ckpt", claim=True)
    sink.driver.prepare(new_run=True)  # claims the prefix and fences the pool: group and
    # transaction coordinators may be on the dead node
    sink.driver.commit(0, [sink.task(p, vals(f"t{p}")) for p in range(2)], tasks=2)
    await_markers(bootstrap, out)
    committed = Counter(v for pv in committed_view(bootstrap, out).values()
                        for v in pv.committed_values)
    assert committed == Counter(vals("t0") + vals("t1"))
    assert_no_open_transactions(bootstrap, out)


def test_recovery_reads_again_a_partition_whose_leader_is_dead(
        kafka: KafkaCluster, unique: str, tmp_path, faults, caplog) -> None:  # noqa: ANN001
    """A driver died with a recovery transaction recorded and not yet ended (task 1's decided
    transaction was fenced, its records copied). The restarted driver ends the copy; as
    the EndTxn is answered, the leader of the partition being recovered is killed, so the
    read of the copy's outcome that follows meets a dead leader (the cluster names it until
    it fences the node, 4 s later). Before, that first failed read failed the restart
    (EOSKAFKA_TRANSACTION_OUTCOME_UNKNOWN, the decision kept); now it is read again, the
    leaders looked up anew, until ``kafka.default.api.timeout.ms`` (the live commit's
    confirmation and roll-forward read through the same retry): the restart finishes the
    batch, every record once."""
    import logging

    from tests.sink_harness import (
        Background,
        Harness,
        assert_once_on_kafka,
        await_path,
        lose_task_1,
        vals,
    )

    bootstrap = kafka.bootstrap_servers
    prefix = unique
    with _wire(bootstrap) as wire:
        coordinator = find_coordinator(wire, f"{prefix}-recovery")
    # The copy's coordinator on a node that leads neither partition (a dead coordinator would
    # hold the EndTxn until the leader had moved too), placed so rather than searched for:
    # after the module's earlier kills, leadership crowds on the nodes that stayed up, and the
    # coordinators found then all sat on a node leading one of the two partitions.
    first, second = (n.node_id for n in kafka.nodes if n.node_id != coordinator)
    leaders = _create_led_by(kafka, unique, {0: first, 1: second})
    sink = Harness(bootstrap, unique, prefix, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    lose_task_1(sink, faults, tmp_path, then="recover.after_record=raise")
    lost = sink.log.get(0) if sink.log else None
    assert lost is not None and lost.recovery, "the copy is recorded, not yet ended"
    (partition,) = {p for _, p, _ in lost.recovery[-1].partitions}
    caplog.set_level(logging.INFO, logger="eos_kafka_source")
    gate = tmp_path / "answered"
    faults(f"endtxn.commit.answered=block:{gate}@{tmp_path / 'once'}")
    restarted = Harness(bootstrap, unique, prefix, tmp_path / "ckpt")
    preparing = Background(lambda: restarted.driver.prepare(new_run=True))
    await_path(gate.with_suffix(".started"))
    kafka.stop_node(leaders[partition], kill=True)
    gate.with_suffix(".release").touch()
    assert preparing.outcome(timeout_s=120) is None
    faults("")
    assert any("the log could not be read" in r.getMessage() for r in caplog.records)
    done = restarted.log.get(0) if restarted.log else None
    assert done is not None and done.done
    restarted.driver.commit(0, [restarted.task(p, vals(f"b0t{p}")) for p in range(2)],
                            tasks=2)  # the replay: aborted
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + vals("b0t1")))


def test_txns_goes_on_past_a_dead_broker_and_names_what_it_could_not_ask(
        kafka: KafkaCluster, unique: str, capsys) -> None:  # noqa: ANN001
    """``eoskafka txns`` as an alert during a broker outage: before, a dead leader stopped it
    with exit 2 (a connection error) and nothing checked; now the partitions it leads are
    named as not asked, the others are checked, and it exits 3 (incomplete), or 1 when the
    rest holds a problem."""
    import json

    from eos_kafka_source.cli import main

    bootstrap = kafka.bootstrap_servers
    with _wire(bootstrap) as wire:
        create_topic(wire, unique, 3, replication=1)  # a dead leader's partitions go dark
    leaders = until(lambda: _leaders(bootstrap, unique),
                    lambda got: len(set(got.values())) > 1, what="leaders on two nodes or more",
                    timeout_s=30)
    victim = leaders[0]
    kafka.stop_node(victim, kill=True)
    try:
        code = main(["txns", "-b", bootstrap, "--topic", unique, "--json"])
        doc = json.loads(capsys.readouterr().out)
        dark = sorted(p for p, leader in leaders.items() if leader == victim)
        assert code == 3 and doc["ok"], doc
        assert sorted(int(u.split(":")[0].rsplit("-", 1)[1]) for u in doc["unasked"]) == dark
        assert sorted(p["partition"] for p in doc["partitions"]) == sorted(
            set(leaders) - set(dark))
        code = main(["txns", "-b", bootstrap, "--topic", unique])
        out = capsys.readouterr().out
        assert code == 3 and "INCOMPLETE" in out and f"NOT ASKED {unique}-0" in out
    finally:  # the fixture waits for every replica in sync: no unreplicated topic left
        from kafka import KafkaAdminClient

        kafka.start_node(victim)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.delete_topics([unique])
        finally:
            admin.close()
