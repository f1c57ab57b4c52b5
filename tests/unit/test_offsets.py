"""Offset JSON, rate limiting, range planning, data-loss checks and spec resolution."""

from __future__ import annotations

import json
import random

import pytest

from eos_kafka_source.errors import ConfigError, DataLossError
from eos_kafka_source.offsets import (
    EndingSpec,
    OffsetRange,
    PartitionBounds,
    StartingSpec,
    cap_end_offsets,
    check_data_loss,
    from_spark_offset,
    parse_offsets_json,
    plan_ranges,
    resolve_ending,
    resolve_starting,
    to_spark_offset,
)

A0, A1, A2, B0 = ("a", 0), ("a", 1), ("a", 2), ("b", 0)

# ---------------------------------------------------------------------------
# JSON


def test_parse_offsets_json():
    assert parse_offsets_json('{"a":{"0":23,"1":-2},"b":{"0":-1}}', "startingOffsets") == {
        A0: 23, A1: -2, B0: -1}


@pytest.mark.parametrize("text, needle", [
    ("", "not valid JSON"),
    ("{a:1}", "not valid JSON"),
    ("[1]", "non-empty JSON object"),
    ("{}", "non-empty JSON object"),
    ('{"a":[0]}', "non-empty object"),
    ('{"a":{}}', "non-empty object"),
    ('{"":{"0":1}}', "empty topic"),
    ('{"a":{"x":1}}', "'x'"),
    ('{"a":{"-1":1}}', "'-1'"),
    ('{"a":{"0":1.0}}', "1.0"),
    ('{"a":{"0":"1"}}', '"1"'),
    ('{"a":{"0":true}}', "true"),
    ('{"a":{"0":null}}', "null"),
])
def test_parse_offsets_json_errors_name_the_option(text, needle):
    with pytest.raises(ConfigError) as info:
        parse_offsets_json(text, "myOption")
    assert "myOption" in str(info.value) and needle in str(info.value)


def test_spark_offset_round_trip_sorted():
    offsets = {("b", 0): 1, ("a", 10): 5, ("a", 2): 7}
    d = to_spark_offset(offsets)
    assert json.dumps(d) == '{"a": {"2": 7, "10": 5}, "b": {"0": 1}}'
    assert from_spark_offset(json.loads(json.dumps(d))) == offsets
    assert to_spark_offset({}) == {}


def test_from_spark_offset_rejects_garbage():
    with pytest.raises(ValueError, match="a-0"):
        from_spark_offset({"a": {"0": "x"}})


# ---------------------------------------------------------------------------
# Bounds and ranges


def test_partition_bounds_latest():
    b = PartitionBounds(log_start=3, high_watermark=20, last_stable=15)
    assert (b.latest(read_committed=True), b.latest(read_committed=False)) == (15, 20)


def test_offset_range():
    r = OffsetRange("a", 1, 5, 9)
    assert (r.size, r.topic_partition) == (4, A1)
    assert OffsetRange("a", 0, 5, 5).size == 0
    with pytest.raises(ValueError):
        OffsetRange("a", 0, 5, 4)


