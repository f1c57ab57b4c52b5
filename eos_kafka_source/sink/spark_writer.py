"""The Spark-facing sink: thin writer classes over TaskWriter and DriverProtocol.

>>> (df.selectExpr("CAST(id AS STRING) AS value")          # doctest: +SKIP
...    .writeStream.format("eoskafka")
...    .option("kafka.bootstrap.servers", "localhost:9092")
...    .option("topic", "out")
...    .option("checkpointLocation", "/tmp/ckpt")
...    .start())

Where each hook runs (docs/design.md, "Where each part runs"): ``__init__`` on the driver, in the
planning worker (before each batch) and again in the commit/abort worker;
``write`` on executors, on a pickled copy; ``commit``/``abort`` in the commit
worker. The writer pickles only plain values (options, schema, prefix).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import FrameType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter
from pyspark.sql.types import StructType

from ..errors import TransactionLostError
from ..formats.plans import WritePlan
from ..gcpause import freeze_imports
from ..options import SinkOptions
from ..timings import Phases
from ..wire import KafkaWire, ProducerIdentity, end_txns, find_coordinator, require_topics
from ..wire.kept import kept_wire
from ..wire.retry import GROUP
from .decisions.log import DecisionLog
from .driver.claims import aborted_group, batch_aborted_at, write_aborted
from .driver.protocol import DriverProtocol
from .handoff import TxnHandoff, handoffs_of
from .lineage import query_id_at, task_lineage
from .naming import TransactionalIdFactory, default_prefix, fingerprint
from .spark_checkpoint import (
    CONF_KEY,
    conf_checkpoint,
    refuse_another_query,
    spark_query_id,
    task_conf_checkpoint,
)
from .task import columns
from .task.context import WriterContext

if TYPE_CHECKING:
    from .task.writer import TaskWriter

try:  # pyspark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamArrowBase

    _STREAM_BASES: tuple[type, ...] = (_StreamArrowBase,)
except ImportError:  # 4.0: deriving from both gets Arrow batches too
    _STREAM_BASES = (DataSourceArrowWriter, DataSourceStreamWriter)

log = logging.getLogger("eos_kafka_source.sink")

#: (prefix, query id) pairs whose pool this process has fenced since it started (see
#: DriverProtocol.prepare): a new query on the same prefix (a reset checkpoint) is a new run.
_PREPARED_IN_PROCESS: set[tuple[str, str]] = set()
#: Streaming sinks (by prefix) whose cluster this process has checked (see _Writer.preflight).
_CHECKED_IN_PROCESS: set[str] = set()


def _in_commit_worker() -> bool:
    """True inside Spark's streaming commit/abort worker, False in the planning worker.

    Walks the frames themselves: ``inspect.stack()`` resolves every frame's source file
    and cost 12 ms a call on a loaded 2-core machine, twice per micro-batch."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__", "").endswith("python_streaming_sink_runner"):
            return True
        frame = frame.f_back
    return False


