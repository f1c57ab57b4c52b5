"""What a decided batch becomes once its EndTxns are answered and confirmed from the log.

Mixed into ``DriverProtocol`` (protocol.py), for its live commits and its roll-forwards
alike: every transaction answered NONE is confirmed from its partitions' markers
(:mod:`.confirming`, invariant 9); one Kafka aborted is copied back from the log by a
recovery transaction (:mod:`.recovery`, invariant 10); a batch none of whose transactions
committed has its decision withdrawn and fails, to be replayed (or, a batch write, rerun).
Errors are worded for what the user can do: a streaming query replays, a batch write
(``streaming=False``) is rerun by its user.
Runs on: the driver (commit and abort workers, planning worker's roll-forward).
"""

from __future__ import annotations

import logging

from ...errors import TransactionLostError
from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import Event, State, commit_event, transition
from ..naming import TransactionalIdFactory
from .committer import FinishReport, finish, outcome_unknown
from .confirming import confirm
from .recovery import Finished, Recovery, lost_error
from .refusals import raise_if_too_long

log = logging.getLogger(__name__)

#: The batch id a batch write's decision is recorded under (aborting.BATCH_WRITE).
_BATCH_WRITE = 0


class Outcomes:
    """Finishing decided batches; ``DriverProtocol`` provides what is declared here."""

    ids: TransactionalIdFactory
    decisions: DecisionLog | None
    streaming: bool
    timeout_ms: int
    commit_deadline_s: float

    def _view(self, lineage: str) -> DecisionLog:
        raise NotImplementedError

    def _finish(self, wire: KafkaWire, decision: Decision) -> Finished:
        """Finish an unfinished decision (DECIDED, LOST or RECOVERING). An unknown outcome
        keeps it as it is and raises.

        An EndTxn answering NONE is confirmed from the log (confirming.py: an operator's
        abort of one partition), as in a live commit."""
        if decision.state is State.RECOVERING:
            return self._recovery().commit(wire, decision)
        if decision.state is State.LOST:  # left by a development build before 0.1.0
            return self._recovery().copy(wire, decision, list(decision.lost_handoffs))
        assert decision.state is State.DECIDED, decision.state
        report = finish(wire, list(decision.handoffs), commit=True,
                        deadline_s=self.commit_deadline_s)
        confirm(wire, report, deadline_s=self.commit_deadline_s)
        return self._record(wire, decision, report, doing="rolling it forward")

    def _record(self, wire: KafkaWire, decision: Decision, report: FinishReport, *,
                doing: str) -> Finished:
        """The transition a DECIDED batch takes once its EndTxns have been answered; the
        aborted ones among them are copied from the log (LOST -> RECOVERING -> DONE)."""
        batch_id = decision.batch_id
        decisions = self._view(decision.lineage)
        event = commit_event(len(report.done), len(report.lost), len(report.unknown))
        if event is Event.NONE_COMMITTED and (report.uncertain or report.partly_committed):
            # An earlier unknown outcome, or a transaction committed in some partitions:
            # something may be visible, so the decision is never voided.
            event = Event.SOME_ABORTED
        state = transition(State.DECIDED, event)
        if event is Event.UNKNOWN:
            self._raise_unknown(batch_id, report, doing)
        if event is Event.ALL_COMMITTED:
            fault_point("commit.before_done")
            decisions.mark_done(batch_id)
            fault_point("commit.after_done")
            return Finished(state)
        if event is Event.NONE_COMMITTED:
            # Nothing of the batch committed: withdrawing the decision lets it replay as new.
            decisions.void(batch_id)
            return Finished(state)  # nothing lost: the batch replays
        log.warning("eoskafka: batch %s: %d decided transaction(s) were aborted by Kafka after "
                    "others committed (a fence, an operator's abort, or the driver down longer "
                    "than kafka.transaction.timeout.ms=%d); copying their records from the "
                    "log: %s", batch_id, len(report.lost), self.timeout_ms,
                    "; ".join(report.describe_lost()))
        return self._recovery().copy(wire, decision, [h for h, _ in report.lost])

    def _recovery(self) -> Recovery:
        return Recovery(self.ids, self.timeout_ms, self.commit_deadline_s, self._view)

    def _lost_error(self, where: str, lost: list[str]) -> TransactionLostError:
        if self.streaming:
            return lost_error(where, lost, self.timeout_ms)
        return TransactionLostError(
            f"the batch write: {len(lost)} partition(s) of its decided transactions were "
            "aborted by Kafka (a fence, an operator's kafka-transactions.sh abort, or the "
            f"driver down longer than kafka.transaction.timeout.ms={self.timeout_ms}) and the "
            "log no longer holds their records (retention or compaction removed them): those "
            "records are LOST, every other row of the write is committed. Do not rerun the "
            "whole write (its other rows would be written twice); write the rows of these "
            "partitions again if you need them: " + "; ".join(lost))

    def _raise_unknown(self, batch_id: int | None, report: FinishReport, doing: str) -> None:
        raise outcome_unknown(batch_id, report, doing, streaming=self.streaming)

    def _none_committed(self, batch_id: int | None, report: FinishReport) -> Exception:
        """Kafka aborted every decided transaction (fenced, expired, an operator's abort):
        nothing was written and the decision is withdrawn; the error says what to do."""
        assert self.decisions is not None
        raise_if_too_long(_BATCH_WRITE if batch_id is None else batch_id, report.lost,
                          timeout_ms=self.timeout_ms, planned_at=self.decisions.planned_at(),
                          streaming=self.streaming)
        why = "; ".join(report.describe_lost())
        if not self.streaming:
            return TransactionLostError(
                "the batch write could not commit any of its transactions (Kafka aborted "
                "them: fenced, expired, or an operator's abort), so nothing was written and "
                f"no row is at risk; rerun the write: {why}")
        return TransactionLostError(
            f"batch {batch_id}: no transaction could be committed (Kafka aborted them: "
            "fenced, expired, or an operator's abort), nothing was written; the batch fails "
            f"and will be replayed on restart: {why}")
