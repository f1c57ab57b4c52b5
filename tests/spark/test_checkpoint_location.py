"""The decision log where Spark's checkpoint is; a batch's identity read, never guessed
(docs/design.md invariants 13 and 15), through real Spark.

- A checkpoint path without a scheme: Spark resolves it against Hadoop's ``fs.defaultFS``.
  ViewFs stands in for a cluster's ``hdfs:`` (hadoop-common ships with Spark): with
  ``fs.defaultFS=viewfs://c/`` and a mount of ``<tmp>/x`` on ``<tmp>/other``, Spark's
  ``<tmp>/x/chk`` lands in ``<tmp>/other/chk`` while pyarrow opens ``file://<tmp>/x/chk``.
- A checkpoint given only as ``spark.sql.streaming.checkpointLocation`` reaches no writer
  option; a rewound batch must still be told from a replay.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql.streaming import StreamingQuery

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view

pytestmark = [pytest.mark.spark]


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    await_markers(bootstrap, topic)
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def _feed(bootstrap: str, topic: str, unique: str, tag: str) -> Counter[bytes]:
    with TxnWriter(bootstrap, f"{unique}-feed-{tag}") as writer:
        for p in range(2):
            writer.committed(topic, [f"{tag}{p}-{i}".encode() for i in range(50)], partition=p)
    return Counter(f"{tag}{p}-{i}".encode() for p in range(2) for i in range(50))


def _start(spark, bootstrap: str, src: str, out: str,  # noqa: ANN001
           **options: str) -> StreamingQuery:
    reader = (spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "150"))
    writer = (reader.load().selectExpr("key", "value").writeStream.format("eoskafka")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", out))
    name = options.pop("queryName", None)
    if name:
        writer = writer.queryName(name)
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start()


@contextmanager
def _session_conf(spark, **conf: str) -> Iterator[None]:  # noqa: ANN001
    """Session conf for one test (the session is shared): set, then unset."""
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in conf:
            spark.conf.unset(key)


def test_checkpoint_without_a_scheme_that_spark_puts_elsewhere_is_refused(
        spark, bootstrap: str, unique: str, tmp_path: Path) -> None:  # noqa: ANN001
    """Measured before the fix (Kafka 4.4): the query ran, Spark's checkpoint went to
    <tmp>/other/chk and the decision log to file://<tmp>/x/chk/eoskafka. A driver on another
    host (here: that directory gone) after the sink committed batch 0 and before Spark wrote
    commits/0 (here: commits/0 deleted) found no decision and committed the replay as new:
    every row twice. Now the first start is refused, naming both places and the fix."""
    src, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, src, partitions=2)
    create_topic(bootstrap, out, partitions=2)
    rows = _feed(bootstrap, src, unique, "a")
    mounted, other = tmp_path / "x", tmp_path / "other"
    other.mkdir()
    ckpt = str(mounted / "chk")  # no scheme: Spark resolves it on fs.defaultFS
    with _session_conf(spark, **{"fs.defaultFS": "viewfs://c/",
                                 f"fs.viewfs.mounttable.c.link.{mounted}": f"file://{other}"}):
        query = _start(spark, bootstrap, src, out, checkpointLocation=ckpt)
        with pytest.raises(Exception, match="EOSKAFKA_DECISION_LOG_ELSEWHERE") as refused:
            query.awaitTermination(480)
        assert (other / "chk" / "metadata").exists()  # Spark's checkpoint: elsewhere
    message = str(refused.value)
    for part in (repr(ckpt), f"file://{ckpt}", "fs.defaultFS", "with its scheme",
                 "duplicates"):
        assert part in message, part
    assert _committed(bootstrap, out) == Counter()  # refused before any task wrote
    assert not (mounted / "chk" / "eoskafka").exists()  # no decision log on the wrong disk
    assert_no_open_transactions(bootstrap, out)
    # The fix the error names: the location with its scheme, which Spark resolves alike.
    query = _start(spark, bootstrap, src, out, checkpointLocation=f"file://{other}/chk2")
    assert query.awaitTermination(480) and query.exception() is None
    assert _committed(bootstrap, out) == rows
    assert_no_open_transactions(bootstrap, out)


def test_rewound_checkpoint_given_only_as_spark_conf_is_refused(
        spark, bootstrap: str, unique: str, tmp_path: Path) -> None:  # noqa: ANN001
    """With the checkpoint only in spark.sql.streaming.checkpointLocation
    (Spark keeps it at <conf>/<queryName>; the writer gets no checkpointLocation option),
    the sink skipped its batch-identity check. Measured before the fix (Kafka 4.4): batch 0
    wrote 100 rows, 100 more arrived, offsets/0 and commits/0 were deleted; the restarted
    query's batch 0 over all 200 was aborted as a replay and success reported: the 100 new
    rows never appeared. Now it is refused by name; restoring the files lets it go on."""
    src, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, src, partitions=2)
    create_topic(bootstrap, out, partitions=2)
    first = _feed(bootstrap, src, unique, "a")
    conf, name = tmp_path / "conf", f"q_{unique.replace('-', '_')}"
    ckpt = conf / name  # where Spark keeps it
    options = {"queryName": name, "decisionLogLocation": str(tmp_path / "decisions")}
    with _session_conf(spark, **{"spark.sql.streaming.checkpointLocation": str(conf)}):
        query = _start(spark, bootstrap, src, out, **options)
        assert query.awaitTermination(480) and query.exception() is None
        assert _committed(bootstrap, out) == first
        later = _feed(bootstrap, src, unique, "b")
        kept = tmp_path / "kept"
        for log in ("offsets", "commits"):  # the operator rewinds to reprocess batch 0
            (kept / log).mkdir(parents=True)
            for entry in ("0", ".0.crc"):
                if (ckpt / log / entry).exists():
                    shutil.move(ckpt / log / entry, kept / log / entry)
        query = _start(spark, bootstrap, src, out, **options)
        with pytest.raises(Exception, match="EOSKAFKA_REPLAY_MISMATCH") as refused:
            query.awaitTermination(480)
        assert f"{ckpt}/offsets/0" in str(refused.value)
        assert _committed(bootstrap, out) == first  # nothing of the rewound batch
        assert_no_open_transactions(bootstrap, out)
        for log in ("offsets", "commits"):  # the fix the error names: restore the files
            for entry in ("0", ".0.crc"):
                (ckpt / log / entry).unlink(missing_ok=True)
                if (kept / log / entry).exists():
                    shutil.copy(kept / log / entry, ckpt / log / entry)
        query = _start(spark, bootstrap, src, out, **options)
        assert query.awaitTermination(480) and query.exception() is None
    assert _committed(bootstrap, out) == first + later
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)
