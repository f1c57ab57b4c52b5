"""Where a task's transaction starts in each partition, when a Produce answer did not say.

The hand-off's ``first_offsets`` are where the driver reads a transaction's outcome and
records from the log (invariant 9, :mod:`.txn_log`); a partition without one reads
UNKNOWN forever. Produce answers carry the base offset of every batch, except a re-sent
batch Tansu 0.6.0 already has: DUPLICATE_SEQUENCE_NUMBER, base offset -1 (Kafka answers
it with NONE and the original offset while the batch is among the producer's last five,
then OUT_OF_ORDER_SEQUENCE_NUMBER; tests/broker/test_first_offsets.py). For such a
partition the task asks, before its hand-off:

1. DescribeProducers (KIP-664): the producer's ``currentTxnStartOffset`` there, exact
   while the transaction is open (READ on the topic, which the sink has);
2. where the broker lacks it (Tansu): the log itself, read from its start for the first
   data batch of this producer id *and epoch*. Every task attempt initialises its id
   (a new epoch), so that batch is this transaction's first; starting the outcome scan
   at the log start instead would meet the COMMIT marker of an earlier transaction of
   the same producer id first.

Runs on: an executor (TaskWriter.handoff).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from ...records.header import BatchHeader
from ...wire import KafkaWire, LogCursor, ProducerIdentity, fetch_bounds
from ...wire.admin_txns import txn_start_offsets

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def find_first_offsets(wire: KafkaWire, producer: ProducerIdentity,
                       leaders: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The first offset of ``producer``'s open transaction in each of ``leaders``'
    partitions (those it could find)."""
    if not leaders:
        return {}
    found = txn_start_offsets(wire, leaders, producer.producer_id) or {}
    for tp in sorted(set(leaders) - set(found)):
        offset = scan_for_first(wire, leaders[tp], tp, producer)
        if offset is not None:
            found[tp] = offset
    return found


def scan_for_first(wire: KafkaWire, leader: int, tp: TopicPartition,
                   producer: ProducerIdentity) -> int | None:
    """The fallback: read ``tp`` from its log start for the producer's first batch."""
    bounds = fetch_bounds(wire, {tp: leader})[tp]
    cursor = LogCursor(wire, leader, tp, bounds.log_start, bounds.high_watermark,
                       read_ahead=False)
    return first_batch_of((header for header, _ in cursor), producer)


def first_batch_of(headers: Iterable[BatchHeader], producer: ProducerIdentity) -> int | None:
    """Base offset of the first data batch written by ``producer`` (id and epoch) among
    ``headers``; control batches (markers) and other producers' batches are skipped."""
    for header in headers:
        if (not header.is_control and header.producer_id == producer.producer_id
                and header.producer_epoch == producer.epoch):
            return header.base_offset
    return None