class _Writer:
    """What batch and streaming writers share: options, ids, task side."""

    def __init__(self, options: dict[str, str], schema: StructType, *, streaming: bool) -> None:
        # On the driver's planning and commit workers: their collection after each call
        # skips the modules (gcpause.py).
        freeze_imports()
        self.options = dict(options)
        self.sink = SinkOptions.parse(self.options)
        formats = self.sink.formats
        columns.validate(schema, self.sink.topic,
                         tuple(s.side for s in formats.sides) if formats else (),
                         self.sink.dead_letter_topic)
        self.schema = schema
        #: valueFormat/keyFormat: the writer schemas, resolved on the driver before any task
        #: (:meth:`resolve_payload`); None for raw payloads, and in the commit worker.
        self.payload: WritePlan | None = None
        self.exactly_once = self.sink.delivery == "exactly_once"
        location = self.sink.checkpoint_location
        if streaming and self.exactly_once and location is None:
            from ..errors import ConfigError

            raise ConfigError(
                "the exactly-once sink needs option('checkpointLocation', ...) for its "
                "decision log (or option('decisionLogLocation', ...)); Spark passes a "
                "checkpoint set only as spark.sql.streaming.checkpointLocation to no sink "
                "before its tasks run")
        self.owner = fingerprint(location) if location else uuid.uuid4().hex[:16]
        self.prefix = self.sink.transactional_id_prefix or (
            default_prefix(location) if location else f"eoskafka-batch-{self.owner}"
        )
        self.streaming = streaming
        #: The query's own checkpoint (decisionLogLocation may live elsewhere): its
        #: fingerprint tells a reset checkpoint from another query sharing the log.
        spark_checkpoint = _option(self.options, "checkpointLocation") or location
        self.checkpoint = fingerprint(spark_checkpoint) if spark_checkpoint else self.owner
        #: Where Spark writes ``offsets/<N>``: which batch a batch id stands for (invariant
        #: 13, batch_identity.py). None for batch writes: they are never replayed.
        self.spark_checkpoint = _option(self.options, "checkpointLocation") if streaming \
            else None
        #: Streaming: Spark's query id (None if unreadable here; tasks carry it). Batch: a
        #: new id per write, pickled to the tasks and to commit() with the writer.
        self.lineage = (query_id_at(spark_checkpoint) if streaming
                        else f"write-{uuid.uuid4().hex[:16]}")
        #: Batch writes with a topic option: where an aborted write is marked (claims.py).
        self.batch_write_topic = None if streaming or not self.exactly_once else self.sink.topic

    # -- helpers ---------------------------------------------------------------------------

    def resolve_payload(self) -> None:
        """Driver, before any task: register (or look up) the writer schemas; an
        incompatible schema or a column that does not fit fails the write here."""
        if self.sink.formats is not None:
            from ..formats.resolve import resolve_write

            self.payload = resolve_write(self.sink.formats, self.sink.topic, self.schema)

    def _wire(self) -> AbstractContextManager[KafkaWire]:
        """Driver hooks and tasks keep their connections between micro-batches (kept.py)."""
        return kept_wire(self.sink.client)

    def _protocol(self, spark_checkpoint: str | None = None) -> DriverProtocol:
        location = self.sink.checkpoint_location
        return DriverProtocol(
            TransactionalIdFactory(self.prefix),
            DecisionLog(location) if location else None,
            self._wire,
            owner=self.owner,
            checkpoint=self.checkpoint,
            transaction_timeout_ms=self.sink.transaction_timeout_ms,
            # Every streaming prefix, derived or chosen, is claimed (claims.py): the same
            # checkpoint path on two clusters derives the same prefix.
            claim_topic=self.sink.topic if self.streaming else None,
            # A topic column: claimed at the first commit, on a topic it wrote (driver.py).
            claim_from_handoffs=self.streaming and self.sink.topic is None,
            lineage=self.lineage,
            streaming=self.streaming,
            spark_checkpoint=spark_checkpoint or self.spark_checkpoint,
            # Where abort marks (and a batch write's "committing" mark) live (claims.py).
            mark_topic=self.sink.topic if self.streaming else self.batch_write_topic,
        )

    def preflight(self) -> None:
        """Driver, before any task: the brokers answer and accept our credentials, and the
        ``topic`` option names an existing topic.

        Tasks would find the same, but only after every attempt of every task failed,
        and Spark would report "Writing job failed" with our message deep in a Java
        trace; raised here it is the error the write fails with (broker unreachable,
        authentication failed, topic not found); the same for ``deadLetterTopic``. Topics
        named by a ``topic`` column are only known to the tasks.
        """
        named = [t for t in (self.sink.topic, self.sink.dead_letter_topic) if t is not None]
        with self._wire() as wire:
            if named:
                require_topics(wire, named)
            else:
                wire.any_node()  # connects: reachability and credentials

    # -- executor --------------------------------------------------------------------------

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> TxnHandoff:
        # Imported here, on the executor: with its codec (pyarrow.compute, which pulls in
        # pandas, and aiokafka) it is half of the sink's import time, which the driver's
        # planning and commit workers (each new worker imports it again) do not need.
        from .task.dead_letters import routed
        from .task.writer import TaskWriter

        freeze_imports()  # the worker's collection after this task skips the modules

        spark = _task_context()
        context = dataclasses.replace(
            spark, owner=self.owner,
            lineage=(spark.lineage if self.streaming else "") or self.lineage or "")
        task = context.first_partition
        tid = TransactionalIdFactory(self.prefix).for_task(task) if self.exactly_once else None
        timed = Phases("task")
        with self._wire() as wire:
            timed.mark("connect")
            writer = TaskWriter(
                wire, transactional_id=tid, topic=self.sink.topic,
                transaction_timeout_ms=self.sink.transaction_timeout_ms,
                batch_records=self.sink.linger_records, context=context,
                compression=self.sink.compression,
                compression_level=self.sink.compression_level,
                batch_bytes=self.sink.batch_bytes,
            )
            writer.open()
            timed.mark("open")
            try:
                self._refuse_if_aborted(wire, context)
                timed.mark("abort_check")
                encode = None
                if self.payload is not None:  # struct columns -> the wire format, first
                    from ..formats.payload import Encoding

                    encode = Encoding(self.payload).apply
                waiting = _Waited(iterator)
                # Dead letters (deadLetterTopic) split off before encoding, written raw.
                writer.write_routed(routed(waiting, self.sink.dead_letter_topic, encode))
                timed.mark("write")  # of which waiting.seconds for the input (the source)
                handoff = writer.handoff()
                timed.mark("handoff")
            except BaseException:
                _abort_own(wire, writer)
                raise
        if self.streaming and self.exactly_once and self.spark_checkpoint is None:
            conf = task_conf_checkpoint(_spark_task_context())  # where Spark keeps it
            if conf:
                handoff = dataclasses.replace(handoff, extra={**handoff.extra, CONF_KEY: conf})
        timed.write(task=task, batch=context.batch_id, records=handoff.records,
                    input_wait=waiting.seconds)
        log.info("eoskafka: task %s wrote %s", task, handoff.describe())
        return handoff

    # -- driver ----------------------------------------------------------------------------

    def _commit(self, messages: list[Any], batch_id: int | None) -> None:
        handoffs = handoffs_of(messages)
        if not self.exactly_once:
            return  # at-least-once: records were visible as soon as they were written
        checkpoint = None
        if self.spark_checkpoint is not None:
            refuse_another_query(self.spark_checkpoint, self.lineage, handoffs)
        if self.streaming and self.spark_checkpoint is None:  # given only as Spark's conf
            lineage = self.lineage or next((h.lineage for h in handoffs if h.lineage), None)
            checkpoint = conf_checkpoint(handoffs, _option(self.options, "queryName"), lineage)
        report = self._protocol(checkpoint).commit(batch_id, handoffs, tasks=len(messages))
        log.info(
            "eoskafka: batch %s committed %d transactions, %d records, %d bytes in %.1f ms",
            batch_id, len(report.done), sum(h.records for h in report.done),
            sum(h.bytes for h in report.done), report.seconds * 1000,
        )

    def _refuse_if_aborted(self, wire: KafkaWire, context: WriterContext) -> None:
        """A task starting after the driver aborted its write or batch must not write.

        Checked after InitProducerId: the driver marks the abort before it fences, so a task
        whose id was initialised after that fence finds the mark (claims.py). Every task
        checks: one OffsetFetch on the worker's kept connection to the group's coordinator,
        which the worker's first task looked up (wire/known.py).
        """
        if self.batch_write_topic is not None:
            group = aborted_group(self.prefix, self.lineage or "")
            aborted, _ = write_aborted(wire, self.prefix, self.batch_write_topic,
                                       self.lineage or "",
                                       node=wire.known_coordinator(group, GROUP))
            if aborted:
                raise TransactionLostError(
                    f"the batch write {self.lineage} (transactional-id prefix "
                    f"{self.prefix!r}) was already aborted by the driver; this late task "
                    "wrote nothing"
                )
        batch, lineage = context.batch_id, context.lineage
        if not (self.streaming and self.exactly_once and self.sink.topic is not None
                and batch is not None and lineage):
            return
        group = aborted_group(self.prefix, lineage)
        aborted, _ = batch_aborted_at(wire, self.prefix, self.sink.topic, lineage, batch,
                                      node=wire.known_coordinator(group, GROUP))
        if aborted:
            raise TransactionLostError(
                f"batch {batch} of query {lineage} (transactional-id prefix {self.prefix!r}) "
                "was already aborted by the driver; this late task wrote nothing"
            )

    def _abort(self, messages: list[Any], batch_id: int | None) -> None:
        """The protocol marks the batch (or write) aborted before it fences (claims.py)."""
        if not self.exactly_once:
            return
        handoffs = handoffs_of(messages)
        self._protocol().abort(batch_id, handoffs, tasks=len(messages))
        log.warning("eoskafka: batch %s aborted (%d hand-offs, %d tasks)",
                    batch_id, len(handoffs), len(messages))


