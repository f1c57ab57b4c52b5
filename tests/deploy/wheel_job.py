"""Runs inside a fresh venv that has only the built eoskafka wheel (tests/deploy/test_wheel.py).

No ``register()`` call: ``format("eoskafka")`` must come from the installed
``pyspark_eoskafka`` package alone. Writes 100 rows (batch, exactly once), reads
them back, asks one task where it imported eoskafka from, and prints one JSON line.

    python wheel_job.py MASTER BOOTSTRAP TOPIC
"""

from __future__ import annotations

import json
import os
import sys


def _origin(_: object) -> str:
    import eos_kafka_source

    return eos_kafka_source.__file__ or ""


def main(argv: list[str]) -> int:
    master, bootstrap, topic = argv
    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors' Python: this venv's
    from pyspark.sql import SparkSession

    import eos_kafka_source

    spark = (SparkSession.builder.master(master).appName("eoskafka-wheel-job")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    values = [f"w{i}" for i in range(100)]
    (spark.createDataFrame([(v,) for v in values], "value string").repartition(2)
     .write.format("eoskafka").mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
    rows = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load().selectExpr("CAST(value AS STRING) AS v").collect())
    out = {
        "driver_module": eos_kafka_source.__file__,
        "task_module": spark.sparkContext.parallelize([0], 1).map(_origin).collect()[0],
        "read": sorted(r.v for r in rows),
    }
    spark.stop()
    print("WHEEL-JOB " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
