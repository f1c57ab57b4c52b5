"""What the log says about a handed-off transaction: its outcome per partition, its records.

"Lost" is a fact read from the log, not a guess from an error code (docs/design.md,
invariant 9). PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE or a dropped
connection say that an EndTxn failed, not that the transaction did not commit: an earlier
attempt whose answer was lost, an operator's fence after the commit, or an id that expired
after it all end that way. And NONE does not always mean committed everywhere either: an
operator's ``kafka-transactions.sh abort`` writes an ABORT marker straight to one partition
while the coordinator still holds the transaction, whose later commit then misses that
partition. The transaction's partitions hold the truth: from the offset of its first
record (the hand-off's ``first_offsets``), the first control batch of its producer id is
that partition's marker: COMMIT or ABORT. No marker up to the high watermark yet: not
known (still open, or the coordinator has not written it yet). Records *and* marker
deleted (retention, DeleteRecords, compaction) once the transaction is over there: gone,
committed or aborted, the log no longer tells; while it may still be open: not known.

The same scan gives the records an aborted partition holds, which recovery copies
(invariant 10, :mod:`.recovery`). Every driver path that decides from the log (the live
commit's confirmation, a refused commit's verdict, roll-forward, recovery's plan and its
copies' outcomes) reads it through :func:`read_log`: a log that cannot be read now (a
leader killed a moment ago, its partition not yet moved) is read again until
``kafka.default.api.timeout.ms`` has passed.
Runs on: the driver (commit worker, planning worker's roll-forward).
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kafka.record import MemoryRecords

from ...errors import EosKafkaError, NotAuthorizedError, TransactionOutcomeUnknownError
from ...faults import fault_point
from ...records import control_is_commit
from ...wire import Bounds, KafkaWire, LogCursor, fetch_bounds
from ...wire.admin_txns import coordinator_may_hold
from ...wire.cluster import fresh_leaders
from ...wire.retry import Deadline
from ..handoff import TxnHandoff
from .hanging_txns import end_hanging

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A marker still missing this long (s) is asked about (hanging.py), then again every so often.
_HANGING_CHECK_S = (2.0, 10.0)


class LogOutcome(enum.Enum):
    COMMITTED = "committed"  # COMMIT markers in every partition
    ABORTED = "aborted"  # ABORT markers in every partition
    PARTIAL = "partly aborted"  # ABORT in some partitions, COMMIT in the others
    UNKNOWN = "unknown"  # a partition without a marker yet, or unreadable
    GONE = "records gone"  # records and marker deleted in some partitions, the txn over


@dataclass(frozen=True)
class LogRecord:
    """One record as written, with what a copy must keep (topic, partition, timestamp)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class PartitionInLog:
    """One partition of a transaction, as its log shows it."""

    topic: str
    partition: int
    first: int
    #: The producer's first marker from ``first`` on: True COMMIT, False ABORT, None none yet.
    marker: bool | None
    #: The log starts past ``first`` (retention, DeleteRecords): records are gone (the
    #: marker may still be known).
    deleted: bool = False
    log_start: int = 0
    #: Records and marker deleted, and the transaction no longer open there: committed or
    #: aborted, the log no longer tells (:func:`_over`).
    gone: bool = False
    #: The producer's records from ``first`` to its marker (when asked for).
    records: tuple[LogRecord, ...] = ()
    #: The marker's offset (-1: none yet), and how many records the producer's batches
    #: from ``first`` to it hold (their headers': what a copy must find there).
    end: int = -1
    count: int = 0


@dataclass(frozen=True)
class TxnInLog:
    outcome: LogOutcome
    #: Why, in words (for error messages and logs).
    why: str
    partitions: tuple[PartitionInLog, ...] = ()

    @property
    def aborted(self) -> list[PartitionInLog]:
        return [p for p in self.partitions if p.marker is False]

    @property
    def pending(self) -> list[PartitionInLog]:
        """Partitions whose marker has not been written yet (and could still be)."""
        return [p for p in self.partitions if p.marker is None and not p.gone]


