"""Where a batch's commit decision is kept: a decision log, or nowhere (a batch write
without ``decisionLogLocation``). The driver's protocol (protocol.py) runs the same named
steps either way and asks its keeper at each: :class:`.logged.LoggedDecisions` or
:class:`.unlogged.NoDecisionLog`, as Flink swaps ``KafkaCommitter`` and ``NoopCommitter``.
Runs on: the driver (planning, commit and abort workers).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from ...wire import KafkaWire
from ..decisions.log import Decision, DecisionLog
from ..handoff import TxnHandoff
from .committer import FinishReport


@dataclass
class Commit:
    """One ``commit()`` under way: what its steps hand each other."""

    batch_id: int | None
    #: The batch id the decision is recorded under (config.BATCH_WRITE for a batch write).
    batch: int
    lineage: str
    handoffs: list[TxnHandoff]
    tasks: int
    #: What the batch id stands for (invariant 13, batch_identity.py), read with the log.
    identity: dict[str, Any] | None = None
    #: An earlier decision of this batch id stands (a replay): nothing more to commit.
    replayed: bool = False
    #: The decision log of the lineage, once read, and the decision once recorded (None:
    #: no log).
    view: DecisionLog | None = None
    decision: Decision | None = None
    #: The transactions the decision stands for: those a task left open.
    decided: list[TxnHandoff] = field(init=False)

    def __post_init__(self) -> None:
        self.decided = [h for h in self.handoffs if h.open]


class DecisionKeeping(ABC):
    """What the protocol's steps ask of the place decisions are kept."""

    @abstractmethod
    def prepare(self, wire_factory: Callable[[], AbstractContextManager[KafkaWire]], *,
                new_run: bool) -> None:
        """Before any task of the next batch (planning worker)."""

    @abstractmethod
    def read(self, wire: KafkaWire, commit: Commit) -> None:
        """The batch's earlier decision, if any: a replay is finished here."""

    @abstractmethod
    def planned_at(self) -> float | None:
        """When the batch was planned (None: unknown), for the liveness check's wording."""

    @abstractmethod
    def decide(self, wire: KafkaWire, commit: Commit) -> None:
        """Durable before the first EndTxn (invariant 1)."""

    @abstractmethod
    def record(self, wire: KafkaWire, commit: Commit, report: FinishReport) -> None:
        """After the EndTxns and their confirmation: done, voided, copied, or raised."""

    @abstractmethod
    def clean_up(self, wire: KafkaWire, tasks: int) -> None:
        """Best effort after a commit (unused ids fenced, old decisions pruned)."""

    @abstractmethod
    def abort(self, wire: KafkaWire, batch_id: int | None, batch: int, lineage: str,
              handoffs: list[TxnHandoff], tasks: int) -> Exception | None:
        """Abort the batch; returns what to raise once the wire is given back."""
