"""Read one input partition as Arrow record batches (runs on an executor).

Called from the Spark reader's ``read(partition)`` (:func:`read_input`), in an executor
Python worker per task. Each offset range of the partition is read with raw Fetch
requests (:class:`~eos_kafka_source.wire.LogCursor`), filtered to the records a
read_committed consumer may see by :func:`~eos_kafka_source.visibility.visible_batches`
(which decides from the COMMIT/ABORT markers in the log, reading ahead past the range end
when a marker lies there), decoded into columns and yielded in batches of at most
:data:`BATCH_ROWS` rows. Memory stays bounded: one fetch response, the visibility queue and
one Arrow batch, however long the range.

A replay reads exactly the planned ``[start, end)``: the range is fixed in the
partition, never "whatever is there now".

>>> for batch in read_partition(part, arrow_schema_of(spark_schema)):  # doctest: +SKIP
...     print(batch.num_rows)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from ..errors import ConnectionDroppedError, DataLossError, KafkaProtocolError, TopicNotFoundError
from ..faults import fault_point
from ..gcpause import freeze_imports
from ..records import BatchHeader, ColumnBuilder
from ..records.decode import arrow_schema
from ..timings import Phases
from ..visibility import visible_batches
from ..wire import KafkaWire, fetch_bounds, fetch_metadata, leader_of
from ..wire.fetch import LogCursors
from ..wire.kept import kept_wire
from ..wire.retry import LEADER_MOVED, Deadline
from .partitions import KafkaInputPartition, KafkaPackedPartition

log = logging.getLogger(__name__)

#: Rows per yielded Arrow batch (one Kafka batch more can push a batch a little past it).
BATCH_ROWS = 65_536
#: Leaders by (topic, partition), shared by the ranges of one task.
Leaders = dict[tuple[str, int], int]


def read_input(partition: InputPartition, schema: Any) -> Iterator[pa.RecordBatch]:
    """The visible records of an input partition (one range, or packed ranges one after
    the other, each in offset order), as Arrow batches of the declared Spark ``schema``."""
    if isinstance(partition, KafkaPackedPartition):
        parts = partition.parts
    elif isinstance(partition, KafkaInputPartition):
        parts = (partition,)
    else:
        return iter(())  # Spark's placeholder when there is nothing to read
    freeze_imports()  # the worker's collection after this task skips the modules
    arrow = arrow_schema_of(schema)
    payload = parts[0].payload
    leaders: Leaders = {}  # one Metadata answers the task's ranges
    if payload is None:
        return _timed_read((batch for part in parts
                            for batch in read_partition(part, arrow, leaders)), len(parts))
    # Decoded after the visibility filter, from the full Kafka columns (headers included,
    # as planned: a schema id may be in one): one decoder per task.
    from ..formats.payload import decoded

    return _timed_read(decoded(payload, arrow, (
        batch for part in parts for batch in read_partition(part, None, leaders))), len(parts))


def _timed_read(batches: Iterator[pa.RecordBatch], ranges: int) -> Iterator[pa.RecordBatch]:
    """``batches``, with a ``source_read`` timing line when they are done (benchmarks: the
    time to the first batch and the whole read, of which Spark took the batches handed)."""
    timing = Phases("source_read")
    rows = 0
    first: float | None = None
    for batch in batches:
        if first is None:
            first = timing.total_s()
        rows += batch.num_rows
        timing.mark("read")
        yield batch
        timing.mark("handed")  # Spark consuming the batch
    timing.mark("read")
    timing.write(ranges=ranges, rows=rows, first_batch_s=first)


def arrow_schema_of(schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects for the declared Spark ``schema`` (a StructType).

    Spark 4.2+ rejects batches whose Arrow schema differs from the declared one, so the
    batches are built from this. Uses pyspark's own conversion when it takes ``timezone``
    (4.2+); otherwise maps the Kafka columns by name, keeping the declared nullability.
    """
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pyspark < 4.2 has no ``timezone`` keyword
        pass
    from pyspark.sql.pandas.types import to_arrow_type

    from .schema import kafka_schema

    spark_kafka = {f.name: f.dataType for f in kafka_schema(True).fields}
    kafka = arrow_schema(True)
    return pa.schema(  # a decoded value/key (valueFormat) and its extra columns: pyspark's
        [pa.field(f.name, kafka.field(f.name).type if spark_kafka.get(f.name) == f.dataType
                  else to_arrow_type(f.dataType), nullable=f.nullable)
         for f in schema.fields]
    )


