"""Retrying coordinator requests: one deadline, and the coordinator looked up again when it moved.

Coordinators move (a broker restarts, the leader of a ``__transaction_state`` or
``__consumer_offsets`` partition changes). Kafka says so with NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, or the connection to the old
one drops; the Java client then runs FindCoordinator again and re-sends
(``TransactionManager.lookupCoordinator``). :func:`with_coordinators` does that for any
request keyed by a transactional id or a group, under one deadline for every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from ..errors import ConnectionDroppedError, KafkaProtocolError, TimeoutError_
from .connection import KafkaWire

T = TypeVar("T")

#: Codes that mean "ask FindCoordinator again" (LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR).
COORDINATOR_MOVED = frozenset({14, 15, 16})
#: Codes that mean "ask Metadata for the partition's leader again" (LEADER_NOT_AVAILABLE,
#: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH): planning and reading.
LEADER_MOVED = frozenset({5, 6, 74, 75})
#: A dropped connection or an unanswered request: the node may be gone; look it up again.
LOST_NODE = (ConnectionDroppedError, TimeoutError_)
TRANSACTION, GROUP = 1, 0  # FindCoordinator key types


class Deadline:
    """One time budget shared by every step (and retry) of an operation."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

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


def backoff_s(attempt: int) -> float:
    """The pause before retry ``attempt``, like the Java client's retry.backoff(.max).ms."""
    return min(0.05 * (2 ** min(attempt, 5)), 1.0)


def should_refind(error: BaseException) -> bool:
    """Whether ``error`` means the coordinator may have moved (so FindCoordinator again)."""
    if isinstance(error, KafkaProtocolError):
        return error.code in COORDINATOR_MOVED
    return isinstance(error, LOST_NODE)


def retriable(error: BaseException) -> bool:
    """Whether re-sending can help: a retriable Kafka code or a lost node."""
    if isinstance(error, KafkaProtocolError):
        return error.retriable
    return isinstance(error, LOST_NODE)


#: ``send(calls)`` sends one request per (key, node) and returns, per key in order, its result
#: or the error it got (an exception instance, not raised); it may raise a LOST_NODE error
#: for the whole round.
SendMany = Callable[[Sequence[tuple[str, int]]], Sequence["T | BaseException"]]


def with_coordinators(
    wire: KafkaWire,
    keys: Sequence[str],
    send: SendMany[T],
    *,
    deadline: Deadline | float | None,
    key_type: int = TRANSACTION,
    nodes: Mapping[str, int] | None = None,
    find: Callable[[Sequence[str], Deadline], dict[str, int]] | None = None,
) -> tuple[dict[str, T | BaseException], dict[str, int]]:
    """Send a request per key to its coordinator; retry what is retriable until ``deadline``.

    ``nodes`` are known coordinators (looked up for the other keys). A key whose answer says
    the coordinator moved, or whose round lost its connection, gets FindCoordinator again; other
    retriable codes (CONCURRENT_TRANSACTIONS) are re-sent to the same node. Returns each key's
    final result or error (not raised: the caller sorts them), and the coordinators last used.

    >>> results, where = with_coordinators(wire, ["tid"], send, deadline=30)  # doctest: +SKIP
    """
    from .cluster import find_coordinators  # cluster imports this module

    deadline = Deadline.of(deadline, wire)
    where = {k: v for k, v in (nodes or {}).items() if k in keys}
    out: dict[str, T | BaseException] = {}
    pending = list(dict.fromkeys(keys))
    attempt = 0
    while pending:
        missing = [k for k in pending if k not in where]
        if missing:
            try:
                where.update(find(missing, deadline) if find is not None else
                             find_coordinators(wire, missing, key_type, deadline=deadline))
            except (KafkaProtocolError, *LOST_NODE) as exc:
                if not retriable(exc) or deadline.expired:
                    out.update({k: exc for k in missing})
                    pending = [k for k in pending if k not in missing]
                    continue
                deadline.backoff(attempt)
                attempt += 1
                continue
        try:
            answers = list(send([(k, where[k]) for k in pending]))
        except LOST_NODE as exc:
            answers = [exc] * len(pending)
            _forget_connections(wire, {where[k] for k in pending})
        retry = []
        for key, answer in zip(pending, answers, strict=True):
            if isinstance(answer, BaseException) and retriable(answer) and not deadline.expired:
                retry.append(key)
                if should_refind(answer):
                    where.pop(key, None)
            else:
                out[key] = answer
        if retry:
            deadline.backoff(attempt)
            attempt += 1
        pending = retry
    return out, where


def with_coordinator(
    wire: KafkaWire,
    key: str,
    send: Callable[[int], T],
    *,
    deadline: Deadline | float | None,
    key_type: int = TRANSACTION,
    node: int | None = None,
) -> tuple[T, int]:
    """:func:`with_coordinators` for one key: ``send(node)`` returns the result or raises.

    Returns (result, coordinator used); raises the last error once it is not retriable or
    the deadline has passed.
    """

    def send_one(calls: Sequence[tuple[str, int]]) -> list[T | BaseException]:
        ((_, target),) = calls
        try:
            return [send(target)]
        except KafkaProtocolError as exc:
            return [exc]

    results, where = with_coordinators(
        wire, [key], send_one, deadline=deadline, key_type=key_type,
        nodes=None if node is None else {key: node})
    result = results[key]
    if isinstance(result, BaseException):
        raise result
    return result, where[key]


def _forget_connections(wire: KafkaWire, nodes: set[int]) -> None:
    """Close connections a round lost, so that the next send reconnects (or fails) at once."""
    drop = getattr(wire, "drop_connection", None)
    if drop is not None:
        for node in nodes:
            drop(node)
