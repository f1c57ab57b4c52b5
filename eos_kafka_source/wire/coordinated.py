"""Requests keyed by a transactional id or a group, sent to its coordinator and re-sent,
under one deadline, when the coordinator moved (see :mod:`.retry` for the codes).

Above :mod:`.cluster` (it looks coordinators up) and :mod:`.retry` (deadlines, codes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from ..errors import KafkaProtocolError
from .cluster import find_coordinators
from .connection import KafkaWire
from .retry import LOST_NODE, TRANSACTION, Deadline, retriable, should_refind

T = TypeVar("T")

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
    deadline = Deadline.of(deadline, wire)
    where = {k: v for k, v in (nodes or {}).items() if k in keys}
    out: dict[str, T | BaseException] = {}
    pending = list(dict.fromkeys(keys))
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
                deadline.pause()
                continue
        try:
            answers = list(send([(k, where[k]) for k in pending]))
        except LOST_NODE as exc:
            answers = [exc] * len(pending)
            _forget_connections(wire, {where[k] for k in pending})
        retry = []
        for key, answer in zip(pending, answers, strict=True):
            if isinstance(answer, BaseException) and should_refind(answer):
                wire.forget_coordinator(key, key_type)
            elif not isinstance(answer, BaseException):
                wire.learn_coordinator(key, where[key], key_type)
            if isinstance(answer, BaseException) and retriable(answer) and not deadline.expired:
                retry.append(key)
                if should_refind(answer):
                    where.pop(key, None)
            else:
                out[key] = answer
        if retry:
            deadline.pause()
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
