"""A topic deleted while the query runs: in the middle of a task, and between batches.

Spark's Kafka source skips a deleted topic under ``failOnDataLoss=false`` and fails
the query otherwise; eoskafka used to fail either way (the task's next Fetch got
UNKNOWN_TOPIC_OR_PARTITION, the planner's Metadata call a TopicNotFoundError).
"""

from __future__ import annotations

import time

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import DataLossError
from eos_kafka_source.options import SourceOptions
from eos_kafka_source.source import partition_reader
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.planner import SourcePlanner
from eos_kafka_source.wire import fetch_metadata
from tests.kafka_helpers import create_topic, wire_for, write_plain
from tests.spark.differential import delete_topic

pytestmark = pytest.mark.kafka_only


def _wait_gone(bootstrap: str, topic: str) -> None:
    deadline = time.monotonic() + 30
    with wire_for(bootstrap) as w:
        while topic in fetch_metadata(w, [topic]):
            assert time.monotonic() < deadline, f"{topic} still listed 30 s after deletion"
            time.sleep(0.2)  # polling the broker's metadata for the deletion to land


def _written(bootstrap: str, topic: str, n: int) -> None:
    for i in range(n):  # one record batch each, so a 1-byte fetch returns one at a time
        write_plain(bootstrap, topic, [f"v{i}".encode()], partition=0)


@pytest.mark.parametrize("fail_on_data_loss", [False, True])
def test_topic_deleted_in_the_middle_of_a_task(bootstrap, unique, monkeypatch, caplog,
                                               fail_on_data_loss) -> None:
    create_topic(bootstrap, unique)
    _written(bootstrap, unique, 6)
    monkeypatch.setattr(partition_reader, "BATCH_ROWS", 1)  # yield after every batch
    part = KafkaInputPartition(unique, 0, 0, 6, ClientConfig((bootstrap,)), fetch_max_bytes=1,
                               fail_on_data_loss=fail_on_data_loss)
    batches = partition_reader.read_partition(part)
    first = next(batches)
    assert first.column("value").to_pylist() == [b"v0"]
    delete_topic(bootstrap, unique)
    _wait_gone(bootstrap, unique)
    if fail_on_data_loss:
        with pytest.raises(DataLossError, match="was deleted while this task read it"):
            list(batches)
    else:
        rest = [v for b in batches for v in b.column("value").to_pylist()]
        # What the cursor had already fetched (it keeps one Fetch ahead), then a skip.
        assert rest == [f"v{i}".encode() for i in range(1, 1 + len(rest))] and len(rest) < 5
        assert f"offsets {1 + len(rest)} to 5 were not read" in caplog.text


def test_subscribed_topic_deleted_between_batches(bootstrap, unique) -> None:
    keep, gone = f"{unique}-keep", f"{unique}-gone"
    for t in (keep, gone):
        create_topic(bootstrap, t)
        write_plain(bootstrap, t, [b"a", b"b"], partition=0)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": f"{keep},{gone}",
               "startingOffsets": "earliest"}
    lenient = SourcePlanner(SourceOptions.parse({**options, "failOnDataLoss": "false"},
                                                streaming=True))
    strict = SourcePlanner(SourceOptions.parse(options, streaming=True))
    try:
        start = lenient.initial_offsets()
        assert start == {(keep, 0): 0, (gone, 0): 0}
        delete_topic(bootstrap, unique + "-gone")
        _wait_gone(bootstrap, gone)
        write_plain(bootstrap, keep, [b"c"], partition=0)
        end = lenient.latest_offsets(start).end
        assert end == {(keep, 0): 3}
        ranges = lenient.plan(start, end)
        assert [(r.topic, r.start, r.end) for r in ranges] == [(keep, 0, 3)]
        # The batch after the skip starts where the gone topic is no longer listed: still
        # skipped (a restarted query used to fail here with EOSKAFKA_TOPIC_NOT_FOUND).
        write_plain(bootstrap, keep, [b"d"], partition=0)
        assert lenient.latest_offsets(end).end == {(keep, 0): 4}
        with pytest.raises(DataLossError, match="no longer exists"):
            strict.plan(start, strict.latest_offsets(start).end)
    finally:
        lenient.close()
        strict.close()
