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
from eos_kafka_source.sink.task.context import WriterContext
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.sink_harness import crash_between_endtxns

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


def _tasks(monkeypatch, n: int):  # noqa: ANN001, ANN202
    """Task partitions 0..n-1 for writer.write() outside Spark (no TaskContext)."""
    from eos_kafka_source.sink import spark_writer

    parts = iter(range(n))
    monkeypatch.setattr(spark_writer, "_task_context",
                        lambda: WriterContext(task_partition=next(parts)))


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    await_markers(bootstrap, topic)
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def test_a_write_its_abort_finished_says_so_and_the_next_write_is_told_once(
        bootstrap: str, unique: str, tmp_path, faults, monkeypatch) -> None:  # noqa: ANN001
    """A batch write's abort after its decision. Before the fix: abort() rolled the decision forward
    silently, the write failed, and the next write with the same decisionLogLocation was not told: a
    rerun wrote every row twice."""
    from eos_kafka_source.errors import PreviousWriteCompletedError, WriteCommittedError

    create_topic(bootstrap, unique, partitions=2)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": unique,
               "decisionLogLocation": str(tmp_path / "log")}
    _tasks(monkeypatch, 2)
    writer = EosKafkaBatchWriter(options, SCHEMA)
    handoffs = [writer.write(iter([pa.RecordBatch.from_pydict({"value": [f"r{p}".encode()] * 5})]))
                for p in range(2)]
    faults("commit.before_done=raise")  # every EndTxn answered; the store fails after
    with pytest.raises(RuntimeError, match="injected fault"):
        writer.commit(handoffs)
    faults("")
    with pytest.raises(WriteCommittedError, match="10 records .* are committed"):
        writer.abort(handoffs)  # what Spark does after commit() raised
    with pytest.raises(PreviousWriteCompletedError, match="10 records"):
        EosKafkaBatchWriter(options, SCHEMA)  # the user's rerun is told, once
    EosKafkaBatchWriter(options, SCHEMA)  # and only once
    assert _committed(bootstrap, unique) == Counter({b"r0": 5, b"r1": 5})
    assert_no_open_transactions(bootstrap, unique)


def test_without_a_log_an_interrupted_commit_is_finished_not_aborted(
        bootstrap: str, unique: str, faults, monkeypatch) -> None:  # noqa: ANN001
    """commit() sent the first EndTxn commit and failed before the
    second. Before the fix abort() aborted the second: half the write committed."""
    from eos_kafka_source.errors import WriteCommittedError

    create_topic(bootstrap, unique, partitions=2)
    _tasks(monkeypatch, 2)
    writer = EosKafkaBatchWriter({"kafka.bootstrap.servers": bootstrap, "topic": unique},
                                 SCHEMA)
    handoffs = [writer.write(iter([pa.RecordBatch.from_pydict({"value": [f"r{p}".encode()] * 5})]))
                for p in range(2)]
    with crash_between_endtxns(), pytest.raises(RuntimeError, match="injected fault"):
        writer.commit(handoffs)
    with pytest.raises(WriteCommittedError, match="all 10 records"):
        writer.abort(handoffs)
    assert _committed(bootstrap, unique) == Counter({b"r0": 5, b"r1": 5})
    assert_no_open_transactions(bootstrap, unique)


def test_without_a_log_an_unknown_outcome_is_reported_and_never_aborted(
        bootstrap: str, unique: str, faults, monkeypatch) -> None:  # noqa: ANN001
    """Half committed, and the abort cannot reach the coordinators either; the second
    transaction's outcome is unknown. Before the fix abort() aborted what it could and said
    nothing of the sort; now it says the outcome is unknown and leaves it to Kafka. A later
    abort that reaches Kafka finishes the commit."""
    from eos_kafka_source.errors import TransactionOutcomeUnknownError, WriteCommittedError

    create_topic(bootstrap, unique, partitions=2)
    _tasks(monkeypatch, 2)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": unique,
               "kafka.default.api.timeout.ms": "3000"}
    writer = EosKafkaBatchWriter(options, SCHEMA)
    handoffs = [writer.write(iter([pa.RecordBatch.from_pydict({"value": [f"r{p}".encode()] * 5})]))
                for p in range(2)]
    with crash_between_endtxns(), pytest.raises(RuntimeError, match="injected fault"):
        writer.commit(handoffs)
    faults("commit.before_endtxn=drop")
    with pytest.raises(TransactionOutcomeUnknownError, match="did NOT abort them"):
        writer.abort(handoffs)
    faults("")
    view = committed_view(bootstrap, unique)
    still_open = set().union(*(pv.open_producers for pv in view.values()))
    assert len(still_open) == 1, "the transaction whose outcome is unknown was aborted"
    with pytest.raises(WriteCommittedError, match="all 10 records"):
        writer.abort(handoffs)  # Spark never calls it twice; an operator's retry would
    assert _committed(bootstrap, unique) == Counter({b"r0": 5, b"r1": 5})
    assert_no_open_transactions(bootstrap, unique)
