"""The sink's pool state in the decision log: ``pool.json`` and ``planned.json``.

``pool.json`` is what the driver knows of the transactional-id pool across restarts: its
size (it never grows with the number of batches), the epoch and producer id it fenced each
id to (older hand-offs are refused), whether ids may still hold open transactions, the
prefix and its owner, the abort marks to clear and the topic a prefix claim was made on.
``planned.json`` is when the driver last prepared a batch. Kept apart from the decisions
(:mod:`.log`), which say what each batch committed.
Runs on: the driver only (planning and commit workers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .files import DecisionFiles


@dataclass
class PoolState:
    size: int = 0
    #: transactional id -> epoch the driver fenced it to; older hand-offs are refused.
    fenced_epochs: dict[str, int] = field(default_factory=dict)
    prefix: str = ""
    owner: str = ""
    #: False after an abort or an unfinished clean-up: ids may hold open transactions.
    clean: bool = False
    #: transactional id -> producer id it had when fenced (an epoch compares only within it).
    fenced_producers: dict[str, int] = field(default_factory=dict)
    #: Lineages whose batch an abort marked aborted (claims.py); the next planning clears
    #: their marks after its fencing, even where it cannot read its own query id.
    marked: list[str] = field(default_factory=list)
    #: With a ``topic`` column: the topic the prefix claim was first made on (claims.py).
    claim_topic: str = ""


class PoolFiles(DecisionFiles):
    """The pool's and the planning's files, read and written whole (atomic replaces)."""

    def mark_planned(self) -> None:
        """When the driver last prepared a batch (its tasks start after): a batch older
        than the transaction timeout at commit was aborted by Kafka, not by a zombie."""
        self._write("planned.json", {"planned_at": time.time()})

    def planned_at(self) -> float | None:
        data = self._read("planned.json", recover=True)
        return None if data is None else float(data["planned_at"])

    def pool(self) -> PoolState:
        data = self._read("pool.json", recover=True) or {}
        return PoolState(
            int(data.get("size", 0)), dict(data.get("fenced_epochs", {})),
            data.get("prefix", ""), data.get("owner", ""), bool(data.get("clean", False)),
            dict(data.get("fenced_producers", {})), list(data.get("marked", [])),
            data.get("claim_topic", ""),
        )

    def save_pool(self, state: PoolState) -> None:
        self._write("pool.json", {"size": state.size, "fenced_epochs": state.fenced_epochs,
                                  "prefix": state.prefix, "owner": state.owner,
                                  "clean": state.clean,
                                  "fenced_producers": state.fenced_producers,
                                  "marked": state.marked,
                                  "claim_topic": state.claim_topic})
