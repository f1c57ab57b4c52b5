"""Every EndTxn, DescribeTransactions, InitProducerId and confirmation outcome of the driver,
per error code, without a broker: the committer (``finish``: ``_finish``/``_sort``), the
liveness check, the confirmation from the log and fencing an id, against the scripted fake
wire (tests/fakes/wire.py).

What Kafka itself does with these requests is pinned on a real broker in
tests/broker/test_sink_coordinator_failover.py and test_live_commit_confirmed.py; here is
what the driver makes of each answer.
"""

from __future__ import annotations

import pytest

from eos_kafka_source.errors import (
    ConnectionDroppedError,
    KafkaProtocolError,
    TimeoutError_,
    TransactionalIdAuthorizationFailedError,
)
from eos_kafka_source.kafka_codes import Code
from eos_kafka_source.sink.driver import confirming, txn_log
from eos_kafka_source.sink.driver.committer import finish, liveness
from eos_kafka_source.sink.driver.txn_log import LogOutcome
from eos_kafka_source.sink.recall import forget_all
from eos_kafka_source.wire.txn import init_producer_ids
from tests.fakes.wire import ABORTED, COMMITTED, ONGOING, Applied, FakeKafka

C = Code


@pytest.fixture
def kafka(monkeypatch) -> FakeKafka:
    fake = FakeKafka()
    monkeypatch.setattr(txn_log, "read_transaction", fake.read_transaction)
    forget_all()
    yield fake
    forget_all()


def _sorted(report) -> tuple[int, int, int]:
    return len(report.done), len(report.lost), len(report.unknown)


# -- EndTxn commit: one answer (then the cluster's own behaviour) -> the report ----------------

@pytest.mark.parametrize(("answers", "expected", "state"), [
    ((), "done", COMMITTED),
    # Retried in place, at the same coordinator.
    ((C.CONCURRENT_TRANSACTIONS,), "done", COMMITTED),
    ((C.COORDINATOR_LOAD_IN_PROGRESS, C.CONCURRENT_TRANSACTIONS), "done", COMMITTED),
    # Looked up again and asked again: the outcome was unknown.
    ((C.NOT_COORDINATOR,), "done", COMMITTED),
    ((C.COORDINATOR_NOT_AVAILABLE, C.COORDINATOR_NOT_AVAILABLE), "done", COMMITTED),
    ((C.REQUEST_TIMED_OUT,), "done", COMMITTED),
    ((C.NETWORK_EXCEPTION,), "done", COMMITTED),
    # The commit reached the log, the answer said otherwise: asked again, NONE.
    ((Applied(C.NOT_COORDINATOR),), "done", COMMITTED),
    ((Applied(C.COORDINATOR_NOT_AVAILABLE),), "done", COMMITTED),
    ((Applied(ConnectionDroppedError("lost")),), "done", COMMITTED),
    ((Applied(TimeoutError_("late")),), "done", COMMITTED),
    ((ConnectionDroppedError("lost"),), "done", COMMITTED),
    # Refused for good: the log decides (an earlier attempt committed: done).
    ((Applied(C.PRODUCER_FENCED),), "done", COMMITTED),
    ((Applied(C.INVALID_PRODUCER_ID_MAPPING),), "done", COMMITTED),
    ((Applied(C.INVALID_TXN_STATE),), "done", COMMITTED),
    ((Applied(C.INVALID_PRODUCER_EPOCH),), "done", COMMITTED),
])
def test_commit_answer(kafka: FakeKafka, answers, expected: str, state: str) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", *answers)
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=5)
    assert _sorted(report) == {"done": (1, 0, 0), "lost": (0, 1, 0), "unknown": (0, 0, 1)}[
        expected], report
    assert kafka.state(handoff) == state


@pytest.mark.parametrize(("log", "lost", "extra"), [
    (LogOutcome.COMMITTED, 0, set()),
    (LogOutcome.ABORTED, 1, set()),
    (LogOutcome.PARTIAL, 1, {"partly_committed"}),
    (LogOutcome.GONE, 1, {"uncertain"}),
])
def test_refused_commit_is_sorted_by_the_log(kafka: FakeKafka, log: LogOutcome, lost: int,
                                             extra: set[str]) -> None:
    """PRODUCER_FENCED says the request failed, not the transaction (invariant 9)."""
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", C.PRODUCER_FENCED)
    kafka.script("ReadLog", "t-0", log)
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=5)
    assert (len(report.done), len(report.lost), len(report.unknown)) == (1 - lost, lost, 0)
    assert bool(report.partly_committed) == ("partly_committed" in extra)
    assert bool(report.uncertain) == ("uncertain" in extra)


