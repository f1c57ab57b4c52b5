"""The payload explorer in CI (tests/formats/explorer): a seed of the date per format, its
generated schemas and values checked against the reference decoders (spark-avro's
from_avro with fastavro and Confluent's deserializer, protobuf's runtime, jsonschema), the
known-difference lists judged (a new difference or a stale entry fails).

The seed rotates with the date (printed), so each day's CI explores new schemas; a failure
replays with ``EXPLORE_FORMATS_SEED=S[,S...]``. ``EXPLORE_FORMATS_PER_SEED`` (default 60)
schemas per seed and format. ``make explore-formats`` runs many seeds.
"""

from __future__ import annotations

import datetime
import os

import pytest

from tests.formats.explorer.run import FORMATS, explore

pytestmark = [pytest.mark.spark, pytest.mark.kafka_only, pytest.mark.faults]


def _seeds() -> list[int]:
    given = os.environ.get("EXPLORE_FORMATS_SEED")
    if given:
        return [int(s) for s in given.split(",")]
    return [int(datetime.date.today().strftime("%Y%m%d"))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_explored_payloads_match_the_references(fmt: str, spark,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    def log(line: str) -> None:
        with capsys.disabled():
            print(line, flush=True)

    seeds = _seeds()
    log(f"\n{fmt} explorer seeds {seeds} (replay: EXPLORE_FORMATS_SEED="
        f"{','.join(map(str, seeds))})")
    report = explore(fmt, seeds, int(os.environ.get("EXPLORE_FORMATS_PER_SEED", "60")),
                     spark if fmt == "avro" else None, shrink_s=60, log=log)
    log(report.summary())
    assert not report.findings, "\n".join(f.describe() for f in report.findings)
    assert not report.stale, "\n".join(report.stale)
