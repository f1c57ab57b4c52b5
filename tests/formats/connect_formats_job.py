"""A Spark Connect client reading and writing Avro payloads (tests/formats/test_formats_connect.py).

Its own process: a Connect session marks the whole Python process remote. Over ``sc://``:
a batch read whose ``value.customer`` only analyses if the server's schema() decoded the
struct, then a streaming read -> exactly-once Avro write (Trigger.AvailableNow). Prints one
JSON line of what it saw.

    python connect_formats_job.py URL BOOTSTRAP REGISTRY SOURCE OUT CHECKPOINT
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession


def main(argv: list[str]) -> int:
    url, bootstrap, registry, source, out_topic, checkpoint = argv
    spark = SparkSession.builder.remote(url).getOrCreate()

    def reader(r: Any) -> Any:
        return (r.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", source).option("startingOffsets", "earliest")
                .option("valueFormat", "avro").option("schema.registry.url", registry))

    out: dict[str, Any] = {"session": type(spark).__module__}
    rows = reader(spark.read).load().select("offset", "value.customer").collect()
    out["read"] = [r.customer for r in sorted(rows, key=lambda r: r.offset)]
    query = (reader(spark.readStream).load().select("value")
             .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", out_topic).option("valueFormat", "avro")
             .option("schema.registry.url", registry)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    out["stream_input_rows"] = sum(p.numInputRows for p in query.recentProgress)
    spark.stop()
    print("CONNECT-JOB " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
