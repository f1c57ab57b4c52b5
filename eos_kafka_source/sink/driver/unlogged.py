"""The protocol's steps without a decision log: a batch write with no
``decisionLogLocation`` (a streaming query always has one, beside its checkpoint).

Nothing is read or recorded. Before the first EndTxn the broker is told the write started
committing (its "committing" mark, claims.py), so an abort never aborts a transaction whose
commit may have reached Kafka; an outcome still unknown, or a transaction lost, is said as
it is: nothing can finish the write later (write_outcome.py).
Runs on: the driver (commit and abort workers).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from ...faults import fault_point
from ...wire import KafkaWire
from ..handoff import TxnHandoff
from .committer import FinishReport
from .config import DriverConfig
from .keeping import Commit, DecisionKeeping
from .write_outcome import abort_without_log, raise_unfinished
from .write_policy import WritePolicy


class NoDecisionLog(DecisionKeeping):
    """No decision kept: the commit's outcome is what the EndTxns answered."""

    def __init__(self, config: DriverConfig, policy: WritePolicy) -> None:
        self.config = config
        self.policy = policy

    def prepare(self, wire_factory: Callable[[], AbstractContextManager[KafkaWire]], *,
                new_run: bool) -> None:
        """Nothing to roll forward; the tasks' own InitProducerId fences their ids."""

    def read(self, wire: KafkaWire, commit: Commit) -> None:
        """No earlier decision to find."""

    def planned_at(self) -> float | None:
        return None

    def decide(self, wire: KafkaWire, commit: Commit) -> None:
        self.policy.mark_committing(wire, self.config.ids.prefix, commit.lineage,
                                    commit.handoffs)
        fault_point("commit.after_decision")

    def record(self, wire: KafkaWire, commit: Commit, report: FinishReport) -> None:
        raise_unfinished(
            report, "committing",
            f"the batch write could not commit {len(report.lost)} transaction(s) "
            f"after {len(report.done)} others were (no decisionLogLocation, so "
            "nothing can finish it later); their records are LOST: ")

    def clean_up(self, wire: KafkaWire, tasks: int) -> None:
        """No pool kept: nothing to fence or prune."""

    def abort(self, wire: KafkaWire, batch_id: int | None, batch: int, lineage: str,
              handoffs: list[TxnHandoff], tasks: int) -> Exception | None:
        abort_without_log(wire, self.config.ids, self.policy.mark_topic_of(handoffs), lineage,
                          handoffs, tasks, self.config.timeout_ms,
                          min(self.config.commit_deadline_s, wire.config.api_timeout_s))
        return None
