"""The source's planner and partition reader against the embedded broker, without Spark.

Data is written by kafka-python (tests/kafka_helpers.py); what is committed is
decided by tests/oracle.py from the raw log, independently of the reader.
"""

from __future__ import annotations

import time

import pytest

from eos_kafka_source import wire as kwire
from eos_kafka_source.broker import free_port
from eos_kafka_source.errors import BrokerUnreachableError, TopicNotFoundError
from eos_kafka_source.options import SourceOptions
from eos_kafka_source.source.partition_reader import read_partition
from eos_kafka_source.source.partitions import KafkaInputPartition
from eos_kafka_source.source.planner import SourcePlanner
from tests.brokers import ON_TANSU
from tests.kafka_helpers import TxnWriter, create_topic, wire_for, write_plain
from tests.oracle import committed_view
from tests.waiting import until


def source_options(bootstrap: str, streaming: bool = True, **extra: str) -> SourceOptions:
    opts = {"kafka.bootstrap.servers": bootstrap, **extra}
    if not {"subscribe", "subscribePattern", "assign"} & set(extra):
        raise ValueError("name a subscription")
    return SourceOptions.parse(opts, streaming=streaming)


def part(opts: SourceOptions, topic: str, partition: int, start: int, end: int,
         **kw: object) -> KafkaInputPartition:
    return KafkaInputPartition(topic, partition, start, end, opts.client,
                               read_committed=opts.read_committed,
                               include_headers=opts.include_headers, **kw)  # type: ignore[arg-type]


def rows(p: KafkaInputPartition) -> list[tuple[int, bytes | None]]:
    out = []
    for batch in read_partition(p):
        d = batch.to_pydict()
        out.extend(zip(d["offset"], d["value"], strict=True))
    return out


def mixed_log(bootstrap: str, topic: str, unique: str) -> None:
    """Two producers interleaving committed and aborted transactions plus plain records."""
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-b") as b:
        a.begin_open(topic, [b"a1", b"a2"], partition=0)
        b.begin_open(topic, [b"b1"], partition=0)
        write_plain(bootstrap, topic, [b"p1"], partition=0)
        a.begin_open(topic, [b"a3"], partition=0)
        b.abort_open()
        a.commit_open()
        b.committed(topic, [b"b2", b"b3"], partition=0)
        a.aborted(topic, [b"a4"], partition=0)
        write_plain(bootstrap, topic, [b"p2"], partition=0)


def test_every_split_of_a_mixed_log_reads_exactly_the_committed_records(
    bootstrap: str, unique: str
) -> None:
    """Ranges ending on markers, inside transactions and holding no visible record at all."""
    create_topic(bootstrap, unique)
    mixed_log(bootstrap, unique, unique)
    view = committed_view(bootstrap, unique)[0]
    expected = [(r.offset, r.value) for r in view.committed]
    assert [v for _, v in expected] == [b"a1", b"a2", b"p1", b"a3", b"b2", b"b3", b"p2"]
    opts = source_options(bootstrap, subscribe=unique)
    end = view.last_stable
    assert end == view.high_watermark
    assert rows(part(opts, unique, 0, 0, end)) == expected
    for step in (1, 2, 3):
        got = []
        for lo in range(0, end, step):
            got.extend(rows(part(opts, unique, 0, lo, min(lo + step, end))))
        assert got == expected, f"ranges of {step} offset(s)"
    # Tiny fetches: a batch larger than the fetch size, partial trailing batches.
    assert rows(part(opts, unique, 0, 0, end, fetch_max_bytes=1)) == expected


def test_read_uncommitted_returns_aborted_records_but_no_markers(
    bootstrap: str, unique: str
) -> None:
    create_topic(bootstrap, unique)
    mixed_log(bootstrap, unique, unique)
    view = committed_view(bootstrap, unique)[0]
    opts = source_options(bootstrap, subscribe=unique,
                          **{"kafka.isolation.level": "read_uncommitted"})
    got = rows(part(opts, unique, 0, 0, view.high_watermark))
    expected = sorted((r.offset, r.value) for r in view.committed + view.aborted)
    assert got == expected


def test_latest_stops_at_an_open_transaction_until_it_commits(
    bootstrap: str, unique: str
) -> None:
    create_topic(bootstrap, unique, partitions=2)
    opts = source_options(bootstrap, subscribe=unique, startingOffsets="earliest")
    planner = SourcePlanner(opts)
    try:
        with TxnWriter(bootstrap, f"{unique}-w") as w:
            w.committed(unique, [b"c1"], partition=0)
            w.begin_open(unique, [b"o1", b"o2"], partition=0)
            write_plain(bootstrap, unique, [b"p"], partition=1)
            start = planner.initial_offsets()
            assert start == {(unique, 0): 0, (unique, 1): 0}
            end = planner.latest_offsets(start).end
            assert end == {(unique, 0): 2, (unique, 1): 1}  # c1 + its marker; p
            got = [rows(part(opts, unique, r.partition, r.start, r.end))
                   for r in planner.plan(start, end)]
            assert [[v for _, v in g] for g in got] == [[b"c1"], [b"p"]]
            w.commit_open()
        # Kafka writes the COMMIT marker after EndTxn answers: the LSO moves a moment later.
        end2 = until(lambda: planner.latest_offsets(end).end, lambda e: e[(unique, 0)] == 5,
                     what="the LSO past the committed transaction")
        (r,) = planner.plan(end, end2)
        assert [v for _, v in rows(part(opts, unique, 0, r.start, r.end))] == [b"o1", b"o2"]
    finally:
        planner.close()


