"""A backlog bigger than one transaction timeout drains under a read bound.

On Apache Kafka (the session broker checks for timed-out transactions every second), a
copy query eoskafka -> eoskafka with ``kafka.transaction.timeout.ms`` of 6 s, and every
produce batch of 5 records slowed by 1 s at the fault point ``write.after_round`` (one
produce round: the next batch of every partition; ``write.after_batch`` fires once per
Arrow batch Spark hands the task, which made the stall depend on Spark's batching): the
whole backlog (60 records) takes 12 s in one batch, twice the timeout.

1. One batch reading the whole backlog (what a read without bound plans) is trapped:
   Kafka aborts its transactions, every attempt fails, and so would every replay, since a
   replay reads the same planned offsets (``<checkpoint>/offsets/0``).
2. The way out that docs/operations.md documents: with the query stopped, delete the
   planned-but-uncommitted ``offsets/0`` and restart with a read bound
   (``maxOffsetsPerTrigger``; the default bound, 1,000,000 offsets, is sized the same way
   for the default 15-minute timeout): the backlog drains in batches that each fit,
   every record exactly once (tests/oracle.py).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from tests.kafka_helpers import create_topic, write_plain
from tests.oracle import assert_no_open_transactions, committed_values
from tests.spark.test_source_stream import process_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only, pytest.mark.faults]

TIMEOUT_MS = 6000
BACKLOG = 60  # x 1 s per 5 records = 12 s in one batch


def _copy(spark, bootstrap: str, source: str, out: str, checkpoint: Path, max_offsets: int):
    return (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max_offsets)).load()
            .selectExpr("key", "value")
            .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out).option("checkpointLocation", str(checkpoint))
            .option("kafka.transaction.timeout.ms", str(TIMEOUT_MS))
            .option("producer.batchRecords", "5")
            .trigger(availableNow=True).start())


def test_a_backlog_longer_than_the_transaction_timeout_drains_under_a_read_bound(
        spark, bootstrap: str, unique: str, tmp_path: Path, faults) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source, partitions=1)
    create_topic(bootstrap, out, partitions=1)
    backlog = [f"r{i}".encode() for i in range(BACKLOG)]
    write_plain(bootstrap, source, backlog, partition=0)
    checkpoint = tmp_path / "chk"
    faults("write.after_round=sleep:1")

    trapped = _copy(spark, bootstrap, source, out, checkpoint, max_offsets=BACKLOG)
    with pytest.raises(StreamingQueryException) as failed:
        trapped.awaitTermination(600)
    # Trapped by the timeout (a task fenced by Kafka's abort, or the driver's check before
    # deciding), not by anything else that can stop a query.
    assert re.search(r"EOSKAFKA_TIMEOUT|PRODUCER_FENCED|INVALID_PRODUCER_EPOCH",
                     str(failed.value)), str(failed.value)[:2000]
    assert not (checkpoint / "commits" / "0").exists()
    assert committed_values(bootstrap, out) == []  # nothing of the trapped batch is visible

    for planned in ("0", ".0.crc"):  # the documented way out (operations.md)
        (checkpoint / "offsets" / planned).unlink(missing_ok=True)
    bounded = _copy(spark, bootstrap, source, out, checkpoint, max_offsets=10)
    process_all(bounded)
    bounded.awaitTermination(120)
    assert bounded.exception() is None
    faults("")
    batches = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert batches == list(range(6))  # 10 offsets a batch
    written = Counter(committed_values(bootstrap, out))
    assert written == Counter(backlog), (
        f"missing {Counter(backlog) - written}, extra {written - Counter(backlog)}")
    assert_no_open_transactions(bootstrap, out)
