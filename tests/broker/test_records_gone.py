"""A decided transaction whose records and marker the log no longer holds.

Retention or DeleteRecords past a transaction's marker leaves nothing to say whether it
committed. The roll-forward must not wait for a marker that will never come: once the
transaction is shown closed (the partition's LSO past its log start, or its coordinator no
longer holding it), its partitions are "records gone", reported once as
EOSKAFKA_TRANSACTION_LOST with partitions and counts, and the query goes on. Apache Kafka
only (DeleteRecords, fencing); TaskWriter plays the tasks and DriverProtocol the driver.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from eos_kafka_source.errors import TransactionLostError
from eos_kafka_source.sink.decisions.states import State
from eos_kafka_source.sink.driver.committer import finish
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.handoff import TxnHandoff
from tests.kafka_helpers import write_plain
from tests.sink_harness import Harness, assert_once_on_kafka, vals

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]


def _restart(h: Harness) -> Harness:
    assert h.log is not None
    return Harness(h.bootstrap, h.topic, h.ids.prefix, h.log.location.rpartition("/")[0],
                   timeout_ms=h.timeout_ms, lineage=h.lineage)


def _crash_at(h: Harness, point: str, handoffs: list[TxnHandoff], faults) -> None:  # noqa: ANN001
    """Batch 0 decided, then the driver dies at ``point`` (nothing runs after a kill)."""
    faults(f"{point}=raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        h.driver.commit(0, handoffs, tasks=len(handoffs))
    faults("")


def _fence_and_delete(h: Harness, tasks: int) -> None:
    """Kafka ends the transactions (a fence: as a timeout would), then DeleteRecords up to
    each partition's high watermark removes their records and markers."""
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KafkaTP

    with h.wire() as wire:
        fence(wire, [h.ids.for_task(p) for p in range(tasks)], h.timeout_ms)
    admin = KafkaAdminClient(bootstrap_servers=h.bootstrap)
    try:
        admin.delete_records({KafkaTP(h.topic, p): -1 for p in range(2)})
    finally:
        admin.close()


@pytest.mark.parametrize("after", ["emptied", "went_on"])
@pytest.mark.parametrize("point", ["commit.after_decision", "commit.before_done"])
def test_a_decided_batch_whose_records_and_markers_were_deleted_is_lost_once(
        sink: Harness, faults, point: str, after: str) -> None:
    """Aborted (died after the decision) or committed (died before marking it done), then
    fenced, then every record and marker deleted. ``emptied``: the log is empty (the
    coordinator says the transaction is over); ``went_on``: other records followed (the
    LSO is past the log start). Before the fix, on Kafka 4.4: every restart's roll-forward
    retried for 75 s (timeout + 15 s) and raised EOSKAFKA_TRANSACTION_OUTCOME_UNKNOWN, the
    decision kept DECIDED: the query could never go on."""
    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    _crash_at(sink, point, handoffs, faults)
    _fence_and_delete(sink, 2)
    later: list[bytes] = []
    if after == "went_on":
        later = vals("plain", 2)
        for p, value in enumerate(later):
            write_plain(sink.bootstrap, sink.topic, [value], partition=p)
    restarted = _restart(sink)
    with pytest.raises(TransactionLostError) as err:
        restarted.driver.prepare(new_run=True)
    message = str(err.value)
    assert "batch 0" in message and "committed or lost" in message, message
    for h in handoffs:
        topic, partition, _ = h.first_offsets[0]
        assert h.transactional_id in message and f"{topic}-{partition}: 30 records" in message
    decision = restarted.log.get(0)
    assert decision is not None and decision.state is State.DONE and decision.lost
    again = _restart(sink)
    again.driver.prepare(new_run=True)  # reported once: the query goes on
    again.driver.commit(0, [again.task(p, vals(f"b0t{p}")) for p in range(2)], tasks=2)
    again.driver.commit(1, [again.task(p, vals(f"b1t{p}")) for p in range(2)], tasks=2)
    assert_once_on_kafka(again, Counter(later + vals("b1t0") + vals("b1t1")))


def _keyed(h: Harness, tag: str, n: int = 30) -> TxnHandoff:
    """Task 0's transaction of ``n`` keyed rows (a compacted topic refuses null keys)."""
    import pyarrow as pa

    with h.wire() as wire:
        writer = h.open_task(wire, 0)
        writer.write_batch(pa.RecordBatch.from_pydict(
            {"key": [f"k-{v.decode()}".encode() for v in vals(tag, n)], "value": vals(tag, n)}))
        return writer.handoff()


