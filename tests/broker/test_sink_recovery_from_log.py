"""Recovery copies from the log (docs/design.md invariants 9, 10, 14).

A decided transaction that Kafka aborted (a fence, the driver down past the timeout, an
operator's ``kafka-transactions.sh abort``) still has its records in its output partitions,
from its hand-off's first offsets to its producer's ABORT marker. The driver copies exactly
those records into a recovery transaction, recorded in the decision before its EndTxn;
whatever a replay of the batch writes is aborted. Each case failed on Apache Kafka 4.3.1
before the change (noted per test). TaskWriter plays the tasks and DriverProtocol the
driver (tests/sink_harness.py); "a crash" is an injected fault with no clean-up after it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.errors import TransactionLostError, TransactionOutcomeUnknownError
from eos_kafka_source.sink.decisions.states import State
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.handoff import TxnHandoff
from tests.sink_harness import (
    Harness,
    assert_once_on_kafka,
    crash_between_endtxns,
    losing_endtxn_answers,
    vals,
)

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]


def _restart(h: Harness) -> Harness:
    """A new driver on the same checkpoint and prefix (the restarted query)."""
    assert h.log is not None
    return Harness(h.bootstrap, h.topic, h.ids.prefix, h.log.location.rpartition("/")[0],
                   timeout_ms=h.timeout_ms, lineage=h.lineage)


def _crash_between_endtxns(h: Harness, handoffs: list[TxnHandoff], faults) -> None:  # noqa: ANN001
    """Decide batch 0 and die after the first hand-off's EndTxn committed (no abort: a
    killed driver runs nothing after)."""
    with crash_between_endtxns(), pytest.raises(RuntimeError, match="injected fault"):
        h.driver.commit(0, handoffs, tasks=len(handoffs))


def _fence(h: Harness, *tasks: int) -> None:
    """An operator's (or a zombie's) fence: the ids' open transactions are aborted."""
    with h.wire() as wire:
        fence(wire, [h.ids.for_task(p) for p in tasks], 60000)


def test_two_lost_transactions_with_the_same_rows_are_both_copied(
        sink: Harness, faults) -> None:
    """Tasks 0 and 2 wrote the same 30 constant rows to partition 0; both were
    aborted after task 1 committed. Before: one replay transaction stood in for both lost
    ones (the guard compared copies by identity), 30 of the 60 rows silently missing."""
    same = [b"same"] * 30
    handoffs = [sink.task(1, vals("b0t1")), sink.task(0, same), sink.task(2, same)]
    assert handoffs[1].partitions == handoffs[2].partitions  # one partition, the same rows
    _crash_between_endtxns(sink, handoffs, faults)  # task 1's committed
    _fence(sink, 0, 2)
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)
    replay = [restarted.task(p, same if p != 1 else vals("b0t1")) for p in range(3)]
    restarted.driver.commit(0, replay, tasks=3)
    assert_once_on_kafka(restarted, Counter(vals("b0t1") + same + same))


def test_an_operator_abort_of_one_partition_is_copied_at_the_roll_forward(
        sink: Harness, faults) -> None:
    """As measured on Kafka 4.3.1 before: the driver died right after its
    decision; `kafka-transactions.sh abort` wrote an ABORT marker to one output partition
    while the coordinator still held the transaction; the restart's EndTxn answered NONE
    and success was reported with that partition's rows missing. Now NONE is confirmed by
    the partitions' markers, and the aborted partition is copied from the log."""
    from eos_kafka_source.apache_kafka import KafkaTools

    rows = vals("wide", 200)  # 50 a batch, alternating over both partitions
    handoff = sink.task(0, rows)
    assert len(handoff.partitions) == 2
    faults("commit.after_decision=raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        sink.driver.commit(0, [handoff], tasks=1)
    faults("")
    topic, partition, first = handoff.first_offsets[1]
    KafkaTools(sink.bootstrap).abort_transaction(topic, partition, first)
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)
    decision = restarted.log.get(0)
    assert decision is not None and decision.state is State.DONE and not decision.lost
    assert_once_on_kafka(restarted, Counter(rows))


