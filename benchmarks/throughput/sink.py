"""Sink benchmarks: one exactly-once task against reference producers, and the driver's commit.

A sink task is driven as Spark drives it, without Spark: a :class:`TaskWriter`
gets Arrow batches of 100-byte values, hands its open transaction off, and
:class:`DriverProtocol` commits it (decision log on local disk). The
references get the same Arrow batches and write them to a fresh 8-partition
topic each run: confluent-kafka's and kafka-python's transactional producers,
and eoskafka's own at-least-once mode. Every run writes to a fresh topic that
is deleted afterwards (the in-memory broker keeps every record otherwise).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import pyarrow as pa

from eos_kafka_source.broker import EmbeddedBroker
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.naming import TransactionalIdFactory
from eos_kafka_source.sink.task.context import WriterContext
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import KafkaWire
from eos_kafka_source.wire.kept import kept_wire

from ..common import (
    Row,
    Sizes,
    Timed,
    delete_topic,
    measure_rounds,
    new_topic,
    row_of,
    unique,
    value_batches,
)

SECTION = "sink per task"
EOS = "eoskafka TaskWriter + handoff + DriverProtocol.commit (exactly-once)"
ALO = "eoskafka TaskWriter at-least-once (idempotent, no transaction)"
CONFLUENT = "confluent-kafka transactional Producer"
KAFKA_PYTHON = "kafka-python transactional KafkaProducer"
OUTPUT_PARTITIONS = 8
TXN_TIMEOUT_MS = 60_000
#: Spark's default producer.batchRecords for the sink.
BATCH_RECORDS = 10_000
#: Records each task writes in the driver-commit benchmark.
COMMIT_TASK_RECORDS = 10


class EosSink:
    """One query's exactly-once sink without Spark: tasks write, the driver commits.

    The decision log lives in a temporary directory removed by :meth:`close`.
    """

    def __init__(self, cfg: ClientConfig, name: str, timeout_ms: int = TXN_TIMEOUT_MS) -> None:
        self.cfg = cfg
        self.timeout_ms = timeout_ms
        self.ids = TransactionalIdFactory(unique(name))
        self.dir = tempfile.mkdtemp(prefix="eoskafka-bench-")
        self.driver = DriverProtocol(self.ids, DecisionLog(self.dir), self.driver_wire,
                                     owner=self.dir, transaction_timeout_ms=timeout_ms)
        self.driver.prepare(new_run=True)  # the planning worker, once per query run
        self.batch_id = 0

    def wire(self) -> KafkaWire:
        return KafkaWire(self.cfg)

    def driver_wire(self) -> AbstractContextManager[KafkaWire]:
        """What the sink's driver hooks use: connections kept between batches."""
        return kept_wire(self.cfg)

    def task(self, wire: KafkaWire, topic: str, partition: int,
             batches: Iterable[pa.RecordBatch]) -> TxnHandoff:
        """What ``write()`` does on an executor: write in a transaction, hand it off."""
        tid = self.ids.for_task(partition)
        writer = TaskWriter(wire, transactional_id=tid, topic=topic,
                            transaction_timeout_ms=self.timeout_ms, batch_records=BATCH_RECORDS,
                            context=WriterContext(task_partition=partition, batch_id=self.batch_id))
        writer.open()
        try:
            writer.write_batches(batches)
            return writer.handoff()
        except BaseException:
            fence(wire, [tid], self.timeout_ms)  # aborts the open transaction
            raise

    def commit(self, handoffs: list[TxnHandoff], tasks: int, *, then_prepare: bool = True) -> float:
        """Commit the current batch; returns the seconds ``DriverProtocol.commit`` took."""
        started = time.perf_counter()
        try:
            self.driver.commit(self.batch_id, handoffs, tasks)
        except BaseException:
            self.driver.abort(self.batch_id, handoffs, tasks)
            raise
        elapsed = time.perf_counter() - started
        self.batch_id += 1
        if then_prepare:
            self.driver.prepare(new_run=False)  # the planning worker, before the next batch
        return elapsed

    def write(self, topic: str, batches: Iterable[pa.RecordBatch]) -> int:
        """One task writes ``batches``, the driver commits; returns the records written."""
        with self.wire() as wire:
            handoff = self.task(wire, topic, 0, batches)
        self.commit([handoff], tasks=1)
        return handoff.records

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def write_at_least_once(cfg: ClientConfig, topic: str, batches: Iterable[pa.RecordBatch]) -> int:
    with KafkaWire(cfg) as wire:
        writer = TaskWriter(wire, transactional_id=None, topic=topic,
                            transaction_timeout_ms=TXN_TIMEOUT_MS, batch_records=BATCH_RECORDS,
                            context=WriterContext(task_partition=0))
        writer.open()
        writer.write_batches(batches)
        return writer.handoff().records


