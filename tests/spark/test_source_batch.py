"""``spark.read.format("eoskafka")`` against the embedded broker.

Data is written by kafka-python (tests/kafka_helpers.py); the expected result
comes from tests/oracle.py, which resolves transactions from the raw log itself.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from eos_kafka_source.broker import free_port
from tests.kafka_helpers import TxnWriter, create_topic, write_plain
from tests.oracle import committed_view

pytestmark = pytest.mark.spark


def reader(spark, bootstrap: str, topic: str, **options: str):
    r = spark.read.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
    r = r.option("subscribe", topic)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def by_partition(rows) -> dict[int, list[tuple[int, bytes]]]:
    """Rows in the order Spark returned them, grouped by partition."""
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for row in rows:
        out[row.partition].append((row.offset, bytes(row.value)))
    return dict(out)


def expected(bootstrap: str, topic: str, *, below_lso: bool = True):
    """Committed (offset, value) per partition; only below the LSO when a txn is open."""
    out = {}
    for partition, pv in committed_view(bootstrap, topic).items():
        recs = [(r.offset, r.value) for r in pv.committed
                if not below_lso or r.offset < pv.last_stable]
        if recs:
            out[partition] = recs
    return out


def write_mixed(bootstrap: str, topic: str, a: TxnWriter, b: TxnWriter) -> None:
    """Committed, aborted and plain records from two producers over three partitions."""
    for p in range(3):
        a.committed(topic, [f"a{p}-1".encode(), f"a{p}-2".encode()], partition=p)
        b.aborted(topic, [f"b{p}-x".encode()], partition=p)
        write_plain(bootstrap, topic, [f"plain{p}".encode()], partition=p)
        b.committed(topic, [f"b{p}-1".encode()], partition=p)
        a.aborted(topic, [f"a{p}-x".encode()] * 3, partition=p)


@pytest.mark.smoke
def test_batch_read_returns_exactly_the_committed_records(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique, partitions=3)
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-b") as b, \
            TxnWriter(bootstrap, f"{unique}-o") as o:
        write_mixed(bootstrap, unique, a, b)
        o.begin_open(unique, [b"open-1"], partition=1)  # still open during the first read
        a.committed(unique, [b"after-open"], partition=1)
        rows = reader(spark, bootstrap, unique).collect()
        got = by_partition(rows)
        want = expected(bootstrap, unique)
        assert got == want
        assert b"after-open" not in {v for recs in got.values() for _, v in recs}
        assert all(r.topic == unique and r.timestampType == 0 and r.key is None for r in rows)
        assert all(r.timestamp is not None for r in rows)
        o.abort_open()
    got = by_partition(reader(spark, bootstrap, unique).collect())
    assert got == expected(bootstrap, unique, below_lso=False)
    values = {v for recs in got.values() for _, v in recs}
    assert b"after-open" in values and b"open-1" not in values
    assert not any(v.endswith(b"-x") for v in values)


def test_batch_read_split_into_small_ranges(spark, bootstrap, unique) -> None:
    """Ranges that end on markers or hold no visible record at all."""
    create_topic(bootstrap, unique, partitions=3)
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-b") as b:
        write_mixed(bootstrap, unique, a, b)
    df = reader(spark, bootstrap, unique, maxRecordsPerPartition="2", minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5 * 3 // 2
    assert by_partition(df.collect()) == expected(bootstrap, unique)


def test_batch_read_of_only_aborted_records_is_empty(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, f"{unique}-empty")
    assert reader(spark, bootstrap, f"{unique}-empty").count() == 0  # no range at all
    create_topic(bootstrap, unique)
    with TxnWriter(bootstrap, f"{unique}-a") as a:
        a.aborted(unique, [b"x1", b"x2"], partition=0)
        a.aborted(unique, [b"x3"], partition=0)
    assert reader(spark, bootstrap, unique).count() == 0
    assert reader(spark, bootstrap, unique, endingOffsets=f'{{"{unique}":{{"0":2}}}}').count() == 0


def test_batch_read_offsets_keys_and_headers(spark, bootstrap, unique) -> None:
    from kafka import KafkaProducer

    create_topic(bootstrap, unique)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for i in range(5):
            producer.send(unique, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                          headers=[("n", str(i).encode())] if i % 2 else None)
        producer.flush()
    finally:
        producer.close(timeout=10)
    df = reader(spark, bootstrap, unique, includeHeaders="true",
                startingOffsets=f'{{"{unique}":{{"0":1}}}}',
                endingOffsets=f'{{"{unique}":{{"0":4}}}}')
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = df.collect()
    assert [(r.offset, bytes(r.key), bytes(r.value)) for r in rows] == [
        (1, b"k1", b"v1"), (2, b"k2", b"v2"), (3, b"k3", b"v3")]
    assert [None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers]
            for r in rows] == [[("n", b"1")], None, [("n", b"3")]]


def test_batch_start_beyond_the_log_is_data_loss(spark, bootstrap, unique) -> None:
    """Tansu has no retention/DeleteRecords to test with: a start past the log stands in."""
    create_topic(bootstrap, unique)
    write_plain(bootstrap, unique, [b"r0", b"r1"], partition=0)
    start = f'{{"{unique}":{{"0":50}}}}'
    with pytest.raises(Exception, match="EOSKAFKA_DATA_LOSS") as info:
        reader(spark, bootstrap, unique, startingOffsets=start).collect()
    assert "failOnDataLoss=false" in str(info.value)
    rows = reader(spark, bootstrap, unique, startingOffsets=start, failOnDataLoss="false").collect()
    assert [bytes(r.value) for r in rows] == [b"r0", b"r1"]


@pytest.mark.parametrize("case", ["unknown option", "bad json", "missing topic", "no broker"])
def test_bad_input_fails_with_a_clear_message(spark, bootstrap, unique, case) -> None:
    options: dict[str, str] = {}
    servers, topic = bootstrap, unique
    if case == "unknown option":
        create_topic(bootstrap, unique)
        options["subscribee"] = unique
        needle = ["EOSKAFKA_INVALID_OPTION", "did you mean 'subscribe'"]
    elif case == "bad json":
        create_topic(bootstrap, unique)
        options["startingOffsets"] = f'{{"{unique}": {{0: 1}}'
        needle = ["EOSKAFKA_INVALID_OPTION", "startingOffsets is not valid JSON"]
    elif case == "missing topic":
        needle = ["EOSKAFKA_TOPIC_NOT_FOUND", unique]
    else:
        servers = f"127.0.0.1:{free_port()}"
        options["kafka.socket.connection.setup.timeout.ms"] = "2000"
        needle = ["EOSKAFKA_BROKER_UNREACHABLE", servers]
    with pytest.raises(Exception) as info:
        reader(spark, servers, topic, **options).collect()
    for text in needle:
        assert text in str(info.value)


def test_default_packs_four_partitions_into_the_task_slots(spark, bootstrap, unique) -> None:
    """No maxPartitions: a 4-partition topic reads in at most as many tasks as the session has
    task slots (local[2]: 2, one wave), each Kafka partition's committed records exactly and
    in offset order inside its task; maxPartitions=4 gives back a task per partition."""
    create_topic(bootstrap, unique, partitions=4)
    with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-b") as b:
        for p in range(4):
            a.committed(unique, [f"a{p}-1".encode(), f"a{p}-2".encode()], partition=p)
            b.aborted(unique, [f"b{p}-x".encode()], partition=p)
            write_plain(bootstrap, unique, [f"plain{p}".encode()], partition=p)
            a.aborted(unique, [f"a{p}-x".encode()] * 2, partition=p)
            b.committed(unique, [f"b{p}-1".encode()], partition=p)
    slots = spark.sparkContext.defaultParallelism
    assert slots < 4, "the session must have fewer task slots than the topic has partitions"
    df = reader(spark, bootstrap, unique)
    assert df.rdd.getNumPartitions() == slots
    tasks = df.rdd.mapPartitions(lambda rows: [[(r.partition, r.offset) for r in rows]]).collect()
    assert len(tasks) == slots
    for task in tasks:  # a packed task reads its Kafka partitions one after the other
        for p in {p for p, _ in task}:
            offsets = [o for q, o in task if q == p]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert by_partition(df.collect()) == expected(bootstrap, unique)
    assert reader(spark, bootstrap, unique, maxPartitions="4").rdd.getNumPartitions() == 4
