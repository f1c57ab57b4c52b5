"""The one retry of an unreadable log (sink/driver/txn_log.py ``read_again``), used by the live
commit's confirmation, roll-forward and recovery: read again while the log cannot be read
now, the leaders looked up anew, until ``kafka.default.api.timeout.ms``; then the error."""

from __future__ import annotations

import time

import pytest

from eos_kafka_source.errors import TransactionOutcomeUnknownError
from eos_kafka_source.sink.driver.txn_log import read_again


class _Wire:
    def __init__(self, api_timeout_s: float) -> None:
        self.config = type("Config", (), {"api_timeout_s": api_timeout_s})()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def _flaky(failures: int) -> tuple[list[float], object]:
    calls: list[float] = []

    def read(left: float) -> str:
        calls.append(left)
        if len(calls) <= failures:
            raise TransactionOutcomeUnknownError("could not read the log: leader gone")
        return "read"

    return calls, read


def test_an_unreadable_log_is_read_again_with_fresh_leaders() -> None:
    wire = _Wire(api_timeout_s=30)
    calls, read = _flaky(2)
    assert read_again(wire, "t", read, deadline_s=30) == "read"  # type: ignore[arg-type]
    assert len(calls) == 3 and wire.closed == 2
    assert all(0 < left <= 30 for left in calls)


@pytest.mark.parametrize(("api_timeout_s", "deadline_s"), [(0.3, 30), (30, 0.3)])
def test_still_unreadable_past_the_api_timeout_or_the_deadline_raises(
        api_timeout_s: float, deadline_s: float) -> None:
    """Whichever ends first bounds the retries; the error is the read's own."""
    wire = _Wire(api_timeout_s)
    calls, read = _flaky(10**6)
    began = time.monotonic()
    with pytest.raises(TransactionOutcomeUnknownError, match="leader gone"):
        read_again(wire, "t", read, deadline_s=deadline_s)  # type: ignore[arg-type]
    assert 0.25 < time.monotonic() - began < 2.0 and len(calls) > 1


def test_other_errors_are_not_retried() -> None:
    wire = _Wire(30)

    def read(left: float) -> str:
        raise ValueError("a bug, not an unreadable log")

    with pytest.raises(ValueError):
        read_again(wire, "t", read, deadline_s=30)  # type: ignore[arg-type]
    assert wire.closed == 0
