"""Source planning without a broker or Spark: a fake cluster stands in for the wire calls.

Covers the planner (subscription, bounds, caps, new partitions, data loss, splits,
batch ranges) and the stream reader's offset bookkeeping across pyspark versions
(``latestOffset()`` with and without ``start``/``limit``), which runs on the driver.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from eos_kafka_source.errors import ConfigError, DataLossError, TopicNotFoundError
from eos_kafka_source.offsets import OffsetRange
from eos_kafka_source.options import SourceOptions
from eos_kafka_source.source import packing as packing_mod
from eos_kafka_source.source import partition_reader as partition_reader_mod
from eos_kafka_source.source import planner as planner_mod
from eos_kafka_source.source.packing import MIN_PIECE, pack_ranges
from eos_kafka_source.source.planner import SourcePlanner
from eos_kafka_source.source.stream_reader import HAS_READ_LIMITS
from eos_kafka_source.wire import Bounds, TopicInfo
from eos_kafka_source.wire import cluster as cluster_mod
from tests.fakes.wire import FakeWire


@dataclass
class FakeCluster:
    """Topics -> partition -> Bounds(log_start, high_watermark, last_stable)."""

    topics: dict[str, dict[int, Bounds]] = field(default_factory=dict)
    bounds_calls: int = 0

    def set(self, topic: str, partition: int, log_start: int, hw: int, lso: int | None = None):
        self.topics.setdefault(topic, {})[partition] = Bounds(
            log_start, hw, hw if lso is None else lso
        )

    def metadata(self, _wire, names):
        wanted = self.topics if names is None else [n for n in names if n in self.topics]
        return {n: TopicInfo(n, dict.fromkeys(self.topics[n], 1)) for n in wanted}

    def fetch_bounds(self, _wire, leaders, hints=None):
        self.bounds_calls += 1
        return {tp: self.topics[tp[0]][tp[1]] for tp in leaders}


@pytest.fixture
def cluster(monkeypatch) -> FakeCluster:
    return fake_cluster(monkeypatch)


def fake_cluster(monkeypatch) -> FakeCluster:
    """A FakeCluster in place of the wire calls (the ``cluster`` fixture's body, for reuse)."""
    fake = FakeCluster()
    monkeypatch.setattr(cluster_mod, "fetch_metadata", fake.metadata)
    monkeypatch.setattr(planner_mod, "fetch_metadata", fake.metadata)
    monkeypatch.setattr(planner_mod, "fetch_bounds", fake.fetch_bounds)
    monkeypatch.setattr(planner_mod, "KafkaWire", FakeWire.for_config)
    return fake


def options(streaming: bool = True, **extra: str) -> SourceOptions:
    opts = {"kafka.bootstrap.servers": "fake:9092"}
    if not {"subscribe", "subscribePattern", "assign"} & set(extra):
        opts["subscribe"] = "a"
    opts.update(extra)
    return SourceOptions.parse(opts, streaming=streaming)


def planner(**extra: str) -> SourcePlanner:
    return SourcePlanner(options(**extra))


A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


# -- subscription and initial offsets ---------------------------------------------------------


def test_initial_offsets_latest_is_the_lso_under_read_committed(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 3, 20, lso=12)
    cluster.set("a", 1, 0, 5)
    assert planner().initial_offsets() == {A0: 12, A1: 5}
    uncommitted = planner(**{"kafka.isolation.level": "read_uncommitted"})
    assert uncommitted.initial_offsets() == {A0: 20, A1: 5}
    assert planner(startingOffsets="earliest").initial_offsets() == {A0: 3, A1: 0}
    json_start = planner(startingOffsets='{"a":{"0":7,"1":-2}}').initial_offsets()
    assert json_start == {A0: 7, A1: 0}


def test_missing_subscribed_topic_and_assigned_partition(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 1)
    with pytest.raises(TopicNotFoundError, match="nope"):
        planner(subscribe="a,nope").initial_offsets()
    with pytest.raises(TopicNotFoundError, match="a-3"):
        planner(assign='{"a":[0,3]}').initial_offsets()
    assert planner(assign='{"a":[0]}').initial_offsets() == {A0: 1}


def test_pattern_is_reevaluated_and_new_partitions_start_at_zero(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 10)
    cluster.set("zzz", 0, 0, 99)
    p = planner(subscribePattern="a|b", startingOffsets="earliest")
    start = p.initial_offsets()
    assert start == {A0: 0}
    cluster.set("a", 1, 0, 4)   # partition added
    cluster.set("b", 0, 0, 6)   # new topic matching the pattern
    end = p.latest_offsets(start).end
    assert end == {A0: 10, A1: 4, B0: 6}
    ranges = p.plan(start, end)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [
        ("a", 0, 0, 10), ("a", 1, 0, 4), ("b", 0, 0, 6)]


# -- latest offsets -----------------------------------------------------------------------------


def test_max_offsets_cap_is_proportional_and_counts_new_partitions(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 90)
    cluster.set("a", 1, 0, 10)
    p = planner()
    latest = p.latest_offsets({A0: 0}, 50)  # a-1 is new: it starts at 0
    assert latest.end == {A0: 45, A1: 5}
    assert latest.available == 100
    assert p.latest_offsets(latest.end, 50).end == {A0: 90, A1: 10}
    assert p.latest_offsets({A0: 90, A1: 10}, 50).end == {A0: 90, A1: 10}


def test_lso_behind_start_keeps_the_start(cluster: FakeCluster) -> None:
    # Tansu's LSO can lag; a start between the LSO and the high watermark is no data loss.
    cluster.set("a", 0, 0, 20, lso=8)
    p = planner()
    assert p.latest_offsets({A0: 12}).end == {A0: 12}
    assert p.plan({A0: 12}, {A0: 12}) == []


def test_target_bounds_latest_and_excludes_later_partitions(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 10)
    p = planner(subscribePattern="a")
    target = p.latest_offsets({}).end
    cluster.set("a", 0, 0, 30)
    cluster.set("a", 1, 0, 5)
    assert p.latest_offsets({A0: 0}, 4, target=target).end == {A0: 4}
    assert p.latest_offsets({A0: 4}, None, target=target).end == {A0: 10}
    assert p.latest_offsets({A0: 10}, None, target=target).end == {A0: 10}


# -- data loss ----------------------------------------------------------------------------------


def test_start_before_log_start_is_data_loss(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 50, 100)
    with pytest.raises(DataLossError, match=r"offsets 10 to 49 were deleted"):
        planner().plan({A0: 10}, {A0: 100})
    ranges = planner(failOnDataLoss="false").plan({A0: 10}, {A0: 100})
    assert [(r.start, r.end) for r in ranges] == [(50, 100)]


def test_start_beyond_the_log_reads_again_from_the_log_start(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 10)  # topic recreated: the checkpoint says 100
    p = planner(failOnDataLoss="false")
    end = p.latest_offsets({A0: 100}, 4).end
    assert end == {A0: 4}
    assert [(r.start, r.end) for r in p.plan({A0: 100}, end)] == [(0, 4)]
    with pytest.raises(DataLossError, match="past the end of the log"):
        planner().plan({A0: 100}, end)


def test_vanished_partition_is_data_loss(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 10)
    with pytest.raises(DataLossError, match="a-1 no longer exists"):
        planner().plan({A0: 0, A1: 3}, {A0: 10})
    ranges = planner(failOnDataLoss="false").plan({A0: 0, A1: 3}, {A0: 10})
    assert [(r.topic, r.partition) for r in ranges] == [A0]


def test_new_partition_whose_log_no_longer_starts_at_zero(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 10)
    cluster.set("a", 1, 7, 9)
    with pytest.raises(DataLossError, match="a-1: offsets 0 to 6"):
        planner().plan({A0: 10}, {A0: 10, A1: 9})


# -- splitting and replays ----------------------------------------------------------------------


def test_plan_is_deterministic_and_split(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 100)
    cluster.set("a", 1, 0, 10)
    p = planner(minPartitions="4", maxRecordsPerPartition="40")
    first = p.plan({A0: 0, A1: 0}, {A0: 100, A1: 10})
    assert first == p.plan({A0: 0, A1: 0}, {A0: 100, A1: 10})
    assert sum(r.size for r in first) == 110
    assert len(first) >= 4 and max(r.size for r in first) <= 40


# -- batch reads --------------------------------------------------------------------------------


def batch(**extra: str) -> SourcePlanner:
    return SourcePlanner(options(streaming=False, **extra))


def test_batch_defaults_earliest_to_lso(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 2, 20, lso=15)
    cluster.set("a", 1, 0, 0)
    assert [(r.partition, r.start, r.end) for r in batch().batch_ranges()] == [(0, 2, 15)]


def test_batch_explicit_ending_past_the_lso_is_refused(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 20, lso=15)
    with pytest.raises(ConfigError, match="transaction is still open"):
        batch(endingOffsets='{"a":{"0":18}}').batch_ranges()
    with pytest.raises(ConfigError, match="past the end of the log"):
        batch(endingOffsets='{"a":{"0":25}}').batch_ranges()
    with pytest.raises(ConfigError, match="after endingOffsets"):
        batch(startingOffsets='{"a":{"0":9}}', endingOffsets='{"a":{"0":5}}').batch_ranges()
    # A start past the LSO with the default end reads nothing (yet) instead of failing.
    assert batch(startingOffsets='{"a":{"0":17}}').batch_ranges() == []


def test_batch_start_beyond_the_log(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 10)
    with pytest.raises(DataLossError):
        batch(startingOffsets='{"a":{"0":50}}').batch_ranges()
    ranges = batch(startingOffsets='{"a":{"0":50}}', failOnDataLoss="false").batch_ranges()
    assert [(r.start, r.end) for r in ranges] == [(0, 10)]


# -- the stream reader's offset bookkeeping (driver side, no SparkSession) ----------------------


def stream_reader(**extra: str):
    from pyspark.sql.types import StructType

    from eos_kafka_source.source.stream_reader import EosKafkaStreamReader

    return EosKafkaStreamReader(options(**extra), StructType([]))


def test_reader_without_start_caps_from_what_it_knows(cluster: FakeCluster) -> None:
    """pyspark < 4.2: latestOffset() has no start; it may come before initialOffset()."""
    cluster.set("a", 0, 0, 12)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="5")
    assert r.latestOffset() == {"a": {"0": 5}}
    assert r.initialOffset() == {"a": {"0": 0}}
    assert r.partitions({"a": {"0": 0}}, {"a": {"0": 5}})  # batch 0 (a second answer first
    # would be Spark's AvailableNow wrapper: tests/unit/test_available_now.py)
    assert r.latestOffset() == {"a": {"0": 10}}
    assert len(r.partitions({"a": {"0": 5}}, {"a": {"0": 10}})) == 1
    assert r.latestOffset() == {"a": {"0": 12}}
    assert r.latestOffset() == {"a": {"0": 12}}


