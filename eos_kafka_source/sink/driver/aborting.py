"""The abort side of the driver's protocol with a decision log: ``abort()``, and the abort
marks.

Spark calls ``abort()`` (commit worker) when a batch fails, and after ``commit()`` raised.
It never aborts a transaction its decision stands for: a decided batch is rolled forward
first (invariant 3). The durable steps, in order: the pool marked not clean (with the
lineage whose abort mark the restart clears), the abort mark, the roll-forward, the
aborts, the fencing. ``prepare()`` clears the marks after its own fencing
(:meth:`Aborter.clear_abort_marks`). Without a decision log: write_outcome.abort_without_log.
Runs on: the driver (commit worker; the mark clearing in the planning worker).
"""

from __future__ import annotations

from ...faults import fault_point
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..decisions.states import UNFINISHED, State
from ..handoff import TxnHandoff
from .claims import clear_batch_aborted
from .committer import finish
from .log_copy import txn_key
from .outcomes import Outcomes
from .pool_upkeep import PoolOwner, fence_pool
from .write_outcome import write_committed


class Aborter:
    """Aborts a batch of one decision log's query, rolling its decision forward first."""

    def __init__(self, outcomes: Outcomes, pool_owner: PoolOwner) -> None:
        self.outcomes = outcomes
        self.pool_owner = pool_owner
        self.config = outcomes.config
        self.decisions = outcomes.decisions
        self.policy = outcomes.policy

    def abort(self, wire: KafkaWire, batch_id: int | None, batch: int, lineage: str,
              handoffs: list[TxnHandoff], tasks: int) -> Exception | None:
        """Abort a batch's transactions; tolerate a batch that was already (being) committed.

        Every transaction its decision stands for (decided and recovery ones) is rolled
        forward first, never aborted (invariant 3), recovery ones included: aborting one
        would lose the records it copies. Order of the durable steps: pool not clean (and
        the lineage whose mark the restart clears), the abort mark, roll-forward, abort,
        fence. A batch write it finishes returns :class:`WriteCommittedError`, raised once the
        wire is given back (Spark reports the write failed; it is committed)."""
        self._unclean(lineage, batch_id, tasks)
        self.policy.mark_aborted(wire, self.config.ids.prefix, lineage, batch,
                                 self.policy.marks_batch(batch_id, lineage))
        fault_point("abort.after_mark")
        kept, finished = self._roll_forward(wire, self.outcomes.view(lineage), batch)
        finish(wire, [h for h in handoffs if txn_key(h) not in kept],
               commit=False, deadline_s=wire.config.api_timeout_s)
        # Failed or stopped tasks (None messages) may hold open transactions; every
        # decision is finished by now, so no id holds one waiting to commit.
        fence_pool(wire, self.pool_owner, self.decisions.pool(), probe=False)
        fault_point("abort.after_fence")
        pool = self.decisions.pool()
        pool.clean = False
        self.decisions.save_pool(pool)
        return None if finished is None else write_committed(finished, self.decisions.location)

    def _unclean(self, lineage: str, batch_id: int | None, tasks: int) -> None:
        """Not clean first: if anything after fails or meets an unknown outcome, the restart
        still fences the pool and clears the abort marks of the lineages recorded here
        (prepare), even where it cannot read its query id."""
        pool = self.decisions.pool()
        pool.size = max(pool.size, tasks)
        pool.clean = False
        if self.policy.marks_batch(batch_id, lineage) and lineage not in pool.marked:
            pool.marked.append(lineage)
        self.decisions.save_pool(pool)

    def _roll_forward(self, wire: KafkaWire, decisions: DecisionLog,
                      batch: int) -> tuple[set[str], Decision | None]:
        """commit() raised after the decision: it stands, roll it forward (an unknown
        outcome raises here, before any fencing could abort it). Returns the transactions
        it stands for (never aborted), and the decision when its user must be told it
        committed (a batch write)."""
        previous = decisions.get(batch)
        if previous is None:
            return set(), None
        tells = self.policy.tells_finished
        if tells:
            decisions.mark_untold(batch)  # before the roll-forward: a crash keeps it
        state = previous.state
        if state in UNFINISHED:
            state = self.outcomes.finish(wire, previous).state
            previous = decisions.get(batch) or previous
        kept = {txn_key(h) for h in previous.committing}
        if not tells:
            return kept, None
        if state is State.VOID:
            decisions.told(batch)  # nothing of it committed: nothing to tell
            return kept, None
        return kept, previous

    def clear_abort_marks(self, wire: KafkaWire, topic: str) -> None:
        """After the fencing: an abort left the pool unclean, this is the restart, its
        fencing has ended every earlier task's transaction, and its replay of the batch must
        write. (Not only on a new run: a query restarted in the same session reuses the
        planning worker, which then takes it for the same run.) The lineages come from the
        pool state the abort wrote (a planning worker that cannot read its query id would
        otherwise never clear them), and this query's own."""
        pool = self.decisions.pool()
        mine = self.config.lineage
        lineages = list(dict.fromkeys([*pool.marked, *([mine] if mine else [])]))
        for lineage in lineages:
            clear_batch_aborted(wire, self.config.ids.prefix, topic, lineage)
        fault_point("prepare.after_clear_mark")
        if pool.marked:
            pool = self.decisions.pool()
            pool.marked = [m for m in pool.marked if m not in lineages]
            self.decisions.save_pool(pool)