@pytest.mark.parametrize("start, latest, budget, expected", [
    # proportional: 90/10 backlog, 50 budget -> 45/5
    ({A0: 0, A1: 0}, {A0: 90, A1: 10}, 50, {A0: 45, A1: 5}),
    # floor of a share >= 1 (100 * 1/3 = 33.3 -> 33 each)
    ({A0: 0, A1: 0, A2: 0}, {A0: 10, A1: 10, A2: 10}, 100, {A0: 10, A1: 10, A2: 10}),
    ({A0: 0, A1: 0, A2: 0}, {A0: 100, A1: 100, A2: 100}, 100, {A0: 33, A1: 33, A2: 33}),
    # budget smaller than the number of partitions: each share < 1 rounds up to 1
    ({A0: 0, A1: 0, A2: 0}, {A0: 3, A1: 3, A2: 3}, 2, {A0: 1, A1: 1, A2: 1}),
    # a tiny partition is not starved: 1000 * 9/9909 = 0.9 -> 1
    ({A0: 0, A1: 0}, {A0: 9900, A1: 9}, 1000, {A0: 999, A1: 1}),
    # never past latest
    ({A0: 5, A1: 0}, {A0: 6, A1: 1000}, 10_000, {A0: 6, A1: 1000}),
    # offsets relative to start; a partition with no backlog keeps latest
    ({A0: 100, A1: 40}, {A0: 200, A1: 40}, 10, {A0: 110, A1: 40}),
    # a new partition enters at its log start (given in start)
    ({A0: 50, B0: 7}, {A0: 150, B0: 107}, 100, {A0: 100, B0: 57}),
    # no backlog at all
    ({A0: 5}, {A0: 5}, 10, {A0: 5}),
    # no limit
    ({A0: 0, A1: 3}, {A0: 10, A1: 30}, None, {A0: 10, A1: 30}),
    # latest below start never moves the offset backwards (check_data_loss judges it)
    ({A0: 50, A1: 0}, {A0: 10, A1: 10}, 5, {A0: 50, A1: 5}),
    ({A0: 50}, {A0: 10}, None, {A0: 50}),
    # partitions that vanished from latest are not in the result
    ({A0: 0, A1: 0}, {A0: 10}, 5, {A0: 5}),
])
def test_cap_end_offsets(start, latest, budget, expected):
    assert cap_end_offsets(start, latest, budget) == expected


