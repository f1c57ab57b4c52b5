"""``spark.readStream.format("eoskafka")`` against the embedded broker.

Queries are driven step by step with ``processAllAvailable()`` (no sleeps; under a
deadline, :func:`process_all`);
``foreachBatch`` records every micro-batch in order, so "each record once, in
offset order per partition" is checked across batches. Expected results come
from tests/oracle.py (raw log, resolved by markers).
"""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from eos_kafka_source import wire as kwire
from eos_kafka_source.errors import UnsupportedVersionError  # type: ignore[attr-defined]
from eos_kafka_source.source.stream_reader import HAS_READ_LIMITS
from tests.brokers import ON_TANSU
from tests.kafka_helpers import TxnWriter, create_topic, wire_for, write_plain
from tests.oracle import committed_view

pytestmark = pytest.mark.spark


class Batches:
    """foreachBatch target: every micro-batch's rows, in batch order (runs on the driver)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list]] = []

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        self.batches.append((batch_id, rows))

    @property
    def sizes(self) -> list[int]:
        return [len(rows) for _, rows in self.batches if rows]

    def by_partition(self) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
        """(offset, value) per (topic, partition), in the order the batches delivered them."""
        out: dict[tuple[str, int], list[tuple[int, bytes]]] = defaultdict(list)
        for _, rows in sorted(self.batches, key=lambda b: b[0]):
            for r in rows:
                out[(r.topic, r.partition)].append((r.offset, bytes(r.value)))
        return dict(out)


def stream(spark, bootstrap: str, **options: str):
    r = spark.readStream.format("eoskafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def start(df, sink: Batches, checkpoint=None, trigger: dict | None = None):
    w = df.writeStream.foreachBatch(sink)
    if checkpoint is not None:
        w = w.option("checkpointLocation", str(checkpoint))
    if trigger is not None:
        w = w.trigger(**trigger)
    return w.start()


def process_all(q, timeout_s: float = 300) -> None:
    """``q.processAllAvailable()`` with a deadline: past it the query is stopped (which makes
    processAllAvailable return) and the test fails instead of hanging."""
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        q.stop()

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        q.processAllAvailable()
    finally:
        timer.cancel()
    assert not expired.is_set(), f"processAllAvailable() did not return within {timeout_s}s"


def committed(bootstrap: str, *topics: str, below_lso: bool = False):
    out = {}
    for topic in topics:
        for partition, pv in committed_view(bootstrap, topic).items():
            recs = [(r.offset, r.value) for r in pv.committed
                    if not below_lso or r.offset < pv.last_stable]
            if recs:
                out[(topic, partition)] = recs
    return out


def values(sink: Batches) -> list[bytes]:
    return [v for recs in sink.by_partition().values() for _, v in recs]


@pytest.mark.smoke
def test_open_transaction_appears_only_once_committed(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique, partitions=2)
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest"), sink)
    try:
        with TxnWriter(bootstrap, f"{unique}-a") as a, TxnWriter(bootstrap, f"{unique}-b") as b:
            a.committed(unique, [b"c1"], partition=0)
            b.begin_open(unique, [b"o1", b"o2"], partition=0)
            a.committed(unique, [b"c2"], partition=0)    # behind the open txn: held back
            a.aborted(unique, [b"x1"], partition=1)
            write_plain(bootstrap, unique, [b"p1"], partition=1)
            process_all(q)
            # Up to the LSO; on Tansu b's open txn also holds back partition 1's LSO.
            assert sink.by_partition() == committed(bootstrap, unique, below_lso=True)
            assert b"c1" in values(sink) and not {b"o1", b"o2", b"c2"} & set(values(sink))
            b.commit_open()
            process_all(q)
            assert sorted(values(sink)) == [b"c1", b"c2", b"o1", b"o2", b"p1"]
            b.begin_open(unique, [b"o3"], partition=1)
            a.committed(unique, [b"c3"], partition=1)
            process_all(q)
            b.abort_open()
            process_all(q)
        assert sink.by_partition() == committed(bootstrap, unique)
        assert b"o3" not in values(sink) and b"c3" in values(sink)
    finally:
        q.stop()


def test_many_producers_and_partitions_small_batches(spark, bootstrap, unique) -> None:
    """Transactions straddle batch and range ends (maxOffsetsPerTrigger, minPartitions)."""
    create_topic(bootstrap, unique, partitions=3)
    sink = Batches()
    df = stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest",
                maxOffsetsPerTrigger="10", minPartitions="4")
    writers = [TxnWriter(bootstrap, f"{unique}-{i}") for i in range(3)]
    for w in writers:
        w.__enter__()
    try:
        for round_ in range(2):
            for i, w in enumerate(writers):
                for p in range(3):
                    recs = [f"w{i}-r{round_}-p{p}-{k}".encode() for k in range(2)]
                    if (i + round_ + p) % 3 == 0:
                        w.aborted(unique, recs, partition=p)
                    else:
                        w.begin_open(unique, recs, partition=p)
                if w.in_transaction:
                    w.commit_open()
        writers[0].begin_open(unique, [b"still-open"], partition=2)
        q = start(df, sink)
        try:
            process_all(q)
            assert sink.by_partition() == committed(bootstrap, unique, below_lso=True)
            writers[0].commit_open()
            process_all(q)
            assert sink.by_partition() == committed(bootstrap, unique)
            assert len(sink.sizes) > 3
        finally:
            q.stop()
    finally:
        for w in writers:
            w.__exit__(None, None, None)


def test_max_offsets_per_trigger_gives_exact_batches(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique)
    write_plain(bootstrap, unique, [f"r{i}".encode() for i in range(12)], partition=0)
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest",
                     maxOffsetsPerTrigger="5"), sink)
    try:
        process_all(q)
    finally:
        q.stop()
    assert sink.sizes == [5, 5, 2]
    assert values(sink) == [f"r{i}".encode() for i in range(12)]


@pytest.mark.skipif(not HAS_READ_LIMITS, reason="Trigger.AvailableNow support needs pyspark 4.2+")
def test_available_now_reads_what_is_there_in_capped_batches_and_stops(
    spark, bootstrap, unique
) -> None:
    create_topic(bootstrap, unique)
    write_plain(bootstrap, unique, [f"r{i}".encode() for i in range(10)], partition=0)
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest",
                     maxOffsetsPerTrigger="4"), sink, trigger={"availableNow": True})
    assert q.awaitTermination(120), "an AvailableNow query must stop by itself"
    assert q.exception() is None
    assert sink.sizes == [4, 4, 2]


@pytest.mark.smoke
def test_available_now_reads_all_in_capped_batches_or_refuses_at_start(
    spark, bootstrap, unique
) -> None:
    """1,000 records, maxOffsetsPerTrigger=100, Trigger.AvailableNow, with the wrapper the
    session enables (as docs/options.md tells 4.0/4.1 users). pyspark 4.2+: all 1,000 in
    batches of at most 100. 4.0/4.1 make the source's first answer the whole run's end (one
    batch): the query must fail before reading anything, never end with 900 unread."""
    create_topic(bootstrap, unique, partitions=2)
    for partition in (0, 1):
        write_plain(bootstrap, unique, [b"v%d" % i for i in range(500)], partition=partition)
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest",
                     maxOffsetsPerTrigger="100"), sink, trigger={"availableNow": True})
    if HAS_READ_LIMITS:
        assert q.awaitTermination(300), "an AvailableNow query must stop by itself"
        assert q.exception() is None
        assert sum(sink.sizes) == 1000 and len(sink.sizes) >= 10 and max(sink.sizes) <= 100
        return
    with pytest.raises(Exception) as info:
        q.awaitTermination(300)
    text = str(info.value)
    assert "EOSKAFKA_AVAILABLE_NOW_BACKLOG_TOO_LARGE" in text, text
    assert "maxOffsetsPerTrigger" in text and "1000" in text and "pyspark 4.2" in text
    assert sink.sizes == [], "a batch ran before the refusal"


@pytest.mark.skipif(HAS_READ_LIMITS, reason="pyspark 4.0/4.1: one AvailableNow batch a run")
def test_available_now_reads_all_in_one_batch_when_it_fits(spark, bootstrap, unique,
                                                           tmp_path) -> None:
    """pyspark 4.0/4.1 with the wrapper: a backlog within maxOffsetsPerTrigger is read whole,
    in one batch; so is the next run's, counted from the checkpoint."""
    create_topic(bootstrap, unique, partitions=2)
    for partition in (0, 1):
        write_plain(bootstrap, unique, [b"a%d" % i for i in range(40)], partition=partition)
    sink = Batches()
    df = stream(spark, bootstrap, subscribe=unique, startingOffsets="latest",
                maxOffsetsPerTrigger="100")
    for run in range(3):
        q = start(df, sink, tmp_path / "chk", trigger={"availableNow": True})
        assert q.awaitTermination(300) and q.exception() is None
        for partition in (0, 1):
            write_plain(bootstrap, unique, [b"r%d-%d" % (run, i) for i in range(30)],
                        partition=partition)
    assert sink.sizes == [60, 60]


