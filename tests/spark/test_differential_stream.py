"""Streaming reads: both formats give the same rows and the same per-batch offset ranges.

Each case runs ``Trigger.AvailableNow`` once per format with its own checkpoint,
changes the topics, and runs again from the checkpoints: a query that stops
and resumes sees what a running one would, and the batches are deterministic.
"""

from __future__ import annotations

import json

import pytest
from pyspark.errors import StreamingQueryException

from eos_kafka_source import wire as kwire
from eos_kafka_source.source.lag import offsets_behind_latest
from tests.kafka_helpers import TxnWriter, create_topic, wire_for, write_plain
from tests.spark.differential import (
    FORMATS,
    Collect,
    available_now_both,
    delete_records,
    delete_topic,
    offset_ranges,
    start_stream,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]


def assert_same(runs: dict, ranges: bool = True) -> None:
    kafka, eos = runs["kafka"], runs["eoskafka"]
    assert kafka[0].rows, "the case read nothing: it proves nothing"
    assert eos[0].rows == kafka[0].rows
    if ranges:
        assert offset_ranges(eos[1]) == offset_ranges(kafka[1])


def values(runs: dict) -> list[bytes]:
    return sorted(r[4] for r in runs["eoskafka"][0].rows)


def test_max_offsets_per_trigger_with_available_now(spark, bootstrap, unique, tmp_path) -> None:
    create_topic(bootstrap, unique, partitions=3)
    for p in range(3):
        write_plain(bootstrap, unique, [f"v{p}-{i}".encode() for i in range(7 + 5 * p)],
                    partition=p)
    runs = available_now_both(spark, bootstrap, tmp_path, subscribe=unique,
                              startingOffsets="earliest", maxOffsetsPerTrigger="10")
    assert_same(runs)
    assert len(offset_ranges(runs["eoskafka"][1])) == 4  # 36 offsets, 10 a batch


def test_read_committed_stream_with_aborted_and_open_transactions(
        spark, bootstrap, unique, tmp_path) -> None:
    create_topic(bootstrap, unique, partitions=2)
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-o") as o:
        a.committed(unique, [b"c1", b"c2"], partition=0)
        a.aborted(unique, [b"x1", b"x2"], partition=0)
        o.begin_open(unique, [b"open"], partition=1)
        a.committed(unique, [b"after-open"], partition=1)
        first = available_now_both(spark, bootstrap, tmp_path, subscribe=unique,
                                   startingOffsets="earliest", maxOffsetsPerTrigger="3")
        o.commit_open()
    second = available_now_both(spark, bootstrap, tmp_path, subscribe=unique,
                                startingOffsets="earliest", maxOffsetsPerTrigger="3")
    assert_same(first)
    assert_same(second)
    assert values(first) == [b"c1", b"c2"]
    assert values(second) == [b"after-open", b"open"]


def test_pattern_with_topics_added_and_deleted(spark, bootstrap, unique, tmp_path) -> None:
    one, two, three = (f"{unique}-{i}" for i in (1, 2, 3))
    for t in (one, two):
        create_topic(bootstrap, t, partitions=2)
        write_plain(bootstrap, t, [f"{t}-a".encode()], partition=1)
    options = {"subscribePattern": f"{unique}-[0-9]", "startingOffsets": "earliest",
               "failOnDataLoss": "false"}
    assert_same(available_now_both(spark, bootstrap, tmp_path, **options))
    delete_topic(bootstrap, two)
    create_topic(bootstrap, three)
    write_plain(bootstrap, three, [b"three-a", b"three-b"], partition=0)
    write_plain(bootstrap, one, [b"one-b"], partition=0)
    runs = available_now_both(spark, bootstrap, tmp_path, **options)
    assert_same(runs)
    assert values(runs) == [b"one-b", b"three-a", b"three-b"]


def test_partitions_added_during_the_query(spark, bootstrap, unique, tmp_path) -> None:
    create_topic(bootstrap, unique, partitions=1)
    write_plain(bootstrap, unique, [b"p0-a"], partition=0)
    options = {"subscribe": unique, "startingOffsets": "earliest"}
    assert_same(available_now_both(spark, bootstrap, tmp_path, **options))
    with wire_for(bootstrap) as w:
        kwire.create_partitions(w, unique, 3)
    write_plain(bootstrap, unique, [b"p1-a"], partition=1)
    write_plain(bootstrap, unique, [b"p2-a", b"p2-b"], partition=2)
    runs = available_now_both(spark, bootstrap, tmp_path, **options)
    assert_same(runs)
    assert values(runs) == [b"p1-a", b"p2-a", b"p2-b"]


