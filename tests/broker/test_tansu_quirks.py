"""What Tansu 0.6.0 does differently from Kafka, pinned as strict expected failures.

Each test asserts Kafka's behaviour: it passes on Apache Kafka and is a strict
xfail on Tansu. If a Tansu upgrade fixes a quirk the test starts passing there,
strict xfail turns that into a failure, and the workaround (and the xfail in
tests/oracle.py) can go.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.wire import (
    KafkaWire,
    ProducerIdentity,
    end_txns,
    fetch_bounds,
    fetch_metadata,
    find_coordinator,
)
from tests.brokers import on_tansu_xfail
from tests.kafka_helpers import TxnWriter, create_topic, write_plain
from tests.oracle import TANSU_STUCK_LSO, committed_view, tansu_stuck_lso


def _open_txn(cfg: ClientConfig, tid: str, topic: str) -> tuple[KafkaWire, TaskWriter]:
    wire = KafkaWire(cfg)
    writer = TaskWriter(wire, transactional_id=tid, topic=topic, transaction_timeout_ms=60000,
                        batch_records=100)
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


@on_tansu_xfail(TANSU_STUCK_LSO, raises=AssertionError)
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


def _stuck_by_kafka_python(bootstrap: str, topic: str, tid: str) -> None:
    """The pinned state again with kafka-python's producer (an independent client): b spans
    a's transaction, a is re-initialised (new producer, same id) and commits again."""
    with TxnWriter(bootstrap, f"{tid}-b") as b:
        b.begin_open(topic, [b"span"], partition=0)
        with TxnWriter(bootstrap, f"{tid}-a") as a:
            a.committed(topic, [b"a1"], partition=0)
        with TxnWriter(bootstrap, f"{tid}-a") as a:  # InitProducerId: epoch + 1
            a.committed(topic, [b"a2"], partition=0)
        b.commit_open()


@on_tansu_xfail(TANSU_STUCK_LSO, raises=AssertionError)
def test_lso_reaches_high_watermark_after_a_second_spanning_transaction(bootstrap,
                                                                         unique) -> None:
    """The same quirk where the spanning transaction starts after the id's previous one
    (the id was already re-initialised once under an earlier span)."""
    create_topic(bootstrap, unique)
    _stuck_by_kafka_python(bootstrap, unique, unique)
    with TxnWriter(bootstrap, f"{unique}-d") as d:
        d.begin_open(unique, [b"span2"], partition=0)
        with TxnWriter(bootstrap, f"{unique}-a") as a:
            a.committed(unique, [b"a3"], partition=0)
        d.commit_open()
    pv = committed_view(bootstrap, unique)[0]
    assert pv.last_stable == pv.high_watermark


@pytest.mark.tansu_only
def test_oracle_recognises_exactly_the_pinned_state(bootstrap, unique) -> None:
    """tests/oracle.py excuses an LSO below the high watermark only in this state: the
    raw log shows it; one more transactional write ends it, and the excuse with it."""
    create_topic(bootstrap, unique)
    _stuck_by_kafka_python(bootstrap, unique, unique)
    pv = committed_view(bootstrap, unique)[0]
    assert pv.last_stable < pv.high_watermark and not pv.open_producers
    signature = tansu_stuck_lso(pv)
    assert signature is not None and f"LSO {pv.last_stable} " in signature
    write_plain(bootstrap, unique, [b"plain"], partition=0)  # not transactional: still stuck
    assert tansu_stuck_lso(committed_view(bootstrap, unique)[0]) is not None
    with TxnWriter(bootstrap, f"{unique}-c") as c:
        c.committed(unique, [b"c"], partition=0)
    pv = committed_view(bootstrap, unique)[0]
    assert pv.last_stable == pv.high_watermark and tansu_stuck_lso(pv) is None