def read_transaction(wire: KafkaWire, handoff: TxnHandoff, *, records: bool = False,
                     deadline_s: float = 30.0, wait: bool = True,
                     strict: bool = False, fetch_bytes: int = 8 << 20) -> TxnInLog:
    """The outcome (and with ``records``, the records) of ``handoff``'s transaction.

    Waits (``wait``) up to ``deadline_s`` for markers still being written. A partition that
    cannot be read makes the outcome UNKNOWN, or with ``strict`` raises
    :class:`TransactionOutcomeUnknownError` (recovery must never take a failed read for an
    empty one, or it would make final a loss a later read could still copy). Hand-offs that
    do not say where their records are (written by a development build before 0.1.0) are
    UNKNOWN too; partitions whose records and marker were deleted
    are GONE once the transaction is over there: the caller decides what that means.
    ``fetch_bytes`` bounds each Fetch (recovery's memory bound)."""
    if not handoff.open:
        return TxnInLog(LogOutcome.COMMITTED, "no transaction: nothing to end")
    firsts = {(t, p): o for t, p, o in handoff.first_offsets}
    missing = [(t, p) for t, p, _ in handoff.partitions if (t, p) not in firsts]
    if missing:
        return TxnInLog(LogOutcome.UNKNOWN, "the hand-off does not say where its records are "
                        f"in {missing} (written by a development build before 0.1.0?)")
    waiting = Deadline(deadline_s)  # markers land a moment after EndTxn answers (Kafka)
    deadline = waiting.at
    check_at = time.monotonic() + _HANGING_CHECK_S[0]
    while True:
        try:
            found = _scan(wire, handoff, firsts, records, deadline, fetch_bytes)
        except NotAuthorizedError:
            raise  # a missing READ ACL on the output topic is named, not retried (docs/acls.md)
        except EosKafkaError as exc:
            why = f"could not read the log of {handoff.transactional_id}: {exc}"
            if strict:
                raise TransactionOutcomeUnknownError(
                    f"{handoff.describe()}: {why}; nothing is decided from it, the decision "
                    "is kept and read again later") from exc
            return TxnInLog(LogOutcome.UNKNOWN, why)
        if not found.pending or not wait or time.monotonic() >= deadline:
            return found
        if time.monotonic() >= check_at:
            check_at = time.monotonic() + _HANGING_CHECK_S[1]
            if end_hanging(wire, handoff, [(p.topic, p.partition, p.first)
                                           for p in found.pending]):
                continue  # an ABORT marker now: read again at once
        waiting.pause()


def read_log(wire: KafkaWire, handoff: TxnHandoff, *, deadline_s: float,
             records: bool = False, fetch_bytes: int = 8 << 20) -> TxnInLog:
    """:func:`read_transaction` (``strict``) for a path that decides from the log, read
    again while the log cannot be read now (:func:`read_again`)."""
    return read_again(wire, handoff.transactional_id, lambda left: read_transaction(
        wire, handoff, strict=True, records=records, fetch_bytes=fetch_bytes,
        deadline_s=max(left, 1.0)), deadline_s=deadline_s)


def read_again(wire: KafkaWire, what: str, read: Callable[[float], T], *,
               deadline_s: float) -> T:
    """``read(seconds_left)``, again while it raises :class:`TransactionOutcomeUnknownError`
    (a log that cannot be read now), the leaders looked up anew each time, until
    ``kafka.default.api.timeout.ms`` or ``deadline_s`` has passed, whichever comes first;
    then that error (the decision is kept). A leader moves within seconds: failing at the
    first unreadable read would fail the query for it."""
    deadline = Deadline(deadline_s)
    retry = Deadline(min(deadline_s, wire.config.api_timeout_s))
    while True:
        try:
            return read(deadline.left())
        except TransactionOutcomeUnknownError as exc:
            if not retry.pause():
                raise
            log.info("eoskafka: %s: the log could not be read (%s); reading it again",
                     what, exc)
            wire.close()  # the next read looks the leaders up again


