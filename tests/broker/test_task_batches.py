"""What a task writes, whatever the record sizes and timestamps (session broker).

Batches are cut by bytes per partition under the topic's ``max.message.bytes``; a timestamp
Kafka 4 refuses fails the task with an error naming the column and the broker setting.
"""

from __future__ import annotations

import datetime
from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType, TimestampType

from eos_kafka_source.errors import InvalidTimestampError
from eos_kafka_source.sink.spark_writer import EosKafkaBatchWriter
from tests.brokers import KAFKA_VERSION
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view

KEYED = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
STAMPED = StructType([StructField("value", BinaryType()),
                      StructField("timestamp", TimestampType())])


def _committed(bootstrap: str, topic: str) -> Counter[bytes | None]:
    await_markers(bootstrap, topic)
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def test_small_values_with_a_few_big_ones_on_one_key_across_200_partitions(
        bootstrap: str, unique: str) -> None:
    """Found by the issue's workload: the records per batch came from the Arrow batch's average
    size, so the partition of the key holding six 500 KB values got one batch of ~3 MB, over
    max.message.bytes (MESSAGE_TOO_LARGE, the task failed)."""
    create_topic(bootstrap, unique, partitions=200)
    small = [(f"k{i}".encode(), f"v{i:06d}".encode() * 12) for i in range(8000)]
    big = [(b"the-big-key", bytes([65 + i]) * 500_000) for i in range(6)]
    rows = small[:4000] + big + small[4000:]
    batch = pa.RecordBatch.from_pydict({"key": [k for k, _ in rows],
                                        "value": [v for _, v in rows]})
    writer = EosKafkaBatchWriter({"kafka.bootstrap.servers": bootstrap, "topic": unique}, KEYED)
    writer.commit([writer.write(iter([batch]))])
    assert _committed(bootstrap, unique) == Counter(v for _, v in rows)
    assert_no_open_transactions(bootstrap, unique)


def test_batches_stay_under_the_topic_max_message_bytes(bootstrap: str, unique: str) -> None:
    """A topic with a small max.message.bytes: batches were cut at 900 KB whatever the topic
    allowed (MESSAGE_TOO_LARGE on Kafka)."""
    create_topic(bootstrap, unique, partitions=2, config={"max.message.bytes": "65536"})
    values = [f"{i:05d}".encode() * 200 for i in range(2000)]  # 1 KB each, 2 MB in all
    writer = EosKafkaBatchWriter({"kafka.bootstrap.servers": bootstrap, "topic": unique},
                                 StructType([StructField("value", BinaryType())]))
    writer.commit([writer.write(iter([pa.RecordBatch.from_pydict({"value": values})]))])
    assert _committed(bootstrap, unique) == Counter(values)
    assert_no_open_transactions(bootstrap, unique)


@pytest.mark.kafka_only
def test_timestamp_far_in_the_future(bootstrap: str, unique: str) -> None:
    """Kafka 4 refuses timestamps more than an hour ahead (KIP-1030); the task said only
    "Kafka error 32 ERROR_32" (and Spark retried it four times). Kafka 3.9 accepts them."""
    create_topic(bootstrap, unique)
    ahead = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=2)
    batch = pa.RecordBatch.from_pydict({
        "value": [b"future"] * 3,
        "timestamp": pa.array([ahead] * 3, pa.timestamp("us", tz="UTC")),
    })
    writer = EosKafkaBatchWriter({"kafka.bootstrap.servers": bootstrap, "topic": unique}, STAMPED)
    if KAFKA_VERSION is not None and KAFKA_VERSION.startswith("3."):
        writer.commit([writer.write(iter([batch]))])
        assert _committed(bootstrap, unique) == Counter([b"future"] * 3)
        return
    with pytest.raises(InvalidTimestampError) as err:
        writer.write(iter([batch]))
    message = str(err.value)
    assert "`timestamp` column" in message and "log.message.timestamp.after.max.ms" in message
    assert ahead.isoformat(timespec="seconds")[:16] in message  # the offending value, readable
    writer.abort([None])
    assert _committed(bootstrap, unique) == Counter()
    assert_no_open_transactions(bootstrap, unique)
