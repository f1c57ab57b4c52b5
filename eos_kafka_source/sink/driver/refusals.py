"""What the driver refuses to commit, and why (named in the error the user reads).

Runs on: the driver (commit worker). The liveness check before a decision is here too:
a transaction fenced after its hand-off fails the whole batch, nothing committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...errors import TimeoutError_, TransactionLostError
from ...wire import TXN_PROTOCOL, KafkaWire
from ..decisions.pool import PoolFiles
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .committer import Liveness, liveness


def refuse_foreign(ids: TransactionalIdFactory, handoffs: list[TxnHandoff]) -> None:
    """Hand-offs of another protocol generation or another prefix are never committed."""
    other_protocol = [h for h in handoffs if h.open and h.txn_protocol != TXN_PROTOCOL]
    if other_protocol:
        raise TransactionLostError(
            f"refusing hand-offs written with transaction protocol generation "
            f"{other_protocol[0].txn_protocol}; this driver finishes generation "
            f"{TXN_PROTOCOL} only (mixed eoskafka versions?): "
            + "; ".join(h.describe() for h in other_protocol)
        )
    foreign = [h for h in handoffs if ids.task_of(h.transactional_id) is None]
    if foreign:
        raise TransactionLostError(
            "refusing hand-offs that do not belong to this query's id prefix "
            f"{ids.prefix!r}: " + "; ".join(h.describe() for h in foreign)
        )


def refuse_superseded(handoffs: list[TxnHandoff], decisions: PoolFiles) -> None:
    """A hand-off whose epoch the driver already fenced (the log's pool state) is a zombie
    attempt's message."""
    pool = decisions.pool()
    stale = [h for h in handoffs
             if h.open and pool.fenced_producers.get(h.transactional_id) == h.producer_id
             and h.epoch <= pool.fenced_epochs.get(h.transactional_id, -1)]
    if stale:
        raise TransactionLostError(
            "refusing hand-offs whose epoch the driver has already fenced (a zombie "
            "attempt's message): " + "; ".join(h.describe() for h in stale)
        )


def refuse_dead(wire: KafkaWire, batch_id: int, handoffs: list[TxnHandoff], *,
                deadline_s: float, timeout_ms: int,
                planned_at: Callable[[], float | None], streaming: bool = True) -> Liveness:
    """Before deciding: every transaction must still be live, or nothing is committed.
    Returns what the check found (where their coordinators answered). ``planned_at``: when
    the batch was planned, read only to word a refusal. ``streaming=False``: a batch write,
    which is never replayed (its user reruns it)."""
    found = liveness(wire, handoffs, deadline_s=deadline_s)
    dead = found.dead
    if dead:
        raise_if_too_long(batch_id, dead, timeout_ms=timeout_ms, planned_at=planned_at(),
                          streaming=streaming)
        what = f"batch {batch_id}" if streaming else "the batch write"
        then = ("the batch fails and can run again" if streaming else
                "no row is at risk: the write fails, rerun it")
        raise TransactionLostError(
            f"{what}: {len(dead)} of its transactions were fenced after their "
            "tasks handed them over (a zombie, another attempt or an operator's fence "
            "re-initialised the id, or Kafka's transaction timeout aborted it); nothing "
            f"was committed, {then}: "
            + "; ".join(f"{h.describe()}: {why}" for h, why in dead)
        )
    return found


def raise_if_too_long(batch_id: int, dead: list[tuple[TxnHandoff, str]], *, timeout_ms: int,
                      planned_at: float | None, streaming: bool = True) -> None:
    """Fenced transactions of a batch that ran past the transaction timeout: Kafka
    aborted them, and the replay (same offsets) would take as long: say so, once."""
    elapsed_s = time.time() - planned_at if planned_at else 0.0
    if elapsed_s * 1000 < timeout_ms:
        return  # younger than the timeout: fenced by a zombie or a retry, not by time
    if not streaming:
        raise TimeoutError_(
            f"the batch write ran {elapsed_s:.0f} s, longer than "
            f"kafka.transaction.timeout.ms={timeout_ms}: Kafka aborted its {len(dead)} "
            "transaction(s) before the driver could commit them, so nothing was written and "
            "no row is at risk. Raise kafka.transaction.timeout.ms (up to the broker's "
            "transaction.max.timeout.ms) or split the write into smaller ones, then rerun "
            "it: " + "; ".join(f"{h.describe()}: {why}" for h, why in dead))
    raise TimeoutError_(
        f"batch {batch_id} ran {elapsed_s:.0f} s, longer than "
        f"kafka.transaction.timeout.ms={timeout_ms}: Kafka aborted its "
        f"{len(dead)} transaction(s) before the driver could commit them, nothing was "
        "written. A replay reads the same offsets, so raise kafka.transaction.timeout.ms "
        "(up to the broker's transaction.max.timeout.ms) before restarting, and lower "
        "the source's maxOffsetsPerTrigger so later batches fit the timeout (a task only "
        "stalled once will commit on replay): "
        + "; ".join(f"{h.describe()}: {why}" for h, why in dead)
    )
