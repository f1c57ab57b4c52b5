"""``eoskafka migrate`` end to end: a query on Spark's own connector hands over to eoskafka.

The old query reads and writes with ``format("kafka")`` (the jar from
eos_kafka_source/apache_kafka/spark_connector.py, on the ``spark`` fixture's classpath),
runs and stops; more input arrives while nothing runs; ``eoskafka migrate`` reads the
old checkpoint; the eoskafka query starts on a new checkpoint from the printed
``startingOffsets`` and writes to the same output topic. The union of both queries'
output, read from the raw log by tests/oracle.py, holds every input record exactly once:
no gap, nothing skipped, nothing read twice.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.cli import main
from tests.kafka_helpers import create_topic, write_plain
from tests.oracle import assert_no_open_transactions, committed_values
from tests.spark.test_source_stream import process_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only]


def _values(tag: str, partition: int, n: int) -> list[bytes]:
    return [f"{tag}-p{partition}-{i}".encode() for i in range(n)]


def _copy(spark, fmt: str, bootstrap: str, source: str, out: str, checkpoint: Path,
          **options: str):
    reader = spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in {"subscribe": source, **options}.items():
        reader = reader.option(key, value)
    return (reader.load().selectExpr("key", "value")
            .writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def test_kafka_query_hands_over_to_eoskafka_with_no_gap_and_no_duplicate(
        spark, bootstrap: str, unique: str, tmp_path: Path, capsys) -> None:
    source, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, out, partitions=2)
    before = {p: _values("before", p, 7 + 3 * p) for p in range(2)}
    for p, values in before.items():
        write_plain(bootstrap, source, values, partition=p)

    # The old query: Spark's connector both sides, several batches, then it stops.
    old = _copy(spark, "kafka", bootstrap, source, out, tmp_path / "old",
                startingOffsets="earliest", maxOffsetsPerTrigger="5")
    process_all(old)
    old.awaitTermination(120)
    assert old.exception() is None
    assert Counter(committed_values(bootstrap, out)) == Counter(sum(before.values(), []))

    # Input keeps arriving while nothing reads; one partition grows more than the other.
    after = {p: _values("after", p, 4 + 5 * p) for p in range(2)}
    for p, values in after.items():
        write_plain(bootstrap, source, values, partition=p)

    code = main(["migrate", "--checkpoint", str(tmp_path / "old"), "-b", bootstrap, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] and doc["broker_checked"], doc
    assert doc["starting_offsets"] == {source: {"0": 7, "1": 10}}
    assert doc["uncommitted_batch"] is None and not doc["warnings"]
    assert any("read_committed" in step for step in doc["steps"])

    # The eoskafka query: a new checkpoint, the printed offsets, the same output topic.
    new = _copy(spark, "eoskafka", bootstrap, source, out, tmp_path / "new",
                startingOffsets=doc["starting_offsets_json"])
    process_all(new)
    new.awaitTermination(120)
    assert new.exception() is None
    everything = sum(before.values(), []) + sum(after.values(), [])
    written = Counter(committed_values(bootstrap, out))
    assert written == Counter(everything), (
        f"missing {Counter(everything) - written}, extra {written - Counter(everything)}")
    assert_no_open_transactions(bootstrap, out)

    # The way back (docs/migrating.md): the same command reads the eoskafka checkpoint.
    code = main(["migrate", "--checkpoint", str(tmp_path / "new"), "--json"])
    back = json.loads(capsys.readouterr().out)
    assert code == 0 and back["starting_offsets"] == {source: {"0": 11, "1": 19}}

