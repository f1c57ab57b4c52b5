"""``kafka.group.id`` on a streaming read: progress visible to Kafka's consumer-group tools.

Each batch's end offsets are committed to the group once Spark has committed the
batch (advisory: Spark's checkpoint stays the truth). The group's offsets are read
back with a plain OffsetFetch, as ``kafka-consumer-groups --describe`` does, and
compared with each partition's last stable offset: lag 0 after a drain.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eos_kafka_source import wire as kwire
from eos_kafka_source.wire.groups import commit_offsets, fetch_offset
from tests.brokers import ON_KAFKA
from tests.kafka_helpers import TxnWriter, create_topic, wire_for
from tests.oracle import committed_values

pytestmark = pytest.mark.spark


def _feed(bootstrap: str, topic: str) -> int:
    create_topic(bootstrap, topic, partitions=2)
    with TxnWriter(bootstrap, f"{topic}-feeder") as w:
        for p in (0, 1):
            w.committed(topic, [f"p{p}-{i}".encode() for i in range(25)], partition=p)
            w.aborted(topic, [b"aborted"] * 3, partition=p)
    return len(committed_values(bootstrap, topic))


def _drain(spark, bootstrap: str, topic: str, group: str, checkpoint: Path) -> int:
    """Run an AvailableNow query (noop sink); returns the rows its source read."""
    query = (
        spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic).option("startingOffsets", "earliest")
        .option("kafka.group.id", group).load()
        .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    return sum(p.numInputRows for p in query.recentProgress)


def _group_lag(bootstrap: str, topic: str, group: str) -> dict[int, int | None]:
    """Per partition: last stable offset minus the group's committed offset (None: none)."""
    with wire_for(bootstrap) as w:
        info = kwire.require_topics(w, [topic])[topic]
        bounds = kwire.fetch_bounds(w, {(topic, p): n for p, n in info.leaders.items()})
        out: dict[int, int | None] = {}
        for (_, partition), b in bounds.items():
            committed = fetch_offset(w, group, topic, partition)
            out[partition] = None if committed is None else b.last_stable - committed[0]
        return out


def test_batch_end_offsets_are_committed_to_the_group(spark, bootstrap, unique, tmp_path) -> None:
    group = f"{unique}-progress"
    expected = _feed(bootstrap, unique)
    assert _group_lag(bootstrap, unique, group) == {0: None, 1: None}

    assert _drain(spark, bootstrap, unique, group, tmp_path / "chk") == expected
    assert _group_lag(bootstrap, unique, group) == {0: 0, 1: 0}
    if ON_KAFKA:  # and as Kafka's own tool reports it
        from eos_kafka_source.apache_kafka import KafkaTools

        rows = KafkaTools(bootstrap).describe_group(group)
        assert sorted((r["PARTITION"], r["LAG"]) for r in rows if r["TOPIC"] == unique) == [
            ("0", "0"), ("1", "0")], rows


def test_a_new_query_never_starts_from_the_group(spark, bootstrap, unique, tmp_path) -> None:
    """The group is output only: a query with the same group but a new checkpoint reads
    from its startingOffsets, not from where the group says a previous query stopped."""
    group = f"{unique}-progress"
    expected = _feed(bootstrap, unique)
    with wire_for(bootstrap) as w:  # the group claims everything was read already
        commit_offsets(w, group, {(unique, 0): 28, (unique, 1): 28}, "a previous query")
    assert _drain(spark, bootstrap, unique, group, tmp_path / "chk") == expected