def _scan(wire: KafkaWire, handoff: TxnHandoff, firsts: dict[tuple[str, int], int],
          want_records: bool, deadline: float, fetch_bytes: int) -> TxnInLog:
    topics = sorted({t for t, _ in firsts})
    info = fresh_leaders(wire, topics, deadline=max(deadline - time.monotonic(), 1.0))
    leaders = {tp: info[tp[0]].leaders[tp[1]] for tp in firsts}
    bounds = fetch_bounds(wire, leaders, dict(firsts))
    parts: list[PartitionInLog] = []
    for tp, first in sorted(firsts.items()):
        b = bounds[tp]
        # Records deleted from the start (retention, DeleteRecords): the marker may still be
        # there, and is this transaction's only after one of its own batches (same producer
        # id and epoch): a later transaction of the id could have written the first one.
        deleted = b.log_start > first
        marker: bool | None = None
        mine = not deleted
        later = False  # a later transaction of the producer is here: ours ended before it
        found: list[LogRecord] = []
        end, count = -1, 0
        cursor = LogCursor(wire, leaders[tp], tp, max(first, b.log_start), b.high_watermark,
                           read_ahead=False, max_bytes=fetch_bytes,
                           deadline_s=max(deadline - time.monotonic(), 1.0))
        for header, view in cursor:
            if header.producer_id != handoff.producer_id:
                continue
            if header.is_control:
                commit = control_is_commit(view)
                # A commit never bumps the epoch: a COMMIT of a higher one is a later
                # transaction's, ours removed by compaction (an abort Kafka starts may).
                later = commit and header.producer_epoch > handoff.epoch
                marker = commit if mine and not later else None
                end = header.base_offset if marker is not None else -1
                break
            if header.producer_epoch > handoff.epoch:
                later = True  # its data before any marker: ours was compacted away
                break
            mine = mine or header.producer_epoch == handoff.epoch
            count += header.record_count
            if want_records and not deleted:
                fault_point("recover.during_read")  # a test drops the connection here
                found += _records(tp, first, view)
        gone = marker is None and (later or _over(wire, handoff, tp, b, first))
        parts.append(PartitionInLog(tp[0], tp[1], first, marker, deleted, b.log_start, gone,
                                    tuple(found), end, count))
    return TxnInLog(*_outcome(parts), tuple(parts))


def _over(wire: KafkaWire, handoff: TxnHandoff, tp: tuple[str, int], b: Bounds,
          first: int) -> bool:
    """Whether a transaction with no marker left in ``tp`` can no longer be open there: its
    records and marker were removed. Never taken for over when that cannot be shown.

    Deleted from the start (the log starts past ``first``): Kafka keeps an open
    transaction's LSO at its first offset, raised to the log start when records before it
    are deleted, so an LSO past the log start proves it over; an LSO at the log start (an
    empty log, or another open transaction) does not, and the coordinator is asked.
    Otherwise (compaction removed aborted records, then the marker): an LSO past ``first``
    means its marker was written below the high watermark, yet the scan found none; the
    coordinator must agree too (a broker whose LSO runs ahead of its log, as Tansu's can,
    has no DescribeTransactions: never over)."""
    if b.log_start > first and b.last_stable > b.log_start:
        return True
    if b.log_start <= first and b.last_stable <= first:
        return False  # no marker yet, and the transaction may well be open
    return coordinator_may_hold(wire, handoff.transactional_id, handoff.producer_id,
                                tp) is False


def _outcome(parts: list[PartitionInLog]) -> tuple[LogOutcome, str]:
    gone = [f"{p.topic}-{p.partition}" for p in parts if p.gone]
    waiting = [f"{p.topic}-{p.partition}" for p in parts if p.marker is None and not p.gone]
    markers = {p.marker for p in parts if p.marker is not None}
    if waiting:
        deleted = [f"{p.topic}-{p.partition}" for p in parts if p.deleted and not p.gone
                   and p.marker is None]
        return LogOutcome.UNKNOWN, f"no marker yet in {', '.join(waiting)}" + (
            f" (records and marker deleted in {', '.join(deleted)}, where the transaction "
            "may still be open)" if deleted else "")
    if gone:
        return LogOutcome.GONE, (f"the transaction's records and marker in {', '.join(gone)} "
                                 "were removed (retention, DeleteRecords or compaction) and it "
                                 "is over there: committed or lost, the log no longer tells")
    if markers == {True}:
        return LogOutcome.COMMITTED, "COMMIT markers in every partition"
    if markers == {False}:
        return LogOutcome.ABORTED, "ABORT markers in every partition"
    aborted = [f"{p.topic}-{p.partition}" for p in parts if p.marker is False]
    return LogOutcome.PARTIAL, (f"ABORT markers in {', '.join(aborted)} (an operator's abort "
                                "of those partitions?), COMMIT markers in the others")


def _records(tp: tuple[str, int], first: int, view: memoryview) -> list[LogRecord]:
    out: list[LogRecord] = []
    for batch in MemoryRecords(bytes(view)):
        for r in batch:
            if r.offset >= first:
                out.append(LogRecord(tp[0], tp[1], r.offset, r.timestamp, r.key, r.value,
                                     tuple((k, v) for k, v in r.headers)))
    return out
