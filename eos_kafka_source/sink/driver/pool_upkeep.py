"""The transactional-id pool's upkeep: fencing it, and what follows a committed batch.

The pool is ``<prefix>-0`` .. ``<prefix>-<size-1>``, one id per task partition
(invariant 5: it never grows with the number of batches). Fencing it (InitProducerId on
every id) aborts whatever a failed, killed or stopped attempt left open; it is only safe
when no decision waits to be committed, so the driver calls it after roll-forward in
the planning worker and after an abort. After a commit, ids the batch did not use are
fenced (a bigger, failed batch may have left them open). The pool state (size, the
identity each id was fenced to, ``clean``) is kept in the decision log.
Runs on: the driver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...faults import fault_point
from ...wire import KafkaWire, ProducerIdentity
from ..decisions.log import DecisionLog
from ..decisions.pool import PoolState
from ..naming import TransactionalIdFactory
from .fencing import fence_identities, fence_lingering
from .log_copy import recovery_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolOwner:
    """Whose pool: its ids, the decision log that keeps its state, the owner's fingerprint
    and the transaction timeout InitProducerId declares."""

    ids: TransactionalIdFactory
    decisions: DecisionLog
    owner: str
    timeout_ms: int


def fence_pool(wire: KafkaWire, who: PoolOwner, pool: PoolState, *, probe: bool) -> None:
    """Fence every id of the pool and the recovery id (and, with ``probe``, ids past it a
    bigger batch may have used); the pool is then clean. Roll-forward runs first, so no
    recorded recovery is open here: what a crash left open on that id is aborted.

    A pool recorded under another prefix (``transactionalIdPrefix`` changed while a run
    had transactions open, which would block read_committed readers until they time out)
    is fenced as a whole first, ids past it
    included; only then is the new prefix recorded, so a failure here leaves it to be
    fenced again by the next planning."""
    if pool.prefix and pool.prefix != who.ids.prefix:
        old = TransactionalIdFactory(pool.prefix)
        fenced = fence_identities(wire, old.pool(pool.size), who.timeout_ms)
        _, more = fence_lingering(wire, old, pool.size, who.timeout_ms,
                                  known=pool.fenced_epochs)
        fenced.update(more)
        log.warning("eoskafka: transactionalIdPrefix changed from %s to %s: fenced the old "
                    "prefix's %d id(s)", pool.prefix, who.ids.prefix, len(fenced))
        for tid in fenced:  # the old ids are done with: keep pool.json small
            pool.fenced_epochs.pop(tid, None)
            pool.fenced_producers.pop(tid, None)
    fenced = fence_identities(wire, [*who.ids.pool(pool.size), recovery_id(who.ids)],
                              who.timeout_ms)
    size = pool.size
    if probe:
        size, more = fence_lingering(wire, who.ids, pool.size, who.timeout_ms,
                                     known=pool.fenced_epochs)
        fenced.update(more)
        size = max(size, pool.size)
    remember(pool, fenced)
    pool.size = size
    pool.prefix, pool.owner = who.ids.prefix, who.owner
    pool.clean = True
    who.decisions.save_pool(pool)


def clean_up(wire: KafkaWire, who: PoolOwner, tasks: int) -> None:
    """After a committed batch: fence unused ids, grow the pool, prune. Best effort (the
    batch has committed whatever happens here); what is not done is left to the next
    batch's planning, which fences the whole pool when it finds it not clean."""
    decisions = who.decisions
    try:
        fault_point("commit.cleanup")
        _after_commit(wire, who, tasks)
        decisions.prune()
    except Exception as exc:  # noqa: BLE001 - reported, and left to the next planning
        log.warning("eoskafka: clean-up after a committed batch failed (%s); the next "
                    "batch fences the pool instead", exc)
        try:
            pool = decisions.pool()
            pool.clean = False
            pool.size = max(pool.size, tasks)
            decisions.save_pool(pool)
        except Exception:  # noqa: BLE001 - the next new run fences the pool anyway
            log.warning("eoskafka: could not record the unfinished clean-up", exc_info=True)


def _after_commit(wire: KafkaWire, who: PoolOwner, tasks: int) -> None:
    """Fence ids this batch did not use (left by a bigger, failed batch); grow the pool."""
    pool = who.decisions.pool()
    if tasks < pool.size:
        stale = [who.ids.for_task(p) for p in range(tasks, pool.size)]
        remember(pool, fence_identities(wire, stale, who.timeout_ms))
    if tasks != pool.size or pool.prefix != who.ids.prefix:
        pool.size = max(pool.size, tasks)
        pool.prefix, pool.owner = who.ids.prefix, who.owner
        who.decisions.save_pool(pool)


def remember(pool: PoolState, fenced: dict[str, ProducerIdentity]) -> None:
    """Record the identity each id was fenced to: older hand-offs on it are zombies."""
    for tid, who in fenced.items():
        pool.fenced_epochs[tid] = who.epoch
        pool.fenced_producers[tid] = who.producer_id
