"""The abort side of the driver's protocol: what ``abort()`` does, and the abort marks.

Spark calls ``abort()`` (commit worker) when a batch fails, and after ``commit()`` raised.
It never aborts a transaction its decision stands for: a decided batch is rolled forward
first (invariant 3). The durable steps, in order: the pool marked not clean (with the
lineage whose abort mark the restart clears), the abort mark, the roll-forward, the
aborts, the fencing. ``prepare()`` clears the marks after its own fencing
(:meth:`Aborting._clear_abort_marks`).
Runs on: the driver (commit worker; the mark clearing in the planning worker).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import UNFINISHED, State
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .claims import clear_batch_aborted, mark_batch_aborted, mark_write_aborted
from .committer import finish
from .log_copy import txn_key
from .pool_upkeep import PoolOwner, fence_pool
from .recovery import Finished
from .write_outcome import abort_without_log, write_committed

log = logging.getLogger(__name__)
#: The batch id a batch write's decision is recorded under (its lineage is the write id).
BATCH_WRITE = 0


class Aborting:
    """``abort()`` and the abort marks, mixed into ``DriverProtocol`` (protocol.py), which
    provides what is declared here."""

    ids: TransactionalIdFactory
    decisions: DecisionLog | None
    wire_factory: Callable[[], AbstractContextManager[KafkaWire]]
    lineage: str | None
    streaming: bool
    mark_topic: str | None
    timeout_ms: int
    commit_deadline_s: float

    def _view(self, lineage: str) -> DecisionLog:
        raise NotImplementedError

    def _finish(self, wire: KafkaWire, decision: Decision) -> Finished:
        raise NotImplementedError

    def _lineage_of(self, handoffs: list[TxnHandoff]) -> str:
        raise NotImplementedError

    def _pool_owner(self) -> PoolOwner:
        raise NotImplementedError

    def abort(self, batch_id: int | None, handoffs: list[TxnHandoff],
              tasks: int) -> None:
        """Abort a batch's transactions; tolerate a batch that was already (being) committed.

        Every transaction its decision stands for (decided and recovery ones) is rolled
        forward first, never aborted (invariant 3), recovery ones included: aborting one
        would lose the records it copies. Order of the
        durable steps: pool not clean (and the lineage whose mark the restart clears),
        the abort mark, roll-forward, abort, fence. A batch write it finishes raises
        :class:`WriteCommittedError` (Spark reports the write failed; it is committed)."""
        batch = BATCH_WRITE if batch_id is None else batch_id
        lineage = self._lineage_of(handoffs)
        with self.wire_factory() as wire:
            if self.decisions is None:
                abort_without_log(wire, self.ids, mark_topic_of(self.mark_topic, handoffs),
                                  lineage, handoffs, tasks,
                                  self.timeout_ms, min(self.commit_deadline_s,
                                                       wire.config.api_timeout_s))
                return
            decisions = self._view(lineage)
            # Not clean first: if anything below fails or meets an unknown
            # outcome, the restart still fences the pool and clears the abort marks of the
            # lineages recorded here (prepare), even where it cannot read its query id.
            pool = self.decisions.pool()
            pool.size = max(pool.size, tasks)
            pool.clean = False
            marking = self.streaming and batch_id is not None and bool(self.mark_topic) and \
                bool(lineage)
            if marking and lineage not in pool.marked:
                pool.marked.append(lineage)
            self.decisions.save_pool(pool)
            self._mark_aborted(wire, batch, lineage, marking)
            fault_point("abort.after_mark")
            kept: set[str] = set()
            finished: Decision | None = None
            previous = decisions.get(batch)
            if previous is not None:
                if not self.streaming:
                    decisions.mark_untold(batch)  # before the roll-forward: a crash keeps it
                # commit() raised after the decision: it stands, roll it forward (an
                # unknown outcome raises here, before any fencing could abort it).
                state = previous.state
                if state in UNFINISHED:
                    state = self._finish(wire, previous).state
                    previous = decisions.get(batch) or previous
                kept = {txn_key(h) for h in previous.committing}
                if not self.streaming:
                    if state is State.VOID:
                        decisions.told(batch)  # nothing of it committed: nothing to tell
                    else:
                        finished = previous
            finish(wire, [h for h in handoffs if txn_key(h) not in kept],
                   commit=False, deadline_s=wire.config.api_timeout_s)
            # Failed or stopped tasks (None messages) may hold open transactions; every
            # decision is finished by now, so no id holds one waiting to commit.
            fence_pool(wire, self._pool_owner(), self.decisions.pool(), probe=False)
            fault_point("abort.after_fence")
            pool = self.decisions.pool()
            pool.clean = False
            self.decisions.save_pool(pool)
        if finished is not None:
            raise write_committed(finished, self.decisions.location)

    def _mark_aborted(self, wire: KafkaWire, batch: int, lineage: str,
                      marking: bool) -> None:
        """The abort mark a late task checks (claims.py), before the fencing."""
        if not self.streaming and self.mark_topic is not None:
            mark_write_aborted(wire, self.ids.prefix, self.mark_topic, lineage)
        elif marking:
            assert self.mark_topic is not None
            try:  # best effort: the fencing is what the guarantee rests on
                mark_batch_aborted(wire, self.ids.prefix, self.mark_topic, lineage, batch)
            except Exception:  # noqa: BLE001 - the abort goes on and fences
                log.warning("eoskafka: could not mark batch %s aborted; a late task may hold "
                            "a transaction open until the next start", batch, exc_info=True)

    def _clear_abort_marks(self, wire: KafkaWire, topic: str) -> None:
        """After the fencing: an abort left the pool unclean, this is the restart, its
        fencing has ended every earlier task's transaction, and its replay of the batch must
        write. (Not only on a new run: a query restarted in the same session reuses the
        planning worker, which then takes it for the same run.) The lineages come from the
        pool state the abort wrote (a planning worker that cannot read its query id would
        otherwise never clear them), and this query's own."""
        assert self.decisions is not None
        pool = self.decisions.pool()
        lineages = list(dict.fromkeys([*pool.marked, *([self.lineage] if self.lineage else [])]))
        for lineage in lineages:
            clear_batch_aborted(wire, self.ids.prefix, topic, lineage)
        fault_point("prepare.after_clear_mark")
        if pool.marked:
            pool = self.decisions.pool()
            pool.marked = [m for m in pool.marked if m not in lineages]
            self.decisions.save_pool(pool)

def mark_topic_of(topic: str | None, handoffs: list[TxnHandoff]) -> str | None:
    """Where a batch write without a log keeps its "committing" mark: its ``topic`` option,
    else the first topic its transactions wrote to (a ``topic`` column)."""
    return topic or next((t for h in handoffs for t, _, _ in h.partitions), None)
