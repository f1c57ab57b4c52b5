"""Many independent requests spread over several connections to each broker, sent at once.

A Kafka broker reads one request per connection at a time: it mutes the connection
until the answer to the request in hand is sent. Pipelining on one connection saves
round trips but not that wait, and for requests that append to a replicated log
(EndTxn writes PrepareCommit to ``__transaction_state`` and answers once its followers
have it; InitProducerId writes the new epoch) the wait is the replication: N such
requests on one connection take N replication waits, one after the other. Spread over L
connections to each broker, L of them are in the broker at once and their appends are
replicated together.

``KafkaNetClient`` keeps one connection per broker, so each extra lane is a sibling
:class:`~.connection.KafkaWire` (same settings, its own connections, made on first use and
closed with the wire), driven by its own thread; lane 0 is the wire itself. Few requests
per broker stay on one lane: another connection costs a handshake (ApiVersions, and SASL
or TLS when configured).

Runs on: the driver (commits, aborts, fencing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import (
    AuthenticationError,
    BrokerUnreachableError,
    ConnectionDroppedError,
    TimeoutError_,
)
from .connection import KafkaWire

#: Requests to one broker that make another connection to it worth its set-up.
REQUESTS_PER_LANE = 8
#: Connections to each broker at most. 48 lets 1,000 transactions over three brokers go at
#: 8 a connection: measured on a 3-node Kafka 4.4 (benchmarks/scale/RESULTS.md, 2026-11-29),
#: the bare EndTxn round of 1,000 took a median 611 ms over 48 connections per broker
#: against 851 ms over 16, in the same run; a batch of few tasks opens few.
MAX_LANES = 48

#: What a lane whose connection failed gives for each of its calls (an instance, not raised).
LaneError = ConnectionDroppedError | TimeoutError_


def lanes_for(calls: Sequence[tuple[int, Any]], max_lanes: int | None = None) -> int:
    """How many connections per broker ``calls`` are spread over (at most ``max_lanes``,
    default :data:`MAX_LANES`)."""
    per_node: dict[int, int] = {}
    for node, _ in calls:
        per_node[node] = per_node.get(node, 0) + 1
    busiest = max(per_node.values(), default=0)
    return max(1, min(max_lanes or MAX_LANES, math.ceil(busiest / REQUESTS_PER_LANE)))


def request_spread(
    wire: KafkaWire, calls: Sequence[tuple[int, Any]], what: str,
    timeout_ms: int | None = None, *, max_lanes: int | None = None,
) -> list[Any]:
    """Send ``calls`` (node, request) over :func:`lanes_for` connections per broker at once.

    Returns the responses in order. A lane whose connection dropped, timed out or could not
    be opened gives that error (a :data:`LaneError` instance, not raised) for each of its
    calls, and its connections are closed (the next request reconnects); the other lanes'
    answers stand. Which calls share a lane: a broker's calls in turn over the lanes.
    """
    if not calls:
        return []
    lanes = lanes_for(calls, max_lanes)
    members: list[list[int]] = [[] for _ in range(lanes)]
    turn: dict[int, int] = {}
    for index, (node, _) in enumerate(calls):
        lane = turn.get(node, 0)
        turn[node] = lane + 1
        members[lane % lanes].append(index)
    wires = [wire, *(wire.sibling(k) for k in range(1, lanes))]

    def run(lane: int) -> list[Any]:
        mine = members[lane]
        lane_wire = wires[lane]
        try:
            return lane_wire.request_many([calls[i] for i in mine], what, timeout_ms)
        except (ConnectionDroppedError, TimeoutError_) as exc:
            lane_wire.reconnect()
            return [exc] * len(mine)
        except AuthenticationError:
            raise
        except BrokerUnreachableError as exc:  # a sibling could not open its connection
            lane_wire.reconnect()
            return [ConnectionDroppedError(f"{what}: {exc.message}")] * len(mine)

    if lanes == 1:
        answers = [run(0)]
    else:
        with ThreadPoolExecutor(lanes - 1, thread_name_prefix="eoskafka-lane") as pool:
            others = [pool.submit(run, lane) for lane in range(1, lanes)]
            answers = [run(0), *(f.result() for f in others)]
    out: list[Any] = [None] * len(calls)
    for mine, got in zip(members, answers, strict=True):
        for index, answer in zip(mine, got, strict=True):
            out[index] = answer
    return out


def lane_errors(answers: Sequence[Any]) -> list[LaneError | None]:
    """Per answer of :func:`request_spread`, its lane's error or None."""
    return [a if isinstance(a, (ConnectionDroppedError, TimeoutError_)) else None
            for a in answers]
