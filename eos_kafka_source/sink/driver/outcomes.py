"""What a decided batch becomes once its EndTxns are answered and confirmed from the log.

For live commits and roll-forwards alike: every transaction answered NONE is confirmed
from its partitions' markers (:mod:`.confirming`, invariant 9); one Kafka aborted is copied
back from the log by a recovery transaction (:mod:`.recovery`, invariant 10); a batch none
of whose transactions committed has its decision withdrawn and fails, to be replayed (or,
a batch write, rerun). Errors are worded by the write policy (:mod:`.write_policy`).
Runs on: the driver (commit and abort workers, planning worker's roll-forward).
"""

from __future__ import annotations

import logging

from ...errors import TransactionLostError
from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import Event, Finished, State, commit_event, transition
from .committer import FinishReport, finish
from .config import BATCH_WRITE, DriverConfig
from .confirming import confirm
from .recovery import Recovery
from .refusals import raise_if_too_long
from .write_policy import WritePolicy

log = logging.getLogger(__name__)


class Outcomes:
    """Finishing decided batches of one decision log, under one write policy."""

    def __init__(self, config: DriverConfig, decisions: DecisionLog,
                 policy: WritePolicy) -> None:
        self.config = config
        self.decisions = decisions
        self.policy = policy

    def view(self, lineage: str) -> DecisionLog:
        return self.decisions.for_lineage(lineage)

    def recovery(self) -> Recovery:
        return Recovery(self.config.ids, self.config.timeout_ms, self.config.commit_deadline_s,
                        self.view)

    def finish(self, wire: KafkaWire, decision: Decision) -> Finished:
        """Finish an unfinished decision (DECIDED, LOST or RECOVERING). An unknown outcome
        keeps it as it is and raises.

        An EndTxn answering NONE is confirmed from the log (confirming.py: an operator's
        abort of one partition), as in a live commit."""
        if decision.state is State.RECOVERING:
            return self.recovery().commit(wire, decision)
        if decision.state is State.LOST:  # left by a development build before 0.1.0
            return self.recovery().copy(wire, decision, list(decision.lost_handoffs))
        assert decision.state is State.DECIDED, decision.state
        deadline_s = self.config.commit_deadline_s
        report = finish(wire, list(decision.handoffs), commit=True, deadline_s=deadline_s)
        confirm(wire, report, deadline_s=deadline_s)
        return self.record(wire, decision, report, doing="rolling it forward")

    def record(self, wire: KafkaWire, decision: Decision, report: FinishReport, *,
               doing: str, decisions: DecisionLog | None = None) -> Finished:
        """The transition a DECIDED batch takes once its EndTxns have been answered; the
        aborted ones among them are copied from the log (LOST -> RECOVERING -> DONE).
        ``decisions``: the decision's lineage's log, where the caller has it."""
        batch_id = decision.batch_id
        decisions = decisions or self.view(decision.lineage)
        event = commit_event(len(report.done), len(report.lost), len(report.unknown))
        if event is Event.NONE_COMMITTED and (report.uncertain or report.partly_committed):
            # An earlier unknown outcome, or a transaction committed in some partitions:
            # something may be visible, so the decision is never voided.
            event = Event.SOME_ABORTED
        finished = Finished(transition(State.DECIDED, event))
        if event is Event.UNKNOWN:
            raise self.policy.outcome_unknown(batch_id, report, doing)
        if event is Event.ALL_COMMITTED:
            fault_point("commit.before_done")
            decisions.mark_done(batch_id)
            fault_point("commit.after_done")
            return finished
        if event is Event.NONE_COMMITTED:
            # Nothing of the batch committed: withdrawing the decision lets it replay as new.
            decisions.void(batch_id)
            return finished  # nothing lost: the batch replays
        log.warning("eoskafka: batch %s: %d decided transaction(s) were aborted by Kafka after "
                    "others committed (a fence, an operator's abort, or the driver down longer "
                    "than kafka.transaction.timeout.ms=%d); copying their records from the "
                    "log: %s", batch_id, len(report.lost), self.config.timeout_ms,
                    "; ".join(report.describe_lost()))
        return self.recovery().copy(wire, decision, [h for h, _ in report.lost])

    def lost_error(self, where: str, lost: list[str]) -> TransactionLostError:
        return self.policy.lost_error(where, lost, self.config.timeout_ms)

    def none_committed(self, batch_id: int | None, report: FinishReport) -> Exception:
        """Kafka aborted every decided transaction (fenced, expired, an operator's abort):
        nothing was written and the decision is withdrawn; the error says what to do."""
        raise_if_too_long(BATCH_WRITE if batch_id is None else batch_id, report.lost,
                          timeout_ms=self.config.timeout_ms,
                          planned_at=self.decisions.planned_at(),
                          streaming=self.policy.streaming)
        return self.policy.none_committed(batch_id, "; ".join(report.describe_lost()))
