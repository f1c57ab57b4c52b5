"""eoskafka's INFO lines on stderr, beside Spark's, when ``EOSKAFKA_LOG_LEVEL`` asks for them.

Spark runs a Python data source's driver-side calls (the sink's commit, the source's
planning) in Python processes its JVM starts, and the tasks in Python workers: none of
them configures Python's logging, so only WARNING and above reach stderr (Python's
last-resort handler) and INFO lines such as ``eoskafka: batch N committed ...`` are
dropped. With ``EOSKAFKA_LOG_LEVEL=INFO`` (or DEBUG, WARNING, ERROR) in a process's
environment, the ``eos_kafka_source`` logger takes that level and writes to the process's
stderr, which Spark's JVM copies into its own stderr: the driver's console or log file (the
driver's environment reaches the processes its JVM starts; executors take
``spark.executorEnv.EOSKAFKA_LOG_LEVEL``). Lines look like Spark's console lines:
``26/11/28 17:20:01 INFO eos_kafka_source.sink: eoskafka: batch 3 committed ...``.
Runs on: every process that imports the package (set up once, at import).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

ENV = "EOSKAFKA_LOG_LEVEL"
LOGGER = "eos_kafka_source"
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """The process's own stderr, not whatever ``sys.stderr`` is while a record is written
    (Spark swaps it while it captures a worker's output)."""

    def __init__(self) -> None:
        super().__init__(sys.__stderr__)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s",
                                            datefmt="%y/%m/%d %H:%M:%S"))


def configure(environ: Mapping[str, str] = os.environ) -> None:
    """Apply ``EOSKAFKA_LOG_LEVEL`` if set; idempotent. A value that is not a level is
    reported on stderr and ignored (an import must not fail over a log setting)."""
    wanted = environ.get(ENV, "").strip().upper()
    if not wanted:
        return
    if wanted not in _LEVELS:
        (sys.__stderr__ or sys.stderr).write(f"eoskafka: {ENV}={environ[ENV]!r} is not one of "
                             f"{', '.join(_LEVELS)}; ignored\n")
        return
    logger = logging.getLogger(LOGGER)
    logger.setLevel(wanted)
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        logger.addHandler(_Stderr())
    logger.propagate = False  # one copy of each line, whatever the root logger has
