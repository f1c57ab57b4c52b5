"""What a hand-off says about the records its task wrote (session broker, Kafka and Tansu).

``first_offsets`` must point at the transaction's first record in each partition, read back
from the raw log, also when another producer wrote to the partition before: the driver
reads a transaction's outcome and records from there (DESIGN.md invariants 9 and 10). A
replay's transaction replaces a lost one only when the log holds the same rows for both,
in any order.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

from eos_kafka_source.sink.fencing import fence
from eos_kafka_source.sink.replacement import replacements
from eos_kafka_source.sink.spark_writer import EosKafkaBatchWriter
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.sink_harness import Harness, vals

ROUTED = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                     StructField("partition", IntegerType())])


def _batch(rows: list[tuple[bytes | None, bytes, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"key": [k for k, _, _ in rows], "value": [v for _, v, _ in rows],
         "partition": [p for _, _, p in rows]},
        schema=pa.schema([("key", pa.binary()), ("value", pa.binary()),
                          ("partition", pa.int32())]))


def _writer(bootstrap: str, topic: str, **extra: str) -> EosKafkaBatchWriter:
    return EosKafkaBatchWriter({"kafka.bootstrap.servers": bootstrap, "topic": topic, **extra},
                               ROUTED)


def test_first_offsets_point_at_the_transaction_s_first_record(
        bootstrap: str, unique: str) -> None:
    """Partition 0 already holds another producer's records (an at-least-once write and a
    committed transaction); partition 2 is empty; partition 1 is not written. The first
    offset of each written partition is where the oracle sees the transaction start, and the
    record there is the first row the task sent to it."""
    create_topic(bootstrap, unique, partitions=3)
    before = _writer(bootstrap, unique, **{"delivery.guarantee": "at_least_once"})
    before.commit([before.write(iter([_batch([(None, b"plain-%d" % i, 0)
                                              for i in range(7)])]))])
    other = _writer(bootstrap, unique)
    other.commit([other.write(iter([_batch([(b"o", b"other-%d" % i, 0) for i in range(5)])]))])

    rows = [(b"k%d" % i, b"mine-%d" % i, 0 if i % 3 else 2) for i in range(3000)]
    writer = _writer(bootstrap, unique, **{"kafka.batch.size": "4096"})  # many batches each
    handoff = writer.write(iter([_batch(rows[:1000]), _batch(rows[1000:])]))
    writer.commit([handoff])
    await_markers(bootstrap, unique)
    view = committed_view(bootstrap, unique)

    assert [(t, p) for t, p, _ in handoff.first_offsets] == [(unique, 0), (unique, 2)]
    assert [p for _, p, _ in handoff.partitions] == [0, 2]
    for _, partition, first in handoff.first_offsets:
        (txn,) = [t for t in view[partition].transactions
                  if (t.producer_id, t.epoch) == (handoff.producer_id, handoff.epoch)]
        assert first == txn.first, (partition, first, txn)
        at = [r for r in view[partition].committed if r.offset == first]
        assert at and at[0].value == next(v for _, v, p in rows if p == partition)
    # after the 7 plain records, the other transaction's 5 and its marker
    assert handoff.first_offsets[0][2] >= 13
    assert_no_open_transactions(bootstrap, unique)


def test_a_replacement_holds_the_same_rows_in_any_order_not_just_the_same_counts(
        bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, None)
    rows = vals("row", 40)
    lost = h.task(0, rows)
    with h.wire() as wire:
        fence(wire, [lost.transactional_id], 60000)  # aborted, its records stay in the log
    # Tasks 0, 2 and 4 start their keyless rows on the same partition of two.
    other = h.task(2, vals("other", 40))  # the same counts per partition, other rows
    shuffled = h.task(4, rows[::-1])  # the same rows, another order
    assert lost.partitions == other.partitions == shuffled.partitions
    with h.wire() as wire:
        chosen = replacements(wire, [lost], [other, shuffled])
        assert [c.transactional_id for c in chosen] == [shuffled.transactional_id]
        assert chosen[0].extra["replaces"].startswith(lost.transactional_id)
        assert replacements(wire, [lost], [other]) == []
        h.driver.abort(None, [other, shuffled], tasks=5)
    assert_no_open_transactions(bootstrap, unique)
