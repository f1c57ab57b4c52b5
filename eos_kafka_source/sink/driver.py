"""The driver's side of the exactly-once protocol, as plain Python (no Spark).

Spark calls ``streamWriter()`` in two driver-side places (DESIGN.md section 3):
the planning worker before a batch's tasks start, and a fresh commit/abort
worker. ``prepare()`` belongs to the first only: it rolls decided batches
forward (invariant 2) and fences the pool when the last batch did not end
cleanly or this is a new run (invariant 5). ``commit()`` and ``abort()`` run
in the second and never fence ids of transactions about to be committed.

>>> protocol = DriverProtocol(options, wire_factory)      # doctest: +SKIP
>>> protocol.commit(batch_id=7, handoffs=[...])           # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..errors import TimeoutError_, TransactionLostError, TransactionOutcomeUnknownError
from ..faults import fault_point
from ..wire import TXN_PROTOCOL, KafkaWire, ProducerIdentity
from .claims import claim_prefix
from .committer import FinishReport, finish, liveness
from .decision_log import Decision, DecisionLog, PoolState
from .fencing import fence, fence_identities, probe_beyond
from .handoff import TxnHandoff
from .naming import TransactionalIdFactory

log = logging.getLogger(__name__)

#: Past a transaction's own timeout, how long until its coordinator has surely aborted it:
#: the coordinator looks for timed-out transactions every
#: transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by default).
_TIMEOUT_CHECK_SLACK_S = 15.0
#: Aborts give up sooner: the fencing that follows them aborts whatever is still open.
_ABORT_DEADLINE_S = 30.0


class DriverProtocol:
    """Recovery, commit, abort and fencing for one query's sink."""

    def __init__(
        self,
        ids: TransactionalIdFactory,
        decisions: DecisionLog | None,
        wire_factory: Callable[[], KafkaWire],
        *,
        owner: str,
        transaction_timeout_ms: int,
        claim_topic: str | None = None,
    ) -> None:
        self.ids = ids
        self.decisions = decisions
        self.wire_factory = wire_factory
        self.owner = owner
        self.timeout_ms = transaction_timeout_ms
        self.claim_topic = claim_topic
        self.last_report: FinishReport | None = None
        #: How long an unknown EndTxn outcome is retried: until the transaction's own
        #: timeout has surely passed (after that nothing will change it but us).
        self.commit_deadline_s = transaction_timeout_ms / 1000 + _TIMEOUT_CHECK_SLACK_S

    # -- planning worker -----------------------------------------------------------------------

    def prepare(self, *, new_run: bool) -> None:
        """Before any task of the next (or replayed) batch: roll forward, then fence if needed."""
        if self.decisions is None:
            return
        with self.wire_factory() as wire:
            if self.claim_topic is not None:
                claim_prefix(wire, self.ids.prefix, self.owner, self.claim_topic)
            for decision in self.decisions.undone():
                # A loss is recorded, not raised: the batch about to run is this one's
                # replay, whose commit rewrites the lost task partitions or fails LOST.
                self._roll_forward(wire, decision.batch_id, list(decision.handoffs),
                                   raise_lost=False)
            pool = self.decisions.pool()
            if new_run or pool.size == 0 or not pool.clean:
                self._fence_pool(wire, pool, probe=True)
            self.decisions.mark_planned()

    def _roll_forward(self, wire: KafkaWire, batch_id: int, handoffs: list[TxnHandoff], *,
                      raise_lost: bool = True) -> None:
        """Finish a recorded decision; unknown outcomes keep it undone (and raise)."""
        assert self.decisions is not None
        report = finish(wire, handoffs, commit=True, deadline_s=self.commit_deadline_s)
        if report.unknown:
            self._raise_unknown(batch_id, report, "rolling it forward")
        lost = report.describe_lost()
        self.decisions.mark_done(batch_id, lost, [h for h, _ in report.lost])
        log.warning("eoskafka: rolled batch %s forward: %d transactions committed, %d lost",
                    batch_id, len(report.done), len(report.lost))
        if lost:
            log.error("eoskafka: batch %s: %d decided transaction(s) were aborted before the "
                      "restarted driver could commit them (down longer than "
                      "kafka.transaction.timeout.ms=%d?); the replay of the batch rewrites "
                      "them if it writes the same rows, else fails with "
                      "EOSKAFKA_TRANSACTION_LOST: %s", batch_id, len(lost), self.timeout_ms,
                      "; ".join(lost))
        if lost and raise_lost:
            raise TransactionLostError(
                f"batch {batch_id} was decided but {len(lost)} of its transactions could not be "
                "committed when it was rolled forward (aborted by Kafka: the driver was "
                f"probably down longer than kafka.transaction.timeout.ms={self.timeout_ms}); "
                "their records are LOST unless the replay of this batch rewrites them: "
                + "; ".join(lost)
            )

    def _raise_unknown(self, batch_id: int | None, report: FinishReport, doing: str) -> None:
        unknown = report.describe_unknown()
        raise TransactionOutcomeUnknownError(
            f"batch {batch_id}: the outcome of {len(unknown)} EndTxn(s) is unknown after "
            f"{report.seconds:.0f} s of {doing} (their coordinator moved or could not be "
            "reached); the decision is kept and the batch fails: the restarted query rolls "
            "it forward before any task starts, committing each transaction once. Check the "
            "brokers hosting __transaction_state. " + "; ".join(unknown)
        )

    def _fence_pool(self, wire: KafkaWire, pool: PoolState, *, probe: bool) -> None:
        fenced = fence_identities(wire, self.ids.pool(pool.size), self.timeout_ms)
        size = pool.size
        if probe:
            size, more = probe_beyond(wire, self.ids.for_task, pool.size, self.timeout_ms,
                                      known=pool.fenced_epochs)
            fenced.update(more)
            size = max(size, pool.size)
        _remember(pool, fenced)
        pool.size = size
        pool.prefix, pool.owner = self.ids.prefix, self.owner
        pool.clean = True
        assert self.decisions is not None
        self.decisions.save_pool(pool)

    # -- commit worker -------------------------------------------------------------------------

    def commit(self, batch_id: int | None, handoffs: list[TxnHandoff], tasks: int) -> FinishReport:
        """Durable decision, EndTxn commit for all, mark done (invariants 1, 3, 4)."""
        started = time.perf_counter()
        self._refuse_foreign(handoffs)
        coordinators = None
        with self.wire_factory() as wire:
            if self.decisions is not None and batch_id is not None:
                previous = self.decisions.get(batch_id)
                if previous is not None:
                    return self._replayed(wire, previous, handoffs)
                pool = self.decisions.pool()
                self._refuse_superseded(handoffs, pool)
                coordinators = self._refuse_dead(wire, batch_id, handoffs)
                fault_point("commit.before_decision")
                self.decisions.decide(batch_id, [h for h in handoffs if h.open])
            fault_point("commit.after_decision")
            report = finish(wire, handoffs, commit=True, deadline_s=self.commit_deadline_s,
                            coordinators=coordinators)
            if report.unknown:
                self._raise_unknown(batch_id, report, "committing")  # never void, never done
            if report.lost:
                self._after_loss(batch_id, report)
            if self.decisions is not None and batch_id is not None:
                fault_point("commit.before_done")
                self.decisions.mark_done(batch_id)
                fault_point("commit.after_done")
                self._after_commit(wire, tasks)
                self.decisions.prune()
        report.seconds = time.perf_counter() - started
        self.last_report = report
        return report

    def _replayed(self, wire: KafkaWire, previous: Decision,
                  fresh: list[TxnHandoff]) -> FinishReport:
        """A batch id seen before: finish the recorded decision, abort the new attempt's work.

        Except for task partitions whose decided transaction was lost (fenced mid-commit by
        a zombie): the replay reads the same offsets, so its task for that partition writes
        the same rows; its transaction, if it holds the same records per output partition,
        is committed in place of the lost one (recorded first, like any decision).
        """
        batch_id = previous.batch_id
        if not previous.done:
            self._roll_forward(wire, batch_id, list(previous.handoffs))
            previous = self.decisions.get(batch_id) or previous  # type: ignore[union-attr]
        recovery = list(previous.recovery or ())
        unmatched: list[TxnHandoff] = []
        if not recovery and previous.lost_handoffs:
            recovery = _replacements(list(previous.lost_handoffs), fresh)
            if not recovery:
                unmatched = list(previous.lost_handoffs)
            if recovery:
                self._refuse_dead(wire, batch_id, recovery)
                assert self.decisions is not None
                self.decisions.record_recovery(batch_id, recovery)
        kept = {(h.transactional_id, h.epoch) for h in [*previous.handoffs, *recovery]}
        duplicates = [h for h in fresh if (h.transactional_id, h.epoch) not in kept]
        finish(wire, duplicates, commit=False, deadline_s=_ABORT_DEADLINE_S)
        if recovery:
            self._recover(wire, previous, recovery)
        log.warning("eoskafka: batch %s was already committed; aborted %d replayed transactions",
                    batch_id, len(duplicates))
        if unmatched:
            # Reported once: the loss becomes final in the log (eoskafka txns shows it) and
            # later replays of the batch go on, instead of failing the query forever.
            assert self.decisions is not None
            self.decisions.mark_done(batch_id, list(previous.lost), [])
            raise TransactionLostError(
                f"batch {batch_id}: {len(unmatched)} decided transaction(s) were aborted by "
                "Kafka before the driver could commit them (down longer than "
                f"kafka.transaction.timeout.ms={self.timeout_ms}, or fenced), and no task of "
                "this replay wrote the same rows to rewrite them; their records are LOST: "
                + "; ".join(h.describe() for h in unmatched)
            )
        return FinishReport(done=[], lost=[])

    def _recover(self, wire: KafkaWire, previous: Decision, recovery: list[TxnHandoff]) -> None:
        assert self.decisions is not None
        report = finish(wire, recovery, commit=True, deadline_s=self.commit_deadline_s)
        if report.unknown:
            self._raise_unknown(previous.batch_id, report, "rewriting lost transactions")
        rewritten = {h.task_partition for h in report.done}
        still = [h for h in previous.lost_handoffs if h.task_partition not in rewritten]
        lost = [f"{h.describe()}: lost, not rewritten by a replay" for h in still]
        # Final once reported: a later replay reads the same offsets and would not match
        # either; the query goes on instead of failing at every restart.
        self.decisions.mark_done(previous.batch_id, lost, [])
        self.decisions.clear_recovery(previous.batch_id)
        log.warning("eoskafka: batch %s: replay rewrote %d lost task partition(s); %d still lost",
                    previous.batch_id, len(rewritten), len(still))
        if still:
            raise TransactionLostError(
                f"batch {previous.batch_id}: the replay could not rewrite "
                f"{len(still)} lost transaction(s) (no task wrote the same records per "
                "partition); their records are LOST: " + "; ".join(lost)
            )

    def _after_loss(self, batch_id: int | None, report: FinishReport) -> None:
        lost = report.describe_lost()
        if self.decisions is not None and batch_id is not None:
            if not report.done and not report.uncertain:
                # Every EndTxn got a definitive failure and none an unknown outcome first:
                # nothing was committed, so withdrawing the decision lets Spark replay it.
                self.decisions.void(batch_id)
                self._raise_if_too_long(batch_id, report.lost)
                raise TransactionLostError(
                    f"batch {batch_id}: no transaction could be committed (fenced or expired), "
                    "nothing was written; the batch fails and will be replayed on restart: "
                    + "; ".join(lost)
                )
            self.decisions.mark_done(batch_id, lost, [h for h, _ in report.lost])
        raise TransactionLostError(
            f"batch {batch_id}: {len(lost)} transactions could not be committed after "
            f"{len(report.done)} others were; their records are LOST unless the replay of "
            "this batch rewrites them (same rows per task partition): " + "; ".join(lost)
        )

    def _after_commit(self, wire: KafkaWire, tasks: int) -> None:
        """Fence ids this batch did not use (left by a bigger, failed batch); grow the pool."""
        assert self.decisions is not None
        pool = self.decisions.pool()
        if tasks < pool.size:
            stale = [self.ids.for_task(p) for p in range(tasks, pool.size)]
            _remember(pool, fence_identities(wire, stale, self.timeout_ms))
        if tasks > pool.size or tasks < pool.size:
            pool.size = max(pool.size, tasks)
            pool.prefix, pool.owner = self.ids.prefix, self.owner
            self.decisions.save_pool(pool)

    def _refuse_foreign(self, handoffs: list[TxnHandoff]) -> None:
        other_protocol = [h for h in handoffs if h.open and h.txn_protocol != TXN_PROTOCOL]
        if other_protocol:
            raise TransactionLostError(
                f"refusing hand-offs written with transaction protocol generation "
                f"{other_protocol[0].txn_protocol}; this driver finishes generation "
                f"{TXN_PROTOCOL} only (mixed eoskafka versions?): "
                + "; ".join(h.describe() for h in other_protocol)
            )
        foreign = [h for h in handoffs if self.ids.task_of(h.transactional_id) is None]
        if foreign:
            raise TransactionLostError(
                "refusing hand-offs that do not belong to this query's id prefix "
                f"{self.ids.prefix!r}: " + "; ".join(h.describe() for h in foreign)
            )

    def _refuse_dead(self, wire: KafkaWire, batch_id: int,
                     handoffs: list[TxnHandoff]) -> dict[str, int]:
        """Before deciding: every transaction must still be live, or nothing is committed.
        Returns where their coordinators answered."""
        found = liveness(wire, handoffs, deadline_s=self.commit_deadline_s)
        dead = found.dead
        if dead:
            self._raise_if_too_long(batch_id, dead)
            raise TransactionLostError(
                f"batch {batch_id}: {len(dead)} of its transactions were fenced after their "
                "tasks handed them over (a zombie or another attempt re-initialised the id); "
                "nothing was committed, the batch fails and will be replayed: "
                + "; ".join(f"{h.describe()}: {why}" for h, why in dead)
            )
        return found.coordinators

    def _raise_if_too_long(self, batch_id: int,
                           dead: list[tuple[TxnHandoff, str]]) -> None:
        """Fenced transactions of a batch that ran past the transaction timeout: Kafka
        aborted them, and the replay (same offsets) would take as long: say so, once."""
        assert self.decisions is not None
        planned = self.decisions.planned_at()
        elapsed_s = time.time() - planned if planned else 0.0
        if elapsed_s * 1000 < self.timeout_ms:
            return  # younger than the timeout: fenced by a zombie or a retry, not by time
        raise TimeoutError_(
            f"batch {batch_id} ran {elapsed_s:.0f} s, longer than "
            f"kafka.transaction.timeout.ms={self.timeout_ms}: Kafka aborted its "
            f"{len(dead)} transaction(s) before the driver could commit them, nothing was "
            "written. A replay reads the same offsets, so raise kafka.transaction.timeout.ms "
            "(up to the broker's transaction.max.timeout.ms) before restarting, and lower "
            "the source's maxOffsetsPerTrigger so later batches fit the timeout (a task only "
            "stalled once will commit on replay): "
            + "; ".join(f"{h.describe()}: {why}" for h, why in dead)
        )

    def _refuse_superseded(self, handoffs: list[TxnHandoff], pool: PoolState) -> None:
        stale = [h for h in handoffs
                 if h.open and pool.fenced_producers.get(h.transactional_id) == h.producer_id
                 and h.epoch <= pool.fenced_epochs.get(h.transactional_id, -1)]
        if stale:
            raise TransactionLostError(
                "refusing hand-offs whose epoch the driver has already fenced (a zombie "
                "attempt's message): " + "; ".join(h.describe() for h in stale)
            )

    # -- abort ---------------------------------------------------------------------------------

    def abort(self, batch_id: int | None, handoffs: list[TxnHandoff], tasks: int) -> None:
        """Abort a batch's transactions; tolerate a batch that was already (being) committed."""
        with self.wire_factory() as wire:
            decided: set[tuple[str, int]] = set()
            if self.decisions is not None and batch_id is not None:
                previous = self.decisions.get(batch_id)
                if previous is not None:
                    # commit() raised after the decision: the decision stands, roll forward
                    # (an unknown outcome raises here, before any fencing could abort it).
                    if not previous.done:
                        self._roll_forward(wire, batch_id, list(previous.handoffs))
                    decided = {(h.transactional_id, h.epoch) for h in previous.handoffs}
            finish(wire, [h for h in handoffs if (h.transactional_id, h.epoch) not in decided],
                   commit=False, deadline_s=_ABORT_DEADLINE_S)
            if self.decisions is not None:
                pool = self.decisions.pool()
                pool.size = max(pool.size, tasks)
                # Failed or stopped tasks (None messages) may hold open transactions; every
                # decision is done by now, so no id holds a transaction waiting to commit.
                self._fence_pool(wire, pool, probe=False)
                pool = self.decisions.pool()
                pool.clean = False
                self.decisions.save_pool(pool)
            else:
                fence(wire, [self.ids.for_task(p) for p in range(tasks)], self.timeout_ms)


def _remember(pool: PoolState, fenced: dict[str, ProducerIdentity]) -> None:
    """Record the identity each id was fenced to: older hand-offs on it are zombies."""
    for tid, who in fenced.items():
        pool.fenced_epochs[tid] = who.epoch
        pool.fenced_producers[tid] = who.producer_id


def _replacements(lost: list[TxnHandoff], fresh: list[TxnHandoff]) -> list[TxnHandoff]:
    """The replay's hand-offs that can stand in for lost ones: same task partition, same
    records per output partition (a replay of the same offsets through the same query)."""
    by_task = {h.task_partition: h for h in lost}
    return [h for h in fresh if h.open and h.task_partition in by_task
            and h.partitions == by_task[h.task_partition].partitions]
