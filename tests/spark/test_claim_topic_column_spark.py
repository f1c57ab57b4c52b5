"""Through real Spark: two streaming queries writing a ``topic``
column (no ``topic`` option) with one ``transactionalIdPrefix``: the second is refused at
its first commit (EOSKAFKA_TRANSACTIONAL_ID_CLASH), and nothing of it is committed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view

pytestmark = [pytest.mark.spark]


def _query(spark, bootstrap: str, src: str, out: str, ckpt: Path, prefix: str):  # noqa: ANN001, ANN202
    return (spark.readStream.format("eoskafka")
            .option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
            .option("startingOffsets", "earliest").load()
            .selectExpr("value", f"'{out}' AS topic")
            .writeStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
            .option("transactionalIdPrefix", prefix).option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True).start())


def test_a_second_topic_column_query_on_the_prefix_is_refused(
        spark, bootstrap: str, unique: str, tmp_path: Path) -> None:  # noqa: ANN001
    src, out, prefix = f"{unique}-in", f"{unique}-out", f"{unique}-shared"
    create_topic(bootstrap, src, partitions=1)
    create_topic(bootstrap, out, partitions=1)
    rows = [f"r{i}".encode() for i in range(20)]
    with TxnWriter(bootstrap, f"{unique}-feed") as feed:
        feed.committed(src, rows, partition=0)
    first = _query(spark, bootstrap, src, out, tmp_path / "q1", prefix)
    assert first.awaitTermination(480) and first.exception() is None
    second = _query(spark, bootstrap, src, out, tmp_path / "q2", prefix)
    with pytest.raises(StreamingQueryException, match="EOSKAFKA_TRANSACTIONAL_ID_CLASH"):
        second.awaitTermination(480)
    await_markers(bootstrap, out)
    assert Counter(v for pv in committed_view(bootstrap, out).values()
                   for v in pv.committed_values) == Counter(rows)
    assert_java_agrees(bootstrap, out)
    assert_no_open_transactions(bootstrap, out)
