"""The driver's EndTxns while the transaction coordinator dies or moves (3-node Apache Kafka).

An EndTxn whose answer is NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a
dropped connection or a timeout has an unknown outcome (the coordinator may have written
PrepareCommit; the next one then completes the commit). The driver looks the coordinator
up again and retries; it never turns "unknown" into "nothing committed". Each case stops
the driver at one step of its commit (a fault point that blocks), kills or moves the
coordinator of a transaction, lets the driver go on, and checks the output with the
marker-resolving oracle and Kafka's Java read_committed consumer: every record once, no
transaction left open. The cluster (``kafka3``) is shared with test_leaders_move.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.errors import TransactionLostError
from eos_kafka_source.kafka_codes import Action, Code
from eos_kafka_source.sink.driver.committer import finish
from eos_kafka_source.wire import (
    KafkaWire,
    ProducerIdentity,
    create_topic,
    end_txns,
    fetch_metadata,
    find_coordinator,
    find_coordinators,
    spread,
)
from tests.sink_harness import (
    Harness,
    assert_once_on_kafka,
    await_path,
    losing_endtxn_answers,
    vals,
)
from tests.waiting import until

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]


@pytest.fixture
def sink(kafka3: KafkaCluster, unique: str, tmp_path: Path) -> Iterator[Harness]:
    # A timeout far above the time a node takes to stop and start on a busy machine.
    h = Harness(kafka3.bootstrap_servers, unique, unique, tmp_path / "ckpt", timeout_ms=600_000)
    with h.wire() as wire:  # replicated like __transaction_state: a dead node loses nothing
        until(lambda: _brokers(wire), lambda n: n == 3, what="all three brokers registered")
        create_topic(wire, unique, 2, replication=3)
        until(lambda: fetch_metadata(wire, [unique])[unique].leaders,
              lambda leaders: all(node >= 0 for node in leaders.values()),
              what=f"leaders for {unique}")
    h.driver.prepare(new_run=True)
    yield h
    for node in kafka3.nodes:  # the next case starts with every node up
        if not node.running:
            kafka3.start_node(node.node_id)


def _brokers(wire: KafkaWire) -> int:
    fetch_metadata(wire, [])  # refreshes the client's broker list
    return len(list(wire.client.cluster.brokers()))


def _coordinator(h: Harness, transactional_id: str) -> int:
    with h.wire() as wire:
        return find_coordinator(wire, transactional_id)


class Committing:
    """The driver's commit on a thread, so the test can act while a fault point blocks it."""

    def __init__(self, h: Harness, batch_id: int, handoffs: list) -> None:
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(h, batch_id, handoffs))
        self.thread.start()

    def _run(self, h: Harness, batch_id: int, handoffs: list) -> None:
        try:
            h.driver.commit(batch_id, handoffs, tasks=len(handoffs))
        except BaseException as exc:  # noqa: BLE001 - asserted by the test
            self.errors.append(exc)

    def join(self) -> None:
        self.thread.join(300)
        assert not self.thread.is_alive(), "the driver's commit never returned"


def _move(kafka3: KafkaCluster, h: Harness, tid: str, victim: int, how: str) -> None:
    """Take the coordinator of ``tid`` (node ``victim``) away: kill it, or move it."""
    if how == "kill":
        kafka3.stop_node(victim, kill=True)  # the driver's next EndTxn finds a dead node
        return
    # A leader election on its __transaction_state partition: a controlled shutdown hands
    # leadership to another replica; back up, the old node is a follower that answers
    # NOT_COORDINATOR (preferred-leader rebalancing waits 5 minutes).
    kafka3.restart_node(victim)
    assert _coordinator(h, tid) != victim, "the coordinator did not move"


def _commit_losing_answers(kafka3: KafkaCluster, h: Harness, handoffs: list, faults,
                           tmp_path: Path) -> tuple[int, Committing]:
    """Commit batch 0 while the coordinator of the first transaction dies: the driver is
    held after EndTxn answered, the node is killed, and the answers never reach the driver
    (the first EndTxn round's connection drops before they are read: here the test's
    stand-in for that round loses them). Returns the killed node and the finished commit."""
    victim = _coordinator(h, handoffs[0].transactional_id)
    gate = tmp_path / "gate"
    faults(f"endtxn.commit.answered=block:{gate}@{tmp_path / 'once1'}")
    with losing_endtxn_answers():
        committing = Committing(h, 0, handoffs)
        await_path(gate.with_suffix(".started"), 60)
        kafka3.stop_node(victim, kill=True)
        gate.with_suffix(".release").touch()
        committing.join()
    faults("")
    return victim, committing


