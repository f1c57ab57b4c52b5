"""The protocol's steps with a decision log: what ``prepare()``, ``commit()`` and
``abort()`` read from it and record in it.

``prepare()`` (planning worker) rolls unfinished decisions forward (invariant 2) and fences
the pool when the last batch did not end cleanly or this is a new run (invariant 5).
``commit()`` reads the batch's earlier decision (a replay is finished, its new
transactions aborted: invariant 10), records the decision before the first EndTxn, and
marks the batch done (or copies what Kafka aborted) after. Every change to a decision is a
transition of :mod:`..decisions.states`; a decision is keyed by the lineage and the batch
id (invariant 8).
Runs on: the driver (planning, commit and abort workers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from ...faults import fault_point
from ...timings import Phases
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import UNFINISHED, Event, State, transition
from ..handoff import TxnHandoff
from .aborting import Aborter
from .claims import claim_at_first_commit, claim_prefix
from .committer import FinishReport, finish
from .config import DriverConfig
from .keeping import Commit, DecisionKeeping
from .log_copy import txn_key
from .outcomes import Outcomes
from .pool_upkeep import PoolOwner, fence_pool
from .pool_upkeep import clean_up as after_commit
from .previous_write import previous_write_completed
from .refusals import refuse_superseded
from .write_policy import WritePolicy

log = logging.getLogger(__name__)


class LoggedDecisions(DecisionKeeping):
    """Decisions kept in a :class:`DecisionLog` (the exactly-once sink's default)."""

    def __init__(self, config: DriverConfig, decisions: DecisionLog,
                 policy: WritePolicy) -> None:
        self.config = config
        self.decisions = decisions
        self.policy = policy
        self.outcomes = Outcomes(config, decisions, policy)
        #: Whose pool the fencing and the clean-up after a commit look after.
        self.pool_owner = PoolOwner(config.ids, decisions, config.owner, config.timeout_ms)
        self.aborter = Aborter(self.outcomes, self.pool_owner)

    # -- planning worker -----------------------------------------------------------------------

    def prepare(self, wire_factory: Callable[[], AbstractContextManager[KafkaWire]], *,
                new_run: bool) -> None:
        """Roll forward, then fence if needed. For a batch write an earlier write's decision
        it finishes is reported once, as :class:`PreviousWriteCompletedError`: this write may
        be its rerun."""
        timed = Phases("prepare")
        with wire_factory() as wire:
            timed.mark("connect")
            self.bind()
            timed.mark("bind")
            self._claim(wire)
            timed.mark("claim")
            completed, losses = self._roll_forward(wire)
            timed.mark("roll_forward")
            fenced = self._fence(wire, new_run)
            timed.mark("fence")
            if fenced and self.policy.clears_marks:
                assert self.policy.mark_topic is not None
                self.aborter.clear_abort_marks(wire, self.policy.mark_topic)
            timed.mark("clear_abort_mark")
            if self.policy.tells_finished:
                completed = self._untold(completed)
            self.decisions.mark_planned()
            timed.mark("mark_planned")
        timed.write(new_run=new_run)
        if losses:
            raise self.outcomes.lost_error("a roll-forward", losses)
        if completed:
            raise previous_write_completed(self.decisions.location, completed)

    def _claim(self, wire: KafkaWire) -> None:
        """The prefix claim, on the ``topic`` option's topic or, with a ``topic`` column,
        on the topic of the first commit's claim (claims.claim_at_first_commit)."""
        topic = self.config.claim_topic
        if topic is None and self.config.claim_from_handoffs:
            topic = self.decisions.pool().claim_topic or None
        if topic is not None:
            lineage, decisions = self.policy.claim_scope(self.config.lineage, self.decisions)
            claim_prefix(wire, self.config.ids.prefix, self.config.owner, topic,
                         lineage=lineage, log=decisions)

    def _roll_forward(self, wire: KafkaWire) -> tuple[list[Decision | None], list[str]]:
        """Aborted decided transactions are copied from the log here, before any task
        starts; what the log no longer holds is raised once, at the end. Returns the
        decisions finished for a batch write's user, and the losses."""
        completed: list[Decision | None] = []
        losses: list[str] = []
        for decision in self.decisions.unfinished():
            finished = self.outcomes.finish(wire, decision)
            losses += [f"batch {decision.batch_id}: {d}" for d in finished.lost]
            if self.policy.tells_finished and finished.state is not State.VOID:
                completed.append(self.outcomes.view(decision.lineage).get(decision.batch_id))
        return completed, losses

    def _fence(self, wire: KafkaWire, new_run: bool) -> bool:
        pool = self.decisions.pool()
        # A changed transactionalIdPrefix: the old prefix's ids may still hold
        # transactions open, so the pool is fenced (under both prefixes).
        moved = bool(pool.prefix) and pool.prefix != self.config.ids.prefix
        fenced = new_run or pool.size == 0 or not pool.clean or moved
        if fenced:
            fault_point("prepare.before_fence")
            fence_pool(wire, self.pool_owner, pool, probe=True)
        return fenced

    def _untold(self, completed: list[Decision | None]) -> list[Decision | None]:
        """Batch writes: the earlier writes finished here, and those an abort finished whose
        user has not been told (``.untold``); each is marked told: reported once."""
        seen = {(d.lineage, d.batch_id) for d in completed if d is not None}
        for untold in self.decisions.untold():
            if untold.state not in UNFINISHED and (untold.lineage, untold.batch_id) not in seen:
                completed.append(untold)
        for decision in completed:
            if decision is not None:
                self.outcomes.view(decision.lineage).told(decision.batch_id)
        return completed

    def bind(self) -> None:
        """A streaming query's log must be its own (invariant 8; DecisionLog.bind)."""
        lineage = self.config.lineage
        if self.policy.binds_log and lineage:
            self._replaced(self.decisions.bind(lineage, self.config.checkpoint))

    def _replaced(self, replaced: str | None) -> None:
        if replaced:
            log.warning("eoskafka: checkpoint reset: query %s replaces query %s in decision "
                        "log %s; its batch ids start again", self.config.lineage, replaced,
                        self.decisions.location)

    # -- commit worker -------------------------------------------------------------------------

    def read(self, wire: KafkaWire, commit: Commit) -> None:
        self.config.lineage = lineage = self.config.lineage or commit.lineage or None
        if self.policy.binds_log and lineage:  # a streaming query's log is its own
            self._replaced(self.decisions.bind(lineage, self.config.checkpoint))
        decisions = commit.view = self.decisions.for_lineage(commit.lineage)
        previous = decisions.get(commit.batch)
        commit.identity = self.policy.identify(commit.batch, commit.handoffs, previous)
        if previous is not None:
            commit.replayed = self._replay(wire, previous, commit.handoffs) is not State.VOID
            if commit.replayed:
                return
        refuse_superseded(commit.handoffs, decisions)

    def _replay(self, wire: KafkaWire, previous: Decision, fresh: list[TxnHandoff]) -> State:
        """A batch id this lineage decided before: finish that decision (copying whatever
        Kafka aborted of it from the log), then abort every transaction of the new attempt:
        they are never matched to lost ones (invariant 10). Returns VOID when the earlier
        decision committed nothing (the batch then commits as new)."""
        batch_id = previous.batch_id
        decisions = self.outcomes.view(previous.lineage)
        lost: list[str] = []
        if previous.state in UNFINISHED:
            finished = self.outcomes.finish(wire, previous)
            if finished.state is State.VOID:
                return State.VOID
            lost = finished.lost
            previous = decisions.get(batch_id) or previous
        state = transition(previous.state, Event.REPLAYED)
        kept = {txn_key(h) for h in previous.committing}  # commit() called twice: kept
        duplicates = [h for h in fresh if txn_key(h) not in kept]
        aborted = finish(wire, duplicates, commit=False, deadline_s=wire.config.api_timeout_s)
        if not aborted.ok:
            # An abort whose outcome is not confirmed may have left its transaction open
            # (blocking every read_committed reader); the next planning fences the pool.
            self._mark_pool_unclean()
            log.warning("eoskafka: batch %s: %d replayed transaction(s) could not be aborted "
                        "for sure; the next batch fences the id pool: %s", batch_id,
                        len(aborted.lost) + len(aborted.unknown),
                        "; ".join(aborted.describe_lost() + aborted.describe_unknown()))
        log.warning("eoskafka: batch %s was already committed; aborted %d replayed transactions",
                    batch_id, len(duplicates))
        if lost:
            raise self.outcomes.lost_error(f"batch {batch_id}", lost)
        return state

    def _mark_pool_unclean(self) -> None:
        pool = self.decisions.pool()
        if pool.clean:
            pool.clean = False
            self.decisions.save_pool(pool)

    def planned_at(self) -> float | None:
        return self.decisions.planned_at()

    def decide(self, wire: KafkaWire, commit: Commit) -> None:
        decisions = commit.view
        assert decisions is not None
        if self.config.claim_from_handoffs and self.config.claim_topic is None:
            claim_at_first_commit(wire, decisions, self.config.ids.prefix, self.config.owner,
                                  commit.handoffs, lineage=self.config.lineage)
        fault_point("commit.before_decision")
        decisions.decide(commit.batch, commit.decided, commit.identity)
        commit.decision = Decision(commit.batch, tuple(commit.decided), False,
                                   lineage=commit.lineage)
        fault_point("commit.after_decision")

    def record(self, wire: KafkaWire, commit: Commit, report: FinishReport) -> None:
        assert commit.decision is not None
        finished = self.outcomes.record(wire, commit.decision, report, doing="committing",
                                        decisions=commit.view)
        if finished.state is State.VOID:
            raise self.outcomes.none_committed(commit.batch_id, report)
        if finished.lost:
            raise self.outcomes.lost_error(f"batch {commit.batch}", finished.lost)

    def clean_up(self, wire: KafkaWire, tasks: int) -> None:
        after_commit(wire, self.pool_owner, tasks)

    # -- abort ---------------------------------------------------------------------------------

    def abort(self, wire: KafkaWire, batch_id: int | None, batch: int, lineage: str,
              handoffs: list[TxnHandoff], tasks: int) -> Exception | None:
        return self.aborter.abort(wire, batch_id, batch, lineage, handoffs, tasks)
