"""The sequence explorer in CI (docs/design.md, invariant 17; tests/explorer): a few seeds
on an Apache Kafka of this module's own (the explorer restarts its broker), judged from the
outside after every sequence, Kafka's own tools over all of them at the end.

The seeds rotate: by default they come from today's date (printed), so each day's CI run
explores new sequences and a failure replays the same day or with ``EXPLORE_SEED=S[,S...]``.
``EXPLORE_SEEDS`` (default 5) seeds are started while ``EXPLORE_BUDGET_S`` (default 120 s)
lasts; a failure is shrunk for at most ``EXPLORE_SHRINK_S`` (default 120 s) and printed
with its seed. ``make explore`` runs many seeds.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_kafka_source.apache_kafka import KafkaCluster
from tests.explorer.actions import format_sequence
from tests.explorer.explore import Explorer
from tests.explorer.world import Cluster
from tests.kafka_clusters import kafka_for_tests

pytestmark = [pytest.mark.kafka_only, pytest.mark.faults]


@pytest.fixture(scope="module")
def own_kafka() -> Iterator[KafkaCluster]:
    with kafka_for_tests(1) as cluster:
        yield cluster


def _seeds() -> list[int]:
    given = os.environ.get("EXPLORE_SEED")
    if given:
        return [int(s) for s in given.split(",")]
    first = int(datetime.date.today().strftime("%Y%m%d")) * 100
    return list(range(first, first + int(os.environ.get("EXPLORE_SEEDS", "5"))))


def test_explored_sequences_hold(own_kafka: KafkaCluster, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    def restart(kill: bool) -> None:
        own_kafka.restart_node(1, kill=kill)

    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        with capsys.disabled():
            print(line, flush=True)

    seeds = _seeds()
    log(f"\nexplorer seeds {seeds} (replay: EXPLORE_SEED={','.join(map(str, seeds))})")
    explorer = Explorer(Cluster(own_kafka.bootstrap_servers, tmp_path, restart),
                        max_length=int(os.environ.get("EXPLORE_MAX_LENGTH", "8")), log=log)
    findings = explorer.explore(
        seeds, shrink_budget_s=float(os.environ.get("EXPLORE_SHRINK_S", "120")),
        deadline_s=float(os.environ.get("EXPLORE_BUDGET_S", "120")), stop_at_first=True)
    assert not findings, "\n".join(
        f"seed {seed} (EXPLORE_SEED={seed}): minimal failing sequence: "
        f"{format_sequence(shrunk.actions)} -> {'; '.join(shrunk.problems)}"
        for seed, _, shrunk in findings)
    assert explorer.final_check() == []