def test_endtxns_spread_over_connections_and_every_node(kafka3, sink: Harness,
                                                         monkeypatch) -> None:
    """Many EndTxns at once (first in the module: the fresh cluster's coordinators are spread; later
    cases' kills crowd them onto the nodes that stayed up): the driver's EndTxns go over several
    connections to each coordinator at once (one connection serves one request at a time: 1,000
    pipelined EndTxns were 1,000 replication waits in a row). Transactions whose coordinators are on
    several nodes commit; EndTxns sent to a node that is not their coordinator answer
    NOT_COORDINATOR on connections they share with other transactions' EndTxns, and only they are
    unknown: the others are committed, and the committer looks the moved ones up again."""
    monkeypatch.setattr(spread, "REQUESTS_PER_LANE", 3)  # lanes for 30 txns, not 1,000
    tasks = 30
    handoffs = [sink.task(p, vals(f"spread{p}", 3)) for p in range(tasks)]
    with sink.wire() as wire:
        where = until(lambda: find_coordinators(wire, [h.transactional_id for h in handoffs]),
                      lambda w: len(set(w.values())) >= 2, timeout_s=60,
                      what="transaction coordinators on several nodes")
        assert len(set(where.values())) >= 2, f"coordinators on several nodes: {where}"
        # Every fourth transaction's EndTxn goes to the next node: NOT_COORDINATOR there.
        wrong = {h.transactional_id: where[h.transactional_id] % 3 + 1 for h in handoffs[::4]}
        sent_to = {**where, **wrong}
        txns = [(h.transactional_id, ProducerIdentity(h.producer_id, h.epoch)) for h in handoffs]
        assert spread.lanes_for([(sent_to[t], None) for t, _ in txns]) > 1
        outcomes = end_txns(wire, sent_to, txns, commit=True)
        for outcome in outcomes:
            if outcome.transactional_id in wrong:
                assert outcome.action is Action.REFIND, outcome
                assert outcome.error is not None and outcome.error.code == Code.NOT_COORDINATOR
            else:
                assert outcome.action is Action.DONE, outcome
        report = finish(wire, handoffs, commit=True, coordinators=sent_to)
        assert report.ok and len(report.done) == tasks
    assert_once_on_kafka(sink, Counter(v for p in range(tasks) for v in vals(f"spread{p}", 3)))



@pytest.mark.parametrize(("how", "point", "which"), [
    ("kill", "commit.after_decision", 0),
    # Right after the driver looked the coordinators up, before the EndTxn round: the other
    # transaction commits in that round, this one's EndTxn meets a dead node...
    ("kill", "commit.before_endtxn", 1),
    # ...or the old node, which answers NOT_COORDINATOR.
    ("move", "commit.before_endtxn", 0),
])
def test_coordinator_killed_or_moved_mid_commit(kafka3, sink: Harness, faults, tmp_path,
                                                how: str, point: str, which: int) -> None:
    """Before EndTxn outcomes were kept unknown, the driver gave up after three dropped
    connections in 0.3 s, or retried NOT_COORDINATOR at the old node for 60 s, then voided the
    decision or called the transactions LOST: the batch failed although nothing was lost."""
    handoffs = [sink.task(p, vals(f"{how}{p}")) for p in range(2)]
    tid = handoffs[which].transactional_id
    victim = _coordinator(sink, tid)
    gate = tmp_path / "gate"
    faults(f"{point}=block:{gate}@{tmp_path / 'once'}")
    committing = Committing(sink, 0, handoffs)
    await_path(gate.with_suffix(".started"), 60)
    _move(kafka3, sink, tid, victim, how)
    faults("")
    gate.with_suffix(".release").touch()
    committing.join()
    assert committing.errors == []
    decision = sink.log.get(0)
    assert decision is not None and decision.done and not decision.lost
    kafka3.start_node(victim)
    assert_once_on_kafka(sink, Counter(vals(f"{how}0") + vals(f"{how}1")))


def test_commit_answer_lost_as_coordinator_dies_is_not_replayed(kafka3, sink: Harness, faults,
                                                                tmp_path) -> None:
    """The coordinator committed (answered NONE: PrepareCommit is in its log) and died
    before the driver read the answer. Today's code took the dropped connections for
    "nothing committed", voided the decision and failed the batch; Spark's replay then
    committed the same rows again: every record twice. Now the outcome is unknown, the
    driver asks the next coordinator, which answers NONE for the completed commit."""
    handoffs = [sink.task(p, vals(f"lost-answer{p}")) for p in range(2)]
    victim, committing = _commit_losing_answers(kafka3, sink, handoffs, faults, tmp_path)
    assert committing.errors == []
    decision = sink.log.get(0)
    assert decision is not None and decision.done and not decision.lost
    # Spark would not replay a committed batch; if it did, the replay is aborted.
    replay = [sink.task(p, vals(f"lost-answer{p}")) for p in range(2)]
    sink.driver.commit(0, replay, tasks=2)
    kafka3.start_node(victim)
    assert_once_on_kafka(sink, Counter(vals("lost-answer0") + vals("lost-answer1")))


def test_unknown_outcome_keeps_the_decision_and_restart_rolls_forward(
        kafka3, unique, sink: Harness, faults, tmp_path) -> None:
    """The coordinator stays away past the driver's deadline: the commit fails with an
    unknown outcome, the decision stays undone (never voided), Spark's abort() leaves it
    alone, and the restarted driver rolls it forward once the cluster is whole again."""
    short = Harness(sink.bootstrap, sink.topic, f"{unique}-short", tmp_path / "short",
                    timeout_ms=600_000)
    # Give up before the controller notices the dead node (broker.session.timeout.ms, 4 s
    # on the test clusters, counted from the kill: the deadline started before it); by
    # default the driver waits out the transaction timeout.
    short.driver.commit_deadline_s = 3.0
    short.driver.prepare(new_run=True)
    handoffs = [short.task(p, vals(f"unknown{p}")) for p in range(2)]
    victim, committing = _commit_losing_answers(kafka3, short, handoffs, faults, tmp_path)
    assert len(committing.errors) == 1
    assert "EOSKAFKA_TRANSACTION_OUTCOME_UNKNOWN" in str(committing.errors[0])
    assert not isinstance(committing.errors[0], TransactionLostError)
    decision = short.log.get(0)
    assert decision is not None and not decision.done  # kept, not voided
    kafka3.start_node(victim)
    restarted = Harness(sink.bootstrap, sink.topic, f"{unique}-short", tmp_path / "short",
                        timeout_ms=600_000)
    restarted.driver.abort(0, handoffs, tasks=2)  # what Spark does after commit() raised
    assert restarted.log.get(0).done and not restarted.log.get(0).lost
    restarted.driver.prepare(new_run=True)
    assert_once_on_kafka(restarted, Counter(vals("unknown0") + vals("unknown1")))
