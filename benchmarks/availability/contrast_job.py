"""One streaming copy job run as its own driver process, so the contrast can kill it.

Spark's Kafka source (read_committed) -> a pass-through Python UDF -> the sink under
test (``kafka`` or ``eoskafka``), ``Trigger.AvailableNow``, checkpoint on disk.
The same two faults reach both sinks the same way:

* ``CONTRAST_TASK_FAULT=BATCH@FLAG``: in that batch, task 0's first attempt fails
  half-way through its rows (after the sink has written the first half); Spark
  retries it. Fires once (FLAG).
* ``EOSKAFKA_KILL_BEFORE_COMMIT_LOG=BATCH@FLAG``: the driver JVM halts just before
  Spark writes that batch's commit log entry (``benchmarks/availability/java``), i.e. after
  the sink's output for it is complete.

    python -m benchmarks.availability.contrast_job FORMAT BOOTSTRAP INPUT OUTPUT CHECKPOINT JARS
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

MAX_OFFSETS = "2000"


def _task_fault_armed() -> bool:
    spec = os.environ.get("CONTRAST_TASK_FAULT")
    if not spec:
        return False
    from pyspark import TaskContext

    batch, flag = spec.split("@", 1)
    ctx = TaskContext.get()
    return (ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0
            and ctx.getLocalProperty("streaming.sql.batchId") == batch
            and not Path(flag).exists())


_seen = 0


def passthrough(value: bytes) -> bytes:
    """The value unchanged; fails once at the 500th row of task 0 when the fault is armed."""
    global _seen
    _seen += 1
    if _seen == 500 and _task_fault_armed():
        Path(os.environ["CONTRAST_TASK_FAULT"].split("@", 1)[1]).touch()
        raise RuntimeError("contrast: task fails after writing half of its rows")
    return value


def main(argv: list[str]) -> int:
    fmt, bootstrap, source, sink, checkpoint, jars = argv[:6]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2,3]")  # 3 attempts per task
        .appName(f"contrast-{fmt}")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.checkpointFileManagerClass",
                "eoskafka.faults.KillBeforeCommitLog")
        # Small Arrow batches into eoskafka's writer, so it has produced rows before the fault
        # (Spark's sink sends each row as it comes).
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed")
             .option("maxOffsetsPerTrigger", MAX_OFFSETS).load())
    through = udf(passthrough, "binary")  # pyspark 4.3 makes UDFs only with a session
    query = (frame.select("key", through("value").alias("value"))
             .writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
