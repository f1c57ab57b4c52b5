"""The hand-off: what a task gives the driver so the driver can finish its transaction.

Runs on: created on an executor by ``write()``, pickled to the driver, read by
``commit()``/``abort()`` in another process, and stored as JSON in the decision
log. Must stay picklable and JSON-able: plain values only, never a secret.
"""

from __future__ import annotations

import copy
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from ..errors import DecisionLogFormatError

#: The hand-off JSON format this eoskafka writes (``"format"``); JSON without one is
#: version 1. Older formats stay readable; a newer one is refused (docs/compatibility.md).
#: A reader of format 2 may meet ``digest`` (written by 0.1.0 and the builds before it,
#: never read): it is skipped, as is any field a version added within the format.
FORMAT = 2


@dataclass(frozen=True)
class TxnHandoff(WriterCommitMessage):
    """One task attempt's open transaction (or, with ``open=False``, the lack of one)."""

    transactional_id: str
    producer_id: int
    epoch: int
    #: Transaction protocol generation used end to end (see wire.txn.TXN_PROTOCOL).
    txn_protocol: int
    #: True when the task added partitions, so there is a transaction to end.
    open: bool
    #: ((topic, partition, records), ...) written inside the transaction.
    partitions: tuple[tuple[str, int, int], ...] = ()
    records: int = 0
    bytes: int = 0
    task_partition: int = -1
    attempt: int = 0
    task_attempt_id: int = -1
    batch_id: int | None = None
    #: Which query (checkpoint fingerprint) produced it; a hand-off from another query is refused.
    owner: str = ""
    #: The lineage the hand-off belongs to: Spark's query id for a streaming write (stable
    #: across restarts, new after a checkpoint reset), the per-write id of a batch write.
    #: Decisions are keyed by it and the batch id together (docs/design.md invariant 8).
    lineage: str = ""
    #: ((topic, partition, first offset), ...): where the transaction's first record landed
    #: in each partition, so its outcome can be read from the log (invariant 9): the
    #: producer's first control marker at or after it is COMMIT or ABORT.
    first_offsets: tuple[tuple[str, int, int], ...] = ()
    #: Set by the at-least-once mode: the records are already visible, nothing to commit.
    delivery: str = "exactly_once"
    extra: dict[str, Any] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling a hand-off another eoskafka version pickled (a driver and executors
        mid-upgrade): a field this version lacks (``digest``) is dropped, one it adds takes
        its default, as :meth:`from_json` reads the JSON."""
        for f in fields(self):
            if f.name in state:
                value = state[f.name]
            elif f.default is not MISSING:
                value = f.default
            elif f.default_factory is not MISSING:
                value = f.default_factory()
            else:
                value = state[f.name]  # a required field: KeyError names it
            object.__setattr__(self, f.name, value)

    def describe(self) -> str:
        parts = ", ".join(f"{t}-{p}: {n}" for t, p, n in self.partitions) or "no partitions"
        return (
            f"transaction {self.transactional_id} (producer {self.producer_id}, epoch "
            f"{self.epoch}) of task {self.task_partition} attempt {self.attempt}: "
            f"{self.records} records [{parts}]"
        )

    def to_json(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: its deep copy of the partitions tuples cost
        # 16 of a 64-task commit's ~130 ms (benchmarks/versus.py commit profile).
        data = {name: getattr(self, name) for name in _FIELDS}
        data["partitions"] = [list(p) for p in self.partitions]
        data["first_offsets"] = [list(p) for p in self.first_offsets]
        data["extra"] = copy.deepcopy(self.extra) if self.extra else {}
        data["format"] = FORMAT
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TxnHandoff:
        data = dict(data)
        version = data.pop("format", 1)
        if not isinstance(version, int) or version > FORMAT:
            raise DecisionLogFormatError(
                f"the hand-off of transaction {data.get('transactional_id')} has format "
                f"{version}, written by a newer eoskafka; this one reads formats up to "
                f"{FORMAT}. Upgrade eoskafka on the driver to the version that wrote it.")
        data["partitions"] = tuple(tuple(p) for p in data.get("partitions", ()))
        data["first_offsets"] = tuple(tuple(p) for p in data.get("first_offsets", ()))
        # Fields a newer eoskafka added within this format are safe to skip (a field that
        # is not raises the format: docs/compatibility.md, "Compatibility promise").
        return cls(**{k: v for k, v in data.items() if k in _KNOWN})


_FIELDS = tuple(f.name for f in fields(TxnHandoff))
_KNOWN = frozenset(_FIELDS)


def handoffs_of(messages: list[Any] | None) -> list[TxnHandoff]:
    """The hand-offs among Spark's commit messages (None entries are failed or stopped tasks)."""
    return [m for m in (messages or []) if isinstance(m, TxnHandoff)]
