"""Answers a sink's Python worker looked up before, kept for its next task or batch.

Coordinators and partition leaders are kept by the wire layer (``wire/known.py``); kept here
is what only the sink asks: the topic's ``max.message.bytes`` (DescribeConfigs), read by
``TaskWriter._batch_limit``. A topic whose ``max.message.bytes`` was lowered in the last
minute refuses a batch with RECORD_TOO_LARGE, as it would a Java producer's (which never
reads the setting).
Runs on: executors (the tasks' Python workers).
"""

from __future__ import annotations

from ..wire import known
from ..wire.known import KEEP_S, Known

__all__ = ["KEEP_S", "MAX_MESSAGE_BYTES", "forget_all"]

#: The topic's ``max.message.bytes`` per topic (``TaskWriter._batch_limit``).
MAX_MESSAGE_BYTES: Known[str, int] = Known()


def forget_all() -> None:
    """Tests: start from nothing kept, here and in the wire layer."""
    MAX_MESSAGE_BYTES.clear()
    known.forget_all()
