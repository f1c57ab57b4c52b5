"""Lifecycle cases through real Spark (issue 15): what users do between runs.

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
