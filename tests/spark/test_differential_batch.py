"""Batch reads: ``format("kafka")`` and ``format("eoskafka")`` return the same rows.

Same topics, same options (Spark's connector given
``kafka.isolation.level=read_committed``, eoskafka's default); every column of
every row must match. The shared topic holds plain records with keys, headers
and spread timestamps, committed and aborted transactions, on three partitions.
"""

from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaProducer

from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import committed_view
from tests.spark.differential import delete_records, read_both

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]

#: Plain records start one hour back (Kafka 4 refuses timestamps more than 1 h ahead).
BASE_MS = (int(time.time()) - 3600) * 1000
PER_PARTITION = 12


def produce(bootstrap: str, topic: str, partition: int, n: int, *, first_ts: int,
            tag: str, headers: bool = True) -> None:
    """``n`` plain records: key k<i>, value <tag>-<p>-<i>, timestamps a second apart."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(n):
            hdrs = [("h", f"{i}".encode()), ("n", b"")] if headers and i % 3 else None
            producer.send(topic, key=f"k{i % 5}".encode(), value=f"{tag}-{partition}-{i}".encode(),
                          partition=partition, timestamp_ms=first_ts + i * 1000, headers=hdrs)
        producer.flush()
    finally:
        producer.close(timeout=10)


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> str:
    """Three partitions: plain records (timestamps BASE_MS + i s), then committed and
    aborted transactions, then more plain records."""
    name = f"diff-{int(time.time() * 1000) % 10**8}"
    create_topic(bootstrap, name, partitions=3)
    for p in range(3):
        produce(bootstrap, name, p, PER_PARTITION // 2, first_ts=BASE_MS, tag="a")
    with TxnWriter(bootstrap, f"{name}-w") as w:
        for p in range(3):
            w.committed(name, [f"c-{p}".encode()] * 2, partition=p, keys=[b"tk", None])
            w.aborted(name, [f"x-{p}".encode()] * 3, partition=p)
    for p in range(3):
        produce(bootstrap, name, p, PER_PARTITION // 2,
                first_ts=BASE_MS + (PER_PARTITION // 2) * 1000, tag="b")
    return name


def assert_same(got: dict) -> None:
    assert got["kafka"], "the case read nothing: it proves nothing"
    assert got["eoskafka"] == got["kafka"]


def test_default_range_is_earliest_to_latest(spark, bootstrap, topic) -> None:
    got = read_both(spark, bootstrap, subscribe=topic)
    assert_same(got)
    assert not any(r[4].startswith(b"x-") for r in got["eoskafka"])


def test_offsets_as_words(spark, bootstrap, topic) -> None:
    assert_same(read_both(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                          endingOffsets="latest"))


def test_offsets_as_json_with_earliest_and_latest_sentinels(spark, bootstrap, topic) -> None:
    start = json.dumps({topic: {"0": 3, "1": -2, "2": 5}})
    end = json.dumps({topic: {"0": 10, "1": -1, "2": 8}})
    assert_same(read_both(spark, bootstrap, subscribe=topic, startingOffsets=start,
                          endingOffsets=end))


def test_global_timestamps(spark, bootstrap, topic) -> None:
    assert_same(read_both(spark, bootstrap, subscribe=topic,
                          startingTimestamp=str(BASE_MS + 2000),
                          endingTimestamp=str(BASE_MS + 9000)))


def test_per_partition_timestamps(spark, bootstrap, topic) -> None:
    start = json.dumps({topic: {"0": BASE_MS, "1": BASE_MS + 4000, "2": BASE_MS + 7000}})
    end = json.dumps({topic: {"0": BASE_MS + 5000, "1": BASE_MS + 11_000,
                              "2": BASE_MS + 3_600_000}})
    assert_same(read_both(spark, bootstrap, subscribe=topic,
                          startingOffsetsByTimestamp=start, endingOffsetsByTimestamp=end))


def test_by_timestamp_strategy_latest_for_a_timestamp_past_every_record(
        spark, bootstrap, topic) -> None:
    future = int(time.time() * 1000) + 600_000
    start = json.dumps({topic: {"0": BASE_MS + 3000, "1": future, "2": BASE_MS}})
    got = read_both(spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=start,
                    startingOffsetsByTimestampStrategy="latest")
    assert_same(got)
    assert {r[1] for r in got["eoskafka"]} == {0, 2}


@pytest.mark.parametrize("options", [
    {"startingTimestamp": "T+4000", "startingOffsets": "latest"},
    {"startingOffsetsByTimestamp": "BY", "startingOffsets": "earliest"},
    {"startingTimestamp": "T+6000", "startingOffsetsByTimestamp": "BY"},
    {"endingTimestamp": "T+8000", "endingOffsets": "latest"},
], ids=["timestamp-over-offsets", "by-timestamp-over-offsets", "timestamp-over-by-timestamp",
        "ending-timestamp-over-offsets"])
def test_starting_and_ending_options_follow_sparks_precedence(
        spark, bootstrap, topic, options) -> None:
    by = json.dumps({topic: {"0": BASE_MS + 1000, "1": BASE_MS + 2000, "2": BASE_MS + 3000}})
    resolved = {k: by if v == "BY" else str(BASE_MS + int(v[2:])) if v.startswith("T+") else v
                for k, v in options.items()}
    assert_same(read_both(spark, bootstrap, subscribe=topic, **resolved))


def test_assign(spark, bootstrap, topic) -> None:
    got = read_both(spark, bootstrap, assign=json.dumps({topic: [0, 2]}))
    assert_same(got)
    assert {r[1] for r in got["eoskafka"]} == {0, 2}


def test_subscribe_pattern_over_two_topics(spark, bootstrap, topic) -> None:
    other = f"{topic}-p2"
    create_topic(bootstrap, other, partitions=2)
    produce(bootstrap, other, 1, 4, first_ts=BASE_MS, tag="o")
    got = read_both(spark, bootstrap, subscribePattern=f"{topic}(-p2)?")
    assert_same(got)
    assert {r[0] for r in got["eoskafka"]} == {topic, other}


def test_include_headers(spark, bootstrap, topic) -> None:
    got = read_both(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert_same(got)
    assert any(r[7] for r in got["eoskafka"])


def test_min_partitions(spark, bootstrap, topic) -> None:
    assert_same(read_both(spark, bootstrap, subscribe=topic, minPartitions="7"))


def test_max_records_per_partition(spark, bootstrap, topic) -> None:
    assert_same(read_both(spark, bootstrap, subscribe=topic, maxRecordsPerPartition="4"))


def test_read_uncommitted_when_both_ask_for_it(spark, bootstrap, topic) -> None:
    got = read_both(spark, bootstrap, subscribe=topic,
                    **{"kafka.isolation.level": "read_uncommitted"})
    assert_same(got)
    assert any(r[4].startswith(b"x-") for r in got["eoskafka"])


def test_read_committed_over_committed_aborted_and_open_transactions(
        spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique, partitions=2)
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-o") as o:
        a.committed(unique, [b"c1", b"c2"], partition=0)
        a.aborted(unique, [b"x1"], partition=0)
        o.begin_open(unique, [b"open"], partition=1)
        a.committed(unique, [b"after-open"], partition=1)
        a.committed(unique, [b"c3"], partition=0)
        during = read_both(spark, bootstrap, subscribe=unique)
        o.commit_open()
    after = read_both(spark, bootstrap, subscribe=unique)
    assert_same(during)
    assert_same(after)
    assert b"after-open" not in {r[4] for r in during["eoskafka"]}
    assert {b"open", b"after-open"} <= {r[4] for r in after["eoskafka"]}


def test_compacted_topic(spark, bootstrap, unique) -> None:
    """Offsets with gaps: compaction removes superseded keys from closed segments."""
    create_topic(bootstrap, unique, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})
    deadline = time.monotonic() + 120
    round_ = 0
    while first_offset(bootstrap, unique) == 0:  # the cleaner has not run yet
        assert time.monotonic() < deadline, "the log cleaner never compacted the topic"
        # Each round's appends roll the segment (segment.ms) so the cleaner has one to clean.
        produce(bootstrap, unique, 0, 10, first_ts=int(time.time() * 1000), tag=f"r{round_}",
                headers=False)
        round_ += 1
        time.sleep(1)  # pacing the appends, not waiting for a result: the loop checks that
    got = read_both(spark, bootstrap, subscribe=unique)
    assert_same(got)
    offsets = [r[2] for r in got["eoskafka"]]
    # Read from the log start (0): compaction left gaps there, at the head or inside.
    assert offsets != list(range(len(offsets))), "compaction left no gap to read over"


def first_offset(bootstrap: str, topic: str) -> int:
    """Offset of the first record left in partition 0 (0 until compaction removes the head).

    Not the first batch's base offset: the cleaner keeps an idempotent producer's batch
    headers, emptied, to preserve its sequence state, so that stays 0 (measured on 4.3)."""
    return min((r.offset for r in committed_view(bootstrap, topic)[0].committed), default=0)


def test_log_start_moved_with_fail_on_data_loss_false(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique, partitions=2)
    for p in range(2):
        produce(bootstrap, unique, p, 10, first_ts=BASE_MS, tag="r")
    delete_records(bootstrap, unique, {0: 6, 1: 3})
    start = json.dumps({unique: {"0": 2, "1": 0}})
    got = read_both(spark, bootstrap, subscribe=unique, startingOffsets=start,
                    failOnDataLoss="false")
    assert_same(got)
    assert min(r[2] for r in got["eoskafka"] if r[1] == 0) == 6


def test_max_partitions_packs_tasks_but_reads_the_same_rows(spark, bootstrap, topic) -> None:
    """maxPartitions (eoskafka's; Spark's connector ignores it): 3 ranges in 2 tasks, or 7
    minPartitions pieces packed into 7 of at most 8, read exactly what Spark reads."""
    assert_same(read_both(spark, bootstrap, subscribe=topic, maxPartitions="2"))
    assert_same(read_both(spark, bootstrap, subscribe=topic, maxPartitions="1",
                          includeHeaders="true"))
    assert_same(read_both(spark, bootstrap, subscribe=topic, minPartitions="7",
                          maxPartitions="8"))
    frame = (spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("maxPartitions", "2").load())
    assert frame.rdd.getNumPartitions() == 2