def test_restart_resumes_from_the_checkpoint(spark, bootstrap, unique, tmp_path) -> None:
    create_topic(bootstrap, unique, partitions=2)
    sink = Batches()
    df = stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest",
                maxOffsetsPerTrigger="3")
    with TxnWriter(bootstrap, f"{unique}-a") as a:
        a.committed(unique, [b"a1", b"a2"], partition=0)
        a.committed(unique, [b"a3"], partition=1)
        q = start(df, sink, tmp_path / "chk")
        try:
            process_all(q)
        finally:
            q.stop()
        a.aborted(unique, [b"x"], partition=0)
        a.committed(unique, [b"a4", b"a5", b"a6", b"a7"], partition=0)
        q = start(df, sink, tmp_path / "chk")
        try:
            process_all(q)
        finally:
            q.stop()
    assert sink.by_partition() == committed(bootstrap, unique)


def test_a_topic_matching_the_pattern_joins_the_running_query(spark, bootstrap, unique) -> None:
    first, second = f"{unique}-1", f"{unique}-2"
    create_topic(bootstrap, first)
    write_plain(bootstrap, first, [b"f0"], partition=0)
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribePattern=f"{unique}-[0-9]+",
                     startingOffsets="earliest"), sink)
    try:
        process_all(q)
        create_topic(bootstrap, second, partitions=2)
        with TxnWriter(bootstrap, f"{unique}-w") as w:
            w.committed(second, [b"s0", b"s1"], partition=1)
            w.aborted(second, [b"sx"], partition=0)
        write_plain(bootstrap, first, [b"f1"], partition=0)
        process_all(q)
    finally:
        q.stop()
    assert sink.by_partition() == committed(bootstrap, first, second)
    assert sorted(values(sink)) == [b"f0", b"f1", b"s0", b"s1"]


