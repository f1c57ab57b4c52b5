"""Source and sink options: validated once at the edge into frozen objects.

Spark hands a data source its options as strings in a case-insensitive map
(keys arrive lower-cased in Python data sources). :meth:`SourceOptions.parse`
and :meth:`SinkOptions.parse` run on the driver, turn that map into typed,
frozen, picklable values, and raise :class:`ConfigError` naming the option, the
bad value and the fix, so nothing deeper has to re-check a string. Option names
and meanings follow Spark's Kafka source where one exists.

Rules chosen here, beyond Spark's:

* An unknown option is an error with a "did you mean" hint, never ignored.
  ``groupIdPrefix``, ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs``
  are accepted and ignored: Spark jobs set them and they mean nothing here.
  ``kafka.group.id`` on a streaming read names the group each committed batch's end
  offsets go to (advisory, for Kafka's lag tools); it is ignored on batch reads.
* An option that would have no effect is an error: trigger limits on a batch
  read, ending offsets on a stream, producer settings on a source, consumer
  settings on a sink, exactly-once settings with ``at_least_once`` delivery.
* ``startingTimestamp``, ``startingOffsetsByTimestamp`` and ``startingOffsets``
  follow Spark's precedence (in that order; the others are ignored with a
  warning); the same for the three ending options.
* ``kafka.isolation.level`` defaults to ``read_committed`` (Spark: uncommitted).

>>> opts = SourceOptions.parse({"kafka.bootstrap.servers": "b:9092",
...                             "subscribe": "t"}, streaming=True)
>>> opts.subscription.topics, opts.starting.kind
(('t',), 'latest')
"""

from __future__ import annotations

from ._common import (
    MAX_FETCH_BYTES,
    MAX_TRANSACTION_TIMEOUT_MS,
    SINK_OPTIONS,
    SOURCE_IGNORED,
    SOURCE_OPTIONS,
    parse_duration_ms,
)
from .sink import SinkOptions
from .source import SourceOptions, Subscription

__all__ = [
    "MAX_FETCH_BYTES", "MAX_TRANSACTION_TIMEOUT_MS", "SINK_OPTIONS", "SOURCE_IGNORED",
    "SOURCE_OPTIONS", "SinkOptions", "SourceOptions", "Subscription", "parse_duration_ms",
]