def spark_rate_limit(limit, start, until):
    """A line-by-line transcription of Spark's rateLimit, as an oracle."""
    sizes = {tp: end - start[tp] for tp, end in until.items() if end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp in sizes:
            prorate = limit * (sizes[tp] / total)
            off = start[tp] + (int(-(-prorate // 1)) if prorate < 1 else int(prorate // 1))
            out[tp] = min(end, off)
        else:
            out[tp] = end
    return out


def test_cap_end_offsets_matches_spark_on_random_inputs():
    rng = random.Random(7)
    for _ in range(500):
        tps = [("t", p) for p in range(rng.randint(1, 12))]
        start = {tp: rng.randint(0, 10_000) for tp in tps}
        latest = {tp: start[tp] + rng.choice([0, rng.randint(0, 50), rng.randint(0, 10**6)])
                  for tp in tps}
        budget = rng.randint(1, 10**5)
        got = cap_end_offsets(start, latest, budget)
        assert got == spark_rate_limit(budget, start, latest)
        assert all(start[tp] <= got[tp] <= latest[tp] for tp in tps)
        backlogged = sum(1 for tp in tps if latest[tp] > start[tp])
        assert sum(got[tp] - start[tp] for tp in tps) <= max(budget, 0) + backlogged


def test_cap_end_offsets_bad_input():
    with pytest.raises(ValueError, match="b-0"):
        cap_end_offsets({A0: 0}, {A0: 5, B0: 5}, 10)
    with pytest.raises(ValueError):
        cap_end_offsets({A0: 0}, {A0: 5}, 0)


def spans(ranges):
    return [(r.topic, r.partition, r.start, r.end) for r in ranges]


@pytest.mark.parametrize("start, end, min_p, max_r, expected", [
    # one range per partition, empty and negative ranges dropped, sorted
    ({B0: 0, A1: 5, A0: 3, A2: 9}, {B0: 4, A1: 5, A0: 10, A2: 2}, None, None,
     [("a", 0, 3, 10), ("b", 0, 0, 4)]),
    # max records: ceil(10/4) = 3 pieces of 3, 3, 4
    ({A0: 0}, {A0: 10}, None, 4, [("a", 0, 0, 3), ("a", 0, 3, 6), ("a", 0, 6, 10)]),
    ({A0: 0}, {A0: 8}, None, 4, [("a", 0, 0, 4), ("a", 0, 4, 8)]),
    # min partitions already met: nothing split
    ({A0: 0, A1: 0}, {A0: 100, A1: 1}, 2, None, [("a", 0, 0, 100), ("a", 1, 0, 1)]),
    # min partitions: the largest is split first, the small one stays whole
    ({A0: 0, A1: 0}, {A0: 100, A1: 1}, 4, None,
     [("a", 0, 0, 33), ("a", 0, 33, 66), ("a", 0, 66, 100), ("a", 1, 0, 1)]),
    # Spark's rounding would give 3 here; we reach the minimum
    ({A0: 0, A1: 0, A2: 0}, {A0: 5, A1: 5, A2: 5}, 4, None,
     [("a", 0, 0, 2), ("a", 0, 2, 5), ("a", 1, 0, 5), ("a", 2, 0, 5)]),
    # not enough offsets for the minimum: one offset per range
    ({A0: 0, A1: 0}, {A0: 2, A1: 1}, 10, None,
     [("a", 0, 0, 1), ("a", 0, 1, 2), ("a", 1, 0, 1)]),
    # both: max records first (2 + 1 pieces), then the largest pieces (a's 10, then
    # a's 6.7 > b's 6) are split until there are 5
    ({A0: 0, B0: 0}, {A0: 20, B0: 6}, 5, 10,
     [("a", 0, 0, 5), ("a", 0, 5, 10), ("a", 0, 10, 15), ("a", 0, 15, 20), ("b", 0, 0, 6)]),
    # equal pieces: ties go to the lowest topic-partition
    ({A0: 0, A1: 0}, {A0: 4, A1: 4}, 3, None,
     [("a", 0, 0, 2), ("a", 0, 2, 4), ("a", 1, 0, 4)]),
    # nothing to read
    ({A0: 4}, {A0: 4}, 3, 2, []),
])
def test_plan_ranges(start, end, min_p, max_r, expected):
    got = plan_ranges(start, end, min_partitions=min_p, max_records_per_partition=max_r)
    assert spans(got) == expected


def test_plan_ranges_invariants_and_determinism():
    rng = random.Random(3)
    for _ in range(300):
        tps = [(rng.choice("xyz"), rng.randint(0, 5)) for _ in range(rng.randint(1, 8))]
        start = {tp: rng.randint(0, 100) for tp in tps}
        end = {tp: start[tp] + rng.randint(-5, 500) for tp in tps}
        min_p = rng.choice([None, 1, 3, 17, 200])
        max_r = rng.choice([None, 1, 7, 64])
        kw = {"min_partitions": min_p, "max_records_per_partition": max_r}
        got = plan_ranges(start, end, **kw)
        assert spans(got) == spans(plan_ranges(dict(reversed(start.items())), end, **kw))
        assert spans(got) == sorted(spans(got))
        assert all(r.size > 0 for r in got)
        if max_r:
            assert all(r.size <= max_r for r in got)
        total = sum(max(0, end[tp] - start[tp]) for tp in set(tps))
        if min_p:
            assert len(got) >= min(min_p, total)
        for tp in set(tps):  # pieces tile [start, end) exactly
            pieces = [(r.start, r.end) for r in got if r.topic_partition == tp]
            if end[tp] > start[tp]:
                assert pieces[0][0] == start[tp] and pieces[-1][1] == end[tp]
                assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
            else:
                assert pieces == []


def test_plan_ranges_bad_input():
    with pytest.raises(ValueError, match="min_partitions"):
        plan_ranges({A0: 0}, {A0: 1}, min_partitions=0, max_records_per_partition=None)
    with pytest.raises(ValueError, match="max_records_per_partition"):
        plan_ranges({A0: 0}, {A0: 1}, min_partitions=None, max_records_per_partition=-1)
    with pytest.raises(ValueError, match="a-1"):
        plan_ranges({A0: 0}, {A0: 1, A1: 1}, min_partitions=None, max_records_per_partition=None)


# ---------------------------------------------------------------------------
# Data loss

BOUNDS = {A0: PartitionBounds(10, 100, 90), A1: PartitionBounds(0, 50, 50)}


def test_no_data_loss():
    start = {A0: 10, A1: 50}
    for fail in (True, False):
        assert check_data_loss(start, BOUNDS, fail_on_data_loss=fail) == (start, [])


@pytest.mark.parametrize("start, adjusted, needles", [
    ({A0: 4, A1: 0}, {A0: 10, A1: 0}, ["a-0", "offsets 4 to 9", "starts at 10", "retention"]),
    ({A0: 101, A1: 0}, {A0: 10, A1: 0}, ["a-0", "101", "(100)", "recreated"]),
    ({A0: 10, A2: 7}, {A0: 10}, ["a-2", "no longer exists", "offset 7"]),
])
def test_data_loss(start, adjusted, needles):
    with pytest.raises(DataLossError) as info:
        check_data_loss(start, BOUNDS, fail_on_data_loss=True)
    message = str(info.value)
    for needle in needles + ["failOnDataLoss=false"]:
        assert needle in message
    got, warnings = check_data_loss(start, BOUNDS, fail_on_data_loss=False)
    assert got == adjusted
    assert len(warnings) == 1 and all(n in warnings[0] for n in needles)


def test_data_loss_lists_every_partition():
    with pytest.raises(DataLossError) as info:
        check_data_loss({A0: 0, A1: 60}, BOUNDS, fail_on_data_loss=True)
    assert "a-0" in str(info.value) and "a-1" in str(info.value)


# ---------------------------------------------------------------------------
# Resolving start and end

PARTS = [A0, A1]


def resolve(spec, read_committed=True, lookup=None, parts=PARTS):
    return resolve_starting(spec, parts, BOUNDS, read_committed=read_committed,
                            offsets_for_times=lookup)


@pytest.mark.parametrize("spec, committed, expected", [
    (StartingSpec("earliest"), True, {A0: 10, A1: 0}),
    (StartingSpec("latest"), True, {A0: 90, A1: 50}),
    (StartingSpec("latest"), False, {A0: 100, A1: 50}),
    (StartingSpec("offsets", per_partition=((A0, -2), (A1, -1))), True, {A0: 10, A1: 50}),
    (StartingSpec("offsets", per_partition=((A0, 3), (A1, 7))), False, {A0: 3, A1: 7}),
])
def test_resolve_starting(spec, committed, expected):
    assert resolve(spec, committed) == expected


@pytest.mark.parametrize("per, needles", [
    (((A0, 1),), ["startingOffsets", "not named: a-1", "-2 for earliest"]),
    (((A0, 1), (A1, 1), (B0, 1)), ["named but not found: b-0"]),
])
def test_resolve_starting_json_must_cover_partitions(per, needles):
    with pytest.raises(ConfigError) as info:
        resolve(StartingSpec("offsets", per_partition=per))
    assert all(n in str(info.value) for n in needles)


def test_resolve_timestamps():
    seen = []

    def lookup(times):
        seen.append(dict(times))
        return {A0: 42, A1: None}

    spec = StartingSpec("timestamp", timestamp=1000, on_no_match="latest",
                        option="startingTimestamp")
    assert resolve(spec, lookup=lookup) == {A0: 42, A1: 50}
    assert seen == [{A0: 1000, A1: 1000}]
    with pytest.raises(ConfigError) as info:
        resolve(StartingSpec("timestamp", timestamp=1000, option="startingTimestamp"),
                lookup=lookup)
    assert "a-1" in str(info.value) and "startingOffsetsByTimestampStrategy=latest" \
        in str(info.value)
    per = StartingSpec("timestamps", per_partition=((A0, 5), (A1, 6)),
                       option="startingOffsetsByTimestamp")
    assert resolve(per, lookup=lambda t: {tp: ts * 2 for tp, ts in t.items()}) == {A0: 10, A1: 12}
    with pytest.raises(ValueError):
        resolve(per)


def test_resolve_ending():
    def end(spec, lookup=None):
        return resolve_ending(spec, PARTS, BOUNDS, read_committed=True, offsets_for_times=lookup)

    assert end(EndingSpec("latest")) == {A0: 90, A1: 50}
    assert end(EndingSpec("offsets", per_partition=((A0, 20), (A1, -1)))) == {A0: 20, A1: 50}
    # no record at or after the timestamp: read to latest (Spark), never an error
    assert end(EndingSpec("timestamp", timestamp=9), lambda t: {A0: -1}) == {A0: 90, A1: 50}
    with pytest.raises(ConfigError, match="endingOffsets"):
        end(EndingSpec("offsets", per_partition=((A0, 20),)))


def test_resolve_needs_bounds_and_handles_no_partitions():
    assert resolve(StartingSpec("earliest"), parts=[]) == {}
    with pytest.raises(ValueError, match="b-0"):
        resolve(StartingSpec("earliest"), parts=[B0])


def test_spec_kind_validated():
    with pytest.raises(ValueError):
        StartingSpec("first")
    with pytest.raises(ValueError):
        EndingSpec("earliest")
