"""What differs between a streaming query and a batch write, as two policies.

A streaming query's batches replay: its decisions are keyed by Spark's query id (bound to
the log, invariant 8), a batch id that comes back must be the same batch (invariant 13),
an abort marks the batch so a late task writes nothing, and errors say the batch replays.
A batch write is never replayed: its user reruns it, so errors say what a rerun would do,
an abort marks the whole write, and a write finished for the user (by an abort or by the
next write's roll-forward) is reported once. The driver's roles ask the policy instead of
testing a flag, as Flink's sink swaps its writer and committer classes.
Runs on: the driver (planning, commit and abort workers).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

from ...errors import TransactionLostError, TransactionOutcomeUnknownError
from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..handoff import TxnHandoff
from .batch_identity import identity_of, refuse_other_batch
from .claims import mark_batch_aborted, mark_write_aborted, mark_write_committing
from .committer import FinishReport, outcome_unknown
from .recovery import lost_error

log = logging.getLogger(__name__)


class WritePolicy(ABC):
    """The streaming query's or the batch write's answers; see the two subclasses."""

    #: Passed to the checks below the driver that word their errors themselves.
    streaming: bool
    #: Where abort marks (and a batch write's "committing" mark) are kept (claims.py).
    mark_topic: str | None

    def __init__(self, mark_topic: str | None) -> None:
        self.mark_topic = mark_topic

    def mark_topic_of(self, handoffs: list[TxnHandoff]) -> str | None:
        """Where a write without a log keeps its marks: the ``topic`` option, else the first
        topic its transactions wrote to (a ``topic`` column)."""
        return self.mark_topic or next((t for h in handoffs for t, _, _ in h.partitions), None)

    # -- lineage -----------------------------------------------------------------------------

    @abstractmethod
    def claim_scope(self, lineage: str | None,
                    decisions: DecisionLog) -> tuple[str | None, DecisionLog | None]:
        """The lineage and log a prefix claim names (claims.claim_prefix)."""

    @abstractmethod
    def identify(self, batch: int, handoffs: list[TxnHandoff],
                 previous: Decision | None) -> dict[str, Any] | None:
        """What the batch id stands for (invariant 13), as the decision records it,
        refusing one ``previous`` decided as another batch; None: nothing to compare."""

    # -- marks -------------------------------------------------------------------------------

    @abstractmethod
    def marks_batch(self, batch_id: int | None, lineage: str) -> bool:
        """Whether an abort marks this batch of the lineage (the restart clears it)."""

    @abstractmethod
    def mark_aborted(self, wire: KafkaWire, prefix: str, lineage: str, batch: int,
                     marking: bool) -> None:
        """The abort mark a late task checks (claims.py), before the fencing."""

    @abstractmethod
    def mark_committing(self, wire: KafkaWire, prefix: str, lineage: str,
                        handoffs: list[TxnHandoff]) -> None:
        """Without a decision log, before the first EndTxn (claims.write_committing)."""

    #: Whether the log is bound to the query's lineage (DecisionLog.bind, invariant 8).
    binds_log: bool = False
    #: Whether prepare() clears the abort marks after its fencing.
    clears_marks: bool = False
    #: Whether a decision finished for the user (an abort's or a later roll-forward) is
    #: reported to them once: a batch write's user saw a failure.
    tells_finished: bool = False

    # -- wording -----------------------------------------------------------------------------

    @abstractmethod
    def lost_error(self, where: str, lost: list[str], timeout_ms: int) -> TransactionLostError:
        """What the log no longer held of decided transactions: reported once, final."""

    @abstractmethod
    def none_committed(self, batch_id: int | None, why: str) -> TransactionLostError:
        """Kafka aborted every decided transaction: nothing written, what to do now."""

    def outcome_unknown(self, batch_id: int | None, report: FinishReport,
                        doing: str) -> TransactionOutcomeUnknownError:
        return outcome_unknown(batch_id, report, doing, streaming=self.streaming)


class StreamingQuery(WritePolicy):
    """A streaming query: batches replay, keyed by Spark's query id."""

    streaming = True
    binds_log = True

    def __init__(self, mark_topic: str | None, spark_checkpoint: str | None) -> None:
        super().__init__(mark_topic)
        #: Spark's checkpoint location: where ``offsets/<N>`` says which batch N is.
        self.spark_checkpoint = spark_checkpoint
        self.clears_marks = bool(mark_topic)

    def claim_scope(self, lineage: str | None,
                    decisions: DecisionLog) -> tuple[str | None, DecisionLog | None]:
        return lineage, decisions

    def identify(self, batch: int, handoffs: list[TxnHandoff],
                 previous: Decision | None) -> dict[str, Any] | None:
        if not self.spark_checkpoint:  # Spark always passes it
            return None
        identity = identity_of(self.spark_checkpoint, batch, handoffs)
        if previous is not None:
            refuse_other_batch(previous, identity, self.spark_checkpoint)
        return identity.to_json()

    def marks_batch(self, batch_id: int | None, lineage: str) -> bool:
        return batch_id is not None and bool(self.mark_topic) and bool(lineage)

    def mark_aborted(self, wire: KafkaWire, prefix: str, lineage: str, batch: int,
                     marking: bool) -> None:
        if not marking:
            return
        assert self.mark_topic is not None
        try:  # best effort: the fencing is what the guarantee rests on
            mark_batch_aborted(wire, prefix, self.mark_topic, lineage, batch)
        except Exception:  # noqa: BLE001 - the abort goes on and fences
            log.warning("eoskafka: could not mark batch %s aborted; a late task may hold "
                        "a transaction open until the next start", batch, exc_info=True)

    def mark_committing(self, wire: KafkaWire, prefix: str, lineage: str,
                        handoffs: list[TxnHandoff]) -> None:
        """Nothing: a streaming query keeps a decision log (beside its checkpoint)."""

    def lost_error(self, where: str, lost: list[str], timeout_ms: int) -> TransactionLostError:
        return lost_error(where, lost, timeout_ms)

    def none_committed(self, batch_id: int | None, why: str) -> TransactionLostError:
        return TransactionLostError(
            f"batch {batch_id}: no transaction could be committed (Kafka aborted them: "
            "fenced, expired, or an operator's abort), nothing was written; the batch fails "
            f"and will be replayed on restart: {why}")


