"""pyspark 4.0/4.1 AvailableNow: the reader tells Spark's wrapper from an ordinary query by
the order of its hooks (source/available_now.py), replayed here as Spark 4.0.5 makes them.

``latestOffset()`` without arguments is what pyspark < 4.2 calls, whatever pyspark runs
these tests. The Spark tests (tests/spark/test_source_stream.py) check the same on a real
query, on 4.0 in the smoke set.
"""

from __future__ import annotations

import pytest

from eos_kafka_source.errors import AvailableNowBacklogError
from tests.unit.test_planner import FakeCluster, fake_cluster, stream_reader

START = {"a": {"0": 0}}


@pytest.fixture
def cluster(monkeypatch) -> FakeCluster:
    return fake_cluster(monkeypatch)


def test_wrapper_new_query_within_the_bound_is_one_whole_batch(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 8)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="10")
    end = r.latestOffset()  # prepareForTriggerAvailableNow: the run's end
    assert end == {"a": {"0": 8}}
    assert r.initialOffset() == START  # the first batch's start
    r.latestOffset()  # the progress report's call: no refusal
    assert len(r.partitions(START, end)) == 1


def test_wrapper_new_query_over_the_bound_is_refused_before_any_batch(
    cluster: FakeCluster,
) -> None:
    cluster.set("a", 0, 0, 1000)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="100")
    assert r.latestOffset() == {"a": {"0": 100}}
    r.initialOffset()
    with pytest.raises(AvailableNowBacklogError) as info:
        r.latestOffset()
    text = str(info.value)
    assert "1000 available offsets" in text and "maxOffsetsPerTrigger=100" in text
    assert "at least 1000" in text and "pyspark 4.2+" in text


def test_wrapper_with_min_offsets_holding_back_is_refused(cluster: FakeCluster) -> None:
    """minOffsetsPerTrigger makes the first answer 'nothing yet': the run would read none."""
    cluster.set("a", 0, 0, 3)
    r = stream_reader(startingOffsets="earliest", minOffsetsPerTrigger="5",
                      maxTriggerDelay="1h")
    assert r.latestOffset() == START
    r.initialOffset()
    with pytest.raises(AvailableNowBacklogError) as info:
        r.latestOffset()
    assert "held back by minOffsetsPerTrigger=5" in str(info.value)


def test_ordinary_new_query_caps_its_batches_and_is_never_refused(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 1000)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="100")
    end = r.latestOffset()
    assert end == {"a": {"0": 100}}
    assert r.initialOffset() == START
    r.partitions(START, end)  # batch 0: the first answer was its end
    assert r.latestOffset() == {"a": {"0": 200}}
    r.latestOffset()  # an idle trigger between batches is no wrapper either


def test_ordinary_restart_starts_with_partitions(cluster: FakeCluster) -> None:
    cluster.set("a", 0, 0, 1000)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="100")
    r.partitions({"a": {"0": 500}}, {"a": {"0": 500}})  # setLatestSeenOffset
    assert r.latestOffset() == {"a": {"0": 600}}
    r.latestOffset()


def test_wrapper_restart_is_checked_from_the_checkpoint(cluster: FakeCluster) -> None:
    """A restart: the wrapper's call comes before the checkpoint's position reaches the
    reader. Within the bound from both, the run is the one batch from the checkpoint."""
    cluster.set("a", 0, 0, 90)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="100")
    end = r.latestOffset()
    assert end == {"a": {"0": 90}}
    r.partitions({"a": {"0": 60}}, {"a": {"0": 60}})  # setLatestSeenOffset: not refused
    r.latestOffset()
    assert len(r.partitions({"a": {"0": 60}}, end)) == 1


def test_wrapper_restart_whose_first_answer_is_capped_is_refused(cluster: FakeCluster) -> None:
    """Counted from startingOffsets the first answer is capped, and would end the run below
    the checkpoint (today: a batch running backwards, then the same rows again)."""
    cluster.set("a", 0, 0, 1000)
    r = stream_reader(startingOffsets="earliest", maxOffsetsPerTrigger="100")
    assert r.latestOffset() == {"a": {"0": 100}}
    with pytest.raises(AvailableNowBacklogError) as info:
        r.partitions({"a": {"0": 950}}, {"a": {"0": 950}})
    text = str(info.value)
    assert "50 available offsets" in text and "at least 1000" in text
