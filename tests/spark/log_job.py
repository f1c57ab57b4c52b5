"""A small exactly-once copy run in its own process, so that its stderr is its own
(tests/spark/test_log_lines.py). Prints nothing on stdout but a last ``LOG-JOB done``.

    python log_job.py BOOTSTRAP SOURCE OUT CHECKPOINT LOG4J2_FILE
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    bootstrap, source, out, checkpoint, log4j2 = argv
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-log-job")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.extraJavaOptions",
                     f"-Dlog4j2.configurationFile=file:{log4j2}")
             .getOrCreate())
    query = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value")
             .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()
    print("LOG-JOB done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
