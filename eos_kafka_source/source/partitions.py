"""The input partitions: one offset range of one Kafka partition, or several packed together.

Created on the driver by the planner, pickled by Spark and unpickled on an
executor, where :func:`~eos_kafka_source.source.partition_reader.read_partition`
reads it. It must stay picklable: plain values only (the client settings are a
frozen :class:`~eos_kafka_source.client.config.ClientConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from ..client.config import ClientConfig
from ..formats.plans import ReadPlan


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Offsets ``[start, end)`` of ``topic``-``partition`` plus what the executor needs.

    >>> KafkaInputPartition("t", 0, 10, 20, ClientConfig(("h:9092",)))  # doctest: +ELLIPSIS
    KafkaInputPartition(topic='t', partition=0, start=10, end=20, ...)
    """

    topic: str
    partition: int
    start: int
    end: int
    client: ClientConfig
    read_committed: bool = True
    include_headers: bool = False
    fetch_max_bytes: int = 8 << 20
    poll_timeout_ms: int = 120_000
    fail_on_data_loss: bool = True
    check_crcs: bool = False
    #: ``valueFormat``/``keyFormat``: the reader schemas fixed when the query started.
    payload: ReadPlan | None = None

    @property
    def size(self) -> int:
        """Offsets in the range (markers and aborted records included)."""
        return self.end - self.start


@dataclass(frozen=True)
class KafkaPackedPartition(InputPartition):
    """Several ranges read one after the other by one task (``maxPartitions``:
    :mod:`~eos_kafka_source.source.packing`), in ``(topic, partition, start)`` order.

    >>> c = ClientConfig(("h:9092",))
    >>> p = KafkaPackedPartition((KafkaInputPartition("t", 0, 0, 5, c),
    ...                           KafkaInputPartition("t", 1, 0, 7, c)))
    >>> p.size
    12
    """

    parts: tuple[KafkaInputPartition, ...]

    @property
    def size(self) -> int:
        """Offsets in all the ranges."""
        return sum(p.size for p in self.parts)
