"""What a retried recovery still copies (sink/driver/log_copy.py ``missing``): each planned
segment less what committed recovery transactions hold (docs/design.md, invariant 16)."""

from __future__ import annotations

import pytest

from eos_kafka_source.sink.driver.log_copy import Segment, missing

KEY = "q-1/7/0"
P0 = Segment(KEY, "t", 0, 100, 10, 210)
P1 = Segment(KEY, "t", 1, 50, 5, 120)


def piece(seg: Segment, start: int, end: int, records: int = -1) -> Segment:
    return Segment(seg.key, seg.topic, seg.partition, records, start, end)


@pytest.mark.parametrize(("committed", "left"), [
    ([], [P0, P1]),
    ([P0], [P1]),  # a recovery committed in partition 0, aborted in partition 1
    ([P0, P1], []),
    ([piece(P0, 10, 90, 40)], [piece(P0, 90, 210), P1]),  # a bounded copy's first part
    ([piece(P0, 90, 150, 30)], [piece(P0, 10, 90), piece(P0, 150, 210), P1]),
    ([piece(P0, 10, 90, 40), piece(P0, 90, 210, 60)], [P1]),
    ([Segment(KEY, "t", 0, 100, 0, -1)], [P1]),  # recorded before offsets: the whole of it
    ([Segment("other/8/0", "t", 0, 100, 10, 210)], [P0, P1]),  # another lost transaction's
])
def test_missing(committed: list[Segment], left: list[Segment]) -> None:
    assert missing([P0, P1], committed) == left


def test_segments_round_trip_through_the_decision_json() -> None:
    assert Segment.from_json(P0.to_json()) == P0
    assert P0.producer_id == 7
    assert Segment.from_json([KEY, "t", 0, 100]) == Segment(KEY, "t", 0, 100, 0, -1)
