"""Which batch a batch id stands for: its input as Spark planned it (invariant 13).

Deleting ``<checkpoint>/offsets/N`` and ``commits/N`` is a common way to reprocess; Spark
then plans batch N again over another range. A decision for N must not make that batch
look like a replay (its new transactions aborted, success reported, its rows never
written). So each decision records the batch's identity: the source offsets Spark wrote to
``<checkpoint>/offsets/<N>`` before the batch ran. A batch id that comes back with other
offsets is refused before anything is aborted; the same offsets with other rows (a
non-deterministic query) are still a replay. Where the offsets cannot be read, on either
side, the batch is refused too: an equal record count is not the same batch (the default
read bound splits a cap over partitions by backlog, so a rewound batch can have the same
total over other ranges). A store error reading them fails the batch, which Spark replays.

The offsets file: line 1 the version (``v1``), line 2 the batch's metadata (timestamps and
conf: not part of the identity), then one line per source, its offset JSON (``-`` for a
source without one). Runs on: the driver (commit worker). No Spark needed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from ...errors import CheckpointUnreadableError, ReplayMismatchError
from ..decisions.log import Decision
from ..handoff import TxnHandoff
from ..spark_checkpoint import read_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchIdentity:
    """What a batch id stood for when it was decided."""

    #: One entry per source: its end offset as Spark planned it (parsed JSON, or the raw
    #: line); None when ``offsets/<N>`` could not be read.
    offsets: tuple[Any, ...] | None
    #: Records the batch's tasks wrote (shown in messages; never taken for the identity).
    records: int

    def to_json(self) -> dict[str, Any]:
        return {"offsets": None if self.offsets is None else list(self.offsets),
                "records": self.records}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> BatchIdentity | None:
        if not data:
            return None
        offsets = data.get("offsets")
        return cls(None if offsets is None else tuple(offsets), int(data.get("records", 0)))

    def describe(self) -> str:
        if self.offsets is None:
            return f"{self.records} records (its offsets could not be read)"
        return "offsets " + "; ".join(json.dumps(o, sort_keys=True) for o in self.offsets)


def identity_of(checkpoint: str | None, batch_id: int,
                handoffs: list[TxnHandoff]) -> BatchIdentity:
    """The identity of ``batch_id`` as planned now: its offsets file, and its record count."""
    return BatchIdentity(read_offsets(checkpoint, batch_id), sum(h.records for h in handoffs))


def read_offsets(checkpoint: str | None, batch_id: int) -> tuple[Any, ...] | None:
    """The source offsets in ``<checkpoint>/offsets/<batch_id>``; None if there is no such
    file. Raises :class:`CheckpointUnreadableError` where it cannot be read."""
    if not checkpoint:
        return None
    text = read_text(checkpoint, f"offsets/{batch_id}")
    return None if text is None else parse_offsets(text)


def parse_offsets(text: str) -> tuple[Any, ...] | None:
    """The per-source offsets of an offsets file's text (None if it is not one)."""
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        return None
    return tuple(_parse(line) for line in lines[2:])


def _parse(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return line.strip()  # "-": a source without an offset


def same_batch(recorded: BatchIdentity | None, now: BatchIdentity) -> bool | None:
    """Whether a batch id planned now is the batch its decision recorded: equal offsets are
    a replay whatever rows the tasks wrote. None where either side's offsets are unknown
    (an equal record count proves nothing). A decision without an identity (written before
    identities existed) is taken as the same batch, as before."""
    if recorded is None:
        return True
    if recorded.offsets is None or now.offsets is None:
        return None
    return recorded.offsets == now.offsets


def refuse_other_batch(previous: Decision, now: BatchIdentity,
                       checkpoint: str | None) -> None:
    """Raise :class:`ReplayMismatchError` when ``now`` is not the batch ``previous``
    decided, :class:`CheckpointUnreadableError` when that cannot be told: before anything
    is aborted (a replay's new transactions would be)."""
    recorded = BatchIdentity.from_json(previous.identity)
    same = same_batch(recorded, now)
    if same:
        return
    assert recorded is not None
    batch = previous.batch_id
    where = checkpoint or "the checkpoint"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(previous.decided_at))
    if same is None:
        unknown = (f"{where}/offsets/{batch} is not there now" if now.offsets is None
                   else f"its offsets were not recorded when it was decided ({when})")
        raise CheckpointUnreadableError(
            f"batch {batch} of query {previous.lineage or 'unknown'} was committed, and "
            f"Spark runs batch {batch} again; eoskafka cannot tell whether it is the same "
            f"batch (a replay: to be skipped) or a rewound one (to be written): {unknown}. "
            f"An equal record count ({recorded.records} then, {now.records} now) is not the "
            "same batch, so nothing of it is committed. To go on: give the query its "
            "checkpointLocation as the URI Spark writes (its offsets/ files must be "
            "readable here), or start the query on a new checkpointLocation with "
            "startingOffsets where this one stopped.")
    raise ReplayMismatchError(
        f"batch {batch} of query {previous.lineage or 'unknown'} was committed (decided "
        f"{when}) as {recorded.describe()}; Spark now runs batch {batch} again as "
        f"{now.describe()}. That is not a replay of the committed batch: {where}/offsets/"
        f"{batch} and commits/{batch} were deleted or rewritten (a rewound checkpoint), or "
        "the source changed. eoskafka does not skip it (its rows would be missing while the "
        "query reports success), nor write it (rows the committed batch wrote would be "
        "written twice); nothing of it is committed. To go on: restore the checkpoint's "
        f"offsets/ and commits/ files from batch {batch} on (the query then continues where "
        "it stopped), or start the query on a new checkpointLocation with startingOffsets "
        "where this one stopped (the end offsets of its last committed batch: the recorded "
        "offsets above if it was the last).")
