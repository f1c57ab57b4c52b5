"""The executor-side partition reader over a fake log: compacted gaps, retention while
reading (failOnDataLoss), a lost leader looked up again, batch sizing and the Arrow schema
Spark checks."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

import pytest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import ConnectionDroppedError, DataLossError, for_code
from eos_kafka_source.kafka_codes import Code
from eos_kafka_source.records import encode_batch, iter_batches
from eos_kafka_source.records.decode import arrow_schema
from eos_kafka_source.source import partition_reader as pr
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.wire import Bounds, TopicInfo, known, retry
from tests.fakes.wire import FakeWire

#: The module that opens the read's cursors, imported by name: ``wire.fetch`` is also a function.
cursors = importlib.import_module("eos_kafka_source.wire.fetch")


class FakeLog:
    """Plain batches at chosen offsets; ``drop_after`` moves the log start mid-read."""

    def __init__(self, offsets: list[list[int]]) -> None:
        self.batches = []
        for group in offsets:
            raw = encode_batch([None] * len(group), [f"v{o}".encode() for o in group],
                               1_700_000_000_000, base_offset=group[0])
            self.batches.extend(iter_batches(raw))
        self.log_start = 0
        self.drop_after: tuple[int, int] | None = None  # (after N batches served, new start)
        self.served = 0

    def cursor(self, _wire, _leader, tp, offset, stop, **_kw):
        log = self

        class Cursor:
            aborted_hints: list = []

            def __iter__(self):
                position = offset
                for header, view in log.batches:
                    if header.last_offset < position:
                        continue
                    if header.base_offset >= stop:
                        return
                    if position < log.log_start:
                        raise DataLossError(f"{tp}: offset {position} is no longer in the log")
                    yield header, view
                    position = header.last_offset + 1
                    log.served += 1
                    if log.drop_after and log.served == log.drop_after[0]:
                        log.log_start = log.drop_after[1]

        return Cursor()


@pytest.fixture
def log(monkeypatch) -> Iterator[FakeLog]:
    known.forget_all()  # leaders another test's wires learned are not this test's
    fake = FakeLog([[0, 1], [5, 6], [9]])  # offsets 2-4 and 7-8 compacted away
    monkeypatch.setattr(pr, "KafkaWire", FakeWire.for_config)
    monkeypatch.setattr(pr, "fetch_metadata", lambda _w, topics: {"t": TopicInfo("t", {0: 1})})
    monkeypatch.setattr(cursors, "LogCursor", fake.cursor)
    monkeypatch.setattr(pr, "fetch_bounds",
                        lambda _w, leaders, hints=None: {tp: Bounds(fake.log_start, 10, 10)
                                                         for tp in leaders})
    yield fake
    known.forget_all()


def part(start: int, end: int, **kw: object) -> KafkaInputPartition:
    return KafkaInputPartition("t", 0, start, end, ClientConfig(("fake:9092",)), **kw)  # type: ignore[arg-type]


def offsets(p: KafkaInputPartition) -> list[int]:
    return [o for batch in pr.read_partition(p) for o in batch.column("offset").to_pylist()]


def test_compacted_gaps_are_skipped_without_data_loss(log: FakeLog) -> None:
    assert offsets(part(0, 10)) == [0, 1, 5, 6, 9]
    assert offsets(part(2, 5)) == []
    assert offsets(part(3, 6)) == [5]
    assert offsets(part(6, 9)) == [6]


def test_retention_while_reading(log: FakeLog) -> None:
    log.drop_after = (1, 6)
    with pytest.raises(DataLossError, match="no longer in the log"):
        offsets(part(0, 10))
    log.served, log.log_start = 0, 0
    assert offsets(part(0, 10, fail_on_data_loss=False)) == [0, 1, 6, 9]


def test_batches_are_bounded(log: FakeLog, monkeypatch) -> None:
    monkeypatch.setattr(pr, "BATCH_ROWS", 2)
    sizes = [b.num_rows for b in pr.read_partition(part(0, 10))]
    assert sizes == [2, 2, 1]


def test_arrow_schema_is_what_spark_expects() -> None:
    from pyspark.sql.types import StructType

    from eos_kafka_source.source.schema import kafka_schema

    for headers in (False, True):
        schema = kafka_schema(headers)
        assert pr.arrow_schema_of(schema).equals(arrow_schema(headers))
        assert isinstance(schema, StructType)


def test_ranges_of_one_task_share_one_leader_look_up(log, monkeypatch) -> None:
    """A packed task's ranges: the first range's Metadata answers the next one's leader."""
    asked: list[list[str]] = []

    def metadata(_w, topics):
        asked.append(topics)
        return {"t": TopicInfo("t", {0: 1, 1: 1})}

    monkeypatch.setattr(pr, "fetch_metadata", metadata)
    leaders: dict[tuple[str, int], int] = {}
    first = [o for b in pr.read_partition(part(0, 10), None, leaders)
             for o in b.column("offset").to_pylist()]
    other = KafkaInputPartition("t", 1, 0, 10, ClientConfig(("fake:9092",)))
    second = [o for b in pr.read_partition(other, None, leaders)
              for o in b.column("offset").to_pylist()]
    assert first == second == [0, 1, 5, 6, 9]
    assert asked == [["t"]]
    assert leaders == {("t", 0): 1, ("t", 1): 1}


