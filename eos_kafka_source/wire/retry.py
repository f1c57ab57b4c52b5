"""Retrying coordinator requests: one deadline, and the coordinator looked up again when it moved.

Coordinators move (a broker restarts, the leader of a ``__transaction_state`` or
``__consumer_offsets`` partition changes). Kafka says so with NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, or the connection to the old
one drops; the Java client then runs FindCoordinator again and re-sends
(``TransactionManager.lookupCoordinator``). :func:`with_coordinators` does that for any
request keyed by a transactional id or a group, under one deadline for every step
(it lives in :mod:`.coordinated`, above :mod:`.cluster`, which this module serves).
"""

from __future__ import annotations

import time

from ..errors import ConnectionDroppedError, KafkaProtocolError, TimeoutError_
from ..kafka_codes import LEADER_MOVED, Action, classify
from .connection import KafkaWire

__all__ = ["LEADER_MOVED", "LOST_NODE", "Deadline", "action", "retriable", "should_refind"]

#: A dropped connection or an unanswered request: the node may be gone; look it up again.
LOST_NODE = (ConnectionDroppedError, TimeoutError_)
TRANSACTION, GROUP = 1, 0  # FindCoordinator key types


class Deadline:
    """One time budget shared by every step (and retry) of an operation."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self._retries = 0

    @classmethod
    def of(cls, deadline: Deadline | float | None, wire: KafkaWire | None = None) -> Deadline:
        """``deadline`` as a Deadline; None is the operation deadline of ``wire``'s client,
        ``kafka.default.api.timeout.ms`` (60 s, as the Java client)."""
        if isinstance(deadline, Deadline):
            return deadline
        if deadline is None:
            deadline = wire.config.api_timeout_s if wire is not None else 60.0
        return cls(deadline)

    def left(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def backoff(self, attempt: int) -> None:
        """Sleep before retry ``attempt`` (0, 1, …): 50 ms doubling to 1 s, never past the end."""
        time.sleep(min(backoff_s(attempt), self.left()))

    def pause(self) -> bool:
        """Before the operation's next retry: sleep on the schedule of :meth:`backoff`, counting
        this deadline's retries, and return True; False, without sleeping, once the deadline
        has passed (give up). The one retry loop of eoskafka's Kafka requests::

            deadline = Deadline(30.0)
            while not done():
                if not deadline.pause():
                    raise TimeoutError_("...")
        """
        if self.expired:
            return False
        self.backoff(self._retries)
        self._retries += 1
        return True


def backoff_s(attempt: int) -> float:
    """The pause before retry ``attempt``, like the Java client's retry.backoff(.max).ms."""
    return min(0.05 * (2 ** min(attempt, 5)), 1.0)


def action(error: BaseException) -> Action:
    """What ``error`` asks for (:func:`..kafka_codes.classify`); a lost node: look it up
    again. Anything else is no answer of Kafka's: fatal."""
    if isinstance(error, KafkaProtocolError):
        return classify(error.code)
    return Action.REFIND if isinstance(error, LOST_NODE) else Action.FATAL


def should_refind(error: BaseException) -> bool:
    """Whether ``error`` means the coordinator may have moved (so FindCoordinator again)."""
    return action(error) is Action.REFIND


def retriable(error: BaseException) -> bool:
    """Whether re-sending can help: a retriable Kafka code or a lost node."""
    return action(error) in (Action.RETRY, Action.REFIND)
