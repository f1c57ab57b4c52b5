"""Copying from the log: what a decided transaction that Kafka aborted left there.

A decided transaction that Kafka aborted (a fence, the driver down longer than
``kafka.transaction.timeout.ms``, an operator's ``kafka-transactions.sh abort``) still has
its records in its output partitions, from its hand-off's first offset to its producer's
ABORT marker. Recovery copies exactly those records (topic, partition, key, value, headers,
timestamp) into *recovery transactions* on the query's own ``<prefix>-recovery`` id,
whatever a replay of the batch writes (docs/design.md, invariant 10).

The plan is a list of :class:`Segment` s: one lost transaction's records in one partition,
``[start, end)`` of the log. A recovery transaction records which segments (or which
leading part of one) it copies; what it copied into a partition is committed exactly when
that partition of the recovery transaction holds a COMMIT marker. So a retried recovery
copies only what no recovery transaction committed (invariant 16: idempotent per
partition), and a copy cut into several transactions resumes where it stopped. Streaming
the records is :mod:`.copy_stream`; the decision's side of it, :mod:`.recovery`.

A partition is copied whole or not at all: when the log no longer holds every record the
hand-off counted there (the log starts past its first offset: retention, DeleteRecords; or
fewer records: compaction of aborted data), that partition's records are lost, named with
their counts. A log that cannot be read now raises (outcome unknown): never a final loss.
Runs on: the driver (planning worker's roll-forward, commit and abort workers).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ...acls import RECOVERY_SUFFIX
from ...errors import TransactionOutcomeUnknownError
from ...wire import KafkaWire
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .txn_log import read_log


def recovery_id(ids: TransactionalIdFactory) -> str:
    """The query's recovery transactional id, ``<prefix>-recovery`` (fenced with the pool):
    its last part is not a number, so it is never a task's id (``TransactionalIdFactory``)."""
    return f"{ids.prefix}-{RECOVERY_SUFFIX}"


def txn_key(h: TxnHandoff) -> str:
    """A transaction's identity: id, producer id and epoch. The epoch alone is not enough:
    an expired id comes back with a new producer id and the same low epochs."""
    return f"{h.transactional_id}/{h.producer_id}/{h.epoch}"


@dataclass(frozen=True)
class Segment:
    """Records of one lost transaction (``key``) in one partition: those of its producer
    in ``[start, end)`` of the log. ``records``: how many (-1: not counted, a remainder)."""

    key: str
    topic: str
    partition: int
    records: int
    start: int
    #: The lost transaction's ABORT marker (or, for a copied part, the offset after it).
    end: int

    @property
    def producer_id(self) -> int:
        return int(self.key.rsplit("/", 2)[1])

    @property
    def where(self) -> tuple[str, str, int]:
        return self.key, self.topic, self.partition

    def to_json(self) -> list[Any]:
        return [self.key, self.topic, self.partition, self.records, self.start, self.end]

    @classmethod
    def from_json(cls, data: list[Any]) -> Segment:
        """A recorded segment; one recorded before segments had offsets (4 fields) stands
        for its whole partition (start 0, no end)."""
        key, topic, partition, records, *span = data
        start, end = span if span else (0, -1)
        return cls(key, topic, int(partition), int(records), int(start), int(end))


@dataclass
class CopyPlan:
    """What the log holds of some lost transactions: the segments to copy, and the rest."""

    segments: list[Segment] = field(default_factory=list)
    #: Partitions the log no longer holds, described (lost for good).
    unrecoverable: list[str] = field(default_factory=list)


