"""Source benchmarks: one task reading one partition, against raw Fetch + the fastest decoder.

Data is written transactionally and committed (confluent-kafka's transactional
producer when installed, else eoskafka's own sink), so the reader runs its
read_committed logic over real COMMIT markers. ``read_partition`` is timed
without Spark: this is the cost one Spark task pays. The "ceiling" is raw Fetch
(the same :class:`LogCursor`) with aiokafka's compiled record reader straight
into Arrow, no visibility logic; "raw Fetch" drops the decode too.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.source.partition_reader import BATCH_ROWS, arrow_schema_of, read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.schema import kafka_schema
from eos_kafka_source.wire import KafkaWire, LogCursor, fetch_bounds, fetch_metadata, leader_of

from ..common import (
    VALUE_SIZE,
    Row,
    Sizes,
    measure_rounds,
    new_topic,
    row_of,
    timed,
    value_batches,
    values_array,
)

SECTION = "source per task"
OURS = "eoskafka read_partition (read_committed → Arrow)"
CEILING = "ceiling: raw Fetch + aiokafka compiled decode → Arrow"
RAW = "raw Fetch, no decode"
EIGHT = "8 partitions, 1 task each, one after another"
#: Records (and bytes at most) per transaction when preparing data: several COMMIT markers
#: per partition.
TXN_RECORDS = 50_000
TXN_BYTES = 50_000_000

Range = tuple[str, int, int, int]  # topic, partition, start, end


def write_committed(cfg: ClientConfig, topic: str, partitions: int, per_partition: int,
                    *, value_bytes: int = VALUE_SIZE) -> None:
    """``per_partition`` records in each partition, in committed transactions."""
    total = partitions * per_partition
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        _write_with_eoskafka(cfg, topic, total, value_bytes)
        return
    _write_with_confluent(cfg, topic, partitions, total, value_bytes)


def _write_with_confluent(cfg: ClientConfig, topic: str, partitions: int, total: int,
                          value_bytes: int) -> None:
    from confluent_kafka import Producer

    from .sink import confluent_settings

    producer = Producer(confluent_settings(cfg, f"{topic}-loader", total))
    producer.init_transactions(30)
    values = values_array(total, size=value_bytes).to_pylist()
    per_txn = max(1, min(TXN_RECORDS, TXN_BYTES // value_bytes))
    try:
        for first in range(0, total, per_txn):
            producer.begin_transaction()
            for i in range(first, min(first + per_txn, total)):
                _produce(producer, topic, values[i], i % partitions)
            producer.commit_transaction(120)
    except BaseException:
        producer.abort_transaction(30)
        raise


def _produce(producer: object, topic: str, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, value, partition=partition)  # type: ignore[attr-defined]
            return
        except BufferError:
            producer.poll(0.05)  # type: ignore[attr-defined]


def _write_with_eoskafka(cfg: ClientConfig, topic: str, total: int, value_bytes: int) -> None:
    from .sink import EosSink

    batches = value_batches(total, size=value_bytes)
    per_txn = max(1, TXN_RECORDS // len(batches[0]))
    sink = EosSink(cfg, "loader")
    try:
        for first in range(0, len(batches), per_txn):
            sink.write(topic, batches[first : first + per_txn])
    finally:
        sink.close()


def committed_ranges(cfg: ClientConfig, topic: str) -> list[Range]:
    """Every partition's [log start, last stable offset)."""
    with KafkaWire(cfg) as wire:
        info = fetch_metadata(wire, [topic])[topic]
        leaders = {(topic, p): leader for p, leader in info.leaders.items()}
        bounds = fetch_bounds(wire, leaders)
    return [(topic, p, b.log_start, b.last_stable) for (_, p), b in sorted(bounds.items())]


# -- the three readers -----------------------------------------------------------------------


def read_ours(cfg: ClientConfig, ranges: list[Range]) -> int:
    """eoskafka's executor-side read, as ``read(partition)`` calls it; returns rows."""
    schema = arrow_schema_of(kafka_schema(False))
    rows = 0
    for topic, partition, start, end in ranges:
        part = KafkaInputPartition(topic, partition, start, end, cfg, read_committed=True)
        for batch in read_partition(part, schema):
            rows += batch.num_rows
    return rows