def test_reader_after_restart_learns_the_position_from_partitions(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 30)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="5")
    assert r.partitions({"a": {"0": 20}}, {"a": {"0": 20}}) == []  # setLatestSeenOffset
    assert r.latestOffset() == {"a": {"0": 25}}


needs_read_limits = pytest.mark.skipif(not HAS_READ_LIMITS, reason="ReadLimit is pyspark 4.2+")


@needs_read_limits
def test_reader_with_read_limits(cluster: FakeCluster) -> None:
    """pyspark >= 4.2: latestOffset(start, limit)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    cluster.set("a", 0, 0, 12)
    r = stream_reader(maxOffsetsPerTrigger="5")
    assert r.getDefaultReadLimit() == ReadMaxRows(5)
    assert r.latestOffset({"a": {"0": 0}}, ReadMaxRows(5)) == {"a": {"0": 5}}
    assert r.latestOffset({"a": {"0": 0}}, ReadAllAvailable()) == {"a": {"0": 12}}
    # Without the option, the default read bound (options/source.py), not everything.
    assert stream_reader().getDefaultReadLimit() == ReadMaxRows(1_000_000)


@needs_read_limits
def test_reader_min_offsets_waits_until_the_delay(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 3)
    waits = stream_reader(minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    assert waits.latestOffset({"a": {"0": 0}}, waits.getDefaultReadLimit()) == {"a": {"0": 0}}
    cluster.set("a", 0, 0, 6)
    assert waits.latestOffset({"a": {"0": 0}}, waits.getDefaultReadLimit()) == {"a": {"0": 6}}
    cluster.set("a", 0, 0, 3)
    late = stream_reader(minOffsetsPerTrigger="5", maxTriggerDelay="0ms")
    assert late.latestOffset({"a": {"0": 0}}, late.getDefaultReadLimit()) == {"a": {"0": 3}}


def test_reader_min_offsets_without_read_limits(cluster: FakeCluster) -> None:
    """pyspark < 4.2: minOffsetsPerTrigger applies to latestOffset() from the options."""
    cluster.set("a", 0, 0, 3)
    waits = stream_reader(startingOffsets="earliest", minOffsetsPerTrigger="5",
                          maxTriggerDelay="1h")
    assert waits.latestOffset() == {"a": {"0": 0}}
    assert waits.partitions({"a": {"0": 0}}, {"a": {"0": 0}}) == []  # batch 0, empty
    cluster.set("a", 0, 0, 6)
    assert waits.latestOffset() == {"a": {"0": 6}}


@needs_read_limits
def test_reader_available_now_stops_at_the_target(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 8)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="5")
    r.prepareForTriggerAvailableNow()
    cluster.set("a", 0, 0, 100)  # written after the run started: not part of it
    limit = r.getDefaultReadLimit()
    assert r.latestOffset({"a": {"0": 0}}, limit) == {"a": {"0": 5}}
    assert r.latestOffset({"a": {"0": 5}}, limit) == {"a": {"0": 8}}
    assert r.latestOffset({"a": {"0": 8}}, limit) == {"a": {"0": 8}}


def test_reader_pickles_without_its_connection(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 8)
    r = stream_reader()
    r.initialOffset()
    assert r._planner is not None
    copy = pickle.loads(pickle.dumps(r))
    assert copy._planner is None and copy.options == r.options
    parts = r.partitions({"a": {"0": 0}}, {"a": {"0": 8}})
    assert pickle.loads(pickle.dumps(parts[0])) == parts[0]


# -- packing ranges into at most maxPartitions input partitions (one wave of tasks) ------------


def ranges_of(*sizes: int, topic: str = "a") -> list[OffsetRange]:
    return [OffsetRange(topic, p, 100, 100 + n) for p, n in enumerate(sizes)]


def covered(groups: list[tuple[OffsetRange, ...]]) -> dict[tuple[str, int], list[int]]:
    """Every offset each Kafka partition's ranges hold, in the order the tasks read them."""
    out: dict[tuple[str, int], list[int]] = {}
    for group in groups:
        for r in group:
            out.setdefault((r.topic, r.partition), []).extend(range(r.start, r.end))
    return {tp: sorted(offsets) for tp, offsets in out.items()}