#: How long a failing task waits for its in-flight Produce answers before aborting.
_DRAIN_S = 5.0


def _spark_task_context() -> Any:
    from pyspark import TaskContext

    return TaskContext.get()


def _task_context() -> WriterContext:
    """Where this task runs: partition, attempt, batch id and query id (TaskContext)."""
    ctx = _spark_task_context()
    batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
    return WriterContext(
        task_partition=ctx.partitionId() if ctx else 0,
        attempt=ctx.attemptNumber() if ctx else 0,
        task_attempt_id=ctx.taskAttemptId() if ctx else -1,
        batch_id=int(batch) if batch is not None else None,
        lineage=task_lineage(ctx),
    )


def _option(options: dict[str, str], name: str) -> str | None:
    wanted = name.lower()
    return next((v for k, v in options.items() if k.lower() == wanted and v), None)


def _abort_own(wire: KafkaWire, writer: TaskWriter) -> None:
    """A failing task aborts its own transaction, so nothing is left open (best effort).

    In-flight Produce requests are drained first (briefly): a batch the broker appends
    after the abort marker would start a new transaction on the id, open until fenced."""
    if writer.transactional_id is None or writer.producer is None:
        return
    try:
        writer.pipeline.delivery_timeout_s = min(writer.pipeline.delivery_timeout_s, _DRAIN_S)
        writer.pipeline.flush()
    except Exception:  # noqa: BLE001 - failing anyway; the abort below is what matters
        log.debug("eoskafka: in-flight batches of the failed task", exc_info=True)
    try:
        # Looked up afresh where possible: the task may have started from a kept coordinator
        # that moved (wire/known.py), and this EndTxn is not retried.
        try:
            node = find_coordinator(wire, writer.transactional_id, deadline=_DRAIN_S)
        except Exception:  # noqa: BLE001 - the one the task last used, then
            if writer.coordinator is None:
                raise
            node = writer.coordinator
        who = ProducerIdentity(writer.producer.producer_id, writer.producer.epoch)
        end_txns(wire, {writer.transactional_id: node}, [(writer.transactional_id, who)], False,
                 deadline_s=5)
    except Exception:  # the driver fences it at the latest by the next batch
        log.warning("eoskafka: could not abort the failed task's transaction", exc_info=True)


