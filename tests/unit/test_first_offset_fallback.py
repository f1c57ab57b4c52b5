"""The first-offset fallback: where neither a Produce answer nor
DescribeProducers said where a task's transaction starts in a partition, the task finds its
own first batch in the log. Real encoded batches, no broker."""

from __future__ import annotations

from eos_kafka_source.records import encode_batch, encode_control_batch
from eos_kafka_source.records.header import iter_batches
from eos_kafka_source.sink.task.first_offsets import first_batch_of
from eos_kafka_source.wire import ProducerIdentity

ME = ProducerIdentity(producer_id=7, epoch=3)


def _data(offset: int, producer_id: int, epoch: int, sequence: int = 0) -> bytes:
    return encode_batch([None, None], [b"a", b"b"], 1_700_000_000_000, producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=sequence, transactional=True,
                        base_offset=offset)


def _marker(offset: int, producer_id: int, epoch: int) -> bytes:
    return encode_control_batch(commit=True, producer_id=producer_id, producer_epoch=epoch,
                                base_offset=offset, timestamp_ms=1_700_000_000_000)


def test_the_first_batch_of_this_producer_and_epoch() -> None:
    """An earlier transaction of the same producer id (the previous attempt's epoch) and its
    COMMIT marker come first in the log: reading the outcome from the log start would take
    that marker for this transaction's. Other producers' batches are skipped too."""
    log = b"".join([
        _data(0, 7, 2), _data(2, 9, 0), _marker(4, 7, 2),  # earlier attempt, committed
        _marker(5, 7, 3),  # the fence of an attempt that wrote nothing here: same epoch
        _data(6, 9, 0, 2), _data(8, 7, 3), _data(10, 7, 3, 2),
    ])
    assert first_batch_of((h for h, _ in iter_batches(log)), ME) == 8


def test_nothing_of_this_producer_in_the_log() -> None:
    log = b"".join([_data(0, 7, 2), _marker(2, 7, 2), _data(3, 9, 3)])
    assert first_batch_of((h for h, _ in iter_batches(log)), ME) is None
