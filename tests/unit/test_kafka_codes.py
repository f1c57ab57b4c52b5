"""The one vocabulary for Kafka's error codes: what each answer asks of the client, as Kafka's
``TransactionManager.EndTxnHandler.handleResponse`` sorts them, and the exception classes
and retry helpers built from it."""

from __future__ import annotations

import pytest

from eos_kafka_source import errors
from eos_kafka_source.errors import ConnectionDroppedError, TimeoutError_, for_code
from eos_kafka_source.kafka_codes import FENCED, RETRIABLE, Action, Code, classify, name_of
from eos_kafka_source.wire.retry import action, retriable, should_refind
from eos_kafka_source.wire.txn import EndTxnOutcome

C = Code


@pytest.mark.parametrize(("code", "expected"), [
    (C.NONE, Action.DONE),
    # Kafka: reenqueue() without a lookup; the coordinator is right, busy or loading.
    (C.CONCURRENT_TRANSACTIONS, Action.RETRY),
    (C.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY),
    # Kafka: lookupCoordinator(); reenqueue(). Timeouts and network errors: the node may go.
    (C.NOT_COORDINATOR, Action.REFIND),
    (C.COORDINATOR_NOT_AVAILABLE, Action.REFIND),
    (C.REQUEST_TIMED_OUT, Action.REFIND),
    (C.NETWORK_EXCEPTION, Action.REFIND),
    # Refused for good: says nothing of an earlier attempt's outcome.
    (C.PRODUCER_FENCED, Action.REFUSED),
    (C.INVALID_PRODUCER_EPOCH, Action.REFUSED),
    (C.INVALID_TXN_STATE, Action.REFUSED),
    (C.INVALID_PRODUCER_ID_MAPPING, Action.REFUSED),
    # Any other retriable code is re-sent (Kafka re-enqueues a RetriableException).
    (C.NOT_ENOUGH_REPLICAS, Action.RETRY),
    (C.NOT_LEADER_OR_FOLLOWER, Action.RETRY),
    # Named, and no retry helps.
    (C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Action.FATAL),
    (C.INVALID_TRANSACTION_TIMEOUT, Action.FATAL),
    (C.UNKNOWN_PRODUCER_ID, Action.FATAL),
    (C.UNSUPPORTED_VERSION, Action.FATAL),
    (C.UNKNOWN_SERVER_ERROR, Action.FATAL),
    # Not named: Kafka's "Unhandled error in EndTxnResponse".
    (999, Action.UNKNOWN),
])
def test_every_answer_is_sorted_once(code: int, expected: Action) -> None:
    assert classify(code) is expected
    if code != C.NONE:
        error = for_code(code)("x")
        assert action(error) is expected
        assert retriable(error) is (expected in (Action.RETRY, Action.REFIND))
        assert should_refind(error) is (expected is Action.REFIND)
        assert EndTxnOutcome("t", False, error).action is expected
    else:
        assert EndTxnOutcome("t", True).action is Action.DONE


def test_a_lost_node_means_look_it_up_again() -> None:
    for error in (ConnectionDroppedError("x"), TimeoutError_("x")):
        assert action(error) is Action.REFIND and retriable(error) and should_refind(error)
        assert EndTxnOutcome("t", False, error).action is Action.REFIND
    assert action(ValueError("x")) is Action.FATAL


def test_exception_classes_are_built_from_the_codes() -> None:
    for code in Code:
        if code is Code.NONE:
            continue
        cls = for_code(code)
        assert (cls.code, cls.name, cls.retriable) == (code, code.name, code in RETRIABLE)
    assert issubclass(for_code(C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), errors.NotAuthorizedError)
    assert for_code(999).name == name_of(999) == "ERROR_999" and not for_code(999).retriable


def test_fenced_codes_mark_an_outcome_fenced() -> None:
    for code in Code:
        if code is not Code.NONE:
            assert EndTxnOutcome("t", False, for_code(code)("x")).fenced is (code in FENCED)
    assert not EndTxnOutcome("t", False, ConnectionDroppedError("x")).fenced
