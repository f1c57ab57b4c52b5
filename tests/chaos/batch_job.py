"""A batch ``df.write`` of known rows with a fixed transactionalIdPrefix (operator chaos).

    python -m tests.chaos.batch_job BOOTSTRAP TOPIC PREFIX FIRST_ID COUNT

Local mode (the chaos cluster's cores belong to the streaming query). Faults come from
EOSKAFKA_TEST_FAULTS; exit 0 when the write succeeded, 1 when it failed (first line of
the error on stderr).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def main(argv: list[str]) -> int:
    bootstrap, topic, prefix, first, count = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-chaos-batch")
             .config("spark.ui.enabled", "false").config("spark.task.maxFailures", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        (spark.range(first, first + count).selectExpr("CAST(id AS STRING) AS value")
         .repartition(2).write.format("eoskafka").mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("transactionalIdPrefix", prefix).save())
    except Exception as exc:  # noqa: BLE001 - reported to the harness
        text = str(getattr(exc, "desc", None) or exc)
        line = next((ln for ln in text.splitlines() if "EOSKAFKA" in ln or "injected" in ln),
                    text.splitlines()[0] if text else repr(exc))
        print(f"batch_job failed: {line[:400]}", file=sys.stderr, flush=True)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