def read_ceiling(cfg: ClientConfig, ranges: list[Range]) -> int:
    """Raw Fetch + aiokafka's compiled reader into the same seven Arrow columns."""
    from aiokafka.record._crecords import DefaultRecordBatch

    rows = 0
    for topic, partition, start, end in ranges:
        with KafkaWire(cfg) as wire:
            tp = (topic, partition)
            leader = leader_of(fetch_metadata(wire, [topic]), tp)
            keys: list[bytes | None] = []
            values: list[bytes | None] = []
            offsets: list[int] = []
            stamps: list[int] = []
            for header, view in LogCursor(wire, leader, tp, start, end):
                if header.is_control:
                    continue
                for rec in DefaultRecordBatch(view):
                    offsets.append(rec.offset)
                    stamps.append(rec.timestamp)
                    keys.append(rec.key)
                    values.append(rec.value)
                if len(offsets) >= BATCH_ROWS:
                    rows += _to_arrow(topic, partition, keys, values, offsets, stamps).num_rows
                    keys, values, offsets, stamps = [], [], [], []
            if offsets:
                rows += _to_arrow(topic, partition, keys, values, offsets, stamps).num_rows
    return rows


def _to_arrow(topic: str, partition: int, keys: list[bytes | None], values: list[bytes | None],
              offsets: list[int], stamps: list[int]) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            pa.array(stamps, pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
            pa.repeat(pa.scalar(0, pa.int32()), n),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"],
    )


def read_raw(cfg: ClientConfig, ranges: list[Range]) -> int:
    """Fetch and frame the batches, decode nothing; returns data records seen."""
    records = 0
    for topic, partition, start, end in ranges:
        with KafkaWire(cfg) as wire:
            tp = (topic, partition)
            leader = leader_of(fetch_metadata(wire, [topic]), tp)
            for header, _ in LogCursor(wire, leader, tp, start, end):
                if not header.is_control:
                    records += header.record_count
    return records


# -- the benchmark ---------------------------------------------------------------------------


def prepare(cfg: ClientConfig, sizes: Sizes) -> dict[str, list[Range]]:
    """Write the source topics; returns their committed ranges by label."""
    one = new_topic(cfg, "src1", 1)
    write_committed(cfg, one, 1, sizes.source_1p)
    return {"1 partition": committed_ranges(cfg, one), EIGHT: prepare_eight(cfg, sizes)}


def prepare_eight(cfg: ClientConfig, sizes: Sizes) -> list[Range]:
    eight = new_topic(cfg, "src8", 8)
    write_committed(cfg, eight, 8, sizes.source_8p_each)
    return committed_ranges(cfg, eight)


def bench(cfg: ClientConfig, topics: dict[str, list[Range]], sizes: Sizes) -> list[Row]:
    rows: list[Row] = []
    for label, ranges in topics.items():
        variants = [
            (OURS, timed(lambda r=ranges: read_ours(cfg, r))),
            (CEILING, timed(lambda r=ranges: read_ceiling(cfg, r))),
            (RAW, timed(lambda r=ranges: read_raw(cfg, r))),
        ]
        results = measure_rounds(variants, sizes.runs)
        expected = sizes.source_1p if len(ranges) == 1 else 8 * sizes.source_8p_each
        ceiling = row_of(SECTION, f"{CEILING} [{label}]", results[CEILING], expected=expected)
        ceiling.short = f"ceiling [{label}]"
        ours = row_of(SECTION, f"{OURS} [{label}]", results[OURS],
                      expected=expected).against(ceiling)
        raw = row_of(SECTION, f"{RAW} [{label}]", results[RAW], expected=expected).against(ceiling)
        # The absolute target is per task on a whole partition; with 8 partitions each task
        # reads an eighth, so its fixed cost (connect, metadata) weighs more: ratio only.
        ours = (ours.target_rate_and_ratio(1_000_000, 0.6) if len(ranges) == 1
                else ours.target_ratio(0.6))
        rows += [ours, ceiling, raw]
    return rows


def bench_spark(spark: Any, cfg: ClientConfig, ranges: list[Range], sizes: Sizes) -> Row:
    """``spark.read.format("eoskafka")`` over every partition of a topic into the noop sink."""
    topic = ranges[0][0]
    records = 8 * sizes.source_8p_each if len(ranges) == 8 else sizes.source_1p
    bootstrap = ",".join(cfg.bootstrap_servers)

    def run() -> int:
        (spark.read.format("eoskafka")
         .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
         .write.format("noop").mode("overwrite").save())
        return records

    result = measure_rounds([("spark", timed(run))], sizes.spark_runs,
                            warmup=None if sizes.spark_warmup else [])["spark"]
    return row_of("Spark end to end",
                  f"spark.read eoskafka → noop, {len(ranges)} partitions, local[2]", result)