class EosKafkaStreamWriter(_Writer, *_STREAM_BASES):  # type: ignore[misc]
    """Streaming sink: one Kafka transaction per task, committed by the driver per batch."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        timed = Phases("stream_writer")
        super().__init__(options, schema, streaming=True)
        timed.mark("options")
        if _in_commit_worker():
            timed.mark("which_worker")
            timed.write(worker="commit")
            return
        timed.mark("which_worker")
        self.resolve_payload()
        timed.mark("schemas")
        if self.prefix not in _CHECKED_IN_PROCESS:  # first batch of this run only: a topic
            self.preflight()                         # deleted later fails the tasks instead
            _CHECKED_IN_PROCESS.add(self.prefix)
        timed.mark("preflight")
        if self.exactly_once and self.spark_checkpoint and self.lineage is None:
            # Spark wrote <checkpoint>/metadata before this: not seeing it is refused by
            # name (a path Spark resolved elsewhere, a scheme pyarrow lacks; invariant 15).
            self.lineage = spark_query_id(self.spark_checkpoint)
        if self.exactly_once:
            run = (self.prefix, self.lineage or "")
            self._protocol().prepare(new_run=run not in _PREPARED_IN_PROCESS)
            _PREPARED_IN_PROCESS.add(run)
        timed.mark("prepare")
        timed.write(worker="planning")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TxnHandoff:  # type: ignore[override]
        return self._write(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 (Spark's name)
        timed = Phases("commit_hook")
        self._commit(messages, batchId)
        timed.mark("commit")
        timed.write(batch=batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        self._abort(messages, batchId)


class EosKafkaBatchWriter(_Writer, DataSourceArrowWriter):
    """Batch sink (``df.write.mode("append")``): every row visible, or none."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        super().__init__(options, schema, streaming=False)
        self.resolve_payload()
        self.preflight()  # writer() runs on the driver, once per write, before any task
        if self.exactly_once and self.sink.checkpoint_location:
            # Finish an earlier write's decision (said once, loudly) and fence the ids.
            self._protocol().prepare(new_run=True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TxnHandoff:  # type: ignore[override]
        return self._write(iterator)

    def commit(self, messages: list[Any]) -> None:  # type: ignore[override]
        self._commit(messages, None)

    def abort(self, messages: list[Any]) -> None:  # type: ignore[override]
        self._abort(messages, None)


class _Waited:
    """The task's input batches, timing how long the task waited for each (the upstream
    read, e.g. the source's Fetches): the part of a task's ``write`` phase that is not
    producing (benchmarks/latency)."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self.batches = iter(batches)
        self.seconds = 0.0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self

    def __next__(self) -> pa.RecordBatch:
        began = time.perf_counter()
        try:
            return next(self.batches)
        finally:
            self.seconds += time.perf_counter() - began
