"""What Tansu 0.6.0 does differently from Kafka, pinned as strict expected failures.

Each test asserts Kafka's behaviour: it passes on Apache Kafka and is a strict
xfail on Tansu. If a Tansu upgrade fixes a quirk the test starts passing there,
strict xfail turns that into a failure, and the workaround (and the xfail in
tests/oracle.py) can go.
"""

from __future__ import annotations

import pyarrow as pa

from eos_kafka_source.client_config import ClientConfig
from eos_kafka_source.sink.task_writer import TaskWriter
from eos_kafka_source.wire import (
    KafkaWire,
    ProducerIdentity,
    end_txns,
    fetch_bounds,
    fetch_metadata,
    find_coordinator,
)
from tests.brokers import on_tansu_xfail
from tests.kafka_helpers import create_topic
from tests.oracle import TANSU_STUCK_LSO


def _open_txn(cfg: ClientConfig, tid: str, topic: str) -> tuple[KafkaWire, TaskWriter]:
    wire = KafkaWire(cfg)
    writer = TaskWriter(wire, transactional_id=tid, topic=topic, transaction_timeout_ms=60000,
                        batch_records=100, context={})
    writer.open()
    writer.write_batch(pa.RecordBatch.from_pydict({"value": [b"x"] * 10}))
    writer.flush()
    return wire, writer


def _end(wire: KafkaWire, writer: TaskWriter, commit: bool) -> None:
    tid = writer.transactional_id
    assert tid is not None and writer.producer is not None
    who = ProducerIdentity(writer.producer.producer_id, writer.producer.epoch)
    [outcome] = end_txns(wire, {tid: find_coordinator(wire, tid)}, [(tid, who)], commit)
    assert outcome.ok
    wire.close()


@on_tansu_xfail(TANSU_STUCK_LSO)
def test_lso_reaches_high_watermark_when_reinitialised_id_overlaps(bootstrap, unique) -> None:
    create_topic(bootstrap, unique)
    cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    spanning = _open_txn(cfg, f"{unique}-b", unique)
    _end(*_open_txn(cfg, f"{unique}-a", unique), commit=True)
    _end(*_open_txn(cfg, f"{unique}-a", unique), commit=True)  # same id, new epoch
    _end(*spanning, commit=True)
    with KafkaWire(cfg) as wire:
        leaders = {(unique, 0): fetch_metadata(wire, [unique])[unique].leaders[0]}
        bounds = fetch_bounds(wire, leaders)[(unique, 0)]
    assert bounds.last_stable == bounds.high_watermark
