"""A live commit is confirmed from the log (docs/design.md invariant 9).

EndTxn's NONE does not prove a commit: Kafka's ``kafka-transactions.sh abort`` writes an
ABORT marker straight to one partition while the coordinator still holds the transaction
Ongoing, and the commit that follows answers NONE and misses that partition. Each test
pauses a live commit right after its decision (no crash), lets an operator act, releases
it, and judges the output with the marker-resolving oracle and Kafka's Java consumer.
TaskWriter plays the tasks and DriverProtocol the driver (tests/sink_harness.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from eos_kafka_source.errors import TransactionLostError
from eos_kafka_source.sink.decisions.states import State
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.handoff import TxnHandoff
from tests.sink_harness import Background, Harness, assert_once_on_kafka, await_path, vals

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]


def _paused_commit(sink: Harness, handoffs: list[TxnHandoff], faults,  # noqa: ANN001
                   tmp_path: Path, operator: Callable[[], None]) -> BaseException | None:
    """Commit batch 0, paused after its decision while ``operator`` acts; what it raised."""
    gate = tmp_path / "gate"
    faults(f"commit.after_decision=block:{gate}")
    committing = Background(lambda: sink.driver.commit(0, handoffs, tasks=len(handoffs)))
    await_path(gate.with_suffix(".started"))
    try:
        operator()
    finally:
        faults("")
        gate.with_suffix(".release").touch()
    return committing.outcome(timeout_s=180)


def _tool_abort(sink: Harness, *places: tuple[str, int, int]) -> None:
    """``kafka-transactions abort`` on each (topic, partition, first offset)."""
    from eos_kafka_source.apache_kafka import KafkaTools

    tools = KafkaTools(sink.bootstrap)
    for topic, partition, first in places:
        tools.abort_transaction(topic, partition, first)


@pytest.mark.parametrize("partition_bytes", [None, 1], ids=["fetch", "batch-alone"])
def test_an_operator_abort_during_a_live_commit_is_copied_before_it_returns(
        sink: Harness, faults, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch, partition_bytes: int | None) -> None:
    """An operator's abort of one partition behind NONE. Before (Kafka 4.4): the commit answered
    NONE everywhere and reported success with the aborted partition's rows missing (oracle: 100 of
    230 rows absent). Now the partitions' outcome is read back after EndTxn, and the aborted one is
    copied from the log before commit() returns. ``batch-alone``: no first batch fits the
    per-partition bytes, so each partition is asked again in a request of its own."""
    from eos_kafka_source.wire import txn_outcome

    if partition_bytes is not None:
        monkeypatch.setattr(txn_outcome, "PARTITION_BYTES", partition_bytes)
    wide = vals("wide", 200)  # 50 a batch, alternating over both partitions
    handoffs = [sink.task(0, wide), sink.task(1, vals("b0t1"))]
    assert len(handoffs[0].partitions) == 2
    aborted = handoffs[0].first_offsets[1]
    caplog.set_level("WARNING", logger="eos_kafka_source")
    error = _paused_commit(sink, handoffs, faults, tmp_path,
                           lambda: _tool_abort(sink, aborted))
    assert error is None, error
    report = sink.driver.last_report
    assert report is not None
    assert [h.transactional_id for h, _ in report.lost] == [handoffs[0].transactional_id]
    assert f"{aborted[0]}-{aborted[1]}" in report.describe_lost()[0]
    assert "copied 100 records" in caplog.text
    decision = sink.log.get(0)
    assert decision is not None and decision.state is State.DONE and not decision.lost
    assert_once_on_kafka(sink, Counter(wide + vals("b0t1")))


def test_every_decided_transaction_aborted_fails_the_batch_to_replay(
        sink: Harness, faults, tmp_path: Path) -> None:
    """Both decided transactions fenced after the decision: nothing of the batch
    committed, the decision is withdrawn and the batch fails to be replayed. Before: an
    AttributeError (``_raise_if_too_long``) instead of that error."""
    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]

    def fence_both() -> None:
        with sink.wire() as wire:
            fence(wire, [h.transactional_id for h in handoffs], sink.timeout_ms)

    error = _paused_commit(sink, handoffs, faults, tmp_path, fence_both)
    assert isinstance(error, TransactionLostError), repr(error)
    assert "batch 0: no transaction could be committed" in str(error)
    assert sink.log.get(0) is None  # voided: the batch replays as new
    replay = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    sink.driver.commit(0, replay, tasks=2)
    assert_once_on_kafka(sink, Counter(vals("b0t0") + vals("b0t1")))


def test_a_tool_abort_of_every_partition_is_not_reported_as_success(
        sink: Harness, faults, tmp_path: Path) -> None:
    """An operator's abort behind NONE that leaves nothing committed: ``kafka-transactions abort``
    on every partition of the only decided transaction. Before: success reported, nothing written.
    Now the batch fails (nothing committed) and its replay writes every row once."""
    handoffs = [sink.task(0, vals("wide", 200))]
    error = _paused_commit(sink, handoffs, faults, tmp_path,
                           lambda: _tool_abort(sink, *handoffs[0].first_offsets))
    assert isinstance(error, TransactionLostError), repr(error)
    assert sink.log.get(0) is None
    sink.driver.commit(0, [sink.task(0, vals("wide", 200))], tasks=1)
    assert_once_on_kafka(sink, Counter(vals("wide", 200)))


def test_a_batch_write_confirms_its_commit_before_it_returns(
        sink: Harness, faults, tmp_path: Path) -> None:
    """The batch-write path (``streaming=False``, a decision log): the same operator's
    abort of one partition during its commit. Before: success with 100 rows missing."""
    from eos_kafka_source.sink.driver.protocol import DriverProtocol
    from eos_kafka_source.sink.naming import fingerprint

    assert sink.log is not None
    sink.driver = DriverProtocol(sink.ids, sink.log, sink.wire,
                                 owner=fingerprint(str(tmp_path / "write")),
                                 transaction_timeout_ms=sink.timeout_ms,
                                 lineage=sink.lineage, streaming=False)
    wide = vals("wide", 200)
    handoffs = [sink.task(0, wide)]
    gate = tmp_path / "gate"
    faults(f"commit.after_decision=block:{gate}")
    committing = Background(lambda: sink.driver.commit(None, handoffs, tasks=1))
    await_path(gate.with_suffix(".started"))
    try:
        _tool_abort(sink, handoffs[0].first_offsets[0])
    finally:
        faults("")
        gate.with_suffix(".release").touch()
    assert committing.outcome(timeout_s=180) is None
    assert sink.driver.last_report is not None and len(sink.driver.last_report.lost) == 1
    assert_once_on_kafka(sink, Counter(wide))
