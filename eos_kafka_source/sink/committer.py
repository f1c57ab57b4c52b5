"""Finishes hand-offs: EndTxn commit or abort for many transactions at once.

Outcomes are sorted into done, lost (fenced, expired, unknown: the transaction
can no longer be committed) and unknown (the broker kept dropping the
connection); the caller decides what each means for the batch.
Runs on: the driver (commit/abort workers and the planning worker's recovery).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from ..errors import ConnectionDroppedError
from ..faults import armed, fault_point
from ..wire import KafkaWire, ProducerIdentity, end_txns, find_coordinators, verify_txns
from .handoff import TxnHandoff

log = logging.getLogger(__name__)

_DROP_RETRIES = 3


@dataclass
class FinishReport:
    done: list[TxnHandoff] = field(default_factory=list)
    lost: list[tuple[TxnHandoff, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.lost

    def describe_lost(self) -> list[str]:
        return [f"{h.describe()}: {reason}" for h, reason in self.lost]


def finish(wire: KafkaWire, handoffs: list[TxnHandoff], *, commit: bool) -> FinishReport:
    """EndTxn(commit or abort) every open hand-off; retries dropped connections.

    Repeating an EndTxn with the same outcome is harmless (Kafka and Tansu
    accept it), which is what makes roll-forward and double commit safe.
    """
    started = time.perf_counter()
    pending = [h for h in handoffs if h.open]
    if commit and len(pending) > 1 and armed("commit.between_endtxn"):
        report = _finish(wire, pending[:1], commit)  # a test stops the driver in between
        fault_point("commit.between_endtxn")
        rest = _finish(wire, pending[1:], commit)
        report.done += rest.done
        report.lost += rest.lost
    else:
        report = _finish(wire, pending, commit)
    report.seconds = time.perf_counter() - started
    return report


def _finish(wire: KafkaWire, pending: list[TxnHandoff], commit: bool) -> FinishReport:
    report = FinishReport()
    for attempt in range(_DROP_RETRIES + 1):
        if not pending:
            break
        coordinators = find_coordinators(wire, [h.transactional_id for h in pending])
        txns = [(h.transactional_id, ProducerIdentity(h.producer_id, h.epoch)) for h in pending]
        outcomes = end_txns(wire, coordinators, txns, commit)
        retry = []
        for handoff, outcome in zip(pending, outcomes, strict=True):
            if outcome.ok:
                report.done.append(handoff)
            elif isinstance(outcome.error, ConnectionDroppedError) and attempt < _DROP_RETRIES:
                retry.append(handoff)
            else:
                report.lost.append((handoff, str(outcome.error)))
        if retry:
            wire.close()  # reconnect: the drop may have been the network, not a fence
            time.sleep(0.05 * (attempt + 1))
        pending = retry
    return report


def dead_handoffs(wire: KafkaWire, handoffs: list[TxnHandoff]) -> list[tuple[TxnHandoff, str]]:
    """The open hand-offs whose transaction can no longer be committed, and why.

    Checked before the decision, so a transaction fenced between its task's hand-off and
    the commit (a zombie or a retried attempt re-initialised its id) fails the whole batch,
    nothing committed, instead of a partial commit that loses that task's records.
    """
    pending = [h for h in handoffs if h.open]
    if not pending:
        return []
    coordinators = find_coordinators(wire, [h.transactional_id for h in pending])
    checks = [(h.transactional_id, ProducerIdentity(h.producer_id, h.epoch),
               [(t, p) for t, p, _ in h.partitions]) for h in pending]
    errors = verify_txns(wire, coordinators, checks)
    return [(h, str(e)) for h, e in zip(pending, errors, strict=True) if e is not None]
