"""The one vocabulary for Kafka's error codes: what each answer asks of the client, as Kafka's
``TransactionManager.EndTxnHandler.handleResponse`` sorts them, the exception classes and
retry helpers built from it, and the one retry schedule (``Deadline.pause``)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from eos_kafka_source import errors
from eos_kafka_source.errors import ConnectionDroppedError, TimeoutError_, for_code
from eos_kafka_source.kafka_codes import FENCED, RETRIABLE, Action, Code, classify, name_of
from eos_kafka_source.wire import retry as retry_module
from eos_kafka_source.wire.retry import Deadline, action, retriable, should_refind
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


PACKAGE = Path(__file__).resolve().parents[2] / "eos_kafka_source"
#: Modules that sleep for something other than retrying a Kafka request: the schedule itself,
#: test fault points, waiting for a process to stop or a development registry to start, the
#: decision store's lock, the schema registry's HTTP retries.
_SLEEPERS = {"wire/retry.py", "faults.py", "processes.py", "apicurio.py",
             "sink/decisions/files.py", "formats/registry_http.py"}


#: Modules whose codes are HTTP statuses (a token endpoint, the schema registry), not Kafka's.
_HTTP = {"wire/oauth.py", "formats/registry_http.py", "formats/registry.py"}


def test_no_bare_kafka_error_code_in_the_package() -> None:
    bare = re.compile(r"(\bcode\b|error_code)\s*(==|!=|in|not in)\s*[({]?\s*-?\d|for_code\(-?\d")
    found = [f"{path.relative_to(PACKAGE)}: {line.strip()}"
             for path in PACKAGE.rglob("*.py") if str(path.relative_to(PACKAGE)) not in _HTTP
             for line in path.read_text().splitlines() if bare.search(line)]
    assert found == [], "name the code (kafka_codes.Code): " + "; ".join(found)


def test_every_retry_sleeps_through_the_one_schedule() -> None:
    """client/table.py tells users retries back off 50 ms doubling to 1 s: Deadline.pause."""
    found = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if "time.sleep(" in path.read_text()]
    assert set(found) == _SLEEPERS


def test_pause_follows_the_schedule_and_stops_at_the_deadline(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(retry_module.time, "sleep", slept.append)
    deadline = Deadline(30.0)
    assert all(deadline.pause() for _ in range(7))
    assert [round(s, 3) for s in slept] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    deadline.at = time.monotonic() - 1
    assert not deadline.pause() and len(slept) == 7