def test_a_replay_with_other_rows_is_aborted_and_the_lost_rows_are_copied(
        sink: Harness, faults) -> None:
    """A non-deterministic replay: task 1's rows are other rows. Before: nothing could stand
    in for the lost transaction, the batch failed with EOSKAFKA_TRANSACTION_LOST and task
    1's rows were gone. Now the log's copy is committed, and the replay's rows are not."""
    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    _crash_between_endtxns(sink, handoffs, faults)  # task 0's committed
    _fence(sink, 1)
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)
    replay = [restarted.task(0, vals("b0t0")), restarted.task(1, vals("other", 7))]
    restarted.driver.commit(0, replay, tasks=2)
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + vals("b0t1")))
    decision = restarted.log.get(0)
    assert decision is not None and decision.state is State.DONE and not decision.lost


def test_a_batch_whose_transaction_is_fenced_mid_commit_succeeds_with_the_copy(
        sink: Harness, faults, tmp_path: Path) -> None:
    """commit() itself finds task 1's transaction aborted after task 0's committed (a
    zombie fenced it after the decision): it copies the records from the log and the
    batch succeeds. Before: the batch failed, and only an identical replay could help."""
    from tests.sink_harness import Background, await_path

    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    gate = tmp_path / "gate"
    faults(f"commit.after_decision=block:{gate}")
    committing = Background(lambda: sink.driver.commit(0, handoffs, tasks=2))
    await_path(gate.with_suffix(".started"))
    sink.task(1, vals("zombie"))  # its InitProducerId aborts task 1's transaction
    faults("")
    gate.with_suffix(".release").touch()
    assert committing.outcome() is None
    _fence(sink, 1)  # the zombie's own transaction ends
    decision = sink.log.get(0)
    assert decision is not None and decision.state is State.DONE and not decision.lost
    assert_once_on_kafka(sink, Counter(vals("b0t0") + vals("b0t1")))


@pytest.mark.parametrize("point", ["recover.after_write", "recover.after_record",
                                   "recover.before_done"])
def test_a_crash_during_recovery_is_finished_by_the_next_run(
        sink: Harness, faults, point: str) -> None:
    """Every durable step of a recovery is a crash point (invariant 14): the copy written
    but not recorded (its transaction is left open), recorded but not committed, committed
    but not marked done. The next run finishes it: each row once, nothing left open."""
    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    _crash_between_endtxns(sink, handoffs, faults)
    _fence(sink, 1)
    faults(f"{point}=raise")
    with pytest.raises(RuntimeError, match=f"injected fault at {point}"):
        _restart(sink).driver.prepare(new_run=True)
    faults("")
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)
    restarted.driver.commit(0, [restarted.task(p, vals(f"b0t{p}")) for p in range(2)],
                            tasks=2)  # the replay: aborted
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + vals("b0t1")))


def test_a_dropped_connection_while_reading_the_log_is_not_a_final_loss(
        sink: Harness, faults, tmp_path) -> None:  # noqa: ANN001
    """A failed read of the lost transaction's records became records=None, no
    match, and a final loss. Now a read that fails is read again (the copy cut short is
    aborted, never recorded) until ``kafka.default.api.timeout.ms``: a connection dropped
    once costs nothing; one that keeps dropping past that deadline raises (outcome
    unknown), the decision stays unfinished, and the next run copies the records."""
    from eos_kafka_source.client.config import ClientConfig

    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    _crash_between_endtxns(sink, handoffs, faults)
    _fence(sink, 1)
    faults("recover.during_read=drop")
    short = _restart(sink)
    short.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": sink.bootstrap,
                                           "kafka.default.api.timeout.ms": "2000"})
    with pytest.raises(TransactionOutcomeUnknownError, match="could not read"):
        short.driver.prepare(new_run=True)
    decision = sink.log.get(0)
    assert decision is not None and decision.state is State.DECIDED
    faults(f"recover.during_read=drop@{tmp_path / 'once'}")
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)  # dropped once, read again
    assert (tmp_path / "once").exists()
    faults("")
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + vals("b0t1")))