def test_pack_unset_or_enough_bins_keeps_one_partition_per_range() -> None:
    ranges = ranges_of(5, 0, 7)
    assert pack_ranges(ranges, None) == [(ranges[0],), (ranges[2],)]  # empty ranges dropped
    assert pack_ranges(ranges, 2) == [(ranges[0],), (ranges[2],)]
    with pytest.raises(ValueError, match="positive"):
        pack_ranges(ranges, 0)


def test_pack_balances_largest_first_and_sorts_each_bin() -> None:
    ranges = ranges_of(500, 300, 200, 100)
    groups = pack_ranges(ranges, 2)
    assert [[r.partition for r in g] for g in groups] == [[0, 3], [1, 2]]
    assert [sum(r.size for r in g) for g in groups] == [600, 500]
    assert covered(groups) == covered([(r,) for r in ranges])  # every offset, once


def test_pack_is_deterministic_whatever_the_input_order() -> None:
    ranges = ranges_of(40, 40, 40, 40, 40) + ranges_of(40, 40, topic="b")
    first = pack_ranges(ranges, 3)
    assert pack_ranges(list(reversed(ranges)), 3) == first
    assert len(first) == 3 and sorted(len(g) for g in first) == [2, 2, 3]


def test_pack_cuts_a_big_range_to_even_the_bins_but_never_into_tiny_pieces() -> None:
    ranges = ranges_of(100_000, 10, 10, 10)
    groups = pack_ranges(ranges, 2)
    assert [sum(r.size for r in g) for g in groups] == [50_020, 50_010]
    assert covered(groups) == covered([(r,) for r in ranges])
    tiny = pack_ranges(ranges_of(9_000, 10, 10, 10), 2)  # share 4,515 < MIN_PIECE: no cut
    assert [sum(r.size for r in g) for g in tiny] == [9_000, 30]
    assert MIN_PIECE > 4_515


