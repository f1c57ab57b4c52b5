"""Read one planned offset range as Arrow record batches (runs on an executor).

Called from the Spark reader's ``read(partition)``, in a fresh executor Python
worker per task: nothing here outlives the call. The range is read with raw
Fetch requests (:class:`~eos_kafka_source.wire.LogCursor`), filtered to the
records a read_committed consumer may see by
:func:`~eos_kafka_source.visibility.visible_batches` (which decides from the
COMMIT/ABORT markers in the log, reading ahead past the range end when a
marker lies there), decoded into columns and yielded in batches of at most
:data:`BATCH_ROWS` rows. Memory stays bounded: one fetch response, the
visibility queue and one Arrow batch, however long the range.

A replay reads exactly the planned ``[start, end)``: the range is fixed in the
partition, never "whatever is there now".

>>> for batch in read_partition(part, arrow_schema_of(spark_schema)):  # doctest: +SKIP
...     print(batch.num_rows)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import ConnectionDroppedError, DataLossError, KafkaProtocolError, TopicNotFoundError
from ..faults import fault_point
from ..records import BatchHeader, ColumnBuilder
from ..records.decode import arrow_schema
from ..visibility import visible_batches
from ..wire import KafkaWire, LogCursor, fetch_bounds, fetch_metadata, kept, leader_of
from ..wire.retry import LEADER_MOVED, Deadline

if TYPE_CHECKING:
    from .partitions import KafkaInputPartition

log = logging.getLogger(__name__)

#: Rows per yielded Arrow batch (one Kafka batch more can push a batch a little past it).
BATCH_ROWS = 65_536
#: "No stop": a scan-ahead cursor reads until it finds what it looks for.
_NO_STOP = 1 << 62


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

    from ..datasource import kafka_schema

    spark_kafka = {f.name: f.dataType for f in kafka_schema(True).fields}
    kafka = arrow_schema(True)
    return pa.schema(  # a decoded value/key (valueFormat) and its extra columns: pyspark's
        [pa.field(f.name, kafka.field(f.name).type if spark_kafka.get(f.name) == f.dataType
                  else to_arrow_type(f.dataType), nullable=f.nullable)
         for f in schema.fields]
    )


def read_partition(
    part: KafkaInputPartition, schema: pa.Schema | None = None,
    leaders: dict[tuple[str, int], int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the visible records of ``part``'s range, in offset order, as Arrow batches.

    ``schema`` is the Arrow form of the declared Spark schema (see
    :func:`arrow_schema_of`); None means the full Kafka source schema. Raises
    :class:`~eos_kafka_source.errors.DataLossError` when offsets of the range were
    deleted before being read, unless ``part.fail_on_data_loss`` is false: then the
    lost offsets are skipped with a warning and reading goes on from the log start.

    ``leaders``: the leaders an earlier range of the same task looked up (a packed input
    partition reads its ranges one after the other): a range whose partition is there
    starts without a Metadata request, and this one's look-up adds its topic's leaders.
    A leader that moved since answers NOT_LEADER_OR_FOLLOWER (or its connection drops)
    and is looked up again, as after any move.
    """
    if part.end <= part.start:
        return
    builder = ColumnBuilder(part.topic, part.partition, part.include_headers, schema)
    wire = kept.take(part.client)  # the worker's last task's connections, if it had any
    clean = False  # a wire is given back only when nothing is left unanswered on it
    tp = (part.topic, part.partition)
    position = part.start
    leader: int | None = None
    lost: Deadline | None = None  # since the leader was lost: kafka.default.api.timeout.ms
    attempt = 0
    try:
        while position < part.end:
            try:
                if leader is None:
                    # After a lost leader, always ask again (the one known may be it).
                    leader = leaders.get(tp) if leaders is not None and lost is None else None
                    if leader is None:
                        info = fetch_metadata(wire, [part.topic])
                        leader = leader_of(info, tp)
                        if leaders is not None:
                            leaders.update({(part.topic, p): node for p, node
                                            in info[part.topic].leaders.items() if node >= 0})
                    if lost is None:
                        fault_point("read.after_leader", task=part.partition)  # it may die
                for header, view in _visible(wire, leader, part, position):
                    builder.add_batch(header, view, position, part.end)
                    position = max(position, header.last_offset + 1)
                    if len(builder) >= BATCH_ROWS:
                        yield builder.to_arrow()
                break
            except (ConnectionDroppedError, KafkaProtocolError) as exc:
                # The leader died or moved (a broker restart, a reassignment): look it up
                # again and go on from ``position`` until the deadline, as Kafka's consumer
                # does; Spark's task retries alone came faster than a dead node is fenced.
                if isinstance(exc, KafkaProtocolError) and exc.code not in LEADER_MOVED:
                    raise
                lost = lost or Deadline.of(None, wire)
                if lost.expired:
                    raise
                log.warning("eoskafka source: %s-%d: %s; looking for its leader again at "
                            "offset %d", part.topic, part.partition, exc, position)
                lost.backoff(attempt)
                attempt += 1
                wire.close()  # its next request connects afresh
                leader = None
            except DataLossError:
                if part.fail_on_data_loss or leader is None:  # None: not from a fetch
                    raise
                log_start = fetch_bounds(wire, {tp: leader})[tp].log_start
                if log_start <= position:
                    raise  # not a retention gap we can step over
                log.warning(
                    "%s-%d: offsets %d to %d were deleted before being read; skipped "
                    "(failOnDataLoss=false)", part.topic, part.partition, position,
                    min(log_start, part.end) - 1,
                )
                position = log_start
        clean = True
    except (TopicNotFoundError, KafkaProtocolError) as exc:
        if _partition_exists(wire, tp):
            raise
        gone = (f"{part.topic}-{part.partition} was deleted while this task read it; offsets "
                f"{position} to {part.end - 1} were not read")
        if part.fail_on_data_loss:
            raise DataLossError(
                f"{gone}. If you accept this, set the source option failOnDataLoss=false to "
                "skip a deleted topic's remaining offsets") from exc
        log.warning("%s (failOnDataLoss=false: skipped)", gone)
    finally:
        if clean:
            kept.give_back(part.client, wire)
        else:
            wire.close()
    if len(builder):
        yield builder.to_arrow()


def _partition_exists(wire: KafkaWire, tp: tuple[str, int]) -> bool:
    """Whether metadata still lists ``tp`` (an error while reading may mean it was deleted)."""
    info = fetch_metadata(wire, [tp[0]])
    return tp[0] in info and tp[1] in info[tp[0]].leaders


def _visible(
    wire: KafkaWire, leader: int, part: KafkaInputPartition, start: int
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The batches of ``[start, part.end)`` a reader may see (all data batches when
    ``read_committed`` is off)."""
    tp = (part.topic, part.partition)
    cursors: list[LogCursor] = []

    def open_cursor(offset: int, stop: int | None) -> Iterable[tuple[BatchHeader, memoryview]]:
        cursor = LogCursor(
            wire, leader, tp, offset, _NO_STOP if stop is None else stop,
            max_bytes=part.fetch_max_bytes, deadline_s=part.poll_timeout_ms / 1000,
            check_crc=part.check_crcs,
        )
        cursors.append(cursor)
        return cursor

    def abort_hints() -> list[tuple[int, int]]:
        hints: list[tuple[int, int]] = []
        for cursor in cursors:
            hints.extend(cursor.aborted_hints)
            cursor.aborted_hints.clear()
        return hints

    return visible_batches(
        open_cursor, start, part.end, read_committed=part.read_committed,
        abort_hints=abort_hints,
    )