def test_records_the_log_no_longer_holds_are_lost_loudly_once(
        sink: Harness, faults) -> None:
    """Retention deleted the lost transaction's records before the restart: nothing to copy.
    The loss is named once (batch, partition, counts), final in the decision log, and the
    query goes on; nothing is doubled."""
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KafkaTP

    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    _crash_between_endtxns(sink, handoffs, faults)
    _fence(sink, 1)
    topic, partition, first = handoffs[1].first_offsets[0]
    admin = KafkaAdminClient(bootstrap_servers=sink.bootstrap)
    try:
        admin.delete_records({KafkaTP(topic, partition): first + 5})
    finally:
        admin.close()
    restarted = _restart(sink)
    with pytest.raises(TransactionLostError) as err:
        restarted.driver.prepare(new_run=True)
    message = str(err.value)
    assert "batch 0" in message and f"{topic}-{partition}" in message
    assert "30 records" in message and sink.ids.for_task(1) in message
    decision = restarted.log.get(0)
    assert decision is not None and decision.state is State.DONE and decision.lost
    again = _restart(sink)
    again.driver.prepare(new_run=True)  # reported once: the query goes on
    again.driver.commit(0, [again.task(p, vals(f"b0t{p}")) for p in range(2)], tasks=2)
    assert_once_on_kafka(again, Counter(vals("b0t0")))


def test_a_loss_recorded_by_an_older_eoskafka_is_copied_when_its_batch_replays(
        sink: Harness, faults) -> None:
    """Decision files of a development build before 0.1.0 hold a LOST batch as ``.done``
    with ``lost_handoffs`` (with their digests), waiting for a replay with the same rows.
    They still load; the replay's commit copies the lost records from the log and aborts its
    own transactions, whatever rows they hold."""
    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    _crash_between_endtxns(sink, handoffs, faults)
    _fence(sink, 1)
    assert sink.log is not None
    old = handoffs[1]
    sink.log._write(sink.log._name(0, ".done"), {  # as written then
        "batch_id": 0, "lost": [f"{old.describe()}: PRODUCER_FENCED"], "done_at": 0.0,
        "lost_handoffs": [{**old.to_json(), "digest": "0123456789abcdef0123456789abcdef"}]})
    assert sink.log.get(0).state is State.LOST
    replay = [sink.task(0, vals("b0t0")), sink.task(1, vals("other", 9))]
    sink.driver.commit(0, replay, tasks=2)
    decision = sink.log.get(0)
    assert decision is not None and decision.state is State.DONE and not decision.lost
    assert_once_on_kafka(sink, Counter(vals("b0t0") + vals("b0t1")))


def test_a_replay_whose_aborts_are_not_confirmed_leaves_the_pool_to_be_fenced(
        sink: Harness, faults) -> None:
    """The replay's transactions of a committed batch are aborted; when an abort's
    answer never comes back, that transaction may still be open. Before, the pool stayed
    clean and the next planning did not fence it; now it is marked not clean."""
    assert sink.log is not None
    sink.driver.commit(0, [sink.task(p, vals(f"b0t{p}")) for p in range(2)], tasks=2)
    assert sink.log.pool().clean
    replay = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    with losing_endtxn_answers("abort", rounds=None):  # every abort's answer is lost
        sink.driver.commit(0, replay, tasks=2)
    assert not sink.log.pool().clean
    sink.driver.prepare(new_run=False)  # the next batch's planning fences the pool
    assert sink.log.pool().clean
    assert_once_on_kafka(sink, Counter(vals("b0t0") + vals("b0t1")))
