"""What a failed batch write tells its user, and its abort without a decision log.

A batch write (``df.write.format("eoskafka").mode("append")``) is never replayed: when
``commit()`` raises, Spark calls ``abort()`` and fails the write. If the commit had
started, that failure is not the truth: with a decision log the abort rolls the decision
forward (every row committed); without one, its transactions' commits may have reached
Kafka. Either way the user must hear that the rows are committed (or may be), never that
the write failed and can simply be rerun (docs/guarantee.md, "Batch writes").
Runs on: the driver (commit/abort worker).
"""

from __future__ import annotations

from ...errors import TransactionLostError, TransactionOutcomeUnknownError, WriteCommittedError
from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .claims import mark_write_aborted, write_committing
from .committer import FinishReport, finish
from .fencing import fence


def abort_without_log(wire: KafkaWire, ids: TransactionalIdFactory, topic: str | None,
                      lineage: str, handoffs: list[TxnHandoff], tasks: int, timeout_ms: int,
                      deadline_s: float) -> None:
    """Abort a batch write that has no decision log, unless its commit started.

    Once ``commit()`` marked the write "committing" on the broker (claims.py), its
    transactions are committed, never aborted: an EndTxn commit may have reached Kafka,
    and aborting the rest would leave half a write. Spark hands abort() the same messages
    as commit(), so this finishes the commit; an outcome still unknown is reported as
    unknown and left to Kafka. Raises :class:`WriteCommittedError` when it committed all.
    """
    if topic is not None and write_committing(wire, ids.prefix, topic, lineage):
        fault_point("abort.after_mark")
        report = finish(wire, handoffs, commit=True, deadline_s=deadline_s)
        raise_unfinished(
            report, "finishing the interrupted commit",
            f"the batch write {lineage} failed while committing, without a "
            f"decisionLogLocation: {len(report.done)} of its transactions are committed "
            f"and {len(report.lost)} could not be (fenced or expired): their records are "
            "LOST, the others written. ")
        fence(wire, [ids.for_task(p) for p in range(tasks)], timeout_ms)
        fault_point("abort.after_fence")
        raise WriteCommittedError(
            f"the batch write {lineage} failed while committing, and eoskafka finished its "
            f"commit: all {sum(h.records for h in report.done)} records of its "
            f"{len(report.done)} transaction(s) are committed. Spark reports the write as "
            "failed, but do NOT run it again: it would write every row twice.")
    if topic is not None:
        mark_write_aborted(wire, ids.prefix, topic, lineage)
    fault_point("abort.after_mark")
    finish(wire, handoffs, commit=False, deadline_s=wire.config.api_timeout_s)
    fence(wire, [ids.for_task(p) for p in range(tasks)], timeout_ms)
    fault_point("abort.after_fence")


def raise_unfinished(report: FinishReport, doing: str, lost: str) -> None:
    """A batch write without a decision log ends here if any transaction is not committed:
    unknown outcomes first (they may still commit), then ``lost`` and what was lost."""
    if report.unknown:
        raise unknown_without_log(report, doing)
    if report.lost:
        raise TransactionLostError(lost + "; ".join(report.describe_lost()))


def unknown_without_log(report: FinishReport, doing: str) -> TransactionOutcomeUnknownError:
    """A batch write without a decision log whose commit outcome is unknown: said as it is."""
    unknown = report.describe_unknown()
    return TransactionOutcomeUnknownError(
        f"the batch write's commit: the outcome of {len(unknown)} EndTxn(s) is unknown after "
        f"{report.seconds:.0f} s of {doing} ({len(report.done)} other(s) committed). Without "
        "a decisionLogLocation nothing can finish them later; eoskafka did NOT abort them (a "
        "commit may have reached Kafka): each either commits or is aborted by Kafka's "
        "transaction timeout. Before rerunning the write, wait until `eoskafka txns` or "
        "kafka-transactions.sh shows them ended and check which rows are in the topic; set "
        "decisionLogLocation to make batch writes atomic across such failures. "
        + "; ".join(unknown))


def write_committed(decision: Decision, location: str) -> WriteCommittedError:
    """The abort of a batch write whose decision it rolled forward: the write committed."""
    records = sum(h.records for h in decision.handoffs)
    topics = sorted({t for h in decision.handoffs for t, _, _ in h.partitions})
    lost = decision.lost
    return WriteCommittedError(
        f"the batch write {decision.lineage} failed after its commit decision, and eoskafka "
        f"finished it: its {records} records to {', '.join(topics) or 'its topics'} are "
        "committed"
        + (f" ({len(lost)} transaction(s) of it were lost: {'; '.join(lost)})" if lost else "")
        + ". Spark reports the write as failed, but do NOT run it again: it would write "
        f"every row twice. (The next batch write with decisionLogLocation {location} says "
        "so once more: EOSKAFKA_PREVIOUS_WRITE_COMPLETED.)")
