"""``DriverProtocol.commit``, its replay of a decided batch and ``abort``, per EndTxn outcome,
without a broker: the scripted fake wire (tests/fakes/wire.py) and a decision log in a
temporary directory. What each ends as: the batch done, its decision kept for a
roll-forward (unknown), or the error the user sees, and what became of each transaction.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from eos_kafka_source.errors import (
    ConnectionDroppedError,
    TransactionOutcomeUnknownError,
)
from eos_kafka_source.kafka_codes import Code
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.decisions.states import State
from eos_kafka_source.sink.driver import txn_log
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.naming import TransactionalIdFactory
from eos_kafka_source.sink.recall import forget_all
from tests.fakes.wire import ABORTED, COMMITTED, ONGOING, Applied, FakeKafka

C = Code
LINEAGE = "query-0"


class Sink:
    """A driver over the fake cluster, its decision log, and the tasks' hand-offs."""

    def __init__(self, kafka: FakeKafka, tmp_path: Path, timeout_ms: int = 1000) -> None:
        self.kafka = kafka
        self.ids = TransactionalIdFactory("p")
        self.log = DecisionLog(str(tmp_path / "log"), LINEAGE)
        self.driver = DriverProtocol(self.ids, self.log, self.wire, owner="owner",
                                     transaction_timeout_ms=timeout_ms, lineage=LINEAGE)
        self.driver.commit_deadline_s = 1.0

    @contextmanager
    def wire(self):  # noqa: ANN201
        with self.kafka.wire() as wire:
            yield wire

    def tasks(self, n: int, batch: int = 0, first: int = 0) -> list:
        """``n`` tasks' open transactions, on ids ``first``, ``first + 1``..."""
        return [self.kafka.open_txn(self.ids.for_task(first + p), [("out", p)], batch=batch)
                for p in range(n)]


@pytest.fixture
def sink(tmp_path: Path, monkeypatch) -> Sink:
    kafka = FakeKafka()
    monkeypatch.setattr(txn_log, "read_transaction", kafka.read_transaction)
    forget_all()
    made = Sink(kafka, tmp_path)
    made.driver.prepare(new_run=True)
    yield made
    forget_all()


@pytest.mark.parametrize("answers", [
    (),
    (C.NOT_COORDINATOR,),
    (Applied(C.NOT_COORDINATOR),),
    (C.CONCURRENT_TRANSACTIONS, C.COORDINATOR_LOAD_IN_PROGRESS),
    (Applied(ConnectionDroppedError("lost")),),
    (Applied(C.PRODUCER_FENCED),),  # an earlier attempt committed: the log says so
])
def test_commit_ends_done(sink: Sink, answers) -> None:
    handoffs = sink.tasks(2)
    sink.kafka.script("EndTxn", handoffs[1].transactional_id, *answers)
    report = sink.driver.commit(0, handoffs, tasks=2)
    assert len(report.done) == 2 and report.ok
    assert sink.log.get(0).state is State.DONE
    assert [sink.kafka.state(h) for h in handoffs] == [COMMITTED, COMMITTED]


def test_an_unknown_outcome_keeps_the_decision(sink: Sink) -> None:
    handoffs = sink.tasks(2)
    sink.kafka.script("EndTxn", handoffs[1].transactional_id,
                      *[C.COORDINATOR_NOT_AVAILABLE] * 200)
    with pytest.raises(TransactionOutcomeUnknownError, match="decision is kept"):
        sink.driver.commit(0, handoffs, tasks=2)
    decision = sink.log.get(0)
    assert decision.state is not State.VOID and not decision.done
    assert [sink.kafka.state(h) for h in handoffs] == [COMMITTED, ONGOING]
    sink.kafka.heal(handoffs[1].transactional_id)
    sink.driver.prepare(new_run=False)  # the restarted query rolls it forward
    assert sink.log.get(0).done and sink.kafka.state(handoffs[1]) == COMMITTED


def test_a_transaction_dead_before_the_decision_fails_the_batch_with_nothing_committed(
        sink: Sink) -> None:
    handoffs = sink.tasks(2)
    sink.kafka.script("DescribeTransactions", handoffs[1].transactional_id,
                      C.TRANSACTIONAL_ID_NOT_FOUND)
    with pytest.raises(Exception, match="no longer live"):
        sink.driver.commit(0, handoffs, tasks=2)
    assert sink.log.get(0) is None
    assert sink.kafka.calls("EndTxn") == []