def _left_of(bootstrap: str, topic: str, producer_id: int, below: int) -> tuple[int, int]:
    """Batches (records or markers) of ``producer_id`` below offset ``below`` still in
    partition 0, read raw from the log start, and the log start."""
    from kafka.record import MemoryRecords

    from eos_kafka_source import wire as kwire
    from tests.kafka_helpers import wire_for

    tp = (topic, 0)
    with wire_for(bootstrap) as w:
        leader = kwire.fetch_metadata(w, [topic])[topic].leaders[0]
        b = kwire.fetch_bounds(w, {tp: leader})[tp]
        position, found = b.log_start, 0
        while position < b.high_watermark:
            chunk = kwire.fetch(w, leader, {tp: position}, max_bytes=1 << 20)[tp]
            batches = [x for x in MemoryRecords(chunk.records) if x.next_offset > position]
            assert batches, f"no batch at {position} below the high watermark"
            found += sum(x.producer_id == producer_id and x.base_offset < below
                         for x in batches)
            position = batches[-1].next_offset
    return found, b.log_start


def test_a_decided_transaction_compacted_away_with_its_marker_is_lost_once(
        bootstrap: str, unique: str, tmp_path, faults) -> None:  # noqa: ANN001
    """Compaction removes an aborted transaction's records, then its marker once the
    producer wrote again (Kafka keeps a producer's last batch); the log start does not move.
    Here the id's next transaction (same producer id, a higher epoch) committed after the
    fence. Before the fix, on Kafka 4.4: the scan took that later transaction's COMMIT
    marker for the lost one's: batch 0 was marked done, no loss reported (pytest: DID NOT
    RAISE TransactionLostError), its 30 rows silently gone. Now: a later epoch's data (or
    COMMIT) before any marker shows ours over and removed: LOST once, the query goes on."""
    from tests.kafka_helpers import create_topic

    create_topic(bootstrap, unique, 1, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    handoff = _keyed(sink, "b0t0")
    _crash_at(sink, "commit.after_decision", [handoff], faults)
    with sink.wire() as wire:
        fence(wire, [sink.ids.for_task(0)], sink.timeout_ms)
    zombie = _keyed(sink, "zombie", 5)  # the id's next transaction: same producer id
    assert zombie.producer_id == handoff.producer_id and zombie.epoch > handoff.epoch
    with sink.wire() as wire:
        assert finish(wire, [zombie], commit=True).ok
    plain: list[bytes] = []
    deadline = time.monotonic() + 120
    while True:  # new segments keep the cleaner working until nothing of it is left
        left, log_start = _left_of(bootstrap, unique, handoff.producer_id,
                                   zombie.first_offsets[0][2])
        if not left:
            break
        assert time.monotonic() < deadline, "the cleaner never removed the transaction"
        value = f"plain-{len(plain)}".encode()
        write_plain(bootstrap, unique, [value], partition=0, keys=[b"p-" + value])
        plain.append(value)
    assert log_start <= handoff.first_offsets[0][2]  # compacted, not deleted
    restarted = _restart(sink)
    with pytest.raises(TransactionLostError) as err:
        restarted.driver.prepare(new_run=True)
    message = str(err.value)
    assert "committed or lost" in message and f"{unique}-0: 30 records" in message, message
    again = _restart(sink)
    again.driver.prepare(new_run=True)
    again.driver.commit(0, [_keyed(again, "b0t0")], tasks=1)
    again.driver.commit(1, [_keyed(again, "b1t0")], tasks=1)
    assert_once_on_kafka(again, Counter(plain + vals("zombie", 5) + vals("b1t0")))


def test_an_open_transaction_whose_records_were_deleted_is_never_gone(sink: Harness) -> None:
    """DeleteRecords may pass an open transaction's first offset (up to the high
    watermark). Its partition then has no records and no marker, yet the transaction is
    open: Kafka holds the LSO at the log start and its coordinator holds it Ongoing, so the
    log reads "no marker yet", never gone. A guard, passed when written; with "an LSO past
    the first offset proves it over" it failed on Kafka 4.4 (GONE: log start 30, LSO 30,
    first offset 0)."""
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KafkaTP

    from eos_kafka_source.sink.driver.txn_log import LogOutcome, read_transaction
    from eos_kafka_source.wire import fetch_bounds, fetch_metadata

    handoff = sink.task(0, vals("open"))
    topic, partition, first = handoff.first_offsets[0]
    try:
        admin = KafkaAdminClient(bootstrap_servers=sink.bootstrap)
        try:
            admin.delete_records({KafkaTP(topic, partition): -1})
        finally:
            admin.close()
        with sink.wire() as wire:
            tp = (topic, partition)
            leader = fetch_metadata(wire, [topic])[topic].leaders[partition]
            b = fetch_bounds(wire, {tp: leader})[tp]
            assert b.log_start > first and b.last_stable == b.log_start, b
            found = read_transaction(wire, handoff, wait=False)
            assert found.outcome is LogOutcome.UNKNOWN and found.pending, found.why
            assert "may still be open" in found.why, found.why
    finally:
        with sink.wire() as wire:
            assert finish(wire, [handoff], commit=False).ok  # never left open
