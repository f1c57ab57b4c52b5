"""A hand-off never lacks the first offset of a partition it wrote.

The first offset is where the transaction's outcome is read from the log (invariant 9);
without it the outcome stays UNKNOWN forever. A Produce answer may carry none: Tansu
answers a re-sent batch with DUPLICATE_SEQUENCE_NUMBER and no base offset. What Kafka
answers is pinned here against a real broker.
"""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa

from eos_kafka_source.records import encode_batch
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.driver.txn_log import LogOutcome, read_transaction
from eos_kafka_source.wire import (
    KafkaWire,
    ProducerIdentity,
    add_partitions_to_txn,
    find_coordinator,
    init_producer_ids,
    produce_errors,
    produce_request,
    require_topics,
)
from eos_kafka_source.wire.txn import produce_offsets
from tests.brokers import ON_TANSU
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, vals


def _batch(who: ProducerIdentity, sequence: int, tag: str) -> bytes:
    values = vals(f"{tag}{sequence}", 3)
    return encode_batch([None] * 3, values, int(time.time() * 1000), producer_id=who.producer_id,
                        producer_epoch=who.epoch, base_sequence=sequence, transactional=True)


def _produce(wire: KafkaWire, leader: int, tid: str, tp: tuple[str, int],
             data: bytes) -> tuple[int, int]:
    response = wire.request(leader, produce_request(wire, tid, {tp: data}, 30000), "Produce")
    return produce_errors(response).get(tp, (0, None))[0], produce_offsets(response)[tp]


def test_kafka_answers_a_resent_batch_with_its_original_offset(bootstrap: str,
                                                               unique: str) -> None:
    """Kafka 4.3 keeps the last 5 batches of each producer per partition
    (ProducerStateManager) and answers a re-sent one with error NONE and the offset it
    was first written at; a re-sent batch older than those 5 is refused as
    OUT_OF_ORDER_SEQUENCE_NUMBER (45). Neither answer is DUPLICATE_SEQUENCE_NUMBER (46)
    without a base offset: Tansu's is (measured: 46, base offset -1)."""
    create_topic(bootstrap, unique, partitions=1)
    tid, tp = f"{unique}-dup", (unique, 0)
    with KafkaWire(Harness(bootstrap, unique, unique, None).cfg) as wire:
        coordinator = find_coordinator(wire, tid)
        who = init_producer_ids(wire, coordinator, [tid], 60000)[tid]
        add_partitions_to_txn(wire, coordinator, tid, who, [tp])
        leader = require_topics(wire, [unique])[unique].leaders[0]
        try:
            first = _batch(who, 0, "s")
            assert _produce(wire, leader, tid, tp, first) == (0, 0)
            resent = _produce(wire, leader, tid, tp, first)
            for sequence in range(3, 19, 3):  # six more batches of 3: seq 0 leaves the cache
                assert _produce(wire, leader, tid, tp, _batch(who, sequence, "s"))[0] == 0
            resent_late = _produce(wire, leader, tid, tp, first)
        finally:
            fence(wire, [tid], 60000)  # aborts the transaction
    if ON_TANSU:
        assert resent == (46, -1)
        return
    assert resent == (0, 0)
    assert resent_late[0] == 45


def test_a_handoff_whose_first_answer_had_no_offset_still_reads_its_outcome(
        bootstrap: str, unique: str, tmp_path, monkeypatch) -> None:
    """The sequence-0 batch's answer carries no base offset (what Tansu answers a re-sent
    batch, injected here by dropping it): the hand-off must still say where the
    transaction's records start, or its outcome reads UNKNOWN forever. Kafka says it
    (DescribeProducers); Tansu has not the request, and the task reads its log."""
    from eos_kafka_source.sink.task import first_offsets

    if not ON_TANSU:
        def no_scan(*args: object) -> None:
            raise AssertionError("DescribeProducers should have answered")

        monkeypatch.setattr(first_offsets, "scan_for_first", no_scan)
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    h.driver.prepare(new_run=True)
    with h.wire() as wire:
        # Another transaction of the same id first: its COMMIT marker (same producer id)
        # lies before this one's records, where a careless fallback would start reading.
        earlier = h.open_task(wire, 0)
        earlier.write_batch(pa.RecordBatch.from_pydict({"value": vals("earlier", 4)}))
        h.driver.commit(0, [earlier.handoff()], tasks=1)
        writer = h.open_task(wire, 0)
        forget = writer.pipeline._complete  # noqa: SLF001 - the answer without an offset

        def without_offsets(sent):  # noqa: ANN001, ANN202
            forget(sent)
            writer.pipeline.first_offsets.clear()

        writer.pipeline._complete = without_offsets  # noqa: SLF001
        writer.write_batch(pa.RecordBatch.from_pydict({"value": vals("later", 4)}))
        handoff = writer.handoff()
    assert {(t, p) for t, p, _ in handoff.first_offsets} == {
        (t, p) for t, p, _ in handoff.partitions}
    h.driver.commit(1, [handoff], tasks=1)
    with h.wire() as wire:
        assert read_transaction(wire, handoff).outcome is LogOutcome.COMMITTED
    assert h.committed() == Counter(vals("earlier", 4) + vals("later", 4))
