"""Run by spark-submit (tests/deploy/test_task_slots.py): how many input partitions a batch
read of TOPIC plans when ``maxPartitions`` is not set, as one line of JSON.

    spark-submit --master MASTER [flags] slots_job.py BOOTSTRAP TOPIC
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    bootstrap, topic = argv
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("eoskafka-slots-job").getOrCreate()
    frame = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).load())
    out = {"partitions": frame.rdd.getNumPartitions()}  # planned on the driver: no task runs
    spark.stop()
    print("SLOTS-JOB " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
