"""The driver's side of the exactly-once protocol, as plain Python (no Spark).

Spark calls ``streamWriter()`` in two driver-side places (docs/design.md, "Where each part runs"):
the planning worker before a batch's tasks start, and a fresh commit/abort
worker. ``prepare()`` belongs to the first only: it rolls unfinished decisions
forward (invariant 2) and fences the pool when the last batch did not end
cleanly or this is a new run (invariant 5). ``commit()`` and ``abort()`` run
in the second and never fence ids of transactions about to be committed.

Every change to a decision is a transition of :mod:`..decisions.states`; a decision is
keyed by the lineage (query id, or batch-write id) and the batch id (invariant 8). Decided
transactions that Kafka aborted are copied from the log by a recovery transaction
(:mod:`.recovery`; invariant 10) wherever the loss is found: in ``commit()``, in the
roll-forward, or when a LOST decision (left by a development build before 0.1.0) replays.

>>> protocol = DriverProtocol(ids, log, wire_factory, owner=fp, lineage=query_id,
...                           transaction_timeout_ms=60000)      # doctest: +SKIP
>>> protocol.commit(batch_id=7, handoffs=[...], tasks=2)        # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from ...errors import (
    DecisionLogConflictError,
    TransactionLostError,
)
from ...faults import fault_point
from ...timings import Phases
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import UNFINISHED, Event, State, transition
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .aborting import BATCH_WRITE, Aborting, mark_topic_of
from .batch_identity import BatchIdentity, identity_of, refuse_other_batch
from .claims import (
    claim_at_first_commit,
    claim_prefix,
    mark_write_committing,
)
from .committer import FinishReport, Liveness, finish
from .confirming import confirm
from .lanes import opening_lanes
from .log_copy import txn_key
from .outcomes import Outcomes
from .pool_upkeep import PoolOwner, clean_up, fence_pool
from .previous_write import previous_write_completed
from .refusals import refuse_dead, refuse_foreign, refuse_superseded
from .write_outcome import unknown_without_log

log = logging.getLogger(__name__)

#: Past a transaction's own timeout, how long until its coordinator has surely aborted it:
#: the coordinator looks for timed-out transactions every
#: transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default).
_TIMEOUT_CHECK_SLACK_S = 15.0


class DriverProtocol(Outcomes, Aborting):
    """Recovery, commit, abort and fencing for one query's (or one batch write's) sink.

    ``owner`` fingerprints the decision log's location (the prefix claim's token),
    ``checkpoint`` the query's checkpoint location (default ``owner``); ``lineage`` is
    Spark's query id (None when the driver cannot read it: the tasks' hand-offs carry it)
    or the batch write's id (``streaming=False``).
    """

    def __init__(
        self,
        ids: TransactionalIdFactory,
        decisions: DecisionLog | None,
        wire_factory: Callable[[], AbstractContextManager[KafkaWire]],
        *,
        owner: str,
        transaction_timeout_ms: int,
        checkpoint: str | None = None,
        claim_topic: str | None = None,
        claim_from_handoffs: bool = False,
        lineage: str | None = None,
        streaming: bool = True,
        spark_checkpoint: str | None = None,
        mark_topic: str | None = None,
    ) -> None:
        self.ids = ids
        self.decisions = decisions
        self.wire_factory = wire_factory
        self.owner = owner
        self.checkpoint = checkpoint or owner
        self.lineage = lineage or None
        self.streaming = streaming
        self.timeout_ms = transaction_timeout_ms
        self.claim_topic = claim_topic
        #: Spark's checkpoint location itself (not a fingerprint): where ``offsets/<N>``
        #: tells which batch a batch id stands for (invariant 13; batch_identity.py).
        self.spark_checkpoint = spark_checkpoint
        #: The topic the abort marks (and a batch write's "committing" mark) are kept on
        #: (claims.py); None: no marks.
        self.mark_topic = mark_topic if mark_topic is not None else claim_topic
        #: A ``topic`` column (no claim_topic): claim on the first topic a commit writes.
        self.claim_from_handoffs = claim_from_handoffs
        self.last_report: FinishReport | None = None
        #: Seconds of each step of the last commit() (prepare, lookup, liveness, decision,
        #: endtxn, done, cleanup).
        self.last_phases: dict[str, float] = {}
        #: How long an unknown EndTxn outcome is retried: until the transaction's own
        #: timeout has surely passed (after that nothing will change it but us).
        self.commit_deadline_s = transaction_timeout_ms / 1000 + _TIMEOUT_CHECK_SLACK_S

    # -- planning worker -----------------------------------------------------------------------

    def prepare(self, *, new_run: bool) -> None:
        """Before any task of the next (or replayed) batch: roll forward, then fence if needed.

        For a batch write (``streaming=False``) an earlier write's decision it finishes is
        reported once, as :class:`PreviousWriteCompletedError`: this write may be its rerun.
        """
        if self.decisions is None:
            return
        timed = Phases("prepare")
        with self.wire_factory() as wire:
            timed.mark("connect")
            self._bind()
            timed.mark("bind")
            claim_topic = self._claim_topic()
            if claim_topic is not None:
                claim_prefix(wire, self.ids.prefix, self.owner, claim_topic,
                             lineage=self.lineage if self.streaming else None,
                             log=self.decisions if self.streaming else None)
            timed.mark("claim")
            completed = []
            losses: list[str] = []
            for decision in self.decisions.unfinished():
                # Aborted decided transactions are copied from the log here, before any
                # task starts; what the log no longer holds is raised once, at the end.
                finished = self._finish(wire, decision)
                losses += [f"batch {decision.batch_id}: {d}" for d in finished.lost]
                if not self.streaming and finished.state is not State.VOID:
                    completed.append(self._view(decision.lineage).get(decision.batch_id))
            timed.mark("roll_forward")
            pool = self.decisions.pool()
            # A changed transactionalIdPrefix: the old prefix's ids may still hold
            # transactions open, so the pool is fenced (under both prefixes).
            moved = bool(pool.prefix) and pool.prefix != self.ids.prefix
            fenced = new_run or pool.size == 0 or not pool.clean or moved
            if fenced:
                fault_point("prepare.before_fence")
                fence_pool(wire, self._pool_owner(), pool, probe=True)
            timed.mark("fence")
            if fenced and self.streaming and self.mark_topic:
                self._clear_abort_marks(wire, self.mark_topic)
            timed.mark("clear_abort_mark")
            if not self.streaming:
                completed = self._untold(completed)
            self.decisions.mark_planned()
            timed.mark("mark_planned")
        timed.write(new_run=new_run)
        if losses:
            raise self._lost_error("a roll-forward", losses)
        if completed:
            raise previous_write_completed(self.decisions.location, completed)

    def _untold(self, completed: list[Decision | None]) -> list[Decision | None]:
        """Batch writes: the earlier writes finished here, and those an abort finished whose
        user has not been told (``.untold``); each is marked told: reported once."""
        assert self.decisions is not None
        seen = {(d.lineage, d.batch_id) for d in completed if d is not None}
        for untold in self.decisions.untold():
            if untold.state not in UNFINISHED and (untold.lineage, untold.batch_id) not in seen:
                completed.append(untold)
        for decision in completed:
            if decision is not None:
                self._view(decision.lineage).told(decision.batch_id)
        return completed

    def _claim_topic(self) -> str | None:
        """The ``topic`` option; with a ``topic`` column, the topic of the first commit's
        claim (claims.claim_at_first_commit), None before it."""
        if self.claim_topic is not None or not self.claim_from_handoffs:
            return self.claim_topic
        assert self.decisions is not None
        return self.decisions.pool().claim_topic or None

    def _bind(self) -> None:
        """A streaming query's log must be its own (invariant 8; DecisionLog.bind)."""
        if self.decisions is None or not self.streaming or not self.lineage:
            return
        replaced = self.decisions.bind(self.lineage, self.checkpoint)
        if replaced:
            log.warning("eoskafka: checkpoint reset: query %s replaces query %s in decision "
                        "log %s; its batch ids start again", self.lineage, replaced,
                        self.decisions.location)

    def _view(self, lineage: str) -> DecisionLog:
        assert self.decisions is not None
        return self.decisions.for_lineage(lineage)

    def _pool_owner(self) -> PoolOwner:
        assert self.decisions is not None
        return PoolOwner(self.ids, self.decisions, self.owner, self.timeout_ms)

    # -- commit worker -------------------------------------------------------------------------

    def commit(self, batch_id: int | None, handoffs: list[TxnHandoff], tasks: int) -> FinishReport:
        """Durable decision, EndTxn commit for all, mark done (invariants 1, 3, 4, 8).

        The seconds of each step are left in :attr:`last_phases` (benchmarks read them).
        """
        started = time.perf_counter()
        timed = Phases("commit")
        self.last_phases = timed.seconds
        refuse_foreign(self.ids, handoffs)
        lineage = self._lineage_of(handoffs)
        batch = BATCH_WRITE if batch_id is None else batch_id
        decisions = self._view(lineage) if self.decisions is not None else None
        identity: BatchIdentity | None = None
        transactions = sum(h.open for h in handoffs)
        # The EndTxn round's connections open while the log is read, the transactions are
        # checked and the decision is written (lanes.opening_lanes): a query's first
        # commit no longer opens them all inside its EndTxn round (benchmarks/scale/RESULTS.md).
        with self.wire_factory() as wire, opening_lanes(wire, transactions) as lanes:
            timed.mark("connect")
            if decisions is not None:
                self.lineage = self.lineage or lineage or None
                self._bind()
                previous = decisions.get(batch)
                if self.streaming and self.spark_checkpoint:  # Spark always passes it
                    identity = identity_of(self.spark_checkpoint, batch, handoffs)
                    if previous is not None:
                        refuse_other_batch(previous, identity, self.spark_checkpoint)
                if previous is not None:
                    state = self._replay(wire, previous, handoffs)
                    if state is not State.VOID:
                        return FinishReport(done=[], lost=[])
                refuse_superseded(handoffs, decisions.pool())
            timed.mark("read_log")
            found = self._refuse_dead(wire, batch, handoffs)  # batch writes too
            timed.mark("verify")
            timed.seconds.update(lookup=found.lookup_s, liveness=found.check_s)
            decided = [h for h in handoffs if h.open]
            if decisions is not None:
                if self.claim_from_handoffs and self.claim_topic is None:
                    claim_at_first_commit(wire, decisions, self.ids.prefix, self.owner,
                                          handoffs, lineage=self.lineage)
                fault_point("commit.before_decision")
                decisions.decide(batch, decided,
                                 identity.to_json() if identity is not None else None)
            elif not self.streaming and (topic := mark_topic_of(self.mark_topic, handoffs)):
                # No log: the broker keeps that this write started committing, so abort()
                # never aborts a transaction whose commit may have reached Kafka.
                mark_write_committing(wire, self.ids.prefix, topic, lineage)
            fault_point("commit.after_decision")
            timed.mark("decision")
            lanes.wait()
            timed.mark("lanes")
            report = finish(wire, handoffs, commit=True, deadline_s=self.commit_deadline_s,
                            coordinators=found.coordinators)
            timed.mark("endtxn")
            endtxn_end = time.time()
            # NONE is not proof (invariant 9): each transaction's partitions are asked for
            # its COMMIT before the batch is done; an ABORT found is copied back below.
            confirm(wire, report, deadline_s=self.commit_deadline_s)
            timed.mark("confirm")
            if decisions is None:
                if report.unknown:
                    raise unknown_without_log(report, "committing")
                if report.lost:
                    raise TransactionLostError(
                        f"the batch write could not commit {len(report.lost)} transaction(s) "
                        f"after {len(report.done)} others were (no decisionLogLocation, so "
                        "nothing can finish it later); their records are LOST: "
                        + "; ".join(report.describe_lost()))
            else:
                finished = self._record(wire, Decision(batch, tuple(decided), False,
                                                       lineage=lineage),
                                        report, doing="committing")
                if finished.state is State.VOID:
                    raise self._none_committed(batch_id, report)
                if finished.lost:
                    raise self._lost_error(f"batch {batch}", finished.lost)
                timed.mark("mark_done")
                clean_up(wire, self._pool_owner(), tasks)
                timed.mark("cleanup")
        report.seconds = time.perf_counter() - started
        timed.write(batch=batch_id, tasks=tasks, transactions=len(report.done),
                    records=sum(h.records for h in report.done), endtxn_end=endtxn_end)
        self.last_report = report
        return report

    def _lineage_of(self, handoffs: list[TxnHandoff]) -> str:
        """The lineage these hand-offs belong to; refuses another query's."""
        theirs = {h.lineage for h in handoffs if h.lineage}
        mine = self.lineage
        if len(theirs) > 1 or (mine and theirs and theirs != {mine}):
            raise DecisionLogConflictError(
                f"hand-offs of query {sorted(theirs)} reached the driver of query "
                f"{mine or 'unknown'}; refusing to commit another query's transactions")
        return mine or next(iter(theirs), "")

    def _replay(self, wire: KafkaWire, previous: Decision, fresh: list[TxnHandoff]) -> State:
        """A batch id this lineage decided before: finish that decision (copying whatever
        Kafka aborted of it from the log), then abort every transaction of the new attempt:
        they are never matched to lost ones (invariant 10). Returns VOID when the earlier
        decision committed nothing (the batch then commits as new)."""
        batch_id = previous.batch_id
        decisions = self._view(previous.lineage)
        lost: list[str] = []
        if previous.state in UNFINISHED:
            finished = self._finish(wire, previous)
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
            raise self._lost_error(f"batch {batch_id}", lost)
        return state

    def _mark_pool_unclean(self) -> None:
        assert self.decisions is not None
        pool = self.decisions.pool()
        if pool.clean:
            pool.clean = False
            self.decisions.save_pool(pool)

    def _refuse_dead(self, wire: KafkaWire, batch_id: int,
                     handoffs: list[TxnHandoff]) -> Liveness:
        planned = self.decisions.planned_at() if self.decisions is not None else None
        return refuse_dead(wire, batch_id, handoffs, deadline_s=self.commit_deadline_s,
                           timeout_ms=self.timeout_ms, planned_at=planned,
                           streaming=self.streaming)
