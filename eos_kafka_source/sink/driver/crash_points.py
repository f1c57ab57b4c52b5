"""Every durable step of the sink's commit protocol, as a named crash point (invariant 14).

A crash point is a :func:`eos_kafka_source.faults.fault_point` the driver passes just
before or after something becomes durable (a decision-store write, an EndTxn, a fence, an
abort mark, a recovery step). The crash-point sweep (tests/broker/test_crash_points.py)
kills a real driver at each one in turn, restarts it, and checks from the outside that
every input row is committed exactly once and nothing is left open (docs/design.md,
"Exactly-once sink: invariants"). A unit test keeps this table and the source in step:
a new durable step comes with its point, and its point comes here, so it gets swept.

``hook`` says where Spark runs the step (docs/design.md, "where each hook runs"):
``prepare`` the planning worker's ``streamWriter()``, ``commit`` and ``abort`` the
commit/abort worker (``prepare/commit``: the recovery of lost transactions, in whichever
meets it first), ``store`` any driver step that writes the decision store.
Runs on: nowhere (a table read by tests and tools).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CrashPoint:
    """One durable step: its fault-point name, the hook it runs in, and what is durable
    (already in the decision store or in Kafka) when the driver dies there."""

    name: str
    hook: str
    durable: str


#: The driver's durable steps, in the order a batch meets them.
POINTS: tuple[CrashPoint, ...] = (
    CrashPoint("prepare.before_fence", "prepare",
               "unfinished decisions rolled forward; the id pool not yet fenced"),
    CrashPoint("prepare.after_clear_mark", "prepare",
               "the pool fenced and the query's batch abort mark cleared; planned time not "
               "yet written"),
    CrashPoint("commit.after_claim", "commit",
               "with a topic column, the first commit's prefix claim on the broker; the pool "
               "state does not name its topic yet, nothing decided"),
    CrashPoint("commit.before_decision", "commit",
               "every hand-off checked live; nothing decided (the batch is still new)"),
    CrashPoint("store.write", "store",
               "nothing of this decision-store write (the file about to be written keeps "
               "its previous content)"),
    CrashPoint("store.before_final", "store",
               "a conditional create's complete temporary file; the decision itself not yet "
               "under its final name"),
    CrashPoint("commit.after_decision", "commit",
               "the decision (batch id, every hand-off); no EndTxn sent"),
    CrashPoint("commit.before_endtxn", "commit",
               "the decision; coordinators found, EndTxn about to be sent"),
    CrashPoint("endtxn.commit.answered", "commit",
               "the decision; every EndTxn commit answered by its coordinator, the answers "
               "not yet read"),
    CrashPoint("commit.before_done", "commit",
               "the decision; every transaction committed; the batch not yet marked done"),
    CrashPoint("commit.after_done", "commit",
               "the batch marked done; unused ids not yet fenced, the log not pruned"),
    CrashPoint("commit.cleanup", "commit",
               "the batch done; the clean-up after it (fencing unused ids, pool size, "
               "pruning) not started"),
    CrashPoint("hanging.after_abort", "prepare/commit",
               "a decided transaction hanging on a partition (as find-hanging judges): "
               "eoskafka's own ABORT marker written there; the transaction not yet read as "
               "lost, its copy from the log not started"),
    CrashPoint("recover.after_write", "prepare/commit",
               "a decided transaction Kafka aborted; its records copied from the log into a "
               "recovery transaction, still open and not yet recorded"),
    CrashPoint("recover.after_record", "prepare/commit",
               "the recovery transaction recorded in the decision; no EndTxn sent for it"),
    CrashPoint("recover.after_part", "prepare/commit",
               "a recovery transaction ended, part of the copy committed (a bounded copy, or "
               "partitions Kafka aborted); the next part not yet written"),
    CrashPoint("recover.before_done", "prepare/commit",
               "the recovery transaction committed; the decision not yet marked done"),
    CrashPoint("endtxn.abort.answered", "abort",
               "EndTxn abort of the batch's undecided transactions answered, the answers "
               "not yet read"),
    CrashPoint("abort.after_mark", "abort",
               "the batch's abort mark (late tasks refuse to write); the pool not fenced"),
    CrashPoint("abort.after_fence", "abort",
               "the pool fenced after an abort; the pool not yet recorded clean"),
)

#: Points on the task side (executors): a killed task is Spark's retry, not a driver crash;
#: named here so the source scan knows them, swept by the task-failure tests instead.
TASK_POINTS: frozenset[str] = frozenset({"write.after_batch", "write.after_round",
                                         "write.after_flush"})

#: Points tests use to act during a read (no durable step): not swept.
READ_POINTS: frozenset[str] = frozenset({"recover.during_read"})

BY_NAME: dict[str, CrashPoint] = {p.name: p for p in POINTS}


def names() -> list[str]:
    """The crash points' names, in protocol order."""
    return [p.name for p in POINTS]
