"""The exactly-once sink in the test session's Spark (local[2,3]: tasks are retried).

Every test checks the committed view of the output (tests/oracle.py resolves
markers itself) and that no transaction is left open.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view

pytestmark = pytest.mark.spark


def _values(n: int, tag: str = "v") -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    await_markers(bootstrap, topic)  # Kafka writes markers after EndTxn answers
    view = committed_view(bootstrap, topic)
    return Counter(v for p in view.values() for v in p.committed_values)


def _aborted_or_open(bootstrap: str, topic: str) -> int:
    view = committed_view(bootstrap, topic)
    return sum(len(p.aborted) + len(p.open) for p in view.values())


def _batch_df(spark, values: list[bytes], partitions: int = 4):
    rows = [(v,) for v in values]
    return spark.createDataFrame(rows, "value binary").repartition(partitions)


@pytest.mark.smoke
def test_batch_write_exactly_once(spark, bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique, partitions=3)
    values = _values(1000)
    (_batch_df(spark, values).write.format("eoskafka").mode("append")
        .option("kafka.bootstrap.servers", bootstrap).option("topic", unique).save())
    assert _committed(bootstrap, unique) == Counter(values)
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)


def test_batch_write_topic_column_keys_headers_and_partition(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique, partitions=2)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", unique, i % 2, [("h", b"x")]) for i in range(50)],
        "key string, value string, topic string, partition int, "
        "headers array<struct<key: string, value: binary>>",
    )
    df.write.format("eoskafka").mode("append").option("kafka.bootstrap.servers", bootstrap).save()
    view = committed_view(bootstrap, unique)
    for partition, pv in view.items():
        assert sorted(r.value for r in pv.committed) == sorted(
            f"v{i}".encode() for i in range(50) if i % 2 == partition
        )
        assert all(r.headers == (("h", b"x"),) for r in pv.committed)
        assert all(r.key == r.value.replace(b"v", b"k") for r in pv.committed)
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)


def test_batch_write_that_fails_for_good_leaves_nothing_visible(
    spark, bootstrap, unique, faults
) -> None:
    create_topic(bootstrap, unique, partitions=2)
    faults("write.after_flush/1=raise")  # every attempt of task 1 fails after flushing
    with pytest.raises(Exception, match="injected fault"):
        (_batch_df(spark, _values(400)).write.format("eoskafka").mode("append")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", unique).save())
    assert _committed(bootstrap, unique) == Counter()
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)


@pytest.mark.parametrize(
    ("column", "type_", "message"),
    [
        ("value", "int", "column 'value' has type int"),
        ("key", "array<int>", "column 'key' has type array<int>"),
        ("partition", "string", "column 'partition' has type string"),
    ],
)
def test_wrong_column_types_fail_at_start(spark, bootstrap, unique, column, type_, message):
    create_topic(bootstrap, unique)
    cols = {"value": "CAST('v' AS BINARY)", column: f"CAST(NULL AS {type_})"}
    df = spark.range(1).selectExpr(*[f"{expr} AS {name}" for name, expr in cols.items()])
    with pytest.raises(Exception, match="EOSKAFKA_INVALID_INPUT_SCHEMA") as err:
        (df.write.format("eoskafka").mode("append")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", unique).save())
    assert message in str(err.value)


def test_missing_value_column(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique)
    with pytest.raises(Exception, match="has no 'value' column"):
        (spark.range(3).write.format("eoskafka").mode("append")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", unique).save())


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("kafka.acks", "1", "acks"),
        ("kafka.enable.idempotence", "false", "idempotence"),
        ("kafka.transactional.id", "mine", "transactionalIdPrefix"),
        ("topicc", "x", "topic"),
    ],
)
def test_settings_that_break_exactly_once_are_rejected(
    spark, bootstrap, unique, option, value, message
) -> None:
    with pytest.raises(Exception, match="EOSKAFKA_INVALID_OPTION") as err:
        (spark.range(1).selectExpr("CAST(id AS STRING) AS value").write.format("eoskafka")
            .mode("append").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", unique).option(option, value).save())
    assert message in str(err.value)


def _json_input(tmp_path: Path, files: int, per_file: int) -> tuple[Path, list[bytes]]:
    src = tmp_path / "in"
    src.mkdir()
    values = []
    for f in range(files):
        lines = []
        for i in range(per_file):
            v = f"f{f}-{i}"
            values.append(v.encode())
            lines.append(json.dumps({"value": v}))
        (src / f"part-{f:04d}.json").write_text("\n".join(lines) + "\n")
    return src, values


def _stream(spark, src: Path, bootstrap: str, topic: str, checkpoint: Path, **opts: str):
    df = (spark.readStream.schema("value string").option("maxFilesPerTrigger", 1).json(str(src))
          .repartition(3))
    writer = (df.writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", topic).option("checkpointLocation", str(checkpoint)))
    for k, v in opts.items():
        writer = writer.option(k, v)
    return writer


@pytest.mark.smoke
def test_streaming_write_exactly_once_and_bounded_id_pool(spark, bootstrap, unique, tmp_path):
    create_topic(bootstrap, unique, partitions=4)
    src, values = _json_input(tmp_path, files=5, per_file=200)
    query = _stream(spark, src, bootstrap, unique, tmp_path / "ckpt").trigger(
        availableNow=True).start()
    _finish(query)
    assert _committed(bootstrap, unique) == Counter(values)
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)
    pool = json.loads((tmp_path / "ckpt" / "eoskafka" / "pool.json").read_text())
    assert pool["size"] == 3  # one transactional id per task partition, not per batch
    (lineage,) = (tmp_path / "ckpt" / "eoskafka" / "decisions").iterdir()  # one query
    assert lineage.name == query.id  # decisions are keyed by Spark's query id
    decisions = sorted(p.name for p in lineage.iterdir())
    assert decisions == [f"{b:020d}.{s}" for b in range(5) for s in ("done", "json")]


@pytest.mark.parametrize("action", ["raise", "kill"], ids=["failure-after-flush", "worker-killed"])
def test_streaming_task_retry_after_flush_writes_once(
    spark, bootstrap, unique, tmp_path, faults, action
) -> None:
    create_topic(bootstrap, unique, partitions=2)
    src, values = _json_input(tmp_path, files=3, per_file=300)
    faults(f"write.after_flush/1={action}@{tmp_path / 'once'}")
    query = _stream(spark, src, bootstrap, unique, tmp_path / "ckpt").trigger(
        availableNow=True).start()
    _finish(query)
    assert (tmp_path / "once").exists(), "the fault did not fire"
    assert _committed(bootstrap, unique) == Counter(values)
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)


def test_query_stop_mid_batch_then_restart(spark, bootstrap, unique, tmp_path, faults) -> None:
    create_topic(bootstrap, unique, partitions=2)
    src, values = _json_input(tmp_path, files=3, per_file=100)
    gate = tmp_path / "gate"
    faults(f"write.after_flush/0=block:{gate}@{tmp_path / 'once'}")
    query = _stream(spark, src, bootstrap, unique, tmp_path / "ckpt").trigger(
        processingTime="100 milliseconds").start()
    _wait_for(gate.with_suffix(".started"), query)
    query.stop()
    gate.with_suffix(".release").touch()  # the blocked task now finishes after the abort
    faults("")
    query = _stream(spark, src, bootstrap, unique, tmp_path / "ckpt").trigger(
        availableNow=True).start()
    _finish(query)
    assert _committed(bootstrap, unique) == Counter(values)
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)


def _finish(query, timeout_s: int = 300) -> None:
    """Wait for an AvailableNow query to end by itself, with a deadline; it must not fail."""
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise AssertionError(f"the query did not end within {timeout_s}s")
    assert query.exception() is None, query.exception()


def _wait_for(path: Path, query) -> None:
    """Event wait: the fault point creates ``path`` when a task reaches it."""
    import time

    deadline = time.monotonic() + 120
    while not path.exists():
        if query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.05)


def test_empty_input_commits_nothing(spark, bootstrap, unique, tmp_path) -> None:
    create_topic(bootstrap, unique)
    df = spark.range(0).select(F.lit(b"x").alias("value"))
    df.write.format("eoskafka").mode("append").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", unique).save()
    assert _committed(bootstrap, unique) == Counter()
    assert _aborted_or_open(bootstrap, unique) == 0


def test_oversized_record_fails_clearly_and_nothing_is_visible(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique)
    df = spark.createDataFrame([(b"x" * 10,), (b"y" * 2_000_000,)], "value binary")
    with pytest.raises(Exception, match="EOSKAFKA_RECORD_TOO_LARGE") as err:
        (df.write.format("eoskafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", unique).save())
    assert "kafka.max.request.size=1048576" in str(err.value)
    assert _committed(bootstrap, unique) == Counter()
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)
