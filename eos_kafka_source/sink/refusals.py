"""What the driver refuses to commit, and why (named in the error the user reads).

Runs on: the driver (commit worker).
"""

from __future__ import annotations

from ..errors import TransactionLostError
from ..wire import TXN_PROTOCOL
from .decision_log import PoolState
from .handoff import TxnHandoff
from .naming import TransactionalIdFactory


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


def refuse_superseded(handoffs: list[TxnHandoff], pool: PoolState) -> None:
    """A hand-off whose epoch the driver already fenced is a zombie attempt's message."""
    stale = [h for h in handoffs
             if h.open and pool.fenced_producers.get(h.transactional_id) == h.producer_id
             and h.epoch <= pool.fenced_epochs.get(h.transactional_id, -1)]
    if stale:
        raise TransactionLostError(
            "refusing hand-offs whose epoch the driver has already fenced (a zombie "
            "attempt's message): " + "; ".join(h.describe() for h in stale)
        )
