"""Hanging transactions (KIP-664) on Apache Kafka.

Seen on 4.4.0 after coordinator and leader kills: a decided transaction was CompleteCommit
at its coordinator and had its COMMIT marker in one output partition, but not in the
other (DescribeProducers: open from offset 12, coordinator epoch -1); the restarted driver
waited for that marker without end, logging nothing. Such a partition is made here on
purpose: records of the task's producer appended to a partition its coordinator never
heard of. Kafka 4.x refuses that from a client (partition verification, KIP-890 part 1:
the first case shows it), so the cases that need it turn verification off for a moment,
as a cluster-wide dynamic setting.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest
from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest

from eos_kafka_source.cli import main
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.records import encode_batch
from eos_kafka_source.sink.handoff import TxnHandoff
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import KafkaWire, fetch_metadata, produce_errors, produce_request
from eos_kafka_source.wire.txn import produce_offsets
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions
from tests.sink_harness import Harness, assert_once_on_kafka, vals
from tests.waiting import until

pytestmark = pytest.mark.kafka_only

VERIFICATION = "transaction.partition.verification.enable"
_BROKER_RESOURCE = 4


def _set_cluster_default(wire: KafkaWire, name: str, value: str | None) -> None:
    """Set (or with None, remove) a cluster-wide dynamic broker setting."""
    version = int(wire.client.api_version(IncrementalAlterConfigsRequest, max_version=1))
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = Resource.AlterableConfig(name=name, config_operation=0 if value else 1, value=value)
    answer = wire.request_any(IncrementalAlterConfigsRequest[version](
        resources=[Resource(resource_type=_BROKER_RESOURCE, resource_name="", configs=[config])],
        validate_only=False), f"IncrementalAlterConfigs {name}")
    assert [r.error_code for r in answer.responses] == [0], answer


@pytest.fixture
def no_verification(bootstrap: str) -> Iterator[None]:
    """Partition verification off for the test (the cluster default restored after)."""
    with KafkaWire(ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})) as wire:
        _set_cluster_default(wire, VERIFICATION, "false")
        try:
            yield
        finally:
            _set_cluster_default(wire, VERIFICATION, None)


#: The stray records' timestamps are this old: Kafka's ``lastTimestamp`` for the producer
#: there (the batch's largest timestamp) is then older than the maximum transaction timeout
#: (15 minutes by default), as find-hanging requires of a hanging transaction, without the
#: test waiting 15 minutes.
IDLE_MS = 20 * 60_000


def _stray_append(wire: KafkaWire, writer: TaskWriter, topic: str, partition: int,
                  values: list[bytes]) -> tuple[int, dict]:
    """Records of ``writer``'s open transaction appended to ``partition`` with no
    AddPartitionsToTxn, stamped :data:`IDLE_MS` ago: (base offset, or -1, and the errors of
    the last answer)."""
    assert writer.producer is not None and writer.transactional_id is not None
    batch = encode_batch([None] * len(values), values, int(time.time() * 1000) - IDLE_MS,
                         producer_id=writer.producer.producer_id,
                         producer_epoch=writer.producer.epoch, base_sequence=0,
                         transactional=True)
    request = produce_request(wire, writer.transactional_id, {(topic, partition): batch}, 30000)
    leader = fetch_metadata(wire, [topic])[topic].leaders[partition]
    answer = wire.request(leader, request, "Produce (stray)")
    errors = produce_errors(answer)
    return (-1 if errors else produce_offsets(answer)[(topic, partition)]), errors


def _txns(bootstrap: str, topic: str, capsys: pytest.CaptureFixture[str]) -> dict:
    """``eoskafka txns --json`` on ``topic``: its document, with the exit code as ``exit``."""
    code = main(["txns", "-b", bootstrap, "--topic", topic, "--json"])
    return {**json.loads(capsys.readouterr().out), "exit": code}


def _hanging_handoff(sink: Harness, wire: KafkaWire, tag: str) -> TxnHandoff:
    """Task 0's transaction, on partition 1 as a task writes it and on partition 0 as a
    stray append the coordinator never heard of; the hand-off lists both."""
    writer = sink.open_task(wire, 0)
    writer.write_batch(pa.RecordBatch.from_pydict({
        "value": vals(f"{tag}p1"), "partition": pa.array([1] * 30, pa.int32())}))
    stray = vals(f"{tag}p0")
    first, _ = until(lambda: _stray_append(wire, writer, sink.topic, 0, stray),
                     lambda got: got[0] >= 0, what="a stray append (verification off)")
    handoff = writer.handoff()
    return dataclasses.replace(
        handoff, partitions=((sink.topic, 0, len(stray)), *handoff.partitions),
        first_offsets=((sink.topic, 0, first), *handoff.first_offsets),
        records=handoff.records + len(stray))


def test_kafka_refuses_a_produce_to_a_partition_outside_the_transaction(
        bootstrap: str, unique: str, tmp_path) -> None:  # noqa: ANN001
    """What our writer could do wrong cannot hang a partition on Kafka 4.x: a transactional
    Produce to a partition the coordinator does not hold is refused (the leader asks the
    coordinator first), so the hanging transaction of the finding is not one such append."""
    create_topic(bootstrap, unique, partitions=2)
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    with sink.wire() as wire:
        writer = sink.open_task(wire, 0)
        writer.write_batch(pa.RecordBatch.from_pydict({
            "value": vals("p1"), "partition": pa.array([1] * 30, pa.int32())}))
        offset, errors = _stray_append(wire, writer, unique, 0, vals("stray"))
        assert offset < 0 and errors, "Kafka took a Produce outside the transaction"
        handoff = writer.handoff()
    sink.driver.commit(0, [handoff], tasks=1)
    assert_once_on_kafka(sink, Counter(vals("p1")))


def test_a_decided_transaction_hanging_on_one_partition_is_ended_and_copied(
        bootstrap: str, unique: str, tmp_path, no_verification,  # noqa: ANN001
        caplog) -> None:  # noqa: ANN001
    """The finding's shape: the coordinator commits partition 1 and ends the transaction
    (CompleteCommit); partition 0 holds it open for good. Before the fix the restarted
    driver's roll-forward (then the only reader of the markers) waited for partition 0's
    marker for the whole commit deadline (75 s here), logging nothing, then failed with
    EOSKAFKA_TRANSACTION_OUTCOME_UNKNOWN ("their coordinator moved or could not be
    reached"), and so did every restart after it. Now the commit itself confirms its
    transaction from the log (invariant 9): the hanging partition is named and ended with
    an ABORT marker within seconds, and its records are copied from the log before the
    commit returns: every record once, nothing open."""
    create_topic(bootstrap, unique, partitions=2)
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    with sink.wire() as wire:
        handoff = _hanging_handoff(sink, wire, "b0")
    began = time.monotonic()
    sink.driver.commit(0, [handoff], tasks=1)  # its confirmation meets the hanging partition
    assert time.monotonic() - began < 60
    assert any("hanging transaction" in r.getMessage() for r in caplog.records)
    assert_once_on_kafka(sink, Counter(vals("b0p0") + vals("b0p1")))


def test_txns_finds_a_hanging_transaction_and_names_the_command(
        bootstrap: str, unique: str, tmp_path, no_verification, capsys) -> None:  # noqa: ANN001
    """``eoskafka txns`` tells a hanging transaction from a live one, as
    ``kafka-transactions.sh find-hanging`` does, and prints Kafka's command that ends it;
    that very command ends it."""
    import shlex

    from eos_kafka_source.apache_kafka import KafkaTools

    create_topic(bootstrap, unique, partitions=2)
    sink = Harness(bootstrap, unique, unique, tmp_path / "ckpt")
    sink.driver.prepare(new_run=True)
    with sink.wire() as wire:
        handoff = _hanging_handoff(sink, wire, "h")
    first = dict(((t, p), o) for t, p, o in handoff.first_offsets)[(unique, 0)]
    doc = _txns(bootstrap, unique, capsys)
    assert doc["open_transactions"] == 2 and doc["exit"] == 1
    # Partition 1 is live (its coordinator holds it); partition 0 hangs already: no
    # coordinator will ever write its marker.
    assert [(h["partition"], h["start_offset"]) for h in doc["hanging"]] == [(0, first)]
    sink.driver.commit(0, [dataclasses.replace(
        handoff, partitions=handoff.partitions[1:], first_offsets=handoff.first_offsets[1:],
        records=30)], tasks=1)  # the coordinator ends it; partition 0 is left open
    until(lambda: _txns(bootstrap, unique, capsys),
          lambda doc: doc["hanging_transactions"] == 1, what="the hanging transaction found")
    assert main(["txns", "-b", bootstrap, "--topic", unique]) == 1
    out = capsys.readouterr().out
    command = next(line.strip() for line in out.splitlines()
                   if "kafka-transactions.sh" in line)
    args = shlex.split(command)
    assert args[args.index("--start-offset") + 1] == str(first)
    KafkaTools(bootstrap).abort_transaction(unique, int(args[args.index("--partition") + 1]),
                                           first)
    until(lambda: _txns(bootstrap, unique, capsys),
          lambda doc: doc["hanging_transactions"] == 0 and doc["open_transactions"] == 0,
          what="no hanging transaction after Kafka's abort")
    assert_no_open_transactions(bootstrap, unique)
