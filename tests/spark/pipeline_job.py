"""A streaming pipeline run as its own driver process, so tests can kill it.

eoskafka source (read_committed) -> transform -> eoskafka exactly-once sink,
Trigger.AvailableNow, checkpoint on disk. Faults come from EOSKAFKA_TEST_FAULTS, more
sink options (JSON) from EOSKAFKA_TEST_SINK_OPTIONS. EOSKAFKA_TEST_SOURCE=kafka reads
with Spark's own connector instead (``kafka.isolation.level=read_committed``: the mixed
pipeline of docs/latency.md), its jars on the driver's classpath. More source options
(JSON) come from EOSKAFKA_TEST_SOURCE_OPTIONS, the columns written (a JSON list of SQL
expressions; default key, value) from EOSKAFKA_TEST_COLUMNS.

    python pipeline_job.py BOOTSTRAP INPUT OUTPUT CHECKPOINT [MAX_OFFSETS] [MASTER]
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def start_pipeline(spark: SparkSession, bootstrap: str, source: str, sink: str,
                   checkpoint: str, max_offsets: str = "0",
                   sink_options: dict[str, str] | None = None,
                   source_format: str = "eoskafka", *,
                   source_options: dict[str, str] | None = None,
                   columns: list[str] | None = None) -> StreamingQuery:
    """The job's query, started in ``spark`` (the tests' own session restarts it there).

    ``source_format="kafka"``: Spark's connector reads, read_committed (its default,
    read_uncommitted, would pass on aborted records)."""
    reader = (
        spark.readStream.format(source_format)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if source_format == "kafka":
        reader = reader.option("kafka.isolation.level", "read_committed")
    if max_offsets != "0":
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    writer = (
        reader.load()
        .selectExpr(*(columns or ["key", "value"]))
        .writeStream.format("eoskafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
    )
    for key, value in (sink_options or {}).items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start()


def main(argv: list[str]) -> int:
    bootstrap, source, sink, checkpoint = argv[:4]
    max_offsets = argv[4] if len(argv) > 4 else "0"
    master = argv[5] if len(argv) > 5 else "local[2,3]"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv
    source_format = os.environ.get("EOSKAFKA_TEST_SOURCE", "eoskafka")
    builder = (
        SparkSession.builder.master(master)
        .appName("eoskafka-pipeline-job")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.triggerAvailableNowWrapper.enabled", "true")
    )
    if source_format == "kafka":
        from eos_kafka_source.apache_kafka.spark_connector import spark_jars

        builder = builder.config("spark.jars", spark_jars())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # More sink options (e.g. delivery.guarantee), as JSON, from the test.
    options = json.loads(os.environ.get("EOSKAFKA_TEST_SINK_OPTIONS", "{}"))
    query = start_pipeline(
        spark, bootstrap, source, sink, checkpoint, max_offsets, options, source_format,
        source_options=json.loads(os.environ.get("EOSKAFKA_TEST_SOURCE_OPTIONS", "{}")),
        columns=json.loads(os.environ.get("EOSKAFKA_TEST_COLUMNS", "null")))
    # The test's subprocess.run(timeout=600) would kill us silently: end first, and say so.
    if not query.awaitTermination(480):
        print("pipeline_job: the query did not end within 480 s", file=sys.stderr, flush=True)
        query.stop()
        spark.stop()
        return 3
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
