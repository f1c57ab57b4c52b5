"""Streaming a copy from the log into one recovery transaction, in bounded memory.

Records go from the log to the recovery producer a Fetch at a time: the driver holds one
Fetch response, a buffer of decoded records and the producer's batches in flight, each
bounded by :class:`CopyLimits` (docs/design.md, invariant 16), whatever the size of the
lost batch. One recovery transaction takes segments (:mod:`.log_copy`) until it reaches
its share of ``kafka.transaction.timeout.ms`` (or, for tests, a record count): it stops at a
batch boundary, and the rest goes into the next recovery transaction, recorded before its
own EndTxn. Runs on: the driver (planning worker's roll-forward, commit and abort workers).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from kafka.record import MemoryRecords

from ...errors import EosKafkaError, NotAuthorizedError, TransactionOutcomeUnknownError
from ...faults import fault_point
from ...wire import TXN_PROTOCOL, KafkaWire, LogCursor
from ...wire.cluster import fresh_leaders
from ..handoff import TxnHandoff
from ..naming import TransactionalIdFactory
from .log_copy import Segment, recovery_id
from .txn_log import LogRecord

if TYPE_CHECKING:
    from ..task.writer import TaskWriter

log = logging.getLogger(__name__)

#: Test override of :class:`CopyLimits` (``memory_bytes=131072,txn_records=1000``).
LIMITS_ENV = "EOSKAFKA_TEST_RECOVERY_LIMITS"
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_RECORD_OVERHEAD = 200  # bytes a decoded record costs besides its key, value and headers


@dataclass(frozen=True)
class CopyLimits:
    """How much a recovery holds in driver memory, and puts in one transaction."""

    #: Driver memory for records being copied: a quarter for one Fetch response, a quarter
    #: for decoded records, about half for the producer's batches (pending and in flight).
    memory_bytes: int = 32 << 20
    #: Share of the transaction timeout one recovery transaction may take, from its
    #: InitProducerId (what is left covers recording it and its EndTxn).
    txn_share: float = 0.5
    #: At most about this many records a recovery transaction (0: no limit; tests).
    txn_records: int = 0

    @classmethod
    def current(cls) -> CopyLimits:
        """The defaults, or a test's override from ``EOSKAFKA_TEST_RECOVERY_LIMITS``."""
        spec = os.environ.get(LIMITS_ENV, "")
        kinds = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for item in filter(None, (s.strip() for s in spec.split(","))):
            name, _, value = item.partition("=")
            values[name] = float(value) if kinds[name] == "float" else int(value)
        return cls(**values)

    @property
    def fetch_bytes(self) -> int:
        return max(self.memory_bytes // 4, 16 << 10)

    @property
    def buffer_bytes(self) -> int:
        return max(self.memory_bytes // 4, 16 << 10)

    @property
    def batch_bytes(self) -> int:
        """The producer's batch size: one pending and up to five in flight per leader."""
        return max(self.memory_bytes // 16, 16 << 10)


def write_part(wire: KafkaWire, ids: TransactionalIdFactory, todo: list[Segment], *,
               limits: CopyLimits, timeout_ms: int, deadline_s: float, lineage: str,
               batch_id: int) -> tuple[TxnHandoff, list[Segment], list[Segment]]:
    """Copy ``todo``'s records, in order, into a new recovery transaction left open for the
    driver's record and EndTxn, until it is full. Returns its hand-off, the segments (or
    leading parts) it copied, and what is left for the next one. Its InitProducerId aborts
    whatever an earlier, unrecorded recovery transaction left open on the id."""
    from ..task.context import WriterContext
    from ..task.writer import TaskWriter  # the codec: only when there is something to copy

    writer = TaskWriter(wire, transactional_id=recovery_id(ids), topic=None,
                        transaction_timeout_ms=timeout_ms, batch_records=10_000,
                        batch_bytes=limits.batch_bytes,
                        context=WriterContext(lineage=lineage, batch_id=batch_id))
    writer.open()
    try:
        return _stream(wire, writer, todo, limits, timeout_ms, deadline_s)
    except (NotAuthorizedError, TransactionOutcomeUnknownError):
        _abort(wire, writer, deadline_s)
        raise
    except EosKafkaError as exc:  # a log that cannot be read now is not a final loss
        _abort(wire, writer, deadline_s)
        raise TransactionOutcomeUnknownError(
            f"could not read the log to copy into {writer.transactional_id}: {exc}; nothing of "
            "it was recorded (its transaction is aborted), the decision is kept and its copy "
            "goes on later") from exc


def _stream(wire: KafkaWire, writer: TaskWriter, todo: list[Segment], limits: CopyLimits,
            timeout_ms: int, deadline_s: float
            ) -> tuple[TxnHandoff, list[Segment], list[Segment]]:
    full_at = time.monotonic() + timeout_ms / 1000 * limits.txn_share
    copied: list[Segment] = []
    written = 0
    leaders: dict[str, dict[int, int]] = {}
    for i, seg in enumerate(todo):
        if seg.topic not in leaders:
            info = fresh_leaders(wire, [seg.topic], deadline=deadline_s)
            leaders[seg.topic] = info[seg.topic].leaders
        cursor = LogCursor(wire, leaders[seg.topic][seg.partition], (seg.topic, seg.partition),
                           seg.start, seg.end, max_bytes=limits.fetch_bytes, read_ahead=False,
                           deadline_s=deadline_s)
        buffer: list[LogRecord] = []
        held = count = 0
        upto = seg.start
        for header, view in cursor:
            if header.producer_id != seg.producer_id or header.is_control:
                upto = header.last_offset + 1
                continue
            taken = written + count + len(buffer)
            if taken and _full(limits, taken, full_at):
                upto = header.base_offset  # the rest starts with a batch to copy
                break
            fault_point("recover.during_read")  # a test drops the connection here
            for record in _decode(seg, view):
                buffer.append(record)
                held += _size(record)
            if held >= limits.buffer_bytes:
                writer.write_batch(_arrow(buffer))
                count, buffer, held = count + len(buffer), [], 0
            upto = header.last_offset + 1
        else:
            upto = seg.end
        if buffer:
            writer.write_batch(_arrow(buffer))
            count += len(buffer)
        writer.flush()  # nothing of this partition stays pending: memory stays bounded
        done = upto >= seg.end
        copied.append(replace(seg, records=count, end=upto))
        written += count
        if not done:
            left = [replace(seg, records=-1, start=upto), *todo[i + 1:]]
            return _handoff(writer, copied), copied, left
        if _full(limits, written, full_at):
            return _handoff(writer, copied), copied, todo[i + 1:]
    return _handoff(writer, copied), copied, []


def _abort(wire: KafkaWire, writer: TaskWriter, deadline_s: float) -> None:
    """End an unrecorded recovery transaction that failed (best effort: the id is fenced
    with the pool at the next planning, and the next copy's InitProducerId aborts it)."""
    from .committer import finish

    if writer.producer is None or writer.transactional_id is None:
        return
    open_txn = TxnHandoff(writer.transactional_id, writer.producer.producer_id,
                          writer.producer.epoch, TXN_PROTOCOL, open=True)
    wire.close()  # the failed read may have left the connection mid-answer
    try:
        finish(wire, [open_txn], commit=False, deadline_s=min(deadline_s, 10.0))
    except EosKafkaError as exc:
        log.warning("eoskafka: could not abort the failed recovery transaction %s now (%s); "
                    "it is aborted by the next copy or fence", writer.transactional_id, exc)


def _full(limits: CopyLimits, records: int, full_at: float) -> bool:
    return (limits.txn_records > 0 and records >= limits.txn_records) or \
        time.monotonic() >= full_at


def _handoff(writer: TaskWriter, copied: list[Segment]) -> TxnHandoff:
    """The open recovery transaction's hand-off, checked against what was fed to it."""
    handoff = writer.handoff()
    wrote = {(t, p): n for t, p, n in handoff.partitions}
    wanted: dict[tuple[str, int], int] = {}
    for seg in copied:
        if seg.records:
            wanted[(seg.topic, seg.partition)] = wanted.get((seg.topic, seg.partition), 0) \
                + seg.records
    if wrote != wanted:  # the produce path must account for every record it was given
        raise AssertionError(f"recovery wrote {wrote}, expected {wanted}")
    return handoff


def _decode(seg: Segment, view: memoryview) -> list[LogRecord]:
    out: list[LogRecord] = []
    for batch in MemoryRecords(bytes(view)):
        for r in batch:
            if seg.start <= r.offset < seg.end:
                out.append(LogRecord(seg.topic, seg.partition, r.offset, r.timestamp, r.key,
                                     r.value, tuple((k, v) for k, v in r.headers)))
    return out


def _size(r: LogRecord) -> int:
    return (_RECORD_OVERHEAD + len(r.key or b"") + len(r.value or b"")
            + sum(len(k) + len(v or b"") for k, v in r.headers))


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
