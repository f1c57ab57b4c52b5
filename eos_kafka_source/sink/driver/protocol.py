"""The driver's side of the exactly-once protocol, as plain Python (no Spark).

Spark calls ``streamWriter()`` in two driver-side places (docs/design.md, "Where each part runs"):
the planning worker before a batch's tasks start, and a fresh commit/abort
worker. ``prepare()`` belongs to the first only: it rolls unfinished decisions
forward (invariant 2) and fences the pool when the last batch did not end
cleanly or this is a new run (invariant 5). ``commit()`` and ``abort()`` run
in the second and never fence ids of transactions about to be committed.

The protocol is composed of roles, each handed what it needs: where decisions are kept
(:mod:`.logged`, or :mod:`.unlogged` for a batch write without a log), what differs
between a streaming query and a batch write (:mod:`.write_policy`), and below them the
outcomes of a decided batch (:mod:`.outcomes`) and the abort (:mod:`.aborting`). Decided
transactions that Kafka aborted are copied from the log by a recovery transaction
(:mod:`.recovery`; invariant 10) wherever the loss is found.

>>> protocol = DriverProtocol(ids, log, wire_factory, owner=fp, lineage=query_id,
...                           transaction_timeout_ms=60000)      # doctest: +SKIP
>>> protocol.commit(batch_id=7, handoffs=[...], tasks=2)        # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack

from ...errors import DecisionLogConflictError
from ...gcpause import gc_paused
from ...timings import Phases
from ...wire import KafkaWire
from ..decisions.log import DecisionLog
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .committer import FinishReport, Liveness, finish
from .config import BATCH_WRITE, DriverConfig
from .confirming import confirm
from .keeping import Commit, DecisionKeeping
from .lanes import opening_lanes
from .logged import LoggedDecisions
from .recovery import Recovery
from .refusals import refuse_dead, refuse_foreign
from .unlogged import NoDecisionLog
from .write_policy import BatchWrite, StreamingQuery, WritePolicy


class DriverProtocol:
    """Recovery, commit, abort and fencing for one query's (or one batch write's) sink.

    ``owner`` fingerprints the decision log's location (the prefix claim's token),
    ``checkpoint`` the query's checkpoint location (default ``owner``); ``lineage`` is
    Spark's query id (None when the driver cannot read it: the tasks' hand-offs carry it)
    or the batch write's id (``streaming=False``). ``spark_checkpoint`` is Spark's
    checkpoint location itself, where ``offsets/<N>`` says which batch N is (invariant 13);
    ``mark_topic`` where abort marks are kept (default ``claim_topic``; None: no marks);
    ``claim_from_handoffs``: a ``topic`` column, claimed on the first topic a commit writes.
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
        self.config = DriverConfig(ids, owner, checkpoint or owner, transaction_timeout_ms,
                                   lineage or None, claim_topic, claim_from_handoffs)
        self.decisions = decisions
        self.wire_factory = wire_factory
        marks = mark_topic if mark_topic is not None else claim_topic
        self.policy: WritePolicy = (StreamingQuery(marks, spark_checkpoint) if streaming
                                    else BatchWrite(marks))
        self.keeper: DecisionKeeping = (
            LoggedDecisions(self.config, decisions, self.policy) if decisions is not None
            else NoDecisionLog(self.config, self.policy))
        self.last_report: FinishReport | None = None
        #: Seconds of each step of the last commit() (connect, read_log, verify, lookup,
        #: liveness, decision, lanes, endtxn, confirm, mark_done, cleanup).
        self.last_phases: dict[str, float] = {}

    # The settings every role shares (config.DriverConfig), as attributes of the protocol.
    @property
    def ids(self) -> TransactionalIdFactory:
        return self.config.ids

    @property
    def owner(self) -> str:
        return self.config.owner

    @property
    def lineage(self) -> str | None:
        return self.config.lineage

    @property
    def commit_deadline_s(self) -> float:
        """How long an unknown EndTxn outcome is retried (tests shorten it)."""
        return self.config.commit_deadline_s

    @commit_deadline_s.setter
    def commit_deadline_s(self, seconds: float) -> None:
        self.config.commit_deadline_s = seconds

    # -- planning worker -----------------------------------------------------------------------

    def prepare(self, *, new_run: bool) -> None:
        """Before any task of the next (or replayed) batch: roll forward, then fence if needed.

        For a batch write an earlier write's decision it finishes is reported once, as
        :class:`PreviousWriteCompletedError`: this write may be its rerun.
        """
        self.keeper.prepare(self.wire_factory, new_run=new_run)

    # -- commit worker -------------------------------------------------------------------------

    def commit(self, batch_id: int | None, handoffs: list[TxnHandoff], tasks: int) -> FinishReport:
        """Durable decision, EndTxn commit for all, mark done (invariants 1, 3, 4, 8): each
        step timed, its seconds left in :attr:`last_phases` (benchmarks read them)."""
        started = time.perf_counter()
        timed = Phases("commit")
        self.last_phases = timed.seconds
        refuse_foreign(self.ids, handoffs)
        commit = Commit(batch_id, BATCH_WRITE if batch_id is None else batch_id,
                        self._lineage_of(handoffs), handoffs, tasks)
        deadline_s = self.config.commit_deadline_s
        with ExitStack() as stack:
            stack.enter_context(gc_paused())  # no collection of the worker's heap mid-commit
            with timed.step("connect"):
                wire = stack.enter_context(self.wire_factory())
                # The EndTxn round's connections open while the log is read, the
                # transactions checked and the decision written (benchmarks/scale/RESULTS.md).
                lanes = stack.enter_context(opening_lanes(wire, len(commit.decided)))
            with timed.step("read_log"):
                self.keeper.read(wire, commit)
            if commit.replayed:
                return FinishReport(done=[], lost=[])
            with timed.step("verify"):
                found = self._refuse_dead(wire, commit)  # batch writes too
            timed.seconds.update(lookup=found.lookup_s, liveness=found.check_s)
            with timed.step("decision"):
                self.keeper.decide(wire, commit)
            with timed.step("lanes"):
                lanes.wait()
            with timed.step("endtxn"):
                report = finish(wire, handoffs, commit=True, deadline_s=deadline_s,
                                coordinators=found.coordinators)
            endtxn_end = time.time()
            with timed.step("confirm"):
                # NONE is not proof (invariant 9): each transaction's partitions are asked
                # for its COMMIT before the batch is done; an ABORT found is copied back.
                confirm(wire, report, deadline_s=deadline_s)
            with timed.step("mark_done"):
                self.keeper.record(wire, commit, report)
            with timed.step("cleanup"):
                self.keeper.clean_up(wire, tasks)
        report.seconds = time.perf_counter() - started
        timed.write(batch=batch_id, tasks=tasks, transactions=len(report.done),
                    records=sum(h.records for h in report.done), endtxn_end=endtxn_end)
        self.last_report = report
        return report

    def _refuse_dead(self, wire: KafkaWire, commit: Commit) -> Liveness:
        return refuse_dead(wire, commit.batch, commit.handoffs,
                           deadline_s=self.config.commit_deadline_s,
                           timeout_ms=self.config.timeout_ms,
                           planned_at=self.keeper.planned_at,
                           streaming=self.policy.streaming)

    def _lineage_of(self, handoffs: list[TxnHandoff]) -> str:
        """The lineage these hand-offs belong to; refuses another query's."""
        theirs = {h.lineage for h in handoffs if h.lineage}
        mine = self.lineage
        if len(theirs) > 1 or (mine and theirs and theirs != {mine}):
            raise DecisionLogConflictError(
                f"hand-offs of query {sorted(theirs)} reached the driver of query "
                f"{mine or 'unknown'}; refusing to commit another query's transactions")
        return mine or next(iter(theirs), "")

    # -- abort ---------------------------------------------------------------------------------

    def abort(self, batch_id: int | None, handoffs: list[TxnHandoff], tasks: int) -> None:
        """Abort a batch's transactions; tolerate a batch that was already (being) committed:
        every transaction its decision stands for is rolled forward first (invariant 3). A
        batch write it finishes raises :class:`WriteCommittedError` (Spark reports the write
        failed; it is committed)."""
        batch = BATCH_WRITE if batch_id is None else batch_id
        lineage = self._lineage_of(handoffs)
        with self.wire_factory() as wire:
            error = self.keeper.abort(wire, batch_id, batch, lineage, handoffs, tasks)
        if error is not None:
            raise error

    def _recovery(self) -> Recovery:
        """The recovery a roll-forward runs (tests drive it directly)."""
        assert isinstance(self.keeper, LoggedDecisions)
        return self.keeper.outcomes.recovery()