def _dropping(log: FakeLog, drops: list[BaseException]):
    """``log``'s cursor, raising the next of ``drops`` after each batch it serves."""
    def cursor(*args, **kw):
        inner = log.cursor(*args, **kw)

        class Cursor:
            aborted_hints: list = []

            def __iter__(self):
                for item in inner:
                    yield item
                    if drops:
                        raise drops.pop(0)

        return Cursor()

    return cursor


def test_a_lost_leader_is_looked_up_again_on_the_retry_schedule(log, monkeypatch) -> None:
    """A leader lost twice mid-read (a dropped connection, then NOT_LEADER_OR_FOLLOWER):
    Metadata is asked again each time, the read goes on where it was (no record twice),
    pausing on the one schedule (50 ms, then 100 ms)."""
    asked: list[list[str]] = []
    sleeps: list[float] = []

    def metadata(_w, topics):
        asked.append(topics)
        return {"t": TopicInfo("t", {0: 1})}

    monkeypatch.setattr(pr, "fetch_metadata", metadata)
    monkeypatch.setattr(cursors, "LogCursor", _dropping(log, [
        ConnectionDroppedError("gone"), for_code(Code.NOT_LEADER_OR_FOLLOWER)("Fetch t-0")]))
    monkeypatch.setattr(retry.time, "sleep", sleeps.append)
    assert offsets(part(0, 10)) == [0, 1, 5, 6, 9]
    assert asked == [["t"]] * 3
    assert sleeps == [pytest.approx(0.05), pytest.approx(0.1)]


def test_a_lost_leader_past_the_deadline_ends_the_read(log, monkeypatch) -> None:
    """No leader found again within ``kafka.default.api.timeout.ms``: the read fails with
    the error that lost it, without a pause."""
    sleeps: list[float] = []
    monkeypatch.setattr(cursors, "LogCursor", _dropping(log, [ConnectionDroppedError("gone")]))
    monkeypatch.setattr(retry.time, "sleep", sleeps.append)
    expired = KafkaInputPartition("t", 0, 0, 10, ClientConfig(("fake:9092",), api_timeout_ms=0))
    with pytest.raises(ConnectionDroppedError, match="gone"):
        offsets(expired)
    assert sleeps == []


def test_a_leader_this_worker_learned_needs_no_metadata_until_it_is_lost(log, monkeypatch
                                                                         ) -> None:
    """The leader an earlier task's Metadata named (wire/known.py) starts the read with no
    Metadata request; when it answers NOT_LEADER_OR_FOLLOWER, Metadata is asked and the
    read goes on where it was."""
    asked: list[list[str]] = []

    def metadata(_w, topics):
        asked.append(topics)
        return {"t": TopicInfo("t", {0: 2})}

    @contextlib.contextmanager
    def wire(config):
        yield FakeWire.for_config(config)  # knows every broker's address

    monkeypatch.setattr(pr, "kept_wire", wire)
    monkeypatch.setattr(pr, "fetch_metadata", metadata)
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)
    known.TOPICS.put(ClientConfig(("fake:9092",)), "t", TopicInfo("t", {0: 1}))
    assert offsets(part(0, 10)) == [0, 1, 5, 6, 9]
    assert asked == []
    monkeypatch.setattr(cursors, "LogCursor", _dropping(log, [
        for_code(Code.NOT_LEADER_OR_FOLLOWER)("Fetch t-0")]))
    assert offsets(part(0, 10)) == [0, 1, 5, 6, 9]
    assert asked == [["t"]]