def confluent_settings(cfg: ClientConfig, transactional_id: str, records: int) -> dict[str, Any]:
    """A transactional librdkafka producer tuned for throughput (queue large enough for all)."""
    return {
        "bootstrap.servers": ",".join(cfg.bootstrap_servers),
        "transactional.id": transactional_id,
        "linger.ms": 5,
        "batch.num.messages": BATCH_RECORDS,
        "queue.buffering.max.messages": min(2**31 - 1, max(100_000, 2 * records)),
        "queue.buffering.max.kbytes": 2**21 - 1,
        "log_level": 3,
    }


def write_confluent(cfg: ClientConfig, topic: str, batches: list[pa.RecordBatch]) -> int:
    from confluent_kafka import Producer

    records = sum(b.num_rows for b in batches)
    producer = Producer(confluent_settings(cfg, unique("ck"), records))
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        try:
            produce = producer.produce
            for batch in batches:
                for value in batch.column(0).to_pylist():
                    try:
                        produce(topic, value)
                    except BufferError:
                        producer.poll(0.05)
                        produce(topic, value)
            producer.commit_transaction(120)
        except BaseException:
            producer.abort_transaction(30)
            raise
    finally:
        producer.close()
    return records


def write_kafka_python(cfg: ClientConfig, topic: str, batches: list[pa.RecordBatch]) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=list(cfg.bootstrap_servers), transactional_id=unique("kp"),
        linger_ms=5, batch_size=1 << 20, max_request_size=16 << 20,
    )
    records = 0
    try:
        producer.init_transactions()
        producer.begin_transaction()
        try:
            for batch in batches:
                for value in batch.column(0).to_pylist():
                    producer.send(topic, value=value)
                records += batch.num_rows
            producer.commit_transaction()
        except BaseException:
            producer.abort_transaction()
            raise
    finally:
        producer.close()
    return records


def on_fresh_topic(cfg: ClientConfig, name: str, work: Callable[[str], int],
                   partitions: int = OUTPUT_PARTITIONS) -> Timed:
    """Time ``work(topic)`` on a new topic (8 partitions by default), created before and
    deleted after."""

    def run() -> tuple[int, float]:
        topic = new_topic(cfg, name, partitions)
        try:
            started = time.perf_counter()
            records = work(topic)
            return records, time.perf_counter() - started
        finally:
            delete_topic(cfg, topic)

    return run


def _has_confluent() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def bench(cfg: ClientConfig, sizes: Sizes) -> list[Row]:
    data = value_batches(sizes.sink)
    small = value_batches(sizes.warmup)
    kp_data = value_batches(sizes.sink_kafka_python)
    sink = EosSink(cfg, "task")
    try:
        def variants(batches: list[pa.RecordBatch], kp: list[pa.RecordBatch]) -> list[Any]:
            out = [
                (EOS, on_fresh_topic(cfg, "eos", lambda t: sink.write(t, batches))),
                (ALO, on_fresh_topic(cfg, "alo", lambda t: write_at_least_once(cfg, t, batches))),
                (KAFKA_PYTHON, on_fresh_topic(cfg, "kp", lambda t: write_kafka_python(cfg, t, kp))),
            ]
            if _has_confluent():
                out.append((CONFLUENT,
                            on_fresh_topic(cfg, "ck", lambda t: write_confluent(cfg, t, batches))))
            return out

        # Two more rounds than elsewhere: the exactly-once vs at-least-once ratio is a small
        # difference between two ~1 s runs on a shared machine.
        results = measure_rounds(variants(data, kp_data), sizes.runs + 2,
                                 warmup=variants(small, small[:1]))
    finally:
        sink.close()
    reference = row_of(SECTION, CONFLUENT, results[CONFLUENT]) if CONFLUENT in results else None
    if reference is not None:
        reference.short = "confluent-kafka txn"
    eos = row_of(SECTION, EOS, results[EOS]).against(reference)
    alo = row_of(SECTION, ALO, results[ALO]).against(reference)
    alo.short = "at-least-once"
    overhead = Row(SECTION, "exactly-once overhead: the exactly-once row against the "
                   "at-least-once row", eos.records, eos.seconds, eos.runs).against(alo)
    rows = [eos.target_rate_and_ratio(500_000, 0.5) if reference is not None
            else eos.target_rate(500_000), alo, overhead.target_ratio(0.9)]
    if reference is not None:
        rows.append(reference)
    rows.append(row_of(SECTION, KAFKA_PYTHON, results[KAFKA_PYTHON],
                       note="a twentieth of the data (a ~50k records/s client)").against(reference))
    return rows


