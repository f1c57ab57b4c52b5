"""A Spark Connect client, run as its own process (tests/deploy/test_connect.py).

A Connect session marks its whole Python process as "remote" (pyspark sets
``SPARK_CONNECT_MODE_ENABLED``), which would turn the test session's classic
SparkSession calls into Connect calls; so the client lives here. It runs, over
``sc://...``: a batch read, a batch write and a streaming read -> exactly-once
write (Trigger.AvailableNow), then prints one JSON line of what it saw. Whether
the data landed exactly once is checked by the test from the raw log.

    python connect_job.py URL BOOTSTRAP INPUT BATCH_OUT STREAM_OUT CHECKPOINT {static|register}
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession


def _head(exc: BaseException, lines: int = 4) -> str:
    """The first lines of the error a user reads."""
    return "\n".join(str(exc).strip().splitlines()[:lines])


def _resolves(spark: Any, bootstrap: str, topic: str) -> bool:
    """Does the server know format("eoskafka") (analysis only, no task)?"""
    try:
        schema = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).load().schema)
    except Exception as exc:  # noqa: BLE001 - the condition name is what we report
        if "DATA_SOURCE_NOT_FOUND" in str(exc):
            return False
        raise
    return "value" in schema.fieldNames()


def main(argv: list[str]) -> int:
    url, bootstrap, source, batch_out, stream_out, checkpoint, mode = argv
    spark = SparkSession.builder.remote(url).getOrCreate()
    out: dict[str, Any] = {"session": type(spark).__module__}
    out["static_before_register"] = _resolves(spark, bootstrap, source)
    if mode == "register":
        import eos_kafka_source

        eos_kafka_source.register(spark)

    def reader(topic: str) -> Any:
        return (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic))

    rows = reader(source).load().selectExpr("CAST(value AS STRING) AS v").collect()
    out["read"] = sorted(r.v for r in rows)

    (reader(source).load().select("key", "value").write.format("eoskafka").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", batch_out).save())

    query = (
        spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest").load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
        .option("topic", stream_out).option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    out["stream_input_rows"] = sum(p.numInputRows for p in query.recentProgress)

    try:  # the user's first line, over Connect, for a mistyped option: before Spark's
        # analysis of value.id (value is binary), which failed first when only the reader
        # checked the options
        reader(source).option("subscribee", source).load().select("value.id").collect()
        out["bad_option"] = None
    except Exception as exc:  # noqa: BLE001
        out["bad_option"] = _head(exc)
    spark.stop()
    print("CONNECT-JOB " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