def read_lost(wire: KafkaWire, lost: list[TxnHandoff], *, deadline_s: float,
              fetch_bytes: int = 8 << 20) -> CopyPlan:
    """The aborted partitions of ``lost`` transactions, checked against their counts (batch
    headers only: no record is held). Raises :class:`TransactionOutcomeUnknownError` when a
    log stays unreadable past ``kafka.default.api.timeout.ms`` (:func:`.txn_log.read_log`)
    or a partition has no marker yet: the caller keeps its decision and tries again later."""

    plan = CopyPlan()
    deadline = time.monotonic() + deadline_s
    for handoff in lost:
        counts = {(t, p): n for t, p, n in handoff.partitions}
        if not handoff.open or not counts:
            continue
        if {(t, p) for t, p, _ in handoff.first_offsets} != set(counts):
            plan.unrecoverable += [
                f"{handoff.describe()}: {t}-{p}: {n} records: the hand-off does not say "
                "where they are in the log (written by a development build before 0.1.0)"
                for (t, p), n in sorted(counts.items())]
            continue
        found = read_log(wire, handoff, fetch_bytes=fetch_bytes,
                         deadline_s=max(deadline - time.monotonic(), 1.0))
        if found.pending:  # (a partition gone with its marker, the transaction over, is not)
            raise TransactionOutcomeUnknownError(
                f"{handoff.describe()}: {found.why}: its outcome is not in the log yet; the "
                "decision is kept and recovered later")
        for part in found.partitions:
            where, n = f"{part.topic}-{part.partition}", counts[(part.topic, part.partition)]
            if part.marker:
                continue  # committed in this partition
            if part.gone:
                plan.unrecoverable.append(
                    f"{handoff.describe()}: {where}: {n} records: committed or lost, the log "
                    "no longer tells: it holds neither the records from the transaction's "
                    f"first offset {part.first} nor its marker (log start {part.log_start}; "
                    "retention, DeleteRecords or compaction removed them)")
            elif part.deleted:
                plan.unrecoverable.append(
                    f"{handoff.describe()}: {where}: {n} records: the log starts at offset "
                    f"{part.log_start}, past the transaction's first offset {part.first} "
                    "(retention or DeleteRecords removed them)")
            elif part.count != n:
                plan.unrecoverable.append(
                    f"{handoff.describe()}: {where}: {n} records: the log holds "
                    f"{part.count} of them (compaction removed aborted records?)")
            else:
                plan.segments.append(Segment(txn_key(handoff), part.topic, part.partition,
                                             n, part.first, part.end))
    return plan


# -- what a recovery transaction's hand-off records (``extra["recovery"]``) ---------------------


def describe_copy(copied: list[Segment], plan: CopyPlan | None = None,
                  lost: list[TxnHandoff] | None = None) -> dict[str, Any]:
    """A recovery hand-off's ``extra``: the segments it copies; the first one of a batch's
    recovery also carries the plan, what could not be copied and the lost hand-offs."""
    info: dict[str, Any] = {"copied": [s.to_json() for s in copied]}
    if plan is not None:
        info["plan"] = [s.to_json() for s in plan.segments]
        info["unrecoverable"] = list(plan.unrecoverable)
    if lost is not None:
        info["lost"] = [h.to_json() for h in lost]
    return {"recovery": info}


def lost_of(recovery: TxnHandoff) -> list[TxnHandoff] | None:
    """The lost hand-offs a recovery transaction copies from (None: not a copy from the log,
    e.g. a replay transaction a development build before 0.1.0 recorded as its recovery;
    [] for a later part of a copy)."""
    info = recovery.extra.get("recovery")
    if info is None:
        return None
    return [TxnHandoff.from_json(h) for h in info.get("lost", ())]


def plan_of(recovery: list[TxnHandoff]) -> CopyPlan | None:
    """The plan a batch's recovery recorded (None: recorded before plans were)."""
    for h in recovery:
        info = h.extra.get("recovery") or {}
        if "plan" in info:
            return CopyPlan([Segment.from_json(s) for s in info["plan"]],
                            list(info.get("unrecoverable", ())))
    return None


def unrecoverable_of(recovery: TxnHandoff) -> list[str]:
    return list((recovery.extra.get("recovery") or {}).get("unrecoverable", ()))


def copied_of(recovery: TxnHandoff) -> list[Segment]:
    return [Segment.from_json(c)
            for c in (recovery.extra.get("recovery") or {}).get("copied", ())]


def missing(plan: list[Segment], committed: list[Segment]) -> list[Segment]:
    """What of ``plan`` no committed copy holds: each segment less the committed ranges of
    the same transaction and partition (a copy without an end stands for it whole)."""
    done: dict[tuple[str, str, int], list[Segment]] = {}
    for c in committed:
        done.setdefault(c.where, []).append(c)
    out: list[Segment] = []
    for seg in plan:
        pieces = [(seg.start, seg.end)]
        for c in done.get(seg.where, ()):
            if c.end < 0:
                pieces = []
                break
            pieces = [(a, b) for lo, hi in pieces
                      for a, b in ((lo, min(hi, c.start)), (max(lo, c.end), hi)) if a < b]
        whole = pieces == [(seg.start, seg.end)]
        out += [Segment(seg.key, seg.topic, seg.partition, seg.records if whole else -1, a, b)
                for a, b in pieces]
    return out
