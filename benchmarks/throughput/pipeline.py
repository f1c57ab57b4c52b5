"""End to end: a streaming query eoskafka → ``selectExpr("key", "value")`` → eoskafka sink.

Exactly-once on both sides (read_committed source, transactional sink with its decision
log beside the checkpoint), ``Trigger.AvailableNow``, ``local[2]``. ``records`` are
written to an input topic beforehand (committed transactions, as for the source
benchmarks); the measure is records / wall time from ``start()`` to the end of
``awaitTermination()``: query start-up, planning, every micro-batch and the sink's
commits, not the Spark session's own start-up. Each run uses a fresh output topic and
checkpoint, and the output is checked: exactly ``records`` rows visible to a
read_committed reader.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from typing import Any

from eos_kafka_source.client.config import ClientConfig

from ..common import Row, Sizes, delete_topic, measure_rounds, new_topic, row_of
from . import source

SECTION = "Spark end to end"
#: Input and output partitions: one per local[2] core.
PARTITIONS = 2
#: Offsets a trigger may take: above any pipeline size, so the read is one batch.
MAX_PER_TRIGGER = 1 << 40


def prepare(cfg: ClientConfig, sizes: Sizes) -> tuple[str, str]:
    """The input topic, and a small one for the warm-up query."""
    topic = new_topic(cfg, "e2e-in", PARTITIONS)
    source.write_committed(cfg, topic, PARTITIONS, sizes.pipeline // PARTITIONS)
    small = new_topic(cfg, "e2e-warmup", PARTITIONS)
    source.write_committed(cfg, small, PARTITIONS, max(1, sizes.warmup // PARTITIONS))
    return topic, small


def run_query(spark: Any, cfg: ClientConfig, input_topic: str, output_topic: str,
              checkpoint: str) -> tuple[float, float]:
    """Run the query to completion; returns (wall seconds, seconds inside its micro-batches)."""
    bootstrap = ",".join(cfg.bootstrap_servers)
    started = time.perf_counter()
    query = (
        spark.readStream.format("eoskafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER))  # one batch, not the default cap
        .load()
        .selectExpr("key", "value")
        .writeStream.format("eoskafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"the pipeline query failed: {query.exception()}")
    in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress
                     if p["numInputRows"]) / 1000
    return elapsed, in_batches


def visible(cfg: ClientConfig, topic: str) -> int:
    """Records a read_committed reader sees in ``topic``."""
    return source.read_ours(cfg, source.committed_ranges(cfg, topic))


def bench(spark: Any, cfg: ClientConfig, topics: tuple[str, str], sizes: Sizes) -> Row:
    """Time the query over ``topics[0]`` (after a warm-up query over the small
    ``topics[1]``, unless --quick); every timed run's output is counted."""
    records = PARTITIONS * (sizes.pipeline // PARTITIONS)
    in_batches: list[float] = []

    def run_on(input_topic: str) -> tuple[int, float]:
        output = new_topic(cfg, "e2e-out", PARTITIONS)
        checkpoint = tempfile.mkdtemp(prefix="eoskafka-bench-e2e-")
        try:
            seconds, batches = run_query(spark, cfg, input_topic, output, checkpoint)
            in_batches.append(batches)
            return visible(cfg, output), seconds
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)
            delete_topic(cfg, output)

    warmup = [("e2e", lambda: run_on(topics[1]))] if sizes.spark_warmup else []
    result = measure_rounds([("e2e", lambda: run_on(topics[0]))], sizes.spark_runs,
                            warmup=warmup)["e2e"]
    timed = in_batches[len(in_batches) - len(result):]
    row = row_of(SECTION, f"streaming eoskafka → selectExpr(key, value) → eoskafka sink "
                 f"(exactly-once), AvailableNow, {PARTITIONS} partitions, local[2]",
                 result, expected=records)
    batch_s = statistics.median(timed)
    row.note = (f"wall time of the query; {batch_s:.2f} s of it inside the micro-batch "
                f"({records / batch_s / 1e3:,.0f}k records/s), the rest query start-up and "
                "shutdown" + (f"; {row.note}" if row.note else ""))
    return row.target_rate(400_000)