def test_refused_commit_without_a_marker_stays_unknown_to_the_deadline(kafka) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", *[C.PRODUCER_FENCED] * 50)
    kafka.script("ReadLog", "t-0", *[LogOutcome.UNKNOWN] * 50)
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=0.3)
    assert _sorted(report) == (0, 0, 1) and "PRODUCER_FENCED" in report.unknown[0][1]


def test_a_refused_commit_reads_an_unreadable_log_again(kafka: FakeKafka) -> None:
    """The log cannot be read at first (its leader just died), then answers COMMIT: read
    again in place (the shared unreadable-log retry), done, the EndTxn not sent again."""
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", Applied(C.PRODUCER_FENCED))
    kafka.script("ReadLog", "t-0", ConnectionDroppedError("leader gone"))
    wire = kafka.wire()
    report = finish(wire, [handoff], commit=True, deadline_s=5)
    assert _sorted(report) == (1, 0, 0)
    assert len(kafka.calls("EndTxn")) == 1
    assert wire.closed >= 1  # the next read looked the leaders up again


def test_a_refused_commit_whose_log_stays_unreadable_is_unknown(kafka: FakeKafka) -> None:
    """Never lost for a log that cannot be read: unknown at the deadline, saying why."""
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", *[Applied(C.PRODUCER_FENCED)] * 50)
    kafka.script("ReadLog", "t-0", *[ConnectionDroppedError("leader gone")] * 500)
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=0.3)
    assert _sorted(report) == (0, 0, 1)
    assert "PRODUCER_FENCED" in report.unknown[0][1] and "leader gone" in report.unknown[0][1]


def test_a_fenced_transaction_really_aborted_is_lost(kafka: FakeKafka) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.open_txn("t-0")  # a zombie's retry re-initialised the id
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=5)
    assert _sorted(report) == (0, 1, 0) and "PRODUCER_FENCED" in report.lost[0][1]


@pytest.mark.parametrize("code", [C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 999])
def test_an_answer_no_retry_helps_ends_the_retries_as_unknown(kafka, code) -> None:
    """Kafka's producer fails on these too; the decision is kept (unknown, never lost)."""
    handoffs = [kafka.open_txn("t-0"), kafka.open_txn("t-1")]
    kafka.script("EndTxn", "t-0", code)
    kafka.script("EndTxn", "t-1", C.NOT_COORDINATOR)
    report = finish(kafka.wire(), handoffs, commit=True, deadline_s=5)
    assert _sorted(report) == (0, 0, 2)
    assert kafka.calls("EndTxn") == [(1, "t-0"), (2, "t-1")]  # not asked again


def test_a_coordinator_that_stays_away_leaves_the_outcome_unknown(kafka) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", *[C.COORDINATOR_NOT_AVAILABLE] * 100)
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=0.3)
    assert _sorted(report) == (0, 0, 1) and "COORDINATOR_NOT_AVAILABLE" in report.unknown[0][1]
    assert kafka.state(handoff) == ONGOING


def test_a_coordinator_that_moved_is_looked_up_again(kafka: FakeKafka) -> None:
    handoffs = [kafka.open_txn(f"t-{i}") for i in range(4)]
    stale = {h.transactional_id: kafka.coordinators[h.transactional_id] for h in handoffs}
    kafka.move("t-1", 3)
    report = finish(kafka.wire(), handoffs, commit=True, deadline_s=5, coordinators=stale)
    assert _sorted(report) == (4, 0, 0)
    assert kafka.calls("FindCoordinator") == [(1, "t-1")]  # only the moved one


def test_dropped_connections_from_a_live_coordinator_are_a_rejection(kafka) -> None:
    """Tansu closes the connection on a stale epoch instead of answering: twice from a
    coordinator that answers FindCoordinator at once is refused, and the log decides."""
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", *[ConnectionDroppedError("closed")] * 5)
    kafka.script("ReadLog", "t-0", LogOutcome.ABORTED)
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=5)
    assert _sorted(report) == (0, 1, 0)
    assert len(kafka.calls("EndTxn")) == 2