def test_pack_keeps_max_records_per_partition_a_hard_cap() -> None:
    groups = pack_ranges(ranges_of(30, 30, 30, 30), 2, max_records_per_partition=40)
    assert len(groups) == 4 and all(sum(r.size for r in g) <= 40 for g in groups)
    groups = pack_ranges(ranges_of(30, 30, 10, 10), 2, max_records_per_partition=40)
    assert [sum(r.size for r in g) for g in groups] == [40, 40]


def test_max_partitions_option_and_its_bounds() -> None:
    assert options(maxPartitions="2").max_partitions == 2
    assert options().max_partitions is None
    with pytest.raises(ConfigError, match="maxPartitions must be a positive integer"):
        options(maxPartitions="0")
    with pytest.raises(ConfigError, match="minPartitions .4. is greater than maxPartitions .2."):
        options(minPartitions="4", maxPartitions="2")


def test_max_partitions_packs_the_plan_into_picklable_input_partitions(
        cluster: FakeCluster) -> None:
    for p, n in enumerate((50, 40, 30, 20)):
        cluster.set("a", p, 0, n)
    reader = stream_reader(maxPartitions="2", minPartitions="2")
    start, end = {"a": {str(p): 0 for p in range(4)}}, {"a": {"0": 50, "1": 40, "2": 30,
                                                               "3": 20}}
    parts = reader.partitions(start, end)
    assert parts == reader.partitions(start, end)  # a replay gets the same tasks
    assert [type(p).__name__ for p in parts] == ["KafkaPackedPartition"] * 2
    assert [[(q.partition, q.start, q.end) for q in p.parts] for p in parts] == [
        [(0, 0, 50), (3, 0, 20)], [(1, 0, 40), (2, 0, 30)]]
    assert pickle.loads(pickle.dumps(parts)) == parts
    unpacked = stream_reader(minPartitions="2", maxPartitions="4").partitions(start, end)
    assert [type(p).__name__ for p in unpacked] == ["KafkaInputPartition"] * 4