def task_records(task: int, spread: int) -> list[pa.RecordBatch]:
    """A task's few records, over ``spread`` partitions (a ``partition`` column: keyless
    rows would all go to one partition, the sink's sticky partitioning)."""
    batch = value_batches(COMMIT_TASK_RECORDS)[0]
    column = pa.array([(task + i) % spread if spread == OUTPUT_PARTITIONS
                       else task % OUTPUT_PARTITIONS for i in range(batch.num_rows)], pa.int32())
    return [batch.append_column("partition", column)]


def bench_commit(sizes: Sizes) -> list[Row]:
    """Median ``DriverProtocol.commit`` time of a batch whose N tasks each wrote a few records.

    Each task's rows name their partitions: each transaction spans all 8 partitions (one
    COMMIT marker per partition); the largest N is also measured with one partition per
    task. Each case runs on a fresh broker: Tansu 0.6.0 keeps every transactional id's
    every epoch in one metadata document that it rewrites on each transactional request,
    so its EndTxn cost grows with all the transactions it has seen. An extra row shows
    that growth: the largest commit after ``HISTORY_BATCHES`` more batches on its broker.
    """
    cases = [(tasks, OUTPUT_PARTITIONS) for tasks in sizes.commit_tasks]
    cases.append((max(sizes.commit_tasks), 1))
    biggest = max(sizes.commit_tasks)
    history = HISTORY_BATCHES if sizes.commit_batches >= 5 else 0  # none in --quick
    rows = []
    for tasks, spread in cases:
        grow = history if (tasks, spread) == (biggest, OUTPUT_PARTITIONS) else 0
        times = _commit_times(tasks, spread, 1 + sizes.commit_batches + grow)
        measured = times[1:1 + sizes.commit_batches]
        row = Row("driver commit",
                  f"DriverProtocol.commit, {tasks} task(s) × {spread} partition(s) each",
                  tasks * COMMIT_TASK_RECORDS, statistics.median(measured),
                  [round(t, 4) for t in measured],
                  note=f"median of {len(measured)} batches after one warm-up, fresh broker; "
                       "decision log on local disk", show_rate=False)
        rows.append(row.target_seconds(0.1) if tasks >= 64 else row)
        if grow:
            rows.append(Row(
                "driver commit",
                f"DriverProtocol.commit, {tasks} task(s) × {spread} partition(s) each, after "
                f"{grow} more batches ({grow * tasks:,} more transactions) on that broker",
                tasks * COMMIT_TASK_RECORDS, times[-1], [round(times[-1], 4)],
                note="the broker's EndTxn cost grows with its transaction history",
                show_rate=False))
    return rows


#: Extra batches of the history row in ``bench_commit``.
HISTORY_BATCHES = 6


def _commit_times(tasks: int, spread: int, batches: int) -> list[float]:
    """Commit times of ``batches`` consecutive batches on a fresh broker."""
    with EmbeddedBroker() as broker:
        cfg = ClientConfig.from_options({"kafka.bootstrap.servers": broker.bootstrap_servers})
        topic = new_topic(cfg, "commit", OUTPUT_PARTITIONS)
        sink = EosSink(cfg, f"commit{tasks}")
        times = []
        try:
            inputs = [task_records(p, spread) for p in range(tasks)]
            with sink.wire() as wire:
                for _ in range(batches):
                    handoffs = [sink.task(wire, topic, p, inputs[p]) for p in range(tasks)]
                    times.append(sink.commit(handoffs, tasks))
        finally:
            sink.close()
    return times


def bench_spark(spark: Any, cfg: ClientConfig, sizes: Sizes) -> Row:
    """``df.write.format("eoskafka")`` of ``spark.range`` rows as 100-byte binary values."""
    bootstrap = ",".join(cfg.bootstrap_servers)

    def rows_of(n: int) -> Timed:
        def work(topic: str) -> int:
            (spark.range(0, n, 1, 2)
             .selectExpr("CAST(lpad(CAST(id AS STRING), 100, 'v') AS BINARY) AS value")
             .write.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).mode("append").save())
            return n

        return on_fresh_topic(cfg, "spark-sink", work)

    warmup = [("spark", rows_of(sizes.warmup))] if sizes.spark_warmup else []
    result = measure_rounds([("spark", rows_of(sizes.spark_sink))], sizes.spark_runs,
                            warmup=warmup)["spark"]
    return row_of("Spark end to end", "df.write eoskafka (exactly-once), 2 tasks, local[2]",
                  result)
