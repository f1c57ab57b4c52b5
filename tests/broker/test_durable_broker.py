"""A broker killed with SIGKILL and restarted: Tansu on s3:// storage (moto), as in the chaos
harness (tests/chaos). What must survive the restart, and which clients must ride it out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from eos_kafka_source.broker import EmbeddedBroker
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.options import SourceOptions
from eos_kafka_source.sink.driver.committer import finish
from eos_kafka_source.sink.task.writer import TaskWriter
from eos_kafka_source.source.planner import SourcePlanner
from eos_kafka_source.wire import KafkaWire, init_producer_ids
from tests.chaos.broker import S3Server, durable_broker
from tests.kafka_helpers import TxnWriter, create_topic
from tests.oracle import committed_view

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def durable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    work: Path = tmp_path_factory.mktemp("durable")
    s3 = S3Server(work).start()
    broker = durable_broker(s3, work)
    try:
        yield broker.start()
    finally:
        broker.stop()
        s3.stop()


def _committed(bootstrap: str, topic: str) -> Counter[bytes]:
    return Counter(v for pv in committed_view(bootstrap, topic).values()
                   for v in pv.committed_values)


def test_records_open_transactions_and_epochs_survive_kill(durable, unique) -> None:
    bootstrap = durable.bootstrap_servers
    create_topic(bootstrap, unique, partitions=2)
    cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(unique, [b"c1", b"c2"], partition=0)
        w.aborted(unique, [b"x"], partition=1)
        w.begin_open(unique, [b"open"], partition=1)
        epoch = w.producer_epoch
        durable.restart(kill=True)
        view = committed_view(bootstrap, unique)
        assert sorted(v for pv in view.values() for v in pv.committed_values) == [b"c1", b"c2"]
        assert view[1].aborted_values == [b"x"] and view[1].open_values == [b"open"]
        w.commit_open()  # the producer rides the restart; its open transaction survived
    assert _committed(bootstrap, unique) == Counter([b"c1", b"c2", b"open"])
    with KafkaWire(cfg) as wire:  # the epoch survived: re-initialising bumps past it
        from eos_kafka_source.wire import find_coordinator

        tid = f"{unique}-w"
        bumped = init_producer_ids(wire, find_coordinator(wire, tid), [tid], 60000)[tid]
    assert bumped.epoch > epoch


def test_driver_commits_a_handoff_across_a_broker_restart(durable, unique) -> None:
    """A task's flushed transaction, handed over before the broker died, is committed after."""
    bootstrap = durable.bootstrap_servers
    create_topic(bootstrap, unique)
    cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
    with KafkaWire(cfg) as wire:
        writer = TaskWriter(wire, transactional_id=f"{unique}-0", topic=unique,
                            transaction_timeout_ms=60000, batch_records=10)
        writer.open()
        writer.write_batch(pa.RecordBatch.from_pydict({"value": [b"a", b"b"]}))
        handoff = writer.handoff()
    durable.restart(kill=True)
    with KafkaWire(cfg) as wire:
        report = finish(wire, [handoff], commit=True)
    assert report.ok and len(report.done) == 1
    assert _committed(bootstrap, unique) == Counter([b"a", b"b"])


def test_source_planning_rides_out_a_broker_restart(durable, unique) -> None:
    """Found by the chaos harness: the planner's connection died with the broker and the
    query failed at its next latestOffset; it now reconnects (within
    kafka.default.api.timeout.ms)."""
    bootstrap = durable.bootstrap_servers
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-w") as w:
        w.committed(unique, [b"1", b"2", b"3"])
    options = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": unique,
                                   "startingOffsets": "earliest"}, streaming=True)
    planner = SourcePlanner(options)
    try:
        start = planner.initial_offsets()
        before = planner.latest_offsets(start).end
        durable.restart(kill=True)
        after = planner.latest_offsets(start).end
        assert after == before and after[(unique, 0)] >= 3
        assert planner.plan(start, after)
    finally:
        planner.close()