def test_no_coordinator_authorisation_raises_before_anything_is_sent(kafka) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("FindCoordinator", "t-0", C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        finish(kafka.wire(), [handoff], commit=True, deadline_s=5)
    assert kafka.calls("EndTxn") == []


@pytest.mark.parametrize(("answers", "expected"), [
    ((), (1, 0, 0)),
    ((C.PRODUCER_FENCED,), (0, 1, 0)),  # an abort is not read from the log
    ((C.NOT_COORDINATOR, C.CONCURRENT_TRANSACTIONS), (1, 0, 0)),
])
def test_abort_answer(kafka: FakeKafka, answers, expected) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("EndTxn", "t-0", *answers)
    report = finish(kafka.wire(), [handoff], commit=False, deadline_s=5)
    assert _sorted(report) == expected
    assert kafka.state(handoff) == (ABORTED if not answers or expected[0] else ONGOING)


def test_commit_after_abort_is_refused_and_the_log_says_aborted(kafka: FakeKafka) -> None:
    handoff = kafka.open_txn("t-0")
    assert finish(kafka.wire(), [handoff], commit=False).ok
    report = finish(kafka.wire(), [handoff], commit=True, deadline_s=5)
    assert _sorted(report) == (0, 1, 0) and "INVALID_TXN_STATE" in report.lost[0][1]


# -- liveness: DescribeTransactions before the decision --------------------------------------

@pytest.mark.parametrize(("answers", "dead"), [
    ((), False),
    ((C.CONCURRENT_TRANSACTIONS,), False),
    ((C.COORDINATOR_LOAD_IN_PROGRESS,), False),
    ((C.NOT_COORDINATOR,), False),
    ((C.COORDINATOR_NOT_AVAILABLE, C.NOT_COORDINATOR), False),
    ((C.TRANSACTIONAL_ID_NOT_FOUND,), True),
    ((C.PRODUCER_FENCED,), True),
    ((C.INVALID_PRODUCER_ID_MAPPING,), True),
])
def test_liveness_answer(kafka: FakeKafka, answers, dead: bool) -> None:
    handoffs = [kafka.open_txn("t-0"), kafka.open_txn("t-1")]
    kafka.script("DescribeTransactions", "t-0", *answers)
    found = liveness(kafka.wire(), handoffs, deadline_s=5)
    assert [h.transactional_id for h, _ in found.dead] == (["t-0"] if dead else [])
    assert set(found.coordinators) == ({"t-1"} if dead else {"t-0", "t-1"})


def test_liveness_finds_a_transaction_fenced_since_its_hand_off(kafka: FakeKafka) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.open_txn("t-0")  # re-initialised: the hand-off's epoch is fenced
    found = liveness(kafka.wire(), [handoff], deadline_s=5)
    assert len(found.dead) == 1 and "no longer live" in found.dead[0][1]


def test_liveness_raises_when_coordinators_keep_moving(kafka: FakeKafka) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("DescribeTransactions", "t-0", *[C.NOT_COORDINATOR] * 100)
    with pytest.raises(TimeoutError_, match="nothing was committed"):
        liveness(kafka.wire(), [handoff], deadline_s=0.3)


# -- the confirmation: NONE is checked against the log -----------------------------------------

def _committed(kafka: FakeKafka, *handoffs):
    report = finish(kafka.wire(), list(handoffs), commit=True, deadline_s=5)
    assert report.ok
    return report


@pytest.mark.parametrize("aborted_index", [True, False])  # Kafka's Fetch | Tansu's markers
def test_confirmed_commit_stays_done(aborted_index: bool, monkeypatch) -> None:
    kafka = FakeKafka(aborted_index=aborted_index)
    monkeypatch.setattr(txn_log, "read_transaction", kafka.read_transaction)
    handoffs = [kafka.open_txn("t-0", [("out", 0), ("out", 1)]), kafka.open_txn("t-1")]
    report = _committed(kafka, *handoffs)
    confirming.confirm(kafka.wire(), report, deadline_s=5)
    assert _sorted(report) == (2, 0, 0)
    assert bool(kafka.calls("Fetch")) is aborted_index
    forget_all()


@pytest.mark.parametrize("aborted_index", [True, False])
@pytest.mark.parametrize(("aborted", "partly"), [
    ([("out", 0)], True),  # one of two partitions aborted by an operator
    ([("out", 0), ("out", 1)], False),
])
def test_an_abort_marker_behind_none_is_lost(aborted_index, aborted, partly,
                                             monkeypatch) -> None:
    kafka = FakeKafka(aborted_index=aborted_index)
    monkeypatch.setattr(txn_log, "read_transaction", kafka.read_transaction)
    handoff = kafka.open_txn("t-0", [("out", 0), ("out", 1)])
    for tp in aborted:
        kafka.abort_by_hand(handoff, tp)
    report = _committed(kafka, handoff)
    confirming.confirm(kafka.wire(), report, deadline_s=5)
    assert _sorted(report) == (0, 1, 0) and "but the log" in report.lost[0][1]
    assert bool(report.partly_committed) is partly
    forget_all()


def test_one_confirmation_sorts_every_kind_of_hand_off_in_its_place(kafka, monkeypatch) -> None:
    """A batch mixing a committed transaction, one a task ended without records (not open),
    one whose hand-off does not say where its records start (its markers are read), and one
    an operator aborted in one of its two partitions: each is sorted as it would be alone,
    and ``done`` keeps the batch's order."""
    from dataclasses import replace

    committed = kafka.open_txn("t-0", [("out", 0), ("out", 1)])
    empty = replace(kafka.open_txn("t-1"), open=False, partitions=(), first_offsets=())
    unplaced = kafka.open_txn("t-2", [("out", 0), ("out", 1)])
    aborted = kafka.open_txn("t-3", [("out", 0), ("out", 1)])
    kafka.abort_by_hand(aborted, ("out", 1))
    report = _committed(kafka, committed, unplaced, aborted)
    report.done = [committed, empty, replace(unplaced, first_offsets=()), aborted]
    read = []
    real = kafka.read_transaction

    def reading(wire, h, **kw):
        read.append(h.transactional_id)
        return real(wire, h, **kw)

    monkeypatch.setattr(txn_log, "read_transaction", reading)
    confirming.confirm(kafka.wire(), report, deadline_s=5)
    assert [h.transactional_id for h in report.done] == ["t-0", "t-1", "t-2"]
    assert [h.transactional_id for h, _ in report.lost] == ["t-3"]
    assert report.partly_committed == {"t-3"} and not report.unknown
    assert read == ["t-2"]  # only the hand-off that cannot say where its records are


def test_a_partition_that_answers_with_an_error_is_read_from_its_markers(kafka) -> None:
    handoff = kafka.open_txn("t-0", [("out", 0), ("out", 1)])
    report = _committed(kafka, handoff)
    kafka.script("Fetch", "out-1", C.NOT_LEADER_OR_FOLLOWER)
    kafka.script("ReadLog", "t-0", LogOutcome.COMMITTED)
    confirming.confirm(kafka.wire(), report, deadline_s=5)
    assert _sorted(report) == (1, 0, 0)


def test_a_failed_fetch_round_falls_back_to_the_markers(kafka: FakeKafka) -> None:
    handoff = kafka.open_txn("t-0")
    report = _committed(kafka, handoff)
    kafka.script("Fetch", "out-0", ConnectionDroppedError("leader gone"))
    confirming.confirm(kafka.wire(), report, deadline_s=5)
    assert _sorted(report) == (1, 0, 0)


def test_a_log_that_cannot_be_read_leaves_the_commit_unknown(kafka, monkeypatch) -> None:
    monkeypatch.setattr(confirming, "FAST_WAIT_S", 0.05)
    handoff = kafka.open_txn("t-0")
    report = _committed(kafka, handoff)
    kafka.script("Fetch", "out-0", ConnectionDroppedError("leader gone"))
    kafka.script("ReadLog", "t-0", *[ConnectionDroppedError("unreadable")] * 100)
    confirming.confirm(kafka.wire(), report, deadline_s=0.5)
    assert _sorted(report) == (0, 0, 1) and "EndTxn answered NONE" in report.unknown[0][1]


def test_a_marker_still_missing_is_unknown(kafka: FakeKafka, monkeypatch) -> None:
    monkeypatch.setattr(confirming, "FAST_WAIT_S", 0.05)
    handoff = kafka.open_txn("t-0")
    report = _committed(kafka, handoff)
    kafka.history[("t-0", handoff.epoch)].state = ONGOING  # its markers not written yet
    confirming.confirm(kafka.wire(), report, deadline_s=0.3)
    assert _sorted(report) == (0, 0, 1)


# -- InitProducerId: fencing an id (pool upkeep, recovery) ------------------------------------

@pytest.mark.parametrize(("answers", "refused"), [
    ((), None),
    ((C.NOT_COORDINATOR,), None),
    ((C.COORDINATOR_NOT_AVAILABLE, C.COORDINATOR_LOAD_IN_PROGRESS), None),
    ((C.CONCURRENT_TRANSACTIONS,), None),
    ((ConnectionDroppedError("lost"),), None),
    ((C.INVALID_TRANSACTION_TIMEOUT,), "transaction.max.timeout.ms"),
    ((C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,), "TRANSACTIONAL_ID"),
    ((C.PRODUCER_FENCED,), "PRODUCER_FENCED"),
])
def test_init_producer_id_answer(kafka: FakeKafka, answers, refused: str | None) -> None:
    handoff = kafka.open_txn("t-0")
    kafka.script("InitProducerId", "t-0", *answers)
    if refused:
        with pytest.raises(KafkaProtocolError, match=refused):
            init_producer_ids(kafka.wire(), None, ["t-0"], 60000, deadline_s=2)
        assert kafka.state(handoff) == ONGOING
        return
    got = init_producer_ids(kafka.wire(), None, ["t-0"], 60000, deadline_s=2)
    assert got["t-0"].epoch == handoff.epoch + 1
    assert kafka.state(handoff) == ABORTED  # the new epoch aborted the open transaction
