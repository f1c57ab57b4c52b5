"""Copying from the log: a decided transaction that Kafka aborted, record for record.

A decided transaction that Kafka aborted (a fence, the driver down longer than
``kafka.transaction.timeout.ms``, an operator's ``kafka-transactions.sh abort``) still has
its records in its output partitions, from its hand-off's first offset to its producer's
ABORT marker. Recovery reads exactly those records (topic, partition, key, value, headers,
timestamp) and writes them in one *recovery transaction* on the query's own
``<prefix>-recovery`` id, whatever a replay of the batch writes (docs/design.md,
invariant 10: a non-deterministic query, changed options or duplicate rows change
nothing). The decision's side of it (recording, committing, reporting) is :mod:`.recovery`.

A partition is copied whole or not at all: when the log no longer holds every record the
hand-off counted there (the log starts past its first offset: retention, DeleteRecords; or
fewer records: compaction of aborted data), that partition's records are lost, named with
their counts. A log that cannot be read now raises (outcome unknown): never a final loss.
Runs on: the driver (planning worker's roll-forward, commit and abort workers).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from ...acls import RECOVERY_SUFFIX
from ...errors import TransactionOutcomeUnknownError
from ...wire import KafkaWire
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .txn_log import LogRecord, read_transaction

log = logging.getLogger(__name__)

_BATCH_RECORDS = 10_000
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def recovery_id(ids: TransactionalIdFactory) -> str:
    """The query's recovery transactional id, ``<prefix>-recovery`` (fenced with the pool):
    its last part is not a number, so it is never a task's id (``TransactionalIdFactory``)."""
    return f"{ids.prefix}-{RECOVERY_SUFFIX}"


def txn_key(h: TxnHandoff) -> str:
    """A transaction's identity: id, producer id and epoch. The epoch alone is not enough:
    an expired id comes back with a new producer id and the same low epochs."""
    return f"{h.transactional_id}/{h.producer_id}/{h.epoch}"


@dataclass
class CopyPlan:
    """What the log holds of some lost transactions: the records to copy, and the rest."""

    records: list[LogRecord] = field(default_factory=list)
    #: (transaction key, topic, partition, records) of each partition copied.
    copied: list[tuple[str, str, int, int]] = field(default_factory=list)
    #: Partitions the log no longer holds, described (lost for good).
    unrecoverable: list[str] = field(default_factory=list)


def read_lost(wire: KafkaWire, lost: list[TxnHandoff], *, deadline_s: float) -> CopyPlan:
    """The aborted partitions' records of ``lost`` transactions, checked against their
    counts. Raises :class:`TransactionOutcomeUnknownError` when a log cannot be read now or
    a partition has no marker yet: the caller keeps its decision and tries again later."""
    plan = CopyPlan()
    deadline = time.monotonic() + deadline_s
    for handoff in lost:
        counts = {(t, p): n for t, p, n in handoff.partitions}
        if not handoff.open or not counts:
            continue
        if {(t, p) for t, p, _ in handoff.first_offsets} != set(counts):
            plan.unrecoverable += [
                f"{handoff.describe()}: {t}-{p}: {n} records: the hand-off does not say "
                "where they are in the log (written by an older eoskafka)"
                for (t, p), n in sorted(counts.items())]
            continue
        found = read_transaction(wire, handoff, records=True, strict=True,
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
                    f"no longer tells: it starts at offset {part.log_start}, past the "
                    f"transaction's first offset {part.first}, and holds no marker of it "
                    "(retention, DeleteRecords or compaction removed records and marker)")
            elif part.deleted:
                plan.unrecoverable.append(
                    f"{handoff.describe()}: {where}: {n} records: the log starts at offset "
                    f"{part.log_start}, past the transaction's first offset {part.first} "
                    "(retention or DeleteRecords removed them)")
            elif len(part.records) != n:
                plan.unrecoverable.append(
                    f"{handoff.describe()}: {where}: {n} records: the log holds "
                    f"{len(part.records)} of them (compaction removed aborted records?)")
            else:
                plan.records += part.records
                plan.copied.append((txn_key(handoff), part.topic, part.partition, n))
    return plan


def write_copy(wire: KafkaWire, ids: TransactionalIdFactory, plan: CopyPlan,
               lost: list[TxnHandoff], *, timeout_ms: int, lineage: str,
               batch_id: int) -> TxnHandoff:
    """Write ``plan``'s records in a recovery transaction, left open for the driver's
    decision; returns its hand-off, whose ``extra["recovery"]`` names what it copies, what
    could not be copied and the lost hand-offs themselves (a recovery that is itself lost
    starts again from them). InitProducerId on the recovery id first aborts whatever an
    earlier, unrecorded recovery left open there."""
    from ..task.writer import TaskWriter  # the codec: only when there is something to copy

    writer = TaskWriter(wire, transactional_id=recovery_id(ids), topic=None,
                        transaction_timeout_ms=timeout_ms, batch_records=_BATCH_RECORDS,
                        context={"lineage": lineage, "batch_id": batch_id})
    writer.open()
    by_partition: dict[tuple[str, int], list[LogRecord]] = {}
    for record in plan.records:
        by_partition.setdefault((record.topic, record.partition), []).append(record)
    for records in by_partition.values():
        writer.write_batch(_arrow(records))
    handoff = writer.handoff()
    wrote = {(t, p): n for t, p, n in handoff.partitions}
    wanted = {tp: len(rs) for tp, rs in by_partition.items()}
    if wrote != wanted:  # the produce path must account for every record it was given
        raise AssertionError(f"recovery wrote {wrote}, expected {wanted}")
    extra: dict[str, Any] = {"recovery": {
        "copied": [list(c) for c in plan.copied],
        "unrecoverable": list(plan.unrecoverable),
        "lost": [h.to_json() for h in lost]}}
    return replace(handoff, extra=extra)


def lost_of(recovery: TxnHandoff) -> list[TxnHandoff] | None:
    """The lost hand-offs a recovery transaction copies from (None: not written by
    :func:`write_copy`, e.g. an older eoskafka's replay transaction)."""
    info = recovery.extra.get("recovery")
    if info is None:
        return None
    return [TxnHandoff.from_json(h) for h in info.get("lost", ())]


def unrecoverable_of(recovery: TxnHandoff) -> list[str]:
    return list((recovery.extra.get("recovery") or {}).get("unrecoverable", ()))


def copied_of(recovery: TxnHandoff) -> list[tuple[str, str, int, int]]:
    return [tuple(c) for c in (recovery.extra.get("recovery") or {}).get("copied", ())]


def _arrow(records: list[LogRecord]) -> pa.RecordBatch:
    """The columns TaskWriter takes (sink/task/columns.py), one row per record, in log order."""
    columns: dict[str, pa.Array] = {
        "topic": pa.array([r.topic for r in records], pa.string()),
        "partition": pa.array([r.partition for r in records], pa.int32()),
        "key": pa.array([r.key for r in records], pa.binary()),
        "value": pa.array([r.value for r in records], pa.binary()),
        "timestamp": pa.array([r.timestamp_ms for r in records], pa.timestamp("ms")),
    }
    if any(r.headers for r in records):
        columns["headers"] = pa.array(
            [[{"key": k, "value": v} for k, v in r.headers] for r in records], _HEADERS)
    return pa.RecordBatch.from_pydict(columns)