class BatchWrite(WritePolicy):
    """A batch write (``df.write``): never replayed, rerun by its user; one write id."""

    streaming = False
    tells_finished = True

    def claim_scope(self, lineage: str | None,
                    decisions: DecisionLog) -> tuple[str | None, DecisionLog | None]:
        return None, None

    def identify(self, batch: int, handoffs: list[TxnHandoff],
                 previous: Decision | None) -> dict[str, Any] | None:
        return None  # never replayed: a batch id is not compared

    def marks_batch(self, batch_id: int | None, lineage: str) -> bool:
        return False

    def mark_aborted(self, wire: KafkaWire, prefix: str, lineage: str, batch: int,
                     marking: bool) -> None:
        if self.mark_topic is not None:
            mark_write_aborted(wire, prefix, self.mark_topic, lineage)

    def mark_committing(self, wire: KafkaWire, prefix: str, lineage: str,
                        handoffs: list[TxnHandoff]) -> None:
        # No log: the broker keeps that this write started committing, so abort() never
        # aborts a transaction whose commit may have reached Kafka.
        topic = self.mark_topic_of(handoffs)
        if topic:
            mark_write_committing(wire, prefix, topic, lineage)

    def lost_error(self, where: str, lost: list[str], timeout_ms: int) -> TransactionLostError:
        return TransactionLostError(
            f"the batch write: {len(lost)} partition(s) of its decided transactions were "
            "aborted by Kafka (a fence, an operator's kafka-transactions.sh abort, or the "
            f"driver down longer than kafka.transaction.timeout.ms={timeout_ms}) and the "
            "log no longer holds their records (retention or compaction removed them): those "
            "records are LOST, every other row of the write is committed. Do not rerun the "
            "whole write (its other rows would be written twice); write the rows of these "
            "partitions again if you need them: " + "; ".join(lost))

    def none_committed(self, batch_id: int | None, why: str) -> TransactionLostError:
        return TransactionLostError(
            "the batch write could not commit any of its transactions (Kafka aborted "
            "them: fenced, expired, or an operator's abort), so nothing was written and "
            f"no row is at risk; rerun the write: {why}")
