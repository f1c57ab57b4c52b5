"""What an operator does to a crashed query, shared by the crash-point sweep
(tests/broker/test_crash_points.py) and the sequence explorer (tests/explorer): Kafka's own
``kafka-transactions abort``, ``eoskafka fence``, and the clean-up after a run that did not
hold. Each acts from the outside, as the operator would: Kafka's tools and the CLI.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from eos_kafka_source.sink.decisions.log import DecisionLog
from tests.crash_driver import Query
from tests.oracle import assert_no_open_transactions
from tests.sink_harness import Harness

ROOT = Path(__file__).parents[1]


def open_candidates(query: Query) -> list[tuple[bool, int, int]]:
    """The sink's transactions open on the query's topic, as ``(undecided, partition,
    start offset)``, undecided ones first: where ``kafka-transactions abort`` can act.
    "Decided" is a hand-off of a decision of the query's log (a recovery transaction is
    recorded beside the decision, not in it: it counts as undecided)."""
    from eos_kafka_source.apache_kafka import KafkaTools

    log = DecisionLog(str(query.checkpoint), query.lineage)
    decided = {h.producer_id for d in log.unfinished() for h in d.handoffs}
    decided |= {h.producer_id for b in _batches(query) if (d := log.get(b)) for h in d.handoffs}
    tools = KafkaTools(query.bootstrap)
    return sorted((o.producer_id not in decided, o.partition, o.start_offset)
                  for o in tools.open_on_partitions(query.topic, range(2)))


def _batches(query: Query) -> list[int]:
    return [int(p.name) for p in (query.checkpoint / "offsets").iterdir() if p.name.isdigit()]


def kafka_abort(query: Query, pick: int | None = None) -> str:
    """``kafka-transactions abort`` on one open transaction of the sink's (the operator's
    tool for a "hanging" transaction): a decided one where there is one, or with ``pick``
    the ``pick``-th (modulo how many are open) of :func:`open_candidates`. What it did."""
    from eos_kafka_source.apache_kafka import KafkaTools

    candidates = open_candidates(query)
    if not candidates:
        return "nothing open to abort"
    undecided, partition, start = (min(candidates) if pick is None
                                   else candidates[pick % len(candidates)])
    KafkaTools(query.bootstrap).abort_transaction(query.topic, partition, start)
    return f"aborted the {'undecided' if undecided else 'decided'} transaction at " \
           f"{partition}:{start}"


def eoskafka_fence(query: Query) -> str:
    """``eoskafka fence`` on the query's prefix (its pool and its recovery id)."""
    done = subprocess.run(
        [sys.executable, "-m", "eos_kafka_source.cli", "fence", "-b", query.bootstrap,
         "--prefix", query.prefix, "--pool-size", "2", "--probe"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return "fenced the pool"


def close_leftovers(bootstrap: str, prefixes: list[str]) -> None:
    """After a run that did not hold (its verdict taken): fence the ids it may have left
    open, so they do not fail the session's last check or stall later runs."""
    from eos_kafka_source.sink.driver.fencing import fence
    from tests.kafka_helpers import wire_for

    ids = [f"{p}-{suffix}" for p in prefixes for suffix in ("0", "1", "recovery")]
    try:
        with wire_for(bootstrap) as wire:
            fence(wire, ids, 60000)
    except Exception as exc:  # noqa: BLE001 - the run's own failure is what matters
        print(f"could not fence {', '.join(prefixes)}'s ids after the run: {exc}")


def judge(bootstrap: str, topic: str, expected: Counter[bytes]) -> None:
    """Every expected row exactly once, nothing aborted visible, nothing open: the raw log
    resolved by its markers (tests/oracle.py)."""
    assert Harness(bootstrap, topic, topic, None).committed() == expected
    assert_no_open_transactions(bootstrap, topic)
