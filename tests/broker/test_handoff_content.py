"""What a hand-off says about the records its task wrote (session broker, Kafka and Tansu).

``first_offsets`` must point at the transaction's first record in each partition, read back
from the raw log, also when another producer wrote to the partition before: the driver
reads a transaction's outcome and records from there (docs/design.md invariants 9 and 10),
and recovery copies an aborted transaction's records from there, exactly.
"""

from __future__ import annotations

import time

import pyarrow as pa
from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

from eos_kafka_source.sink.driver.committer import finish
from eos_kafka_source.sink.driver.copy_stream import CopyLimits, write_part
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.driver.log_copy import read_lost
from eos_kafka_source.sink.driver.txn_log import read_transaction
from eos_kafka_source.sink.spark_writer import EosKafkaBatchWriter
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.sink_harness import Harness

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


def test_recovery_copies_an_aborted_transaction_exactly(bootstrap: str, unique: str) -> None:
    """What recovery reads back from the log of an aborted transaction, and writes again:
    every record in its partition and order, with its key, value (a null one too), headers
    and timestamp; the copy commits, and nothing else becomes visible."""
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, None)
    stamp = int(time.time() * 1000) - 60_000  # recent: older records fall to retention
    n = 40
    batch = pa.RecordBatch.from_pydict({
        "key": [None if i % 5 == 0 else b"k%d" % i for i in range(n)],
        "value": [None if i == 7 else b"v%d" % i for i in range(n)],
        "partition": [i % 2 for i in range(n)],
        "timestamp": [stamp + i for i in range(n)],
        "headers": [[{"key": "h", "value": b"%d" % i}] if i % 3 == 0 else [] for i in range(n)],
    }, schema=pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("partition", pa.int32()),
        ("timestamp", pa.timestamp("ms")),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))]))
    with h.wire() as wire:
        writer = h.open_task(wire, 0)
        writer.write_batch(batch)
        lost = writer.handoff()
        fence(wire, [lost.transactional_id], 60000)  # aborted; its records stay in the log
        plan = read_lost(wire, [lost], deadline_s=30)
        assert plan.unrecoverable == []
        assert sorted((s.topic, s.partition, s.records) for s in plan.segments) == [
            (unique, 0, 20), (unique, 1, 20)]
        copy, copied, left = write_part(wire, h.ids, plan.segments, limits=CopyLimits(),
                                        timeout_ms=60000, deadline_s=30, lineage="q",
                                        batch_id=0)
        assert copied == plan.segments and left == []
        assert copy.transactional_id == f"{unique}-recovery"
        assert h.ids.task_of(copy.transactional_id) is None
        wanted = sorted((i % 2, stamp + i, batch.column("key")[i].as_py(),
                         batch.column("value")[i].as_py(),
                         tuple((x["key"], x["value"]) for x in batch.column("headers")[i].as_py()))
                        for i in range(n))
        assert finish(wire, [copy], commit=True).ok
        written = read_transaction(wire, copy, records=True)  # the copy, read back
        got = sorted((r.partition, r.timestamp_ms, r.key, r.value, r.headers)
                     for p in written.partitions for r in p.records)
        assert got == wanted
    await_markers(bootstrap, unique)
    view = committed_view(bootstrap, unique)
    for partition in (0, 1):
        values = [v for i, v in enumerate(batch.column("value").to_pylist()) if i % 2 == partition]
        assert view[partition].committed_values == values  # in the order written
    assert_no_open_transactions(bootstrap, unique)