@pytest.mark.parametrize(("slots", "options", "tasks"), [
    (2, {}, 2),                          # the default: the task slots
    (None, {}, 4),                       # slots unknown: a task per range, as Spark's
    (2, {"maxPartitions": "4"}, 4),      # maxPartitions overrides
    (2, {"minPartitions": "3"}, 3),      # minPartitions stays a floor
])
def test_the_default_packs_into_the_task_slots(
        cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch, slots: int | None,
        options: dict[str, str], tasks: int) -> None:
    monkeypatch.setattr(packing_mod, "task_slots", lambda: slots)
    for p in range(4):
        cluster.set("a", p, 0, 10)
    parts = stream_reader(**options).partitions({"a": {str(p): 0 for p in range(4)}},
                                                {"a": {str(p): 10 for p in range(4)}})
    assert len(parts) == tasks


def test_a_packed_partition_reads_its_ranges_one_after_the_other(
        cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[tuple[int, int]] = []

    def fake_read(part, _schema, _leaders=None):
        read.append((part.partition, part.start))
        yield pa.record_batch({"partition": [part.partition]})

    monkeypatch.setattr(partition_reader_mod, "read_partition", fake_read)
    for p in range(3):
        cluster.set("a", p, 0, 10)
    reader = stream_reader(maxPartitions="1")
    (only,) = reader.partitions({"a": {"0": 0, "1": 0, "2": 0}},
                                {"a": {"0": 10, "1": 10, "2": 10}})
    assert [b.column(0)[0].as_py() for b in reader.read(only)] == [0, 1, 2]
    assert read == [(0, 0), (1, 0), (2, 0)]


def test_plan_takes_the_bounds_latest_offsets_just_fetched_for_the_same_batch(
        cluster: FakeCluster) -> None:
    """Spark asks latestOffset(start) then partitions(start, end): one Fetch of bounds a
    batch, not two. A replay, another start or a new planner fetch afresh."""
    cluster.set("a", 0, 0, 10)
    cluster.set("a", 1, 0, 4)
    p = planner()
    end = p.latest_offsets({A0: 2, A1: 0}).end
    assert cluster.bounds_calls == 1
    first = p.plan({A0: 2, A1: 0}, end)
    assert cluster.bounds_calls == 1
    assert p.plan({A0: 2, A1: 0}, end) == first  # used once: the replay asks again
    assert cluster.bounds_calls == 2
    p.latest_offsets({A0: 2, A1: 0})
    p.plan({A0: 3, A1: 0}, end)  # another start: asks again
    assert cluster.bounds_calls == 4


def test_reused_bounds_still_find_data_lost_before_the_batch(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 5, 10)
    p = planner()
    end = p.latest_offsets({A0: 2}).end
    with pytest.raises(DataLossError, match="a-0: offsets 2 to 4"):
        p.plan({A0: 2}, end)
    lenient = planner(failOnDataLoss="false")
    end = lenient.latest_offsets({A0: 2}).end
    assert [(r.start, r.end) for r in lenient.plan({A0: 2}, end)] == [(5, 10)]
    assert cluster.bounds_calls == 2
