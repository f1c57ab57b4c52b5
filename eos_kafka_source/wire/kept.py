"""Connections kept from one use to the next in the same Python process.

Spark runs a streaming query's driver hooks and its tasks in Python workers it reuses
from batch to batch. A new wire per use pays its handshakes every time: bootstrap,
ApiVersions and metadata, then the same again for every extra connection a large commit
spreads its EndTxns over (about 50 at 1,000 tasks: a few hundred ms of a commit). A wire
whose last use ended cleanly is kept for the next use in the same process, for at most
:data:`KEEP_S` idle, well under the broker's ``connections.max.idle.ms`` (10 min by
default, after which the broker closes it); a connection closed meanwhile is noticed
before the next request. A wire whose use raised is closed: its connections may be dead
or hold unanswered requests. A wire whose SASL session (KIP-368 re-authentication,
``connections.max.reauth.ms``) ends within :data:`SESSION_REUSE_S` is closed too: the
broker closes a connection that sends a request on an expired session, and an idle wire
is not polled, so kafka-python's re-authentication may come too late. (Measured on Kafka
4.4, 2026-11-25: with this check disabled an idle wire past its session still recovered,
kafka-python reconnecting on its own; the check keeps that from being relied on.)

Runs on: the driver (planning and commit workers) and the executors (tasks).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from ..client.config import ClientConfig
from .connection import KafkaWire

#: Seconds a kept wire may sit unused before it is closed instead of reused.
KEEP_S = 60.0
#: Idle wires kept per configuration (a process may read and write the same cluster).
KEEP_PER_CONFIG = 2
#: A kept wire whose SASL session ends sooner than this (seconds) is not reused.
SESSION_REUSE_S = 5.0

_LOCK = threading.Lock()
#: Idle wires per client configuration, each with when it was given back; newest last.
_IDLE: dict[ClientConfig, list[tuple[KafkaWire, float]]] = {}


@contextlib.contextmanager
def kept_wire(config: ClientConfig) -> Iterator[KafkaWire]:
    """A wire for ``config`` (:func:`take`), given back after a clean use and closed after
    one that raised."""
    wire = take(config)
    try:
        yield wire
    except BaseException:
        wire.close()
        raise
    give_back(config, wire)


def take(config: ClientConfig) -> KafkaWire:
    """The newest idle wire for ``config`` if it is fresh, else a new one. Uses at the same
    time get different wires."""
    now = time.monotonic()
    with _LOCK:
        idle = _IDLE.pop(config, [])
        stale = [w for w, since in idle if now - since >= KEEP_S]
        fresh = [(w, since) for w, since in idle if now - since < KEEP_S]
        wire = fresh.pop()[0] if fresh else None
        if fresh:
            _IDLE[config] = fresh
    for old in stale:
        old.close()
    if wire is not None and wire.sessions_end_within(SESSION_REUSE_S):
        wire.close()
        wire = None
    if wire is None:
        return KafkaWire(config)
    wire.notice_closed()
    return wire


def give_back(config: ClientConfig, wire: KafkaWire) -> None:
    """Keep ``wire`` for the next :func:`take`; only after a clean use (no request left
    unanswered on it)."""
    with _LOCK:
        idle = _IDLE.setdefault(config, [])
        idle.append((wire, time.monotonic()))
        surplus = idle[:-KEEP_PER_CONFIG]
        del idle[:-KEEP_PER_CONFIG]
    for old, _ in surplus:
        old.close()


def close_kept() -> None:
    """Close every kept wire (tests; a worker about to exit needs nothing: the broker
    drops the connections)."""
    with _LOCK:
        idle = [w for entries in _IDLE.values() for w, _ in entries]
        _IDLE.clear()
    for wire in idle:
        wire.close()
