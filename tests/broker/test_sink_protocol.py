"""The exactly-once protocol against the real broker, without Spark.

TaskWriter plays the tasks, DriverProtocol the driver; each test names the
docs/design.md invariant it pins and checks the committed view of the
output with the independent oracle.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from eos_kafka_source.errors import (
    IdPrefixClashError,
    KafkaProtocolError,
    TransactionLostError,
)
from tests.java_oracle import assert_java_agrees
from tests.kafka_helpers import create_topic
from tests.oracle import assert_no_open_transactions, committed_view
from tests.sink_harness import (
    Background,
    Harness,
    await_path,
    crash_between_endtxns,
    lose_task_1,
    vals,
)

_Background = Background
_await = await_path
_vals = vals


def test_commit_makes_every_task_visible_once(sink: Harness) -> None:
    handoffs = [sink.task(p, _vals(f"b0t{p}")) for p in range(3)]
    assert sink.committed(settle=False) == Counter()  # open until the driver commits
    sink.driver.commit(0, handoffs, tasks=3)
    assert sink.committed() == Counter(_vals("b0t0") + _vals("b0t1") + _vals("b0t2"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant1_decision_recorded_before_first_endtxn(sink: Harness, faults) -> None:
    handoffs = [sink.task(p, _vals(f"t{p}")) for p in range(2)]
    faults("commit.after_decision=raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        sink.driver.commit(0, handoffs, tasks=2)
    decision = sink.log.get(0)
    assert decision is not None and not decision.done
    assert {h.transactional_id for h in decision.handoffs} == {sink.ids.for_task(0),
                                                                sink.ids.for_task(1)}
    assert sink.committed(settle=False) == Counter()


def test_invariant2_restart_rolls_decided_batch_forward_before_tasks(sink: Harness,
                                                                     faults) -> None:
    handoffs = [sink.task(p, _vals(f"t{p}")) for p in range(2)]
    with crash_between_endtxns(), pytest.raises(RuntimeError, match="injected fault"):
        sink.driver.commit(0, handoffs, tasks=2)
    assert len(sink.committed(settle=False)) == 30  # half committed: a crash between two EndTxns
    sink.driver.prepare(new_run=True)  # the restarted driver, before any task starts
    assert sink.committed() == Counter(_vals("t0") + _vals("t1"))
    assert sink.log.get(0).done
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant3_replayed_batch_id_aborts_new_work(sink: Harness) -> None:
    sink.driver.commit(0, [sink.task(0, _vals("first"))], tasks=1)
    replay = [sink.task(0, _vals("replay"))]
    sink.driver.commit(0, replay, tasks=1)
    assert sink.committed() == Counter(_vals("first"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant3_commit_twice_abort_after_commit_abort_with_none(sink: Harness) -> None:
    handoffs = [sink.task(p, _vals(f"t{p}")) for p in range(2)]
    sink.driver.commit(0, handoffs, tasks=2)
    sink.driver.commit(0, handoffs, tasks=2)
    sink.driver.abort(0, handoffs, tasks=2)
    sink.driver.abort(1, [], tasks=2)  # abort([None, None]) of a stopped batch
    assert sink.committed() == Counter(_vals("t0") + _vals("t1"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant4_fenced_handoff_fails_loudly_and_batch_can_replay(sink: Harness) -> None:
    stale = sink.task(0, _vals("stale"))
    sink.task(0, _vals("newer"))  # a later attempt of task 0 fences the hand-off above
    with pytest.raises(TransactionLostError,
                       match=r"fenced after their tasks handed them over.*nothing was committed"):
        sink.driver.commit(0, [stale], tasks=1)
    assert sink.log.get(0) is None  # nothing committed: the decision is withdrawn
    sink.driver.abort(0, [stale], tasks=1)
    assert sink.committed() == Counter()
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant4_handoff_fenced_before_commit_fails_the_batch_whole(sink: Harness) -> None:
    """Found by the chaos harness (zombie fault): a zombie on a sink id fenced a task's
    transaction after the task handed it over and before the driver committed. The driver
    committed the others and lost that one (partial batch, records LOST) although nothing
    had been committed yet: the whole batch could still fail and replay. It now checks
    every hand-off is still live before its decision."""
    good = sink.task(0, _vals("good"))
    fenced = sink.task(1, _vals("fenced"))
    sink.task(1, _vals("zombie"))  # InitProducerId on the id: the hand-off above is dead
    with pytest.raises(TransactionLostError, match="nothing was committed") as err:
        sink.driver.commit(0, [good, fenced], tasks=2)
    assert sink.ids.for_task(1) in str(err.value)
    assert sink.log.get(0) is None and sink.committed(settle=False) == Counter()
    sink.driver.abort(0, [good, fenced], tasks=2)  # what Spark does after commit() raised
    sink.driver.prepare(new_run=True)  # the restarted query replays the batch
    sink.driver.commit(0, [sink.task(p, _vals(f"replay{p}")) for p in range(2)], tasks=2)
    assert sink.committed() == Counter(_vals("replay0") + _vals("replay1"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant4_a_transaction_lost_mid_commit_is_copied_from_the_log(
    sink: Harness, faults, tmp_path
) -> None:
    """Found by the chaos soak: a zombie's InitProducerId landed while the driver was
    committing (after its liveness check; on slow storage the EndTxns take a while), so one
    task's transaction was aborted while the others committed. Its records are still in the
    log, up to its ABORT marker: commit() copies them in a recovery transaction, recorded
    first, and the batch succeeds (invariant 10). Replays of the batch are aborted, whatever
    rows they write."""
    lose_task_1(sink, faults, tmp_path, tasks=3)
    decision = sink.log.get(0)
    assert decision is not None and decision.done and not decision.lost
    assert decision.recovery is None and not decision.lost_handoffs
    assert sink.committed() == Counter(_vals("b0t0") + _vals("b0t1") + _vals("b0t2"))
    sink.driver.prepare(new_run=True)  # a restart, then a replay writing other rows
    other = [sink.task(0, _vals("b0t0")), sink.task(1, _vals("other", 29)),
             sink.task(2, _vals("b0t2"))]
    sink.driver.commit(0, other, tasks=3)
    assert sink.committed() == Counter(_vals("b0t0") + _vals("b0t1") + _vals("b0t2"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant5_zombie_keeps_writing_after_being_fenced(sink: Harness) -> None:
    with sink.wire() as zombie_wire, sink.wire() as winner_wire:
        zombie = sink.open_task(zombie_wire, 0)
        zombie.write_batch(pa.RecordBatch.from_pydict({"value": _vals("zombie")}))
        zombie.flush()
        winner = sink.open_task(winner_wire, 0)  # the retry: same id, new epoch
        winner.write_batch(pa.RecordBatch.from_pydict({"value": _vals("winner")}))
        with pytest.raises(KafkaProtocolError) as err:
            zombie.write_batch(pa.RecordBatch.from_pydict({"value": _vals("zombie-late")}))
            zombie.flush()
        assert err.value.code in (47, 90)  # INVALID_PRODUCER_EPOCH / PRODUCER_FENCED
        sink.driver.commit(0, [winner.handoff()], tasks=1)
    assert sink.committed() == Counter(_vals("winner"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant5_lingering_transactions_fenced_at_query_start(sink: Harness,
                                                                  bootstrap: str) -> None:
    sink.driver.commit(0, [sink.task(p, _vals(f"ok{p}")) for p in range(3)], tasks=3)
    for p in range(3):
        sink.task(p, _vals(f"killed{p}"))  # a killed run's tasks: open, never handed over
    assert sum(len(pv.open) for pv in committed_view(bootstrap, sink.topic).values()) == 90
    sink.driver.prepare(new_run=True)
    assert sink.committed() == Counter(_vals("ok0") + _vals("ok1") + _vals("ok2"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant5_ids_beyond_recorded_pool_found_by_probing(sink: Harness) -> None:
    sink.driver.commit(0, [sink.task(0, _vals("ok"))], tasks=1)
    # A killed batch with more tasks than any committed one, of which only the last had
    # started: ids 1-3 unused, a gap just under the probe's window of 4. (This test used id 5,
    # a gap of 4, found only because the probe used to mistake its own earlier fencing of
    # ids 1-3 for use; see test_invariant5_pool_does_not_grow_with_restarts.)
    sink.task(4, _vals("wide"))
    sink.driver.prepare(new_run=True)
    assert sink.committed() == Counter(_vals("ok"))
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant5_pool_does_not_grow_with_batches(sink: Harness) -> None:
    for batch in range(6):
        sink.driver.commit(batch, [sink.task(p, _vals(f"b{batch}p{p}", 3)) for p in range(2)],
                           tasks=2)
        sink.driver.prepare(new_run=False)
    assert sink.log.pool().size == 2
    assert len(sink.committed()) == 36


def test_invariant5_pool_does_not_grow_with_restarts(sink: Harness) -> None:
    """Found by the chaos harness (pool.json size 8 for 3 tasks after 3 restarts): the probe
    for ids beyond the pool took the epochs its own previous probe had left (> 0) for use,
    so every restart of the query grew the pool by the probe window."""
    for batch in range(5):
        sink.driver.commit(batch, [sink.task(p, _vals(f"b{batch}p{p}", 3)) for p in range(2)],
                           tasks=2)
        sink.driver.prepare(new_run=True)  # the query restarted (driver killed, query stopped)
    assert sink.log.pool().size == 2
    sink.task(4, _vals("wide"))  # still found: a killed wider batch beyond the pool
    sink.driver.prepare(new_run=True)
    assert sink.log.pool().size == 5
    assert len(sink.committed()) == 30
    assert_java_agrees(sink.bootstrap, sink.topic)
    assert_no_open_transactions(sink.bootstrap, sink.topic)


def test_invariant5_superseded_epoch_refused(sink: Harness) -> None:
    old = sink.task(0, _vals("old"))
    sink.driver.abort(0, [], tasks=1)  # fences the pool: the old attempt is now a zombie
    with pytest.raises(TransactionLostError, match="already fenced"):
        sink.driver.commit(1, [old], tasks=1)
    assert sink.committed() == Counter()


def test_invariant7_user_prefix_claimed_against_other_queries(bootstrap, unique, tmp_path):
    create_topic(bootstrap, unique)
    first = Harness(bootstrap, unique, f"{unique}-shared", tmp_path / "q1", claim=True)
    first.driver.prepare(new_run=True)
    first.driver.prepare(new_run=True)  # the same query again: fine
    second = Harness(bootstrap, unique, f"{unique}-shared", tmp_path / "q2", claim=True)
    with pytest.raises(IdPrefixClashError, match="already used by another query"):
        second.driver.prepare(new_run=True)


def test_invariant7_a_claim_under_its_old_group_name_still_holds(bootstrap, unique, tmp_path):
    """Claims moved from ``eoskafka-claim.<prefix>`` to ``<prefix>.eoskafka-claim`` (one
    prefixed ACL covers it): another query's old claim still refuses, our own carries over."""
    from eos_kafka_source.sink.driver.claims import _token, claim_group
    from eos_kafka_source.wire.groups import commit_offset, fetch_offset

    create_topic(bootstrap, unique)
    theirs, ours = f"{unique}-theirs", f"{unique}-ours"
    mine = Harness(bootstrap, unique, ours, tmp_path / "q", claim=True)
    with mine.wire() as wire:
        commit_offset(wire, f"eoskafka-claim.{theirs}", unique, 0, 12345, "elsewhere")
        commit_offset(wire, f"eoskafka-claim.{ours}", unique, 0, _token(mine.driver.owner),
                      mine.driver.owner)
    other = Harness(bootstrap, unique, theirs, tmp_path / "q2", claim=True)
    with pytest.raises(IdPrefixClashError, match=f"eoskafka-claim.{theirs}"):
        other.driver.prepare(new_run=True)
    mine.driver.prepare(new_run=True)
    with mine.wire() as wire:
        assert fetch_offset(wire, claim_group(ours), unique, 0)[0] == _token(mine.driver.owner)


def test_batch_write_without_decision_log(bootstrap: str, unique: str) -> None:
    create_topic(bootstrap, unique)
    h = Harness(bootstrap, unique, unique, None)
    h.driver.commit(None, [h.task(p, _vals(f"t{p}")) for p in range(2)], tasks=2)
    assert h.committed() == Counter(_vals("t0") + _vals("t1"))
    assert_java_agrees(bootstrap, unique)
    assert_no_open_transactions(bootstrap, unique)
