"""Phase timings for benchmarks, shared by the source and the sink: inert unless asked for.

``EOSKAFKA_TIMINGS=/path/file.jsonl`` makes the timed steps append one JSON line each
(wall-clock end, seconds per phase) to that file: the sink's streamWriter() planning,
commit and prepare, the source's ``latestOffset``, ``partitions`` and each task's read.
``benchmarks/latency`` reads them to split a micro-batch into its phases. Unset (the
default), a phase mark is one attribute test and a clock read: nothing is written. Lines
are appended whole (one ``write`` of a line opened with O_APPEND), so every worker, driver
side and executor, can share the file. Imports nothing of the package: any layer may time
itself.

>>> t = Phases("commit")            # doctest: +SKIP
>>> with t.step("decision"): ...   # doctest: +SKIP
>>> ...; t.mark("endtxn"); t.write(batch=7)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENV = "EOSKAFKA_TIMINGS"


class Phases:
    """Seconds spent between successive :meth:`mark` calls, by phase name."""

    def __init__(self, kind: str) -> None:
        self.path = os.environ.get(ENV) or None
        self.kind = kind
        #: Kept even when nothing is written: DriverProtocol.last_phases (benchmarks/scale.py).
        self.seconds: dict[str, float] = {}
        self.started = self.last = time.perf_counter()

    def mark(self, phase: str) -> None:
        """The time since the previous mark (or the start) was spent in ``phase``."""
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now

    @contextmanager
    def step(self, phase: str) -> Iterator[None]:
        """The time since the previous mark, and the ``with`` block's, is ``phase``'s
        (counted even when the block raises: a failed step's time is still spent)."""
        try:
            yield
        finally:
            self.mark(phase)

    def total_s(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.started

    def write(self, **extra: Any) -> None:
        if self.path is None:
            return
        line = {"kind": self.kind, "end": time.time(), "pid": os.getpid(),
                "total": time.perf_counter() - self.started, "phases": self.seconds, **extra}
        data = (json.dumps(line) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
