"""The EndTxn round's extra connections, opened while the commit writes its decision.

A commit of many transactions spreads its EndTxns over several connections per broker
(``wire/spread.py``). A kept wire (``wire/kept.py``) has them from a query's second batch
on; :func:`opening_lanes` opens them for the first one in the background while the driver
reads its log, checks liveness and writes the decision (benchmarks/scale/RESULTS.md). Only
connections are opened here, never a request of the protocol.
Runs on: the driver (commit worker).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from ...wire import KafkaWire, spread

log = logging.getLogger(__name__)


class Lanes:
    """The EndTxn round's extra connections, being opened (:func:`opening_lanes`)."""

    def __init__(self, pool: ThreadPoolExecutor | None, opening: list[Future[None]]) -> None:
        self._pool = pool
        self._opening = opening
        self._stop = threading.Event()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self) -> None:
        """Stop waiting for handshakes still under way and let every opening thread end:
        before the round, since a lane's connections must be one thread's. A connection
        not up yet is completed by the round that uses it, as it was before this existed,
        so a slow or paused broker holds the commit no longer than it did."""
        self._stop.set()
        for future in self._opening:
            future.result()
        self._opening = []
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


@contextlib.contextmanager
def opening_lanes(wire: KafkaWire, transactions: int) -> Iterator[Lanes]:
    """Open, in the background, the connections an EndTxn round of ``transactions`` will be
    spread over (:mod:`~eos_kafka_source.wire.spread`), while the caller reads its log,
    checks liveness and writes its decision; :meth:`Lanes.wait` (on exit at the latest)
    ends the opening.

    A kept wire (``wire/kept.py``) has them from the query's first batch on; the first batch
    opened them inside its EndTxn round: about 50 connections, each a bootstrap, metadata
    and one handshake per broker, for 1,000 transactions on three brokers
    (benchmarks/scale/RESULTS.md).
    Only connections are opened here; no request of the protocol is sent. The lanes are
    sized as :func:`~eos_kafka_source.wire.spread.lanes_for` will size them, from the
    brokers the wire knows (the coordinators are not looked up yet): transactions spread
    evenly over them.
    """
    brokers = sorted(b.node_id for b in wire.client.cluster.brokers()) if transactions else []
    per_broker = math.ceil(transactions / len(brokers)) if brokers else 0
    lanes = min(spread.MAX_LANES, math.ceil(per_broker / spread.REQUESTS_PER_LANE))
    siblings = [wire.sibling(k) for k in range(1, lanes)]
    pool = ThreadPoolExecutor(len(siblings), thread_name_prefix="eoskafka-open-lane") \
        if siblings else None
    opened = Lanes(pool, [])
    if pool is not None:
        opened._opening = [pool.submit(_connect, lane, brokers, opened) for lane in siblings]
    try:
        yield opened
    finally:
        opened.wait()


#: How often an opening thread looks whether it should stop waiting (seconds).
_OPEN_POLL_MS = 20


def _connect(lane: KafkaWire, brokers: list[int], lanes: Lanes) -> None:
    """Connect ``lane`` to every broker, until they are up or :meth:`Lanes.wait` is called;
    a failure is left to the round that uses the lane."""
    try:
        client = lane.client  # the lane's bootstrap, under its own deadline, as in the round
        for node in brokers:  # every handshake under way at once
            client.maybe_connect(node)
        while not lanes.stopping and not all(client.is_ready(n) for n in brokers):
            client.poll(timeout_ms=_OPEN_POLL_MS)
    except Exception:  # noqa: BLE001 - the EndTxn round reconnects and reports it
        log.debug("eoskafka: opening an EndTxn lane failed; the round retries it",
                  exc_info=True)
