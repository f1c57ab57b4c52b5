"""Lifecycle cases through real Spark: what users do between runs.

- a streaming query whose checkpoint is deleted and started again with the same options,
  decision log kept apart (``decisionLogLocation``): a new query, all of its rows written;
- a batch ``df.write`` that failed, rerun with the same fixed ``transactionalIdPrefix``.
Both lost or refused rows on Apache Kafka 4.3.1 before the fix.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.spark.test_sink_recovery import _restart

pytestmark = [pytest.mark.spark]


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    await_markers(bootstrap, topic)
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def test_reset_checkpoint_with_a_kept_decision_log_writes_everything_again(
        spark, bootstrap: str, unique: str, tmp_path: Path) -> None:  # noqa: ANN001
    """Measured before the fix: the new query's batches met the old query's done decisions
    for the same batch ids, were aborted as replays, and Spark reported success: 120 of
    240 rows never appeared."""
    src, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, src, partitions=2)
    create_topic(bootstrap, out, partitions=2)
    with TxnWriter(bootstrap, f"{unique}-feed") as feed:
        for p in range(2):
            feed.committed(src, [f"r{p}-{i}".encode() for i in range(60)], partition=p)
    options = {"decisionLogLocation": str(tmp_path / "decisions")}
    ckpt = tmp_path / "ckpt"
    _restart(spark, bootstrap, src, out, ckpt, options)
    once = _committed(bootstrap, out)
    assert sum(once.values()) == 120
    shutil.rmtree(ckpt)  # the operator resets the query: same options, same paths
    _restart(spark, bootstrap, src, out, ckpt, options)  # a new query id: a new query
    assert _committed(bootstrap, out) == once + once  # the new query reprocessed it all
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)


def test_failed_batch_write_then_rerun_with_a_fixed_prefix(
        spark, bootstrap: str, unique: str, faults) -> None:
    """Before the fix, every write with the prefix failed after one failed write
    ("was already aborted by the driver"), for offsets.retention.minutes (7 days)."""
    create_topic(bootstrap, unique, partitions=2)
    df = spark.range(40).selectExpr("CAST(id AS STRING) AS value").repartition(2)
    write = (df.write.format("eoskafka").mode("append")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", unique)
             .option("transactionalIdPrefix", f"{unique}-fixed"))
    faults("write.after_flush/1=raise")  # task 1 fails on every attempt: the write fails
    with pytest.raises(Exception, match="injected fault"):
        write.save()
    faults("")
    write.save()  # the user reruns it
    assert _committed(bootstrap, unique) == Counter(str(i).encode() for i in range(40))
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)


def test_rewound_checkpoint_is_refused_loudly_and_loses_nothing(
        spark, bootstrap: str, unique: str, tmp_path: Path) -> None:  # noqa: ANN001
    """A rewound checkpoint (invariant 13), measured on Kafka 4.3.1 before the fix: batch 0
    wrote 100 rows, 100 more arrived, offsets/0 and commits/0 were deleted; the restarted
    query planned batch 0 over all 200, took it for a replay of the committed batch 0,
    aborted it and reported success: the 100 new rows never appeared. Now it stops with
    EOSKAFKA_REPLAY_MISMATCH, and restoring the files lets it go on, every row once."""
    from tests.spark.pipeline_job import start_pipeline

    src, out = f"{unique}-in", f"{unique}-out"
    create_topic(bootstrap, src, partitions=2)
    create_topic(bootstrap, out, partitions=2)

    def feed(tag: str) -> Counter[bytes]:
        with TxnWriter(bootstrap, f"{unique}-feed-{tag}") as writer:
            for p in range(2):
                writer.committed(src, [f"{tag}{p}-{i}".encode() for i in range(50)],
                                 partition=p)
        return Counter(f"{tag}{p}-{i}".encode() for p in range(2) for i in range(50))

    first = feed("a")
    ckpt = tmp_path / "ckpt"
    _restart(spark, bootstrap, src, out, ckpt)  # batch 0: the 100 rows
    assert _committed(bootstrap, out) == first
    later = feed("b")  # 100 more arrive
    kept = tmp_path / "kept"
    for log in ("offsets", "commits"):  # the operator rewinds to reprocess batch 0
        (kept / log).mkdir(parents=True)
        for name in ("0", ".0.crc"):
            if (ckpt / log / name).exists():
                shutil.move(ckpt / log / name, kept / log / name)
    query = start_pipeline(spark, bootstrap, src, out, str(ckpt), "150")
    with pytest.raises(Exception, match="EOSKAFKA_REPLAY_MISMATCH") as refused:
        query.awaitTermination(480)
    assert "startingOffsets" in str(refused.value) and "restore" in str(refused.value)
    assert _committed(bootstrap, out) == first  # nothing of the rewound batch, nothing lost
    assert_no_open_transactions(bootstrap, out)
    for log in ("offsets", "commits"):  # the fix the error names: restore the files
        for name in ("0", ".0.crc"):
            (ckpt / log / name).unlink(missing_ok=True)
            if (kept / log / name).exists():
                shutil.copy(kept / log / name, ckpt / log / name)
    _restart(spark, bootstrap, src, out, ckpt)  # batch 1: the 100 new rows
    assert _committed(bootstrap, out) == first + later
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)