def read_partition(part: KafkaInputPartition, schema: pa.Schema | None = None,
                   leaders: Leaders | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the visible records of ``part``'s range, in offset order, as Arrow batches.

    ``schema`` is the Arrow form of the declared Spark schema (see
    :func:`arrow_schema_of`); None means the full Kafka source schema. Raises
    :class:`~eos_kafka_source.errors.DataLossError` when offsets of the range were
    deleted before being read, unless ``part.fail_on_data_loss`` is false: then the
    lost offsets are skipped with a warning and reading goes on from the log start.

    ``leaders``: the leaders an earlier range of the same task looked up (a packed input
    partition reads its ranges one after the other): a range whose partition is there
    starts without a Metadata request, and this one's look-up adds its topic's leaders.

    The wire is the worker's last task's, if it had one, and is given back for the next
    when the read ends without an error; otherwise closed.
    """
    if part.end <= part.start:
        return
    builder = ColumnBuilder(part.topic, part.partition, part.include_headers, schema)
    read = _RangeRead(part, {} if leaders is None else leaders)
    with kept_wire(part.client) as wire:
        yield from builder.arrow_batches(read.visible(wire), part.end, BATCH_ROWS)


class _RangeRead:
    """Where the read of one range stands, and what it does when the log moves under it:
    a leader that moved or died, offsets deleted by retention, a partition deleted."""

    def __init__(self, part: KafkaInputPartition, leaders: Leaders) -> None:
        self.part = part
        self.tp = (part.topic, part.partition)
        self.leaders = leaders
        #: The next offset to read: records below it are not read twice after a retry.
        self.position = part.start
        self.leader: int | None = None
        #: Since the leader was lost: ``kafka.default.api.timeout.ms`` to find it again.
        self.lost: Deadline | None = None

    def visible(self, wire: KafkaWire) -> Iterator[tuple[BatchHeader, memoryview, int]]:
        """The range's visible batches, each with the offset the read had reached (where
        its records start), from :attr:`position` to the end of the range; a partition
        deleted under the task ends them (:meth:`_deleted`)."""
        try:
            yield from self._across_moves(wire)
        except (TopicNotFoundError, KafkaProtocolError) as exc:
            if _partition_exists(wire, self.tp):
                raise
            self._deleted(exc)
            wire.close()  # a Fetch read ahead may be unanswered on it: the next use reconnects

    def _across_moves(self, wire: KafkaWire) -> Iterator[tuple[BatchHeader, memoryview, int]]:
        """The visible batches across leader moves and, with ``failOnDataLoss=false``,
        offsets deleted by retention before they were read."""
        while self.position < self.part.end:
            try:
                for header, view in _visible(wire, self._leader(wire), self.part, self.position):
                    yield header, view, self.position
                    self.position = max(self.position, header.last_offset + 1)
                return
            except (ConnectionDroppedError, KafkaProtocolError) as exc:
                if not self._look_again(wire, exc):
                    raise
            except DataLossError:
                if not self._skip_deleted_offsets(wire):
                    raise

    def _leader(self, wire: KafkaWire) -> int:
        """The partition's leader: the one the task knows, else the one this worker's last
        Metadata answer named (``wire.known_leader``: each batch's tasks asked Metadata
        again), else from a Metadata request (always after a lost leader: the one known may
        be it). A leader that moved answers the Fetch with NOT_LEADER_OR_FOLLOWER, and the
        read looks it up again (:meth:`_look_again`): a stale hint costs a round trip."""
        if self.leader is None:
            self.leader = self.leaders.get(self.tp) if self.lost is None else None
            if self.leader is None and self.lost is None:
                self.leader = wire.known_leader(*self.tp)
            if self.leader is None:
                info = fetch_metadata(wire, [self.part.topic])
                self.leader = leader_of(info, self.tp)
                self.leaders.update({(self.part.topic, p): node for p, node
                                     in info[self.part.topic].leaders.items() if node >= 0})
            if self.lost is None:
                fault_point("read.after_leader", task=self.part.partition)  # it may die
        return self.leader

    def _look_again(self, wire: KafkaWire, exc: ConnectionDroppedError | KafkaProtocolError,
                    ) -> bool:
        """Whether to read on after ``exc``: the leader died or moved (a broker restart, a
        reassignment), so it is looked up again and the read goes on from
        :attr:`position` until the deadline, as Kafka's consumer does; Spark's task retries
        alone came faster than a dead node is fenced. Any other error ends the read."""
        if isinstance(exc, KafkaProtocolError) and exc.code not in LEADER_MOVED:
            return False
        self.lost = self.lost or Deadline.of(None, wire)
        if not self.lost.pause():
            return False
        log.warning("eoskafka source: %s-%d: %s; looking for its leader again at offset %d",
                    self.part.topic, self.part.partition, exc, self.position)
        wire.close()  # its next request connects afresh
        self.leader = None
        return True

    def _skip_deleted_offsets(self, wire: KafkaWire) -> bool:
        """``failOnDataLoss=false``: step over offsets retention deleted before they were
        read, to the log start; False (the read fails) otherwise."""
        if self.part.fail_on_data_loss or self.leader is None:  # None: not from a fetch
            return False
        log_start = fetch_bounds(wire, {self.tp: self.leader})[self.tp].log_start
        if log_start <= self.position:
            return False  # not a retention gap we can step over
        log.warning("%s-%d: offsets %d to %d were deleted before being read; skipped "
                    "(failOnDataLoss=false)", self.part.topic, self.part.partition,
                    self.position, min(log_start, self.part.end) - 1)
        self.position = log_start
        return True

    def _deleted(self, exc: TopicNotFoundError | KafkaProtocolError) -> None:
        """The partition was deleted while the task read it: a DataLossError, unless
        ``failOnDataLoss=false`` (then its remaining offsets are skipped, with a warning)."""
        gone = (f"{self.part.topic}-{self.part.partition} was deleted while this task read "
                f"it; offsets {self.position} to {self.part.end - 1} were not read")
        if self.part.fail_on_data_loss:
            raise DataLossError(
                f"{gone}. If you accept this, set the source option failOnDataLoss=false to "
                "skip a deleted topic's remaining offsets") from exc
        log.warning("%s (failOnDataLoss=false: skipped)", gone)


def _partition_exists(wire: KafkaWire, tp: tuple[str, int]) -> bool:
    """Whether metadata still lists ``tp`` (an error while reading may mean it was deleted)."""
    info = fetch_metadata(wire, [tp[0]])
    return tp[0] in info and tp[1] in info[tp[0]].leaders


def _visible(
    wire: KafkaWire, leader: int, part: KafkaInputPartition, start: int
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The batches of ``[start, part.end)`` a reader may see (all data batches when
    ``read_committed`` is off)."""
    cursors = LogCursors(wire, leader, (part.topic, part.partition),
                         max_bytes=part.fetch_max_bytes,
                         deadline_s=part.poll_timeout_ms / 1000, check_crc=part.check_crcs)
    return visible_batches(cursors.open, start, part.end, read_committed=part.read_committed,
                           abort_hints=cursors.abort_hints)
