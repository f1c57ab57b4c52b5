"""What a sink's Python worker keeps between tasks and batches is a hint, never the truth
(wire/known.py; 3-node Apache Kafka, so a kept coordinator can be the wrong broker).

A worker keeps the coordinators it found (its tasks' transactional ids, the query's
abort-mark group, the prefix claim's group; the commit worker's liveness check), so a warm
task checks the abort mark with one OffsetFetch instead of FindCoordinator + OffsetFetch.
A coordinator that moved since must cost a lookup, not the batch, and above all not the
abort mark: a late task of an aborted batch whose worker keeps a stale group coordinator
must still find the mark and write nothing (docs/design.md, invariants).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import TransactionLostError
from eos_kafka_source.sink import recall
from eos_kafka_source.sink.driver.claims import aborted_group, claim_group
from eos_kafka_source.sink.naming import TransactionalIdFactory
from eos_kafka_source.sink.spark_writer import EosKafkaStreamWriter
from eos_kafka_source.sink.task.context import WriterContext
from eos_kafka_source.wire import KafkaWire, known
from eos_kafka_source.wire.cluster import find_coordinator
from eos_kafka_source.wire.kept import close_kept
from eos_kafka_source.wire.retry import GROUP, TRANSACTION
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, await_markers, committed_view
from tests.sink_harness import vals

pytestmark = pytest.mark.kafka_only

SCHEMA = StructType([StructField("value", BinaryType())])


@pytest.fixture(autouse=True)
def _nothing_kept() -> Iterator[None]:
    recall.forget_all()
    yield
    recall.forget_all()
    close_kept()


def _config(bootstrap: str) -> ClientConfig:
    return ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})


def _writer(bootstrap: str, topic: str, checkpoint: Path) -> EosKafkaStreamWriter:
    """The writer a new planning worker makes for a batch (it prepares the sink)."""
    import eos_kafka_source.sink.spark_writer as sw

    sw._PREPARED_IN_PROCESS.clear()
    return EosKafkaStreamWriter({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                 "checkpointLocation": str(checkpoint)}, SCHEMA)


def _task(writer: EosKafkaStreamWriter, task: int, batch: int, lineage: str, tag: str):  # noqa: ANN202
    """``writer.write`` as task ``task`` of streaming batch ``batch``."""
    import eos_kafka_source.sink.spark_writer as sw

    real = sw._task_context
    sw._task_context = lambda: WriterContext(task_partition=task, batch_id=batch, lineage=lineage)
    try:
        return writer.write(iter([pa.RecordBatch.from_pydict({"value": vals(tag)})]))
    finally:
        sw._task_context = real


def _checkpoint(tmp_path: Path, lineage: str) -> Path:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": lineage}) + "\n")
    return checkpoint


def _wrong(kafka: KafkaCluster, wire: KafkaWire, key: str, key_type: int) -> tuple[int, int]:
    """(the coordinator of ``key``, another live broker)."""
    right = find_coordinator(wire, key, key_type)
    return right, next(n.node_id for n in kafka.nodes if n.node_id != right)


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    await_markers(bootstrap, topic)
    view = committed_view(bootstrap, topic)
    return Counter(v for pv in view.values() for v in pv.committed_values)


def test_kept_coordinators_on_the_wrong_broker_cost_a_lookup_not_the_batch(
        kafka3: KafkaCluster, unique: str, tmp_path: Path) -> None:
    """Every kept coordinator points at a broker that is not the coordinator: the claim
    check (planning), InitProducerId and the abort-mark check (tasks) and the liveness check
    (commit) each get NOT_COORDINATOR, look the coordinator up again, and the batch commits
    once; what is kept afterwards is the coordinator that answered."""
    bootstrap = kafka3.bootstrap_servers
    create_topic(bootstrap, unique, partitions=2)
    lineage = f"query-{unique}"
    checkpoint = _checkpoint(tmp_path, lineage)
    config = _config(bootstrap)
    prefix = _writer(bootstrap, unique, checkpoint).prefix  # prepares: the claim exists
    ids = TransactionalIdFactory(prefix)
    keys = [(claim_group(prefix), GROUP), (aborted_group(prefix, lineage), GROUP),
            *((ids.for_task(p), TRANSACTION) for p in range(2))]
    right: dict[str, int] = {}
    with KafkaWire(config) as wire:
        for key, key_type in keys:
            right[key], wrong = _wrong(kafka3, wire, key, key_type)
            wire.learn_coordinator(key, wrong, key_type)
    writer = _writer(bootstrap, unique, checkpoint)  # the claim check at the wrong broker
    handoffs = []
    for p in range(2):  # each task's InitProducerId and mark check at the wrong broker
        if p == 1:  # the commit's liveness check at the wrong broker too
            with KafkaWire(config) as wire:
                wire.learn_coordinator(ids.for_task(0),
                                       _wrong(kafka3, wire, ids.for_task(0), TRANSACTION)[1])
        handoffs.append(_task(writer, p, 0, lineage, f"b0t{p}"))
    writer.commit(handoffs, 0)
    assert _committed(bootstrap, unique) == Counter(vals("b0t0") + vals("b0t1"))
    for key, key_type in keys:
        assert known.COORDINATORS.get(config, (key_type, key)) == right[key], (
            f"{key}: the wrong broker is still kept")
    assert_no_open_transactions(bootstrap, unique)


def test_a_late_task_whose_worker_keeps_a_wrong_group_coordinator_still_refuses(
        kafka3: KafkaCluster, unique: str, tmp_path: Path) -> None:
    """The abort marks the batch, then fences; a task that initialises its id after that
    must find the mark. Its worker's first task kept the mark group's coordinator, which
    has since moved (here: the kept one is another broker): the OffsetFetch answers
    NOT_COORDINATOR, the task looks the coordinator up, finds the mark and writes nothing.
    Checked on purpose: with a NOT_COORDINATOR answer taken for "no mark", this test fails
    (the late task writes and its transaction stays open)."""
    bootstrap = kafka3.bootstrap_servers
    create_topic(bootstrap, unique, partitions=2)
    lineage = f"query-{unique}"
    checkpoint = _checkpoint(tmp_path, lineage)
    config = _config(bootstrap)
    stopped = _writer(bootstrap, unique, checkpoint)
    first = _task(stopped, 0, 0, lineage, "b0t0")  # this worker keeps the group's coordinator
    group = aborted_group(stopped.prefix, lineage)
    with KafkaWire(config) as wire:
        right, wrong = _wrong(kafka3, wire, group, GROUP)
    assert known.COORDINATORS.get(config, (GROUP, group)) == right
    known.COORDINATORS.put(config, (GROUP, group), wrong)  # the coordinator "moved"
    stopped.abort([first, None], 0)  # task 1 had not started when the query stopped
    with pytest.raises(TransactionLostError, match="already aborted"):
        _task(stopped, 1, 0, lineage, "late")
    assert known.COORDINATORS.get(config, (GROUP, group)) == right
    assert_no_open_transactions(bootstrap, unique)
    assert _committed(bootstrap, unique) == Counter()
