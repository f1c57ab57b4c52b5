"""What a task writer is told about the task it writes for, stamped into its hand-off.

Runs on: built on an executor from Spark's ``TaskContext`` (spark_writer.py), or on the
driver for a recovery transaction (copy_stream.py). Plain values only: no Spark import.

>>> WriterContext(task_partition=3, batch_id=7, lineage="q-1").handoff_partition
3
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WriterContext:
    """Where a task writer's transaction belongs: the task, its attempt, the batch and
    the lineage (query id, or batch-write id). Every field has the value a writer outside
    Spark (a recovery transaction, a test, a benchmark) is given when it names none."""

    #: Spark's partition id of the task; None outside a Spark task.
    task_partition: int | None = None
    attempt: int = 0
    task_attempt_id: int = -1
    #: The micro-batch (streaming); None for a batch write or outside Spark.
    batch_id: int | None = None
    #: Fingerprint of the query's decision log location (the driver refuses others').
    owner: str = ""
    lineage: str = ""

    @property
    def first_partition(self) -> int:
        """Where the writer's partitioner starts (a task with no partition id: 0)."""
        return 0 if self.task_partition is None else self.task_partition

    @property
    def handoff_partition(self) -> int:
        """The hand-off's ``task_partition`` (-1: not a Spark task)."""
        return -1 if self.task_partition is None else self.task_partition
