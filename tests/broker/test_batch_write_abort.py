"""A batch write aborted by the driver: a task starting afterwards must not leave a
transaction open (found by the fresh-clone CI run: a task Spark launched just before
the job failed initialised its id after the driver's fence and wrote)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from eos_kafka_source.errors import TransactionLostError
from eos_kafka_source.sink.spark_writer import EosKafkaBatchWriter
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view

SCHEMA = StructType([StructField("value", BinaryType())])


def test_task_starting_after_the_abort_writes_nothing(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": unique}
    writer = EosKafkaBatchWriter(options, SCHEMA)
    writer.abort([None, None])  # the job failed; Spark aborts the write
    late = pa.RecordBatch.from_pydict({"value": [b"late"] * 10})
    with pytest.raises(TransactionLostError, match="already aborted"):
        writer.write(iter([late]))
    view = committed_view(bootstrap, unique)
    assert Counter(v for pv in view.values() for v in pv.committed_values) == Counter()
    assert sum(len(pv.open) for pv in view.values()) == 0
    assert_no_open_transactions(bootstrap, unique)


def test_a_write_that_was_not_aborted_is_not_refused(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    writer = EosKafkaBatchWriter({"kafka.bootstrap.servers": bootstrap, "topic": unique}, SCHEMA)
    handoff = writer.write(iter([pa.RecordBatch.from_pydict({"value": [b"ok"] * 3})]))
    writer.commit([handoff])
    await_markers(bootstrap, unique)  # Kafka writes the COMMIT marker after EndTxn answers
    view = committed_view(bootstrap, unique)
    assert Counter(v for pv in view.values() for v in pv.committed_values) == Counter({b"ok": 3})