def add_partitions_or_xfail(bootstrap: str, topic: str, total: int) -> None:
    """Grow ``topic``; Tansu 0.6.0 has no CreatePartitions, so there the test is an xfail."""
    from eos_kafka_source.errors import UnsupportedVersionError  # type: ignore[attr-defined]

    with wire_for(bootstrap) as w:
        try:
            kwire.create_partitions(w, topic, total)
        except UnsupportedVersionError:
            if not ON_TANSU:
                raise
            pytest.xfail("Tansu 0.6.0 does not implement CreatePartitions (UNSUPPORTED_VERSION); "
                         "partitions cannot be added to a live topic on this broker")


def test_a_topic_matching_the_pattern_joins_at_offset_zero(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, f"{unique}-x")
    write_plain(bootstrap, f"{unique}-x", [b"x0"], partition=0)
    planner = SourcePlanner(source_options(bootstrap, subscribePattern=f"{unique}-.*"))
    try:
        start = planner.initial_offsets()
        assert start == {(f"{unique}-x", 0): 1}
        create_topic(bootstrap, f"{unique}-y", partitions=2)
        write_plain(bootstrap, f"{unique}-y", [b"y0", b"y1"], partition=1)
        end = planner.latest_offsets(start).end
        assert end == {(f"{unique}-x", 0): 1, (f"{unique}-y", 0): 0, (f"{unique}-y", 1): 2}
        ranges = [(r.topic, r.partition, r.start, r.end) for r in planner.plan(start, end)]
        assert ranges == [(f"{unique}-y", 1, 0, 2)]
    finally:
        planner.close()


def test_added_partitions_join_at_offset_zero(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    planner = SourcePlanner(source_options(bootstrap, subscribe=unique))
    try:
        start = planner.initial_offsets()
        add_partitions_or_xfail(bootstrap, unique, 2)
        write_plain(bootstrap, unique, [b"n0"], partition=1)
        end = planner.latest_offsets(start).end
        assert end == {(unique, 0): 0, (unique, 1): 1}
        assert [(r.partition, r.start, r.end) for r in planner.plan(start, end)] == [(1, 0, 1)]
    finally:
        planner.close()


def test_headers_are_read(bootstrap: str, unique: str) -> None:
    from kafka import KafkaProducer

    create_topic(bootstrap, unique)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        producer.send(unique, value=b"v", headers=[("h1", b"x"), ("h2", b"")], partition=0)
        producer.send(unique, value=b"w", partition=0)
        producer.flush()
    finally:
        producer.close(timeout=10)
    opts = source_options(bootstrap, subscribe=unique, includeHeaders="true")
    (batch,) = list(read_partition(part(opts, unique, 0, 0, 2)))
    assert batch.column("headers").to_pylist() == [
        [{"key": "h1", "value": b"x"}, {"key": "h2", "value": b""}], None]


def test_missing_topic_and_unreachable_broker_fail_fast(bootstrap: str, unique: str) -> None:
    with pytest.raises(TopicNotFoundError, match=unique):
        SourcePlanner(source_options(bootstrap, subscribe=unique)).initial_offsets()
    dead = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match="could not connect"):
        SourcePlanner(source_options(
            dead, subscribe=unique, **{"kafka.socket.connection.setup.timeout.ms": "2000"}
        )).initial_offsets()
    assert time.monotonic() - began < 20


def test_check_crcs_verifies_every_batch_read(bootstrap: str, unique: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka.check.crcs=true (Java's default) verifies each batch's CRC-32C as it is read:
    a batch altered after the broker wrote it (here: one value byte flipped between the
    broker's answer and the decoder) fails the task with EOSKAFKA_CORRUPT_RECORD, where
    the default reads the altered value."""
    import dataclasses
    import importlib

    from eos_kafka_source.errors import CorruptRecordError

    wire_fetch = importlib.import_module("eos_kafka_source.wire.fetch")  # the module

    create_topic(bootstrap, unique)
    write_plain(bootstrap, unique, [b"value-1", b"value-2"], partition=0)
    checked = source_options(bootstrap, subscribe=unique, **{"kafka.check.crcs": "true"})
    assert checked.check_crcs and not source_options(bootstrap, subscribe=unique).check_crcs
    good = part(checked, unique, 0, 0, 2, check_crcs=True)
    assert [v for _, v in rows(good)] == [b"value-1", b"value-2"]

    real = wire_fetch.fetch

    def altered(*args: object, **kwargs: object) -> dict:
        return {tp: dataclasses.replace(c, records=bytes(c.records).replace(b"value-2",
                                                                             b"value-X"))
                for tp, c in real(*args, **kwargs).items()}  # type: ignore[arg-type]

    monkeypatch.setattr(wire_fetch, "fetch", altered)
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        rows(good)
    assert [v for _, v in rows(part(checked, unique, 0, 0, 2))] == [b"value-1", b"value-X"]
