"""Recovery: a decision's LOST -> RECOVERING -> DONE path, copying from the log.

When the log shows that Kafka aborted some decided transactions of a batch (a fence, an
operator's ``kafka-transactions.sh abort``, the driver down longer than
``kafka.transaction.timeout.ms``), their records are still in the output partitions. The
driver copies them (:mod:`.log_copy`, :mod:`.copy_stream`) into recovery transactions on
``<prefix>-recovery``, each recorded in the decision's ``.recovery`` before its EndTxn, and
marks the batch done once every copied partition shows a COMMIT marker (docs/design.md,
invariants 10 and 16). A recovery transaction aborted in some partitions (an operator's
abort of the copy holding the LSO, a timeout) is not copied again in full: only the
segments whose partition it did not commit. A lost batch too large for one transaction is
copied in several, in bounded memory. It never matches a replay's transactions to lost
ones. Each durable step is a fault point (invariant 14): ``recover.after_write``,
``recover.after_record``, ``recover.after_part``, ``recover.before_done``.

What the log no longer holds (retention, compaction) is lost: the batch is marked done with
those partitions named, and the caller reports it once. A log that cannot be read now is
read again until ``kafka.default.api.timeout.ms`` has passed (:func:`.txn_log.read_again`);
still unreadable then, or an unknown EndTxn outcome, raises and keeps the decision
unfinished: a failed read taken for an empty one would make a loss final that a later read
could still copy.
Runs on: the driver (planning worker's roll-forward, commit and abort workers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...errors import TransactionLostError, TransactionOutcomeUnknownError
from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import Event, Finished, State, transition
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .committer import finish, outcome_unknown
from .confirming import confirm
from .copy_stream import CopyLimits, write_part
from .log_copy import (
    CopyPlan,
    Segment,
    copied_of,
    describe_copy,
    lost_of,
    missing,
    plan_of,
    read_lost,
    txn_key,
)
from .txn_log import read_again, read_log

log = logging.getLogger(__name__)

#: Recovery transactions in a row that Kafka aborted before a run gives up (and the next run
#: goes on from what they committed).
_STALLED_ROUNDS = 3


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
        """LOST -> RECOVERING: plan the copy from the lost transactions' partitions, write
        the first recovery transaction, record it before its EndTxn; then go on
        (:meth:`commit`). A log that cannot be read now raises and leaves the decision
        unfinished."""
        batch_id = decision.batch_id
        decisions = self.view(decision.lineage)
        limits = CopyLimits.current()
        try:
            plan = read_lost(wire, lost, deadline_s=self.deadline_s,
                             fetch_bytes=limits.fetch_bytes)
        except TransactionOutcomeUnknownError:
            transition(State.LOST, Event.UNKNOWN)
            raise
        if not plan.segments:
            state = transition(State.LOST, Event.UNRECOVERABLE)
            decisions.mark_done(batch_id, plan.unrecoverable, [])
            report_loss(batch_id, plan.unrecoverable)
            return Finished(state, plan.unrecoverable)
        first = self._write(wire, decision, plan.segments, limits, plan, lost)
        transition(State.LOST, Event.COPIED)
        decisions.record_recovery(batch_id, [first])
        fault_point("recover.after_record")
        return self._go_on(wire, replace(decision, recovery=(first,)), plan, limits)

    def commit(self, wire: KafkaWire, decision: Decision) -> Finished:
        """RECOVERING -> DONE: end the last recorded recovery transaction, read from every
        recorded one which partitions committed, and copy what is still missing in further
        recovery transactions (each recorded before its EndTxn) until nothing is."""
        recovery = list(decision.recovery or ())
        if any(lost_of(h) is None for h in recovery):
            return self._legacy(wire, decision, recovery)
        plan = plan_of(recovery)
        if plan is None:  # recorded by an eoskafka that copied whole partitions at once
            plan = read_lost(wire, _lost_behind(decision, recovery), deadline_s=self.deadline_s)
        return self._go_on(wire, decision, plan, CopyLimits.current())

    def _go_on(self, wire: KafkaWire, decision: Decision, plan: CopyPlan,
               limits: CopyLimits) -> Finished:
        batch_id = decision.batch_id
        decisions = self.view(decision.lineage)
        recovery = list(decision.recovery or ())
        outcomes: dict[str, dict[tuple[str, int], bool]] = {}
        before: list[Segment] = []
        stalled = 0
        while True:
            if recovery:
                self._end(wire, batch_id, recovery[-1])
            committed = self._committed(wire, batch_id, recovery, outcomes, limits)
            todo = missing(plan.segments, committed)
            if not todo:
                break
            stalled = stalled + 1 if todo == before else 0
            if stalled >= _STALLED_ROUNDS:  # each copy aborted in turn: try at the next run
                transition(State.RECOVERING, Event.UNKNOWN)
                raise TransactionOutcomeUnknownError(
                    f"batch {batch_id}: {stalled} recovery transactions in a row were aborted "
                    "by Kafka (an operator's abort, or a transaction timeout shorter than one "
                    "copy takes); the decision is kept and its copy goes on at the next run")
            before = todo
            transition(State.RECOVERING, Event.RECOVERY_PARTIAL)
            fault_point("recover.after_part")
            recovery.append(self._write(wire, decision, todo, limits))
            decisions.append_recovery(batch_id, recovery)
            fault_point("recover.after_record")
        fault_point("recover.before_done")
        state = transition(State.RECOVERING, Event.RECOVERY_COMMITTED)
        decisions.mark_done(batch_id, plan.unrecoverable, [])
        decisions.clear_recovery(batch_id)
        log.warning("eoskafka: batch %s: copied %d records of %d aborted partition(s) from the "
                    "log in %d recovery transaction(s)", batch_id,
                    sum(s.records for s in plan.segments), len(plan.segments), len(recovery))
        report_loss(batch_id, plan.unrecoverable)
        return Finished(state, plan.unrecoverable)

    def _write(self, wire: KafkaWire, decision: Decision, todo: list[Segment],
               limits: CopyLimits, plan: CopyPlan | None = None,
               lost: list[TxnHandoff] | None = None) -> TxnHandoff:
        """The next recovery transaction, written and left open (not yet recorded); a log
        that cannot be read now is read again (a copy cut short is aborted, never recorded)."""
        handoff, copied, _ = read_again(wire, f"batch {decision.batch_id}'s copy", lambda left:
                                        write_part(wire, self.ids, todo, limits=limits,
                                                   timeout_ms=self.timeout_ms,
                                                   deadline_s=max(left, 1.0),
                                                   lineage=decision.lineage,
                                                   batch_id=decision.batch_id),
                                        deadline_s=self.deadline_s)
        fault_point("recover.after_write")
        return replace(handoff, extra=describe_copy(copied, plan, lost))

    def _end(self, wire: KafkaWire, batch_id: int, last: TxnHandoff) -> None:
        """EndTxn(commit) of the last recorded recovery transaction (the earlier ones were
        ended before it was written); an unknown outcome keeps the decision and raises."""
        report = finish(wire, [last], commit=True, deadline_s=self.deadline_s)
        if report.unknown:
            transition(State.RECOVERING, Event.UNKNOWN)
            raise outcome_unknown(batch_id, report, "committing the copy of lost transactions")

    def _committed(self, wire: KafkaWire, batch_id: int, recovery: list[TxnHandoff],
                   outcomes: dict[str, dict[tuple[str, int], bool]],
                   limits: CopyLimits) -> list[Segment]:
        """The copied segments whose partition of their recovery transaction shows COMMIT,
        read from the log (``outcomes`` keeps what was read: markers are final)."""
        deadline = time.monotonic() + self.deadline_s
        out: list[Segment] = []
        for h in recovery:
            key = txn_key(h)
            if key not in outcomes and h.open:
                found = read_log(wire, h, fetch_bytes=limits.fetch_bytes,
                                 deadline_s=max(deadline - time.monotonic(), 1.0))
                if found.pending:
                    transition(State.RECOVERING, Event.UNKNOWN)
                    raise TransactionOutcomeUnknownError(
                        f"batch {batch_id}: recovery {h.describe()}: {found.why}: its outcome "
                        "is not in the log yet; the decision is kept and finished later")
                # A partition whose records and marker were deleted cannot be read: its
                # copy's source is gone too, so it counts as committed (EndTxn's word).
                outcomes[key] = {(p.topic, p.partition): p.marker is not False
                                 for p in found.partitions}
            marks = outcomes.get(key, {})
            out += [s for s in copied_of(h)
                    if s.records == 0 or marks.get((s.topic, s.partition), False)]
        return out

    def _legacy(self, wire: KafkaWire, decision: Decision,
                recovery: list[TxnHandoff]) -> Finished:
        """A development build's (before 0.1.0) recovery by replay transactions, which a
        decision log it left may still hold: commit them; the lost
        transactions they did not stand in for (or that were aborted in turn) are copied
        from the log."""
        batch_id = decision.batch_id
        decisions = self.view(decision.lineage)
        report = finish(wire, recovery, commit=True, deadline_s=self.deadline_s)
        confirm(wire, report, deadline_s=self.deadline_s)
        if report.unknown:
            transition(State.RECOVERING, Event.UNKNOWN)
            raise outcome_unknown(batch_id, report, "committing the copy of lost transactions")
        left = (list(decision.lost_handoffs) if report.lost
                else _legacy_uncovered(decision, recovery))
        if left:
            transition(State.RECOVERING, Event.RECOVERY_LOST)
            decisions.mark_done(batch_id, [], left)
            decisions.clear_recovery(batch_id)
            return self.copy(wire, replace(decision, recovery=None, lost_handoffs=tuple(left)),
                             left)
        fault_point("recover.before_done")
        state = transition(State.RECOVERING, Event.RECOVERY_COMMITTED)
        decisions.mark_done(batch_id, [], [])
        decisions.clear_recovery(batch_id)
        return Finished(state)


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
    """The lost transactions a recovery copies from, as its hand-offs name them."""
    out: dict[str, TxnHandoff] = {}
    for h in recovery:
        for gone in lost_of(h) or ():
            out.setdefault(txn_key(gone), gone)
    return list(out.values())


def _legacy_uncovered(decision: Decision, recovery: list[TxnHandoff]) -> list[TxnHandoff]:
    """Lost transactions the committed replay transactions of a development build (before
    0.1.0) did not stand in for: each replay transaction covers one lost transaction, once
    (those builds could record one replay for two lost transactions, losing one's records)."""
    covered: set[str] = set()
    seen: set[str] = set()
    for h in recovery:
        if txn_key(h) not in seen:
            seen.add(txn_key(h))
            covered.add(str(h.extra.get("replaces")))
    return [h for h in decision.lost_handoffs if txn_key(h) not in covered]