def test_partitions_added_while_the_query_runs(spark, bootstrap, unique) -> None:
    create_topic(bootstrap, unique)
    with wire_for(bootstrap) as w:  # probe first: Tansu cannot add partitions at all
        probe = f"{unique}-probe"
        kwire.create_topic(w, probe, 1)
        try:
            kwire.create_partitions(w, probe, 2)
        except UnsupportedVersionError:
            if not ON_TANSU:
                raise
            pytest.xfail("Tansu 0.6.0 does not implement CreatePartitions (UNSUPPORTED_VERSION); "
                         "covered without a broker in tests/unit/test_planner.py")
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest"), sink)
    try:
        write_plain(bootstrap, unique, [b"p0"], partition=0)
        process_all(q)
        with wire_for(bootstrap) as w:
            kwire.create_partitions(w, unique, 3)
        write_plain(bootstrap, unique, [b"n1"], partition=1)
        write_plain(bootstrap, unique, [b"n2"], partition=2)
        process_all(q)
    finally:
        q.stop()
    assert sink.by_partition() == committed(bootstrap, unique)


def test_start_beyond_the_log_is_data_loss(spark, bootstrap, unique) -> None:
    """Tansu has no retention/DeleteRecords: a checkpointed start past the log stands in."""
    create_topic(bootstrap, unique)
    write_plain(bootstrap, unique, [b"r0", b"r1"], partition=0)
    beyond = f'{{"{unique}":{{"0":40}}}}'
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets=beyond), Batches())
    try:
        with pytest.raises(Exception, match="EOSKAFKA_DATA_LOSS"):
            process_all(q)
    finally:
        q.stop()
    sink = Batches()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets=beyond,
                     failOnDataLoss="false"), sink)
    try:
        process_all(q)
        write_plain(bootstrap, unique, [b"r2"], partition=0)
        process_all(q)
    finally:
        q.stop()
    assert values(sink) == [b"r0", b"r1", b"r2"]


@pytest.mark.parametrize("case", ["missing topic", "unknown option"])
def test_bad_input_stops_the_query_with_a_clear_message(spark, bootstrap, unique, case) -> None:
    options = {"subscribe": unique}
    if case == "unknown option":
        create_topic(bootstrap, unique)
        options["maxOffsetPerTrigger"] = "5"
        needle = ["EOSKAFKA_INVALID_OPTION", "did you mean 'maxOffsetsPerTrigger'"]
    else:
        needle = ["EOSKAFKA_TOPIC_NOT_FOUND", unique]
    with pytest.raises(Exception) as info:
        q = start(stream(spark, bootstrap, **options), Batches())
        try:
            process_all(q)
        finally:
            q.stop()
    for text in needle:
        assert text in str(info.value)



def test_default_packs_each_batch_into_the_task_slots(spark, bootstrap, unique) -> None:
    """No maxPartitions: each micro-batch of a 4-partition topic runs in at most as many tasks
    as the session has task slots, and delivers every committed record once, in order."""
    create_topic(bootstrap, unique, partitions=4)
    with TxnWriter(bootstrap, f"{unique}-a") as a:
        for p in range(4):
            a.committed(unique, [f"c{p}-{i}".encode() for i in range(3)], partition=p)
            a.aborted(unique, [f"x{p}".encode()], partition=p)
            write_plain(bootstrap, unique, [f"v{p}".encode()], partition=p)
    tasks: list[int] = []

    class Counted(Batches):
        def __call__(self, df, batch_id: int) -> None:
            tasks.append(df.rdd.getNumPartitions())
            super().__call__(df, batch_id)

    sink = Counted()
    q = start(stream(spark, bootstrap, subscribe=unique, startingOffsets="earliest"), sink)
    try:
        process_all(q)
    finally:
        q.stop()
    assert sink.by_partition() == committed(bootstrap, unique)
    slots = spark.sparkContext.defaultParallelism
    assert tasks and all(n <= slots for n in tasks), (tasks, slots)
