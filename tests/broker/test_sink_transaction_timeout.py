"""The transaction timeout, for real: Apache Kafka with transaction.max.timeout.ms=10000.

Kafka aborts a transaction open longer than its
timeout (checked every second on these test brokers) and bumps the epoch, so a later
EndTxn commit with the task's epoch is PRODUCER_FENCED. Which cases end in no loss:
- a task stalled past the timeout: nothing of the batch is visible, the batch fails
  (naming the timeout and maxOffsetsPerTrigger), and its replay commits: no loss;
- the driver killed after its decision and down past the timeout: Kafka aborted the
  decided transactions still open, but their records are in the log up to the ABORT
  markers: the restarted driver copies them in a recovery transaction before any task
  starts (no loss), whatever the replay writes (docs/design.md, invariant 10). Only
  records the log no longer holds are lost: the restart fails once with
  EOSKAFKA_TRANSACTION_LOST naming batch, partitions and counts, and ``eoskafka txns``
  shows the loss.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.cli import main
from eos_kafka_source.errors import TimeoutError_, TransactionLostError
from tests.kafka_clusters import kafka_for_tests
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, assert_once_on_kafka, crash_between_endtxns, vals
from tests.waiting import until

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

TIMEOUT_MS = 4000  # the sink's kafka.transaction.timeout.ms; the broker allows up to 10 s


@pytest.fixture(scope="module")
def kafka_short() -> Iterator[KafkaCluster]:
    with kafka_for_tests(1, {"transaction.max.timeout.ms": "10000"}) as cluster:
        yield cluster


@pytest.fixture
def sink(kafka_short: KafkaCluster, unique: str, tmp_path: Path) -> Harness:
    create_topic(kafka_short.bootstrap_servers, unique, partitions=2)
    h = Harness(kafka_short.bootstrap_servers, unique, unique, tmp_path / "ckpt",
                timeout_ms=TIMEOUT_MS)
    h.driver.prepare(new_run=True)
    return h


def _await_timeout_abort(h: Harness, values: list[bytes]) -> None:
    """Until Kafka has aborted the transactions holding ``values`` (their timeout passed)."""
    until(h.aborted, lambda seen: all(seen[v] for v in values),
          what="Kafka's timeout abort of the transactions", timeout_s=60)


def test_task_stalled_past_the_timeout_fails_the_batch_whole_then_replay_commits(
        sink: Harness) -> None:
    """Before: "nothing was written; the batch fails and will be replayed", the same advice
    for a zombie and for a batch longer than the timeout, whose replay fails the same way."""
    quick = sink.task(0, vals("quick"))
    stalled = sink.task(1, vals("stalled"))
    _await_timeout_abort(sink, vals("stalled") + vals("quick"))  # the whole batch outlived it
    with pytest.raises(TimeoutError_) as err:
        sink.driver.commit(0, [quick, stalled], tasks=2)
    message = str(err.value)
    assert f"kafka.transaction.timeout.ms={TIMEOUT_MS}" in message
    assert "maxOffsetsPerTrigger" in message and "nothing was written" in message
    assert sink.log.get(0) is None and sink.committed() == Counter()  # nothing partial
    sink.driver.abort(0, [quick, stalled], tasks=2)  # Spark, after commit() raised
    sink.driver.prepare(new_run=True)  # the replay
    sink.driver.commit(0, [sink.task(p, vals(f"replay{p}")) for p in range(2)], tasks=2)
    assert_once_on_kafka(sink, Counter(vals("replay0") + vals("replay1")))


def _decided_then_down_past_the_timeout(sink: Harness, faults, tmp_path: Path,
                                        point: str = "between_endtxns",
                                        prepare: bool = True) -> Harness:
    """The driver records its decision and dies (at ``point``: between its two EndTxns, so
    task 0's transaction committed; or right after the decision, before any EndTxn); it
    stays down until Kafka has aborted what was still open. Returns the restarted driver,
    prepared (with ``prepare``)."""
    handoffs = [sink.task(p, vals(f"b0t{p}")) for p in range(2)]
    if point == "between_endtxns":
        with crash_between_endtxns(), pytest.raises(RuntimeError, match="injected fault"):
            sink.driver.commit(0, handoffs, tasks=2)
    else:
        faults(f"{point}=raise@{tmp_path / 'once'}")
        with pytest.raises(RuntimeError, match="injected fault"):
            sink.driver.commit(0, handoffs, tasks=2)
        faults("")
    open_values = vals("b0t1") if point == "between_endtxns" else vals("b0t0") + vals(
        "b0t1")
    _await_timeout_abort(sink, open_values)
    restarted = Harness(sink.bootstrap, sink.topic, sink.ids.prefix, tmp_path / "ckpt",
                        timeout_ms=TIMEOUT_MS)
    if prepare:
        restarted.driver.prepare(new_run=True)  # rolls forward: lost ones copied from the log
    return restarted


def test_driver_down_past_the_timeout_before_any_endtxn_withdraws_the_decision(
        sink: Harness, faults, tmp_path) -> None:
    """Every decided transaction aborted by Kafka (the log shows ABORT markers): nothing of
    the batch was committed, so the decision is withdrawn and the replay commits as a new
    batch, whatever rows it writes: no loss, nothing twice."""
    restarted = _decided_then_down_past_the_timeout(sink, faults, tmp_path,
                                                    "commit.after_decision")
    assert restarted.log.get(0) is None
    replay = [restarted.task(0, vals("b0t0")), restarted.task(1, vals("other", 7))]
    restarted.driver.commit(0, replay, tasks=2)
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + vals("other", 7)))


def test_driver_down_past_the_timeout_the_restart_copies_the_lost_transactions(
        sink: Harness, faults, tmp_path) -> None:
    """No loss, whatever the replay writes: the restart copies task 1's aborted records from
    the log before any task starts, and the replay (task 1 writing other rows, a source
    that is not replayable) is aborted. Before: the loss was recorded and only a replay with
    the same rows could rewrite it; other rows failed the batch with a final loss."""
    restarted = _decided_then_down_past_the_timeout(sink, faults, tmp_path)
    decision = restarted.log.get(0)
    assert decision.done and not decision.lost and not decision.lost_handoffs
    replay = [restarted.task(0, vals("b0t0")), restarted.task(1, vals("other", 7))]
    restarted.driver.commit(0, replay, tasks=2)
    assert_once_on_kafka(restarted, Counter(vals("b0t0") + vals("b0t1")))


def test_driver_down_past_the_timeout_loss_is_named_once_and_shown_by_txns(
        sink: Harness, faults, tmp_path, capsys) -> None:
    """Loss: while the driver was down, retention removed the aborted transaction's first
    records, so nothing can be copied: EOSKAFKA_TRANSACTION_LOST names the batch, the
    partitions and the counts, once; `eoskafka txns` shows the loss; the query goes on."""
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KafkaTP

    restarted = _decided_then_down_past_the_timeout(sink, faults, tmp_path, prepare=False)
    lost = restarted.log.get(0).handoffs[1]
    topic, partition, first = lost.first_offsets[0]
    admin = KafkaAdminClient(bootstrap_servers=sink.bootstrap)
    try:
        admin.delete_records({KafkaTP(topic, partition): first + 1})
    finally:
        admin.close()
    with pytest.raises(TransactionLostError) as err:
        restarted.driver.prepare(new_run=True)
    message = str(err.value)
    assert "[EOSKAFKA_TRANSACTION_LOST]" in message and "batch 0:" in message
    assert "LOST" in message and f"{sink.ids.for_task(1)}" in message
    assert "30 records" in message and f"{topic}-{partition}" in message
    restarted.driver.prepare(new_run=True)  # reported once: the query goes on
    restarted.driver.commit(0, [restarted.task(p, vals(f"again{p}", 5)) for p in range(2)],
                            tasks=2)  # the replay is aborted
    capsys.readouterr()
    # Exit 1: a loss recorded in the decision log is what `txns` alerts on (docs/operations.md).
    assert main(["txns", "--checkpoint", str(tmp_path / "ckpt"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    batch = next(b for b in doc["batches"] if b["batch_id"] == 0)
    assert batch["transactions_lost"] == 1 and batch["state"] == "done"
    assert any(sink.ids.for_task(1) in entry for entry in batch["lost"])
    assert main(["txns", "--checkpoint", str(tmp_path / "ckpt")]) == 1
    assert "batch 0 lost:" in capsys.readouterr().out
    # Task 0's rows committed before the crash; task 1's are lost (not doubled).
    assert_once_on_kafka(restarted, Counter(vals("b0t0")))
