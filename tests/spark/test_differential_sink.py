"""The sink: one DataFrame written by ``format("kafka")`` and ``format("eoskafka")``.

Each format writes to its own topic (named in the DataFrame's ``topic`` column);
both topics are then read back and must hold, per partition, the same keys,
values and headers. Offsets differ by design (eoskafka's transaction markers
take offsets) and timestamps are the broker's clock, so neither is compared.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from eos_kafka_source.records import iter_batches
from eos_kafka_source.wire import fetch_metadata, leader_of
from eos_kafka_source.wire.fetch import fetch
from tests.kafka_helpers import create_topic, wire_for
from tests.oracle import assert_no_open_transactions
from tests.spark.differential import FORMATS, read_batch

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]

HEADERS = "array<struct<key:string,value:binary>>"


def frame(spark, topic: str, n: int, *, partition: bool, keys: bool = True):
    """``n`` rows: key, value, topic, optional partition and headers columns."""
    df = spark.range(n).select(
        F.when(F.lit(keys), F.concat(F.lit("k"), (F.col("id") % 11).cast("string")))
        .cast("binary").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.lit(topic).alias("topic"),
        F.when(F.col("id") % 4 == 0, F.array()).otherwise(F.array(
            F.struct(F.lit("id").alias("key"), F.col("id").cast("string").cast("binary")
                     .alias("value")),
            F.struct(F.lit("none").alias("key"), F.lit(None).cast("binary").alias("value")),
        )).cast(HEADERS).alias("headers"),
        (F.col("id") % 3).cast("int").alias("partition"),
    )
    return df if partition else df.drop("partition")


def write(df, fmt: str, bootstrap: str, tmp_path, **options: str) -> None:
    w = df.write.format(fmt).mode("append").option("kafka.bootstrap.servers", bootstrap)
    if fmt == "eoskafka":
        w = w.option("decisionLogLocation", str(tmp_path / "decisions"))
    for key, value in options.items():
        w = w.option(key, value)
    w.save()


def landed(spark, bootstrap: str, topic: str) -> dict[int, list]:
    """Per partition, the sorted (key, value, headers) of what a read_committed reader sees."""
    rows = read_batch(spark, "eoskafka", bootstrap, subscribe=topic, includeHeaders="true")
    out: dict[int, list] = {}
    for r in rows:
        out.setdefault(r[1], []).append((r[3], r[4], r[7] or ()))
    return {p: sorted(v, key=repr) for p, v in out.items()}


def write_both(spark, bootstrap, unique, tmp_path, *, partition: bool, n: int = 300,
               **options: str) -> dict[str, dict[int, list]]:
    """Both formats write the frame; what landed, per format. The oracle (kafka-python's
    record reader) needs python-snappy/lz4/zstandard for compressed logs, so it checks for
    open transactions on uncompressed writes only."""
    out = {}
    for fmt in FORMATS:
        topic = f"{unique}-{fmt}"
        create_topic(bootstrap, topic, partitions=3)
        write(frame(spark, topic, n, partition=partition), fmt, bootstrap, tmp_path, **options)
        out[fmt] = landed(spark, bootstrap, topic)
    if options.get("kafka.compression.type", "none") in ("none", "gzip"):
        assert_no_open_transactions(bootstrap, f"{unique}-eoskafka")
    return out


def test_partition_column_and_headers_land_alike(spark, bootstrap, unique, tmp_path) -> None:
    got = write_both(spark, bootstrap, unique, tmp_path, partition=True)
    assert sum(len(v) for v in got["kafka"].values()) == 300
    assert got["eoskafka"] == got["kafka"]


def test_key_hash_partitioning_matches_the_java_producer(spark, bootstrap, unique,
                                                         tmp_path) -> None:
    got = write_both(spark, bootstrap, unique, tmp_path, partition=False)
    assert len(got["kafka"]) == 3
    assert got["eoskafka"] == got["kafka"]


@pytest.mark.parametrize("codec, level", [("gzip", None), ("snappy", None), ("lz4", None),
                                          ("zstd", None), ("lz4", "12"), ("zstd", "10")])
def test_compression_type_is_honoured(spark, bootstrap, unique, tmp_path, codec,
                                      level) -> None:
    levels = {} if level is None else {f"kafka.compression.{codec}.level": level}
    got = write_both(spark, bootstrap, unique, tmp_path, partition=True, n=200,
                     includeHeaders="true", **{"kafka.compression.type": codec,
                                               "kafka.linger.ms": "5",
                                               "kafka.batch.size": "65536"}, **levels)
    assert got["eoskafka"] == got["kafka"]
    ids = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    for fmt in FORMATS:
        assert codecs_in_log(bootstrap, f"{unique}-{fmt}") == {ids[codec]}, fmt


def codecs_in_log(bootstrap: str, topic: str) -> set[int]:
    """The compression codec of every data batch in partition 0, read raw from the log."""
    with wire_for(bootstrap) as w:
        leader = leader_of(fetch_metadata(w, [topic]), (topic, 0))
        chunk = fetch(w, leader, {(topic, 0): 0}, max_bytes=8 << 20)[(topic, 0)]
    return {h.compression for h, _ in iter_batches(chunk.records) if not h.is_control}