def test_subscribed_topic_deleted_during_the_query(spark, bootstrap, unique, tmp_path) -> None:
    """eoskafka skips a deleted subscribed topic under failOnDataLoss=false. Spark's
    connector does too when its consumer has not yet tried the gone partition, and
    otherwise fails with UnknownTopicOrPartition (timing-dependent; the differences table
    of docs/compatibility.md): either its rows equal eoskafka's or it failed that way,
    nothing else."""
    keep, gone = f"{unique}-keep", f"{unique}-gone"
    for t in (keep, gone):
        create_topic(bootstrap, t)
        write_plain(bootstrap, t, [f"{t}-a".encode()], partition=0)
    options = {"subscribe": f"{keep},{gone}", "startingOffsets": "earliest",
               "failOnDataLoss": "false"}
    assert_same(available_now_both(spark, bootstrap, tmp_path, **options))
    delete_topic(bootstrap, gone)
    write_plain(bootstrap, keep, [b"keep-b"], partition=0)
    rows = {}
    for fmt in FORMATS:
        sink = Collect()
        q = start_stream(spark, fmt, bootstrap, sink, str(tmp_path / f"run-{fmt}"),
                         {"availableNow": True}, **options)
        try:
            q.awaitTermination(300)
            rows[fmt] = [r[4] for r in sink.rows]
        except StreamingQueryException as exc:
            assert fmt == "kafka" and "UnknownTopicOrPartition" in str(exc), exc
        finally:
            q.stop()
    assert rows["eoskafka"] == [b"keep-b"]
    assert rows.get("kafka", rows["eoskafka"]) == rows["eoskafka"]


def test_retention_with_fail_on_data_loss_false(spark, bootstrap, unique, tmp_path) -> None:
    create_topic(bootstrap, unique, partitions=2)
    write_plain(bootstrap, unique, [b"a0"], partition=0)
    write_plain(bootstrap, unique, [b"a1"], partition=1)
    options = {"subscribe": unique, "startingOffsets": "earliest", "failOnDataLoss": "false"}
    assert_same(available_now_both(spark, bootstrap, tmp_path, **options))
    for p in range(2):
        write_plain(bootstrap, unique, [f"b{p}-{i}".encode() for i in range(5)], partition=p)
    delete_records(bootstrap, unique, {0: 4, 1: 6})  # the log start passes unread offsets
    runs = available_now_both(spark, bootstrap, tmp_path, **options)
    assert_same(runs, ranges=False)  # Spark's range starts where the checkpoint says
    assert values(runs) == [b"b0-3", b"b0-4"]


def test_offsets_behind_latest_match_sparks_metrics(spark, bootstrap, unique, tmp_path) -> None:
    """Spark's connector puts avg/max/minOffsetsBehindLatest in each batch's source metrics;
    a Python source cannot (PythonMicroBatchStream does not implement ReportsSourceMetrics),
    so eoskafka reports latestOffset and offsets_behind_latest() computes the same figures."""
    create_topic(bootstrap, unique, partitions=2)
    write_plain(bootstrap, unique, [b"x"] * 9, partition=0)
    write_plain(bootstrap, unique, [b"y"] * 3, partition=1)
    runs = available_now_both(spark, bootstrap, tmp_path, subscribe=unique,
                              startingOffsets="earliest", maxOffsetsPerTrigger="4")
    assert_same(runs)
    keys = ("avgOffsetsBehindLatest", "maxOffsetsBehindLatest", "minOffsetsBehindLatest")
    spark_figures = [{k: float(p["sources"][0]["metrics"][k]) for k in keys}
                     for p in runs["kafka"][1].recentProgress if p["numInputRows"]]
    ours = [offsets_behind_latest(p["sources"][0])
            for p in runs["eoskafka"][1].recentProgress if p["numInputRows"]]
    assert ours == spark_figures
    assert json.dumps(ours)  # plain numbers


def test_max_partitions_packs_each_batch_and_keeps_its_ranges(
        spark, bootstrap, unique, tmp_path) -> None:
    """maxPartitions=1: every batch's 3 ranges in one task; the same rows and per-batch
    offset ranges as Spark's connector (which ignores the option), across a restart."""
    create_topic(bootstrap, unique, partitions=3)
    for p in range(3):
        write_plain(bootstrap, unique, [f"v{p}-{i}".encode() for i in range(4 + 3 * p)],
                    partition=p)
    options = {"subscribe": unique, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": "5", "maxPartitions": "1"}
    assert_same(available_now_both(spark, bootstrap, tmp_path, **options))
    for p in range(3):
        write_plain(bootstrap, unique, [f"w{p}".encode()], partition=p)
    again = available_now_both(spark, bootstrap, tmp_path, **options)
    assert_same(again)
    assert values(again) == [b"w0", b"w1", b"w2"]
