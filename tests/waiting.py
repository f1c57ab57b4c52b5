"""Waiting for a condition the broker reaches on its own, with a deadline (never a bare sleep).

Apache Kafka answers EndTxn once the decision is in the transaction log and writes the
COMMIT/ABORT markers afterwards, asynchronously (TransactionMarkerChannelManager): a
reader right after EndTxn may still see the transaction open. Tests that look at markers
straight after ending a transaction wait for them with :func:`until`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Markers land within milliseconds on an idle broker; CI machines are not idle.
MARKER_DEADLINE_S = 30.0


def until(probe: Callable[[], T], done: Callable[[T], bool], *, what: str,
          timeout_s: float = MARKER_DEADLINE_S) -> T:
    """Call ``probe`` until ``done(result)``; the last result, or AssertionError naming
    ``what`` and the last result when the deadline passes."""
    deadline = time.monotonic() + timeout_s
    pause = 0.01
    while True:
        result = probe()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s:.0f}s; last: {result!r}")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
