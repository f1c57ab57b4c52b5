"""Reading a topic's raw log for the operator commands: bounds, markers, open transactions.

Runs on: the operator's machine. Fetches are raw (read_uncommitted) through
:class:`~eos_kafka_source.wire.LogCursor`; a transaction's fate comes from its
producer's COMMIT/ABORT marker, recorded in a
:class:`~eos_kafka_source.visibility.FateBook` (the one the source's reader uses),
never from a read_committed consumer or the broker's aborted list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..records import BatchHeader, control_is_commit
from ..visibility import FateBook
from ..wire import Bounds, KafkaWire, LogCursor, fetch_bounds, require_topics

TopicPartition = tuple[str, int]
#: How long a cursor waits for offsets below the high watermark to become fetchable.
_CURSOR_DEADLINE_S = 15.0


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    bounds: Bounds

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


def partitions_of(wire: KafkaWire, topics: list[str]) -> list[PartitionState]:
    """Every partition of ``topics`` with its leader and Fetch bounds (TopicNotFoundError if
    a topic is missing)."""
    info = require_topics(wire, topics)
    leaders = {(t, p): leader for t in topics for p, leader in info[t].leaders.items()}
    bounds = fetch_bounds(wire, leaders)
    return [PartitionState(t, p, leaders[(t, p)], bounds[(t, p)]) for t, p in sorted(leaders)]


def batches(wire: KafkaWire, part: PartitionState, start: int, stop: int,
            ) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The raw batches of ``[start, stop)``, in offset order."""
    return iter(LogCursor(wire, part.leader, part.tp, start, stop,
                          deadline_s=_CURSOR_DEADLINE_S))


@dataclass
class OpenTxn:
    """Transactional records of one producer not yet followed by its marker."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    last_offset: int
    records: int = 0
    batches: int = 0
    #: The first batch's first timestamp (ms): when it was written, unless the writer set
    #: record timestamps itself (CreateTime from a ``timestamp`` column).
    first_timestamp_ms: int = -1

    def age_s(self, now_s: float) -> float | None:
        """Seconds since the transaction's first record, or None without a timestamp."""
        if self.first_timestamp_ms < 0:
            return None
        return max(0.0, now_s - self.first_timestamp_ms / 1000)

    def to_json(self, transactional_id: str | None = None,
                now_s: float | None = None) -> dict[str, object]:
        age = None if now_s is None else self.age_s(now_s)
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "transactional_id": transactional_id, "first_offset": self.first_offset,
                "last_offset": self.last_offset, "records": self.records,
                "batches": self.batches, "first_timestamp_ms": self.first_timestamp_ms,
                "age_s": None if age is None else round(age, 3)}


@dataclass
class HeaderScan:
    """What the batch headers of a range tell: every marker, and what is still open."""

    fates: FateBook = field(default_factory=FateBook)
    open: dict[int, OpenTxn] = field(default_factory=dict)
    markers: int = 0
    batches: int = 0


def scan_headers(wire: KafkaWire, part: PartitionState, start: int, stop: int) -> HeaderScan:
    """Read ``[start, stop)`` looking at headers (and markers) only.

    A producer's transactional records are open until its next marker; whatever
    has none by ``stop`` is an open transaction (it holds the LSO back).
    """
    scan = HeaderScan()
    for header, view in batches(wire, part, start, stop):
        scan.batches += 1
        pid = header.producer_id
        if header.is_control:
            scan.markers += 1
            scan.fates.add_marker(pid, header.base_offset, control_is_commit(view))
            scan.open.pop(pid, None)
        elif header.is_transactional:
            txn = scan.open.get(pid)
            if txn is None:
                txn = scan.open[pid] = OpenTxn(pid, header.producer_epoch, header.base_offset,
                                               header.last_offset,
                                               first_timestamp_ms=header.first_timestamp)
            txn.last_offset = header.last_offset
            txn.producer_epoch = header.producer_epoch
            txn.records += header.record_count
            txn.batches += 1
    return scan
