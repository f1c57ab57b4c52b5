"""offsets_behind_latest: Spark's three source metrics, from a progress entry."""

from __future__ import annotations

from eos_kafka_source.source.lag import offsets_behind_latest


def test_figures_as_spark_computes_them() -> None:
    progress = {"endOffset": '{"a":{"0":4,"1":3},"b":{"0":10}}',
                "latestOffset": {"a": {"0": 9, "1": 3}, "b": {"0": 17}}}
    assert offsets_behind_latest(progress) == {
        "avgOffsetsBehindLatest": 4.0, "maxOffsetsBehindLatest": 7,
        "minOffsetsBehindLatest": 0}


def test_no_latest_offset_gives_nothing() -> None:
    assert offsets_behind_latest({"endOffset": '{"a":{"0":4}}', "latestOffset": None}) == {}
