"""A decided transaction whose records and marker the log no longer holds (issue 30, finding 5).

Retention or DeleteRecords past a transaction's marker leaves nothing to say whether it
committed. The roll-forward must not wait for a marker that will never come: once the
transaction is shown closed (the partition's LSO past its log start, or its coordinator no
longer holding it), its partitions are "records gone", reported once as
EOSKAFKA_TRANSACTION_LOST with partitions and counts, and the query goes on. Apache Kafka
only (DeleteRecords, fencing); TaskWriter plays the tasks and DriverProtocol the driver.
"""

from __future__ import annotations

from collections import Counter

import pytest

from eos_kafka_source.errors import TransactionLostError
from eos_kafka_source.sink.decisions.states import State
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
