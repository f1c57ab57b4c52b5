"""Recovery is idempotent per partition, and bounded (docs/design.md
invariant 16).

A recovery transaction can itself be aborted in some of its partitions (an operator's
``kafka-transactions.sh abort`` of the long copy that holds the LSO): a retried recovery
copies only what is still missing, read from the recovery's own markers per partition. And
the copy streams from the log in bounded memory, in several recovery transactions when the
lost records are more than one transaction should hold, each recorded before its EndTxn.
TaskWriter plays the tasks and DriverProtocol the driver (tests/sink_harness.py).
"""

from __future__ import annotations

import logging
import re
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.sink.decisions.states import State
from eos_kafka_source.sink.driver.fencing import fence
from eos_kafka_source.sink.handoff import TxnHandoff
from tests.sink_harness import (
    Background,
    Harness,
    assert_once_on_kafka,
    await_path,
    crash_between_endtxns,
    vals,
)

pytestmark = [pytest.mark.faults]

LIMITS_ENV = "EOSKAFKA_TEST_RECOVERY_LIMITS"


def _restart(h: Harness) -> Harness:
    assert h.log is not None
    return Harness(h.bootstrap, h.topic, h.ids.prefix, h.log.location.rpartition("/")[0],
                   timeout_ms=h.timeout_ms, lineage=h.lineage)


def _lose(h: Harness, handoffs: list[TxnHandoff], faults) -> None:  # noqa: ANN001
    """Batch 0 decided; the driver dies after task 0's EndTxn; a fence then aborts the
    others (Kafka's abort of a decided transaction)."""
    with crash_between_endtxns(), pytest.raises(RuntimeError, match="injected fault"):
        h.driver.commit(0, handoffs, tasks=len(handoffs))
    with h.wire() as wire:
        fence(wire, [h.ids.for_task(p) for p in range(1, len(handoffs))], 60000)


@pytest.mark.kafka_only  # Kafka's own abort tool
def test_a_recovery_aborted_in_one_partition_copies_only_that_partition_again(
        sink: Harness, faults, tmp_path: Path) -> None:
    """The restart's recovery transaction (task 1's records, both partitions) is
    recorded; the operator's ``kafka-transactions abort`` ends it on partition 1 only; the
    driver's commit then commits partition 0. Before: the recovery was cleared and both
    partitions copied again: partition 0's 100 rows twice on Kafka 4.4 (duplicates, success
    reported). Now only partition 1 is copied again."""
    from eos_kafka_source.apache_kafka import KafkaTools

    wide = vals("wide", 200)  # 50 a batch, alternating over both partitions
    handoffs = [sink.task(0, vals("b0t0")), sink.task(1, wide)]
    assert len(handoffs[1].partitions) == 2
    _lose(sink, handoffs, faults)
    gate = tmp_path / "gate"
    faults(f"recover.after_record=block:{gate}")
    restarted = _restart(sink)
    recovering = Background(lambda: restarted.driver.prepare(new_run=True))
    await_path(gate.with_suffix(".started"), 120)
    faults("")
    tools = KafkaTools(sink.bootstrap)
    (open_here,) = list(tools.open_on_partitions(sink.topic, [1]))  # the recovery's
    tools.abort_transaction(sink.topic, 1, open_here.start_offset)
    gate.with_suffix(".release").touch()
    assert recovering.outcome(180) is None
    decision = restarted.log.get(0)
    assert decision is not None and decision.state is State.DONE and not decision.lost
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + wide))


def _big(n: int, size: int = 1000) -> list[bytes]:
    return [f"big-{i:06d}-".encode().ljust(size, b"x") for i in range(n)]


def test_a_lost_batch_larger_than_the_memory_bound_streams_in_several_transactions(
        sink: Harness, faults, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The memory bound: 3,000 lost records of 1 kB (3 MB) with a 128 kB memory bound and at most
    1,000 records a recovery transaction. Before: every record was held in driver memory
    (peak 13.1 MB traced during the copy on Kafka 4.4) in one recovery transaction. Now the
    copy's peak stays under 1 MB, in at least 3 recovery transactions; each row once."""
    big = _big(3000)
    handoffs = [sink.task(0, vals("b0t0")), sink.task(1, big)]
    _lose(sink, handoffs, faults)
    monkeypatch.setenv(LIMITS_ENV, f"memory_bytes={128 << 10},txn_records=1000")
    restarted = _restart(sink)
    decision = restarted.log.get(0)
    assert decision is not None
    caplog.set_level(logging.WARNING, logger="eos_kafka_source")
    tracemalloc.start()
    try:
        with restarted.wire() as wire:
            finished = restarted.driver._recovery().copy(wire, decision, [handoffs[1]])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert finished.state is State.DONE and not finished.lost
    assert peak < 1 << 20, f"the copy held {peak} bytes at its peak"
    said = [re.search(r"in (\d+) recovery transaction", r.getMessage()) for r in caplog.records]
    assert [int(m.group(1)) for m in said if m] in ([3], [4]), caplog.text
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + big))


def test_a_copy_past_its_share_of_the_transaction_timeout_goes_on_in_the_next(
        sink: Harness, faults, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The time bound: with no share of the transaction timeout left after a
    batch (``txn_share=0``), each recovery transaction takes one record batch of the lost
    transaction (200 records, 4 batches of 50) and the next goes on: 4 recovery
    transactions, each row once."""
    wide = vals("wide", 200)
    handoffs = [sink.task(0, vals("b0t0")), sink.task(1, wide)]
    _lose(sink, handoffs, faults)
    monkeypatch.setenv(LIMITS_ENV, "txn_share=0")
    caplog.set_level(logging.WARNING, logger="eos_kafka_source")
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)
    said = [re.search(r"in (\d+) recovery transaction", r.getMessage()) for r in caplog.records]
    assert [int(m.group(1)) for m in said if m] == [4], caplog.text
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + wide))


@pytest.mark.parametrize("point", ["recover.after_part", "recover.after_record"])
def test_a_crash_between_recovery_transactions_copies_only_what_is_missing(
        sink: Harness, faults, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """Idempotent across a crash: the driver dies after the first of several recovery transactions
    committed (``recover.after_part``), or once the second is recorded (its EndTxn not sent). The
    restart copies only what no committed recovery transaction holds: each row once."""
    big = _big(500, 100)
    handoffs = [sink.task(0, vals("b0t0")), sink.task(1, big)]
    _lose(sink, handoffs, faults)
    monkeypatch.setenv(LIMITS_ENV, "txn_records=200")
    dies_at = ["recover.after_part"] + (["recover.after_record"]
                                        if point == "recover.after_record" else [])
    for where in dies_at:  # after_record: the second transaction's, once the first committed
        faults(f"{where}=raise")
        with pytest.raises(RuntimeError, match=f"injected fault at {where}"):
            _restart(sink).driver.prepare(new_run=True)
    faults("")
    restarted = _restart(sink)
    restarted.driver.prepare(new_run=True)
    restarted.driver.commit(0, [restarted.task(0, vals("b0t0")), restarted.task(1, big)],
                            tasks=2)  # the replay: aborted
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + big))
