"""The streaming abort mark is cleared by the restart, whatever the restart knows.
The abort marks its batch on the broker before fencing, so a late task writes
nothing (claims.py); the restart clears the mark after its own fencing. Before the fix it
did so only when its planning worker could read the query id: on a checkpoint scheme
``query_id_at`` cannot read (``dbfs:/``) every replayed task refused, on every restart.
And an abort meeting an unknown outcome left the pool marked clean: the next batch in the
same session neither fenced nor cleared the mark.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eos_kafka_source.errors import TransactionOutcomeUnknownError
from eos_kafka_source.faults import InjectedFault
from eos_kafka_source.sink.decisions.log import DecisionLog
from eos_kafka_source.sink.driver.claims import batch_aborted
from eos_kafka_source.sink.driver.protocol import DriverProtocol
from eos_kafka_source.sink.naming import fingerprint
from tests.kafka_helpers import create_topic
from tests.sink_harness import Harness, assert_once_on_kafka, vals


def _sink(bootstrap: str, unique: str, ckpt: Path) -> Harness:
    create_topic(bootstrap, unique, partitions=2)
    h = Harness(bootstrap, unique, unique, ckpt, claim=True, lineage="query-A")
    h.driver.prepare(new_run=True)
    return h


def _marked(h: Harness, batch: int) -> bool:
    with h.wire() as wire:
        return batch_aborted(wire, h.ids.prefix, h.topic, "query-A", batch)


def test_a_restart_that_cannot_read_its_query_id_clears_the_abort_mark(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    """Before the fix the mark stayed: the planning worker (lineage None) skipped it."""
    ckpt = tmp_path / "ckpt"
    h = _sink(bootstrap, unique, ckpt)
    h.driver.commit(0, [h.task(0, vals("b0"))], tasks=1)
    failed = [h.task(0, vals("b1"))]
    h.driver.abort(1, failed, tasks=1)  # the commit worker knows the lineage (hand-offs)
    assert _marked(h, 1)
    planner = DriverProtocol(h.ids, DecisionLog(str(ckpt)), h.wire, owner=fingerprint(str(ckpt)),
                             transaction_timeout_ms=h.timeout_ms, claim_topic=h.topic,
                             lineage=None)  # query_id_at could not read the checkpoint
    planner.prepare(new_run=True)
    assert not _marked(h, 1), "the restart left batch 1 marked aborted: its replay refuses"
    assert h.log.pool().marked == []
    h.driver.commit(1, [h.task(0, vals("b1"))], tasks=1)  # the replay writes
    assert_once_on_kafka(h, Counter(vals("b0") + vals("b1")))


def test_an_abort_meeting_an_unknown_outcome_leaves_the_pool_unclean(
        bootstrap: str, unique: str, tmp_path: Path, faults) -> None:  # noqa: ANN001
    """Before the fix abort() raised the unknown outcome before it set pool.clean=False: the
    next batch of the same run neither fenced the pool nor cleared the mark."""
    h = _sink(bootstrap, unique, tmp_path / "ckpt")
    h.driver.commit(0, [h.task(p, vals(f"b0t{p}")) for p in range(2)], tasks=2)
    assert h.log.pool().clean
    batch1 = [h.task(p, vals(f"b1t{p}")) for p in range(2)]
    faults("commit.after_decision=raise")  # decided, no EndTxn sent
    with pytest.raises(InjectedFault):
        h.driver.commit(1, batch1, tasks=2)
    faults("commit.before_endtxn=drop")  # the roll-forward in abort() cannot reach Kafka
    h.driver.commit_deadline_s = 2.0
    with pytest.raises(TransactionOutcomeUnknownError):
        h.driver.abort(1, batch1, tasks=2)
    faults("")
    pool = h.log.pool()
    assert not pool.clean, "an unknown outcome in abort() left the pool marked clean"
    assert pool.marked == ["query-A"]
    h.driver.commit_deadline_s = 75.0
    h.driver.prepare(new_run=False)  # same run: fences only because the pool is unclean
    assert h.log.get(1).done  # rolled forward, not aborted
    assert not _marked(h, 1)
    assert_once_on_kafka(h, Counter([*vals("b0t0"), *vals("b0t1"), *vals("b1t0"),
                                     *vals("b1t1")]))