@pytest.mark.parametrize(("answers", "clean"), [
    ((), True),
    ((C.NOT_COORDINATOR,), True),
    ((C.COORDINATOR_NOT_AVAILABLE,) * 200, False),  # not confirmed: the pool is fenced next
])
def test_a_replay_of_a_committed_batch_aborts_its_new_transactions(sink: Sink, answers,
                                                                  clean: bool) -> None:
    first = sink.tasks(2)
    sink.driver.commit(0, first, tasks=2)
    replay = sink.tasks(2)
    sink.kafka.script("EndTxn", replay[0].transactional_id, *answers)
    report = sink.driver.commit(0, replay, tasks=2)
    assert report.done == [] and sink.log.get(0).done
    assert sink.kafka.state(replay[1]) == ABORTED
    assert sink.kafka.state(replay[0]) == (ABORTED if clean else ONGOING)
    assert sink.log.pool().clean is clean


def test_a_replay_of_an_unfinished_decision_finishes_it_first(sink: Sink) -> None:
    first = sink.tasks(2)
    sink.kafka.script("EndTxn", first[1].transactional_id, *[C.COORDINATOR_NOT_AVAILABLE] * 200)
    with pytest.raises(TransactionOutcomeUnknownError):
        sink.driver.commit(0, first, tasks=2)
    replay = sink.tasks(2, first=2)  # Spark replays the batch, on other ids
    sink.kafka.heal(first[1].transactional_id)  # the coordinator is back
    sink.driver.commit(0, replay, tasks=2)
    assert [sink.kafka.state(h) for h in first] == [COMMITTED, COMMITTED]
    assert [sink.kafka.state(h) for h in replay] == [ABORTED, ABORTED]


@pytest.mark.parametrize(("answers", "state"), [
    ((), ABORTED),
    ((C.NOT_COORDINATOR,), ABORTED),
    ((C.CONCURRENT_TRANSACTIONS,), ABORTED),
])
def test_abort_of_an_undecided_batch(sink: Sink, answers, state: str) -> None:
    handoffs = sink.tasks(2)
    sink.kafka.script("EndTxn", handoffs[0].transactional_id, *answers)
    sink.driver.abort(0, handoffs, tasks=2)
    assert [sink.kafka.state(h) for h in handoffs] == [state, ABORTED]
    assert sink.log.get(0) is None


def test_abort_after_an_unknown_commit_leaves_the_decision(sink: Sink) -> None:
    """Spark's abort() after commit() raised: a decided batch is finished, never aborted."""
    handoffs = sink.tasks(2)
    sink.kafka.script("EndTxn", handoffs[1].transactional_id,
                      *[C.COORDINATOR_NOT_AVAILABLE] * 200)
    with pytest.raises(TransactionOutcomeUnknownError):
        sink.driver.commit(0, handoffs, tasks=2)
    sink.kafka.heal(handoffs[1].transactional_id)
    sink.driver.abort(0, handoffs, tasks=2)
    assert [sink.kafka.state(h) for h in handoffs] == [COMMITTED, COMMITTED]
    assert sink.log.get(0).done


@pytest.mark.parametrize("fails", [False, True])
def test_no_garbage_collection_inside_a_commit(sink: Sink, monkeypatch, fails: bool) -> None:
    """A large commit is a burst of short-lived objects: the cyclic collector is paused for
    its length (a collection of the worker's heap landed anywhere in it, the EndTxn round
    included), and left as it was after it, whether the commit ends well or raises."""
    import gc

    from eos_kafka_source.sink.driver import protocol

    seen = []
    real = protocol.finish

    def finishing(*args, **kwargs):
        seen.append(gc.isenabled())
        if fails:
            raise ConnectionDroppedError("scripted")
        return real(*args, **kwargs)

    monkeypatch.setattr(protocol, "finish", finishing)
    handoffs = sink.tasks(2)
    assert gc.isenabled()
    if fails:
        with pytest.raises(ConnectionDroppedError):
            sink.driver.commit(0, handoffs, tasks=2)
        sink.driver.abort(0, handoffs, tasks=2)
    else:
        assert sink.driver.commit(0, handoffs, tasks=2).ok
    assert seen == [False] and gc.isenabled()
    monkeypatch.setattr(protocol, "finish", real)
    gc.disable()
    try:  # a caller that paused it itself finds it paused still
        sink.driver.commit(1, sink.tasks(2, batch=1, first=2), tasks=2)
        assert not gc.isenabled()
    finally:
        gc.enable()
