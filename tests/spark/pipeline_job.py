"""A streaming pipeline run as its own driver process, so tests can kill it.

eoskafka source (read_committed) -> transform -> eoskafka exactly-once sink,
Trigger.AvailableNow, checkpoint on disk. Faults come from EOSKAFKA_TEST_FAULTS, more
sink options (JSON) from EOSKAFKA_TEST_SINK_OPTIONS.

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
                   sink_options: dict[str, str] | None = None) -> StreamingQuery:
    """The job's query, started in ``spark`` (the tests' own session restarts it there)."""
    reader = (
        spark.readStream.format("eoskafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if max_offsets != "0":
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    writer = (
        reader.load()
        .selectExpr("key", "value")
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
    spark = (
        SparkSession.builder.master(master)
        .appName("eoskafka-pipeline-job")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.triggerAvailableNowWrapper.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # More sink options (e.g. delivery.guarantee), as JSON, from the test.
    options = json.loads(os.environ.get("EOSKAFKA_TEST_SINK_OPTIONS", "{}"))
    query = start_pipeline(spark, bootstrap, source, sink, checkpoint, max_offsets, options)
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
