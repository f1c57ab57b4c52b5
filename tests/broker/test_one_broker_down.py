"""One broker of three is down: every request that any broker can answer goes to a live one.

Seen in a failover check on Kafka 4.3.1: the coordinator (node 3) was
killed, and the next micro-batch's ``streamWriter()`` failed with
``[EOSKAFKA_CONNECTION_DROPPED] Metadata: could not connect to broker ... (node 3)``; Spark
ended the query. Metadata, FindCoordinator and the other cluster-wide requests can be
answered by any broker, and Kafka's client asks another when one cannot be reached; a new
wire's first request went to a broker picked at random among those the bootstrap answer
listed, the dead one included until the controller fences it (4 s here, 9 s by default).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.sink import recall
from eos_kafka_source.sink.naming import TransactionalIdFactory
from eos_kafka_source.wire.cluster import create_topic, fetch_metadata, find_coordinator
from eos_kafka_source.wire.kept import close_kept
from tests.broker.conftest import in_sync_wire
from tests.broker.test_kept_lookups import (  # _nothing_kept: its autouse fixture
    _checkpoint,
    _committed,
    _nothing_kept,  # noqa: F401
    _task,
    _writer,
)
from tests.oracle import assert_no_open_transactions
from tests.sink_harness import vals

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]

#: New wires made one after another while the dead node is still listed (each picked "any
#: node" at random among three: all nine avoid the dead one by luck 2.6% of the time).
NEW_WIRES = 9


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with in_sync_wire(bootstrap) as wire:
        create_topic(wire, topic, partitions, replication=3)


def test_new_wires_ask_a_live_broker_for_metadata(kafka: KafkaCluster, unique: str) -> None:
    """The wire-level reproduction: the coordinator of an id is killed, then new wires (a
    planning worker's) ask for metadata and the coordinator. Before the fix 1 to 3 of nine
    failed at once with EOSKAFKA_CONNECTION_DROPPED "Metadata: could not connect to broker
    ... (node N)", the killed node."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 3)
    tid = f"{unique}-tid"
    with in_sync_wire(bootstrap) as wire:
        victim = find_coordinator(wire, tid)
    kafka.stop_node(victim, kill=True)
    began = time.monotonic()
    listed = 0
    for _ in range(NEW_WIRES):
        with in_sync_wire(bootstrap) as wire:
            listed += victim in {b.node_id for b in wire.client.cluster.brokers()}
            assert sorted(fetch_metadata(wire, [unique])[unique].leaders) == [0, 1, 2]
            find_coordinator(wire, tid)
    assert listed, "the dead node was fenced before the first new wire: nothing was tested"
    assert time.monotonic() - began < 60


def test_the_next_batch_is_planned_and_committed_with_its_coordinator_dead(
        kafka: KafkaCluster, unique: str, tmp_path: Path) -> None:
    """The failover check's case: batch 0 commits, the coordinator of a task's
    transactional id is killed, and batch 1 is planned by new planning workers (the
    prefix claim, the roll-forward check), written and committed; every record once."""
    bootstrap = kafka.bootstrap_servers
    _create(bootstrap, unique, 2)
    lineage = f"query-{unique}"
    checkpoint = _checkpoint(tmp_path, lineage)
    writer = _writer(bootstrap, unique, checkpoint)
    writer.commit([_task(writer, p, 0, lineage, f"b0t{p}") for p in range(2)], 0)
    with in_sync_wire(bootstrap) as wire:
        victim = find_coordinator(wire, TransactionalIdFactory(writer.prefix).for_task(0))
    kafka.stop_node(victim, kill=True)
    for _ in range(5):  # each a new planning worker: nothing kept
        recall.forget_all()
        close_kept()
        writer = _writer(bootstrap, unique, checkpoint)
    writer.commit([_task(writer, p, 1, lineage, f"b1t{p}") for p in range(2)], 1)
    expected = Counter(vals("b0t0") + vals("b0t1") + vals("b1t0") + vals("b1t1"))
    assert _committed(bootstrap, unique) == expected
    assert_no_open_transactions(bootstrap, unique)
