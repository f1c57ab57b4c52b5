"""Idempotent Produce with retries: every batch reaches its partition's log exactly once.

Runs on: an executor (inside :class:`~.task_writer.TaskWriter`). Batches carry the
producer id, epoch and a base sequence per partition, so the broker drops a batch it
already has. That makes re-sending safe when a leader moves: on NOT_LEADER_OR_FOLLOWER,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT or a dropped connection the
pipeline refreshes the leaders and re-sends every unacknowledged batch of the partition,
in sequence order and one at a time, inside the same transaction (what Kafka's
``Sender.completeBatch`` / ``TransactionManager.canRetry`` do: a batch after a failed
one fails with OUT_OF_ORDER_SEQUENCE_NUMBER, which is retried too; DUPLICATE_SEQUENCE_NUMBER
means "already written"). Any other code fails the task with what it means.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import (
    InvalidTimestampError,
    KafkaProtocolError,
    RecordTooLargeError,
    TimeoutError_,
    for_code,
)
from ...kafka_codes import LEADER_MOVED, Code
from ...wire import KafkaWire, produce_errors, produce_request
from ...wire.retry import LOST_NODE, Deadline
from ...wire.txn import produce_offsets

TopicPartition = tuple[str, int]

#: Produce codes that say "this leader cannot take it now; ask again for the leader":
#: UNKNOWN_TOPIC_OR_PARTITION (metadata not yet on this broker), a leader that moved, a
#: timeout, and NOT_ENOUGH_REPLICAS_AFTER_APPEND (appended, not replicated: a re-send is a
#: duplicate, which the sequence drops).
RETRY_CODES = LEADER_MOVED | {
    Code.UNKNOWN_TOPIC_OR_PARTITION, Code.REQUEST_TIMED_OUT, Code.NETWORK_EXCEPTION,
    Code.NOT_ENOUGH_REPLICAS, Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
}
_TOO_LARGE = frozenset({Code.MESSAGE_TOO_LARGE, Code.RECORD_LIST_TOO_LARGE})


class Verdict(enum.Enum):
    ACKED = "acked"
    RETRY = "retry"
    FATAL = "fatal"


def verdict(code: int, earlier_unacked: bool) -> Verdict:
    """What a batch's Produce answer means.

    ``earlier_unacked``: a batch with a lower sequence of the same partition is not yet
    acknowledged, so OUT_OF_ORDER_SEQUENCE_NUMBER only says that one failed first.
    """
    if code in (Code.NONE, Code.DUPLICATE_SEQUENCE_NUMBER):
        return Verdict.ACKED
    if code in RETRY_CODES or (code == Code.OUT_OF_ORDER_SEQUENCE_NUMBER and earlier_unacked):
        return Verdict.RETRY
    return Verdict.FATAL


@dataclass(eq=False)
class Batch:
    """One encoded record batch and where it goes; kept until the broker acknowledged it."""

    tp: TopicPartition
    sequence: int
    count: int
    data: bytes
    max_timestamp: int = 0


@dataclass
class _Sent:
    node: int
    pending: tuple[int, Any]
    batches: list[Batch] = field(default_factory=list)


class ProducePipeline:
    """Up to ``max_in_flight`` Produce requests per leader; retries as the module says.

    ``leader(tp)`` names a partition's leader from the caller's metadata, ``refresh()``
    asks the cluster again. ``acked`` counts acknowledged records per partition.
    """

    def __init__(
        self,
        wire: KafkaWire,
        transactional_id: str | None,
        *,
        leader: Callable[[TopicPartition], int],
        refresh: Callable[[Deadline], None],
        max_in_flight: int = 5,
        request_timeout_ms: int = 30000,
        delivery_timeout_s: float = 120.0,
    ) -> None:
        self.wire = wire
        self.transactional_id = transactional_id
        self.leader = leader
        self.refresh = refresh
        self.max_in_flight = max_in_flight
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_s = delivery_timeout_s
        self.acked: dict[TopicPartition, int] = {}
        #: Offset of each partition's first record (its sequence-0 batch), when the broker
        #: said: where the transaction's outcome and records are read from the log.
        self.first_offsets: dict[TopicPartition, int] = {}
        self.retries = 0  # batches re-sent (for tests and logs)
        self._unacked: dict[TopicPartition, deque[Batch]] = {}
        self._in_flight: dict[int, deque[_Sent]] = {}
        self._retry: set[TopicPartition] = set()
        self._last_error: dict[TopicPartition, BaseException] = {}

    @property
    def what(self) -> str:
        return self.transactional_id or "idempotent producer"

    # -- normal path -----------------------------------------------------------------------

    def send(self, node: int, batches: Sequence[Batch]) -> None:
        """Send one request to ``node`` (at most one batch per partition), pipelined."""
        self._drain(node, self.max_in_flight - 1)
        for batch in batches:
            self._unacked.setdefault(batch.tp, deque()).append(batch)
        self._send(node, list(batches))
        self._recover_if_needed()

    def flush(self) -> None:
        """Wait for every answer; re-send what needs it. Raises if a batch cannot be written."""
        for node in list(self._in_flight):
            self._drain(node, 0)
        self._recover_if_needed()

    def _send(self, node: int, batches: list[Batch]) -> None:
        if node < 0:  # no leader known (being elected): like a lost one
            self._failed(batches, for_code(Code.LEADER_NOT_AVAILABLE)(
                f"Produce by {self.what}: no leader"))
            return
        request = produce_request(self.wire, self.transactional_id,
                                  {b.tp: b.data for b in batches}, self.request_timeout_ms)
        try:
            pending = self.wire.send(node, request, f"Produce {self.what}")
        except LOST_NODE as exc:
            self._failed(batches, exc)
            return
        self._in_flight.setdefault(node, deque()).append(_Sent(node, pending, batches))

    def _drain(self, node: int, keep: int) -> None:
        queue = self._in_flight.get(node)
        while queue and len(queue) > keep:
            self._complete(queue.popleft())

    def _complete(self, sent: _Sent) -> None:
        """Sort one answer's batches into acknowledged, to retry, or fatal (raised)."""
        try:
            response = self.wire.wait([sent.pending], f"Produce {self.what}",
                                      self.request_timeout_ms + 5000)[0]
        except LOST_NODE as exc:
            self.wire.drop_connection(sent.node)  # later answers on it must not count
            self._failed(sent.batches, exc)
            return
        errors = produce_errors(response)
        offsets = produce_offsets(response)
        for batch in sent.batches:
            code, message = errors.get(batch.tp, (0, None))
            queue = self._unacked[batch.tp]
            earlier = bool(queue) and queue[0] is not batch
            result = verdict(code, earlier)
            if result is Verdict.ACKED:
                queue.remove(batch)
                self.acked[batch.tp] = self.acked.get(batch.tp, 0) + batch.count
                if batch.sequence == 0 and offsets.get(batch.tp, -1) >= 0:
                    self.first_offsets[batch.tp] = offsets[batch.tp]
            elif result is Verdict.RETRY:
                self._retry.add(batch.tp)
                self._last_error[batch.tp] = for_code(code)(
                    f"Produce to {batch.tp[0]}-{batch.tp[1]} by {self.what}")
            else:
                raise self._fatal(batch, code, message)

    def _failed(self, batches: list[Batch], exc: BaseException) -> None:
        for batch in batches:
            self._retry.add(batch.tp)
            self._last_error[batch.tp] = exc

    # -- retries ---------------------------------------------------------------------------

    def _recover_if_needed(self) -> None:
        if not self._retry:
            return
        for node in list(self._in_flight):  # settle everything sent: its answers count
            self._drain(node, 0)
        deadline = Deadline(self.delivery_timeout_s)
        while self._retry:
            if deadline.expired:
                raise self._gave_up(deadline)
            deadline.pause()
            try:
                self.refresh(deadline)
            except (KafkaProtocolError, *LOST_NODE) as exc:
                for tp in self._retry:
                    self._last_error[tp] = exc
                continue
            for tp in sorted(self._retry):
                self._resend(tp)

    def _resend(self, tp: TopicPartition) -> None:
        """Re-send ``tp``'s unacknowledged batches in sequence order, each after the last."""
        self._retry.discard(tp)
        while self._unacked.get(tp):
            batch = self._unacked[tp][0]
            node = self.leader(tp)
            if node < 0:
                self._retry.add(tp)
                self._last_error[tp] = for_code(Code.LEADER_NOT_AVAILABLE)(
                    f"partition {tp[0]}-{tp[1]} has no leader")
                return
            self.retries += 1
            self._send(node, [batch])
            self._drain(node, 0)
            if tp in self._retry:
                return

    def _gave_up(self, deadline: Deadline) -> TimeoutError_:
        parts = ", ".join(f"{t}-{p} ({self._last_error.get((t, p))})"
                          for t, p in sorted(self._retry))
        return TimeoutError_(
            f"Produce by {self.what}: partitions {parts} found no leader that took their "
            f"records within {deadline.seconds:.0f}s (kafka.delivery.timeout.ms); check that "
            "the brokers are up and the partitions have enough in-sync replicas "
            "(min.insync.replicas). Nothing of this task was committed")

    def _fatal(self, batch: Batch, code: int, message: str | None) -> Exception:
        tp = f"{batch.tp[0]}-{batch.tp[1]}"
        if code == Code.INVALID_TIMESTAMP:
            return InvalidTimestampError(
                f"{tp}: the broker refused the records' timestamps (the `timestamp` column; the "
                f"batch's latest is {_iso(batch.max_timestamp)}): Kafka 4 refuses timestamps "
                "more than an hour in the future (log.message.timestamp.after.max.ms, topic "
                "setting message.timestamp.after.max.ms) or older than "
                "log.message.timestamp.before.max.ms. Fix the column's values, drop the column to "
                "let the sink stamp records with the write time, or raise the topic setting. "
                "Nothing of this task was committed"
                + (f" (broker: {message.strip()})" if message else ""))
        if code in _TOO_LARGE:
            return RecordTooLargeError(
                f"{tp}: a batch of {batch.count} records ({len(batch.data)} bytes) was rejected "
                "as too large; raise the topic's max.message.bytes (a single record must fit on "
                "its own)")
        if code == Code.OUT_OF_ORDER_SEQUENCE_NUMBER:
            message = (message or "") + (
                " (the broker lost records this producer had written: an unclean leader "
                "election or a truncated log; the task fails and its transaction is not "
                "committed)")
        return for_code(code)(f"Produce to {tp} by {self.what}"
                              + (f": {message.strip()}" if message else ""))


def _iso(ms: int) -> str:
    import datetime

    try:
        return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat()
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms since the epoch"
