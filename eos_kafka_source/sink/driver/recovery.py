"""Recovery: a decision's LOST -> RECOVERING -> DONE path, copying from the log.

When the log shows that Kafka aborted some decided transactions of a batch (a fence, an
operator's ``kafka-transactions.sh abort``, the driver down longer than
``kafka.transaction.timeout.ms``), their records are still in the output partitions. The
driver copies them (:mod:`.log_copy`) into a recovery transaction on ``<prefix>-recovery``,
records its hand-off as the decision's ``.recovery`` before its EndTxn, commits it, and
marks the batch done (docs/design.md, invariant 10). It never matches a replay's
transactions to lost ones. Each durable step is a fault point (invariant 14):
``recover.after_write``, ``recover.after_record``, ``recover.before_done``.

What the log no longer holds (retention, compaction) is lost: the batch is marked done with
those partitions named, and the caller reports it once. A log that cannot be read now, or an
unknown EndTxn outcome, raises and keeps the decision unfinished (finding 6 of issue 22).
Runs on: the driver (planning worker's roll-forward, commit and abort workers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ...errors import TransactionLostError, TransactionOutcomeUnknownError
from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import Event, State, transition
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .committer import confirm, finish, outcome_unknown
from .log_copy import copied_of, lost_of, read_lost, txn_key, unrecoverable_of, write_copy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """Where finishing a decision left it, and what the log could no longer give back
    (descriptions naming transactions, partitions and counts: lost for good)."""

    state: State
    lost: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Recovery:
    """Copies a batch's aborted decided transactions from the log, as one query's driver.

    ``view(lineage)`` is the decision log of that lineage; ``deadline_s`` bounds each
    wait (EndTxn retries, markers still being written)."""

    ids: TransactionalIdFactory
    timeout_ms: int
    deadline_s: float
    view: Callable[[str], DecisionLog]

    def copy(self, wire: KafkaWire, decision: Decision, lost: list[TxnHandoff]) -> Finished:
        """LOST -> RECOVERING: write the lost transactions' records, read from the log, in a
        recovery transaction; record it before its EndTxn; then commit it (:meth:`commit`).
        A log that cannot be read now raises and leaves the decision unfinished."""
        batch_id = decision.batch_id
        decisions = self.view(decision.lineage)
        try:
            plan = read_lost(wire, lost, deadline_s=self.deadline_s)
        except TransactionOutcomeUnknownError:
            transition(State.LOST, Event.UNKNOWN)
            raise
        if not plan.copied:
            state = transition(State.LOST, Event.UNRECOVERABLE)
            decisions.mark_done(batch_id, plan.unrecoverable, [])
            report_loss(batch_id, plan.unrecoverable)
            return Finished(state, plan.unrecoverable)
        recovery = write_copy(wire, self.ids, plan, lost, timeout_ms=self.timeout_ms,
                              lineage=decision.lineage, batch_id=batch_id)
        fault_point("recover.after_write")
        transition(State.LOST, Event.COPIED)
        decisions.record_recovery(batch_id, [recovery])
        fault_point("recover.after_record")
        return self.commit(wire, replace(decision, recovery=(recovery,)))

    def commit(self, wire: KafkaWire, decision: Decision) -> Finished:
        """RECOVERING -> DONE: commit the recorded recovery transaction. One that Kafka
        aborted in turn (RECOVERY_LOST) is written again from the original lost
        transactions, whose records are still in the log."""
        batch_id = decision.batch_id
        decisions = self.view(decision.lineage)
        recovery = list(decision.recovery or ())
        report = finish(wire, recovery, commit=True, deadline_s=self.deadline_s)
        confirm(wire, report, deadline_s=self.deadline_s)
        if report.unknown:
            transition(State.RECOVERING, Event.UNKNOWN)
            raise outcome_unknown(batch_id, report, "committing the copy of lost transactions")
        if report.lost:
            transition(State.RECOVERING, Event.RECOVERY_LOST)
            log.warning("eoskafka: batch %s: the recovery transaction was aborted too (%s); "
                        "copying from the log again", batch_id,
                        "; ".join(report.describe_lost()))
            decisions.clear_recovery(batch_id)
            return self.copy(wire, replace(decision, recovery=None),
                             _lost_behind(decision, recovery))
        fault_point("recover.before_done")
        left = _legacy_uncovered(decision, recovery)
        if left:  # an older eoskafka's replay transactions covered only some lost ones
            transition(State.RECOVERING, Event.RECOVERY_LOST)
            decisions.mark_done(batch_id, [], left)
            decisions.clear_recovery(batch_id)
            return self.copy(wire, replace(decision, recovery=None, lost_handoffs=tuple(left)),
                             left)
        state = transition(State.RECOVERING, Event.RECOVERY_COMMITTED)
        unrecoverable = [u for h in recovery for u in unrecoverable_of(h)]
        decisions.mark_done(batch_id, unrecoverable, [])
        decisions.clear_recovery(batch_id)
        copied = [c for h in recovery for c in copied_of(h)]
        log.warning("eoskafka: batch %s: copied %d records of %d aborted partition(s) from the "
                    "log in a recovery transaction", batch_id, sum(c[3] for c in copied),
                    len(copied))
        report_loss(batch_id, unrecoverable)
        return Finished(state, unrecoverable)


def report_loss(batch_id: int, lost: list[str]) -> None:
    if lost:
        log.error("eoskafka: batch %s: %d partition(s) of decided transactions were aborted "
                  "by Kafka and the log no longer holds their records: LOST, final: %s",
                  batch_id, len(lost), "; ".join(lost))


def lost_error(where: str, lost: list[str], timeout_ms: int) -> TransactionLostError:
    """The one report of records that could not be copied (``where``: "batch 7", ...)."""
    return TransactionLostError(
        f"{where}: {len(lost)} partition(s) of decided transactions were aborted by Kafka "
        "(a fence, an operator's kafka-transactions.sh abort, or the driver down longer than "
        f"kafka.transaction.timeout.ms={timeout_ms}), or may have committed where said, and "
        "the log no longer holds their records (retention or compaction removed them), so "
        "they could not be copied: their records are LOST. This is reported once and final "
        "(`eoskafka txns` lists it); the query goes on. Rerun that input range if you need "
        "the rows: " + "; ".join(lost))


def _lost_behind(decision: Decision, recovery: list[TxnHandoff]) -> list[TxnHandoff]:
    """The lost transactions a recovery copies from: named in its hand-off, or, for an
    older eoskafka's replay transactions, the decision's ``lost_handoffs``."""
    out: dict[str, TxnHandoff] = {}
    for h in recovery:
        named = lost_of(h)
        for gone in named if named is not None else decision.lost_handoffs:
            out.setdefault(txn_key(gone), gone)
    return list(out.values())


def _legacy_uncovered(decision: Decision, recovery: list[TxnHandoff]) -> list[TxnHandoff]:
    """Lost transactions an older eoskafka's committed replay transactions did not stand in
    for: each replay transaction covers one lost transaction, once (finding 1 of issue 22:
    one was recorded for two)."""
    legacy = [h for h in recovery if lost_of(h) is None]
    if not legacy:
        return []
    covered: set[str] = set()
    seen: set[str] = set()
    for h in legacy:
        if txn_key(h) not in seen:
            seen.add(txn_key(h))
            covered.add(str(h.extra.get("replaces")))
    return [h for h in decision.lost_handoffs if txn_key(h) not in covered]
