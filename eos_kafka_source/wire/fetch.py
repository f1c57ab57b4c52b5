"""Raw Fetch: partition bounds (log start, high watermark, LSO) and batch cursors.

Offsets are planned from Fetch, never from ListOffsets latest (wrong on Tansu,
docs/compatibility.md). The reader's fetches use read_uncommitted isolation: it resolves
transactions itself from control markers, which may lie past the LSO. Only the sink's
confirmation of its own commits fetches read_committed (``txn_outcome.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from ..errors import CorruptRecordError, DataLossError, TimeoutError_, for_code
from ..kafka_codes import LEADER_MOVED, Code
from ..records import BatchHeader, iter_batches
from .cluster import TopicPartition
from .connection import KafkaWire

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_EARLIEST = -2
#: max_wait_ms of a Fetch below the high watermark. Kafka answers such a Fetch at once (the
#: data exists, min_bytes=1 is met), so the wait costs nothing there; Tansu on slow storage
#: (s3://) answers with whatever it loaded by then, and with nothing at 1 ms (measured: reading
#: 3300 records took 10-23 s with 1 ms / 200 ms waits, ~1.5 s with 500 ms). Each empty answer
#: below the high watermark doubles the wait, up to MAX_BELOW_HW_WAIT_MS: a large log on slow
#: storage answered nothing within 1 s and 31 batches within 2 s (chaos harness soak).
BELOW_HW_WAIT_MS = 500
MAX_BELOW_HW_WAIT_MS = 8000
#: Empty answers below the high watermark re-asked (with a real wait) before taking a gap.


@dataclass(frozen=True)
class Bounds:
    """What a Fetch response tells about a partition."""

    log_start: int
    high_watermark: int
    last_stable: int

    def latest(self, read_committed: bool) -> int:
        return self.last_stable if read_committed else self.high_watermark


@dataclass
class Chunk:
    """One partition's part of a Fetch response."""

    error_code: int
    bounds: Bounds
    records: bytes
    aborted: list[tuple[int, int]] = field(default_factory=list)  # (producer id, first offset)


def _fetch_request(
    version: int,
    wants: Mapping[TopicPartition, int],
    max_bytes: int,
    max_wait_ms: int,
    isolation: int = READ_UNCOMMITTED,
    total_bytes: int | None = None,
) -> FetchRequest:
    by_topic: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = {}
    for (topic, partition), offset in sorted(wants.items()):
        by_topic.setdefault(topic, []).append(
            FetchRequest.FetchTopic.FetchPartition(
                partition=partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=max_bytes,
            )
        )
    return FetchRequest[version](
        replica_id=-1,
        # Tansu answers min_bytes=0 / max_wait_ms=0 with an empty response: ask for 1 byte.
        max_wait_ms=max(1, max_wait_ms),
        min_bytes=1,
        max_bytes=total_bytes or max(max_bytes * len(wants), max_bytes),
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[],
        rack_id="",
    )


def fetch(
    wire: KafkaWire,
    leader: int,
    wants: Mapping[TopicPartition, int],
    *,
    max_bytes: int,
    max_wait_ms: int = 1,
) -> dict[TopicPartition, Chunk]:
    """One Fetch to ``leader`` for several partitions at given offsets."""
    return receive_fetch(send_fetch(wire, leader, wants, max_bytes=max_bytes,
                                    max_wait_ms=max_wait_ms))


@dataclass
class SentFetch:
    """A Fetch sent and not yet answered: pass it to :func:`receive_fetch`."""

    wire: KafkaWire
    sent: tuple[int, Any]
    what: str
    timeout_ms: int


def send_fetch(
    wire: KafkaWire,
    leader: int,
    wants: Mapping[TopicPartition, int],
    *,
    max_bytes: int,
    max_wait_ms: int = 1,
    isolation: int = READ_UNCOMMITTED,
    total_bytes: int | None = None,
) -> SentFetch:
    """Send a Fetch without waiting, so the broker prepares it while the caller works.
    ``total_bytes``: the response's cap (default: ``max_bytes`` per partition)."""
    request = _fetch_request(wire.version(FetchRequest), wants, max_bytes, max_wait_ms,
                             isolation, total_bytes)
    what = f"Fetch {_describe(wants)}"
    sent = wire.send(leader, request, what)
    wire.flush()
    return SentFetch(wire, sent, what, wire.config.request_timeout_ms + max_wait_ms)


def receive_fetch(pending: SentFetch) -> dict[TopicPartition, Chunk]:
    """The answer to a :func:`send_fetch`, by partition."""
    response = pending.wire.wait([pending.sent], pending.what, pending.timeout_ms)[0]
    out: dict[TopicPartition, Chunk] = {}
    for topic in response.responses:
        for part in topic.partitions:
            aborted = [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or [])]
            if part.error_code in LEADER_MOVED:
                pending.wire.forget_topic(topic.topic)  # its leaders are asked for again
            out[(topic.topic, part.partition_index)] = Chunk(
                part.error_code,
                Bounds(part.log_start_offset, part.high_watermark, part.last_stable_offset),
                bytes(part.records or b""),
                aborted,
            )
    return out


def _describe(wants: Mapping[TopicPartition, int]) -> str:
    items = [f"{t}-{p}@{o}" for (t, p), o in sorted(wants.items())]
    return ", ".join(items[:5]) + (f" (+{len(items) - 5})" if len(items) > 5 else "")


def list_earliest(
    wire: KafkaWire, leader: int, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    return _list_offsets(wire, leader, dict.fromkeys(tps, _EARLIEST), "ListOffsets earliest")


def list_offsets_for_times(
    wire: KafkaWire, leader: int, times: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """ListOffsets by timestamp (ms): the first offset whose timestamp is at or after it,
    None when no record is that late. Known to be unreliable on Tansu (docs/compatibility.md)."""
    found = _list_offsets(wire, leader, times, "ListOffsets by timestamp")
    return {tp: (off if off >= 0 else None) for tp, off in found.items()}


def _list_offsets(
    wire: KafkaWire, leader: int, times: Mapping[TopicPartition, int], what: str
) -> dict[TopicPartition, int]:
    version = wire.version(ListOffsetsRequest)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), ts in times.items():
        by_topic.setdefault(topic, []).append((partition, ts))
    request = ListOffsetsRequest[version](
        replica_id=-1,
        isolation_level=READ_UNCOMMITTED,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=t,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=ts
                    )
                    for p, ts in ps
                ],
            )
            for t, ps in by_topic.items()
        ],
    )
    response = wire.request(leader, request, what)
    out: dict[TopicPartition, int] = {}
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code:
                raise for_code(part.error_code)(f"{what} {topic.name}-{part.partition_index}")
            out[(topic.name, part.partition_index)] = part.offset
    return out


def fetch_bounds(
    wire: KafkaWire,
    leaders: Mapping[TopicPartition, int],
    hints: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, Bounds]:
    """Log start, high watermark and LSO of each partition, one Fetch per leader.

    ``hints`` are offsets believed valid (the last known end); fetching there
    returns little or no data. On OFFSET_OUT_OF_RANGE the log start is looked up
    and the fetch repeated from it.
    """
    hints = hints or {}
    by_leader: dict[int, dict[TopicPartition, int]] = {}
    for tp, leader in leaders.items():
        by_leader.setdefault(leader, {})[tp] = max(0, hints.get(tp, 0))
    out: dict[TopicPartition, Bounds] = {}
    for leader, wants in by_leader.items():
        chunks = fetch(wire, leader, wants, max_bytes=1)
        retry = [tp for tp, c in chunks.items() if c.error_code == Code.OFFSET_OUT_OF_RANGE]
        if retry:
            starts = list_earliest(wire, leader, retry)
            chunks.update(fetch(wire, leader, starts, max_bytes=1))
        for tp in wants:
            chunk = chunks.get(tp)
            if chunk is None:
                raise for_code(Code.UNKNOWN_TOPIC_OR_PARTITION)(
                    f"Fetch {tp[0]}-{tp[1]}: partition missing from the response")
            if chunk.error_code:
                raise for_code(chunk.error_code)(f"Fetch {tp[0]}-{tp[1]}")
            b = chunk.bounds
            log_start = b.log_start if b.log_start >= 0 else 0
            last_stable = b.last_stable if b.last_stable >= 0 else b.high_watermark
            out[tp] = Bounds(log_start, b.high_watermark, min(last_stable, b.high_watermark))
    return out


class LogCursor:
    """Batches of one partition in offset order, from ``offset`` up to ``stop`` (exclusive).

    Fetches ``max_bytes`` at a time; a partial trailing batch is fetched again
    from its start, a batch larger than ``max_bytes`` doubles the fetch size. If
    the log ends before ``stop`` (data not yet replicated, or a broker whose LSO
    ran ahead), it polls until ``deadline_s`` and then raises. While the caller
    works through one response, the Fetch for the next offsets is already sent
    (when the high watermark says there is more), so the broker prepares it in
    parallel (``read_ahead=False`` turns that off). Memory held: two fetch responses.
    """

    def __init__(
        self,
        wire: KafkaWire,
        leader: int,
        tp: TopicPartition,
        offset: int,
        stop: int,
        *,
        max_bytes: int = 8 << 20,
        deadline_s: float = 120.0,
        read_ahead: bool = True,
        check_crc: bool = False,
    ) -> None:
        self.wire, self.leader, self.tp = wire, leader, tp
        self.read_ahead = read_ahead
        self.check_crc = check_crc  # kafka.check.crcs
        self.position = offset
        self.stop = stop
        self.max_bytes = max_bytes
        self.deadline_s = deadline_s
        self.aborted_hints: list[tuple[int, int]] = []
        self.bytes_fetched = 0

    def __iter__(self) -> Iterator[tuple[BatchHeader, memoryview]]:
        waited_since: float | None = None
        empty_below_hw = 0
        wait_ms = BELOW_HW_WAIT_MS
        max_bytes = self.max_bytes
        ahead: tuple[int, SentFetch] | None = None  # (offset, Fetch sent for it)
        while self.position < self.stop:
            if ahead is not None and ahead[0] == self.position:
                chunk = receive_fetch(ahead[1]).get(self.tp)
            else:
                chunk = fetch(self.wire, self.leader, {self.tp: self.position},
                              max_bytes=max_bytes, max_wait_ms=wait_ms).get(self.tp)
            ahead = None
            if chunk is None:
                raise for_code(Code.UNKNOWN_TOPIC_OR_PARTITION)(
                    f"Fetch {self.tp[0]}-{self.tp[1]}: partition missing")
            if chunk.error_code == Code.OFFSET_OUT_OF_RANGE:
                raise DataLossError(
                    f"{self.tp[0]}-{self.tp[1]}: offset {self.position} is no longer in the log "
                    f"(log start {chunk.bounds.log_start}); records were deleted by retention "
                    "while being read. Set failOnDataLoss=false to skip lost offsets"
                )
            if chunk.error_code:
                raise for_code(chunk.error_code)(f"Fetch {self.tp[0]}-{self.tp[1]}")
            self.aborted_hints.extend(chunk.aborted)
            self.bytes_fetched += len(chunk.records)
            position = self.position
            batches = [(header, view) for header, view
                       in iter_batches(chunk.records, check_crc=self.check_crc)
                       if header.last_offset >= position]  # skip older overlapping batches
            if batches:
                after = batches[-1][0].last_offset + 1
                if self.read_ahead and after < self.stop and chunk.bounds.high_watermark > after:
                    ahead = (after, send_fetch(self.wire, self.leader, {self.tp: after},
                                               max_bytes=max_bytes, max_wait_ms=wait_ms))
                for header, view in batches:
                    if header.last_offset < self.position:
                        continue
                    self.position = header.last_offset + 1
                    yield header, view
                    if self.position >= self.stop:
                        return
                waited_since = None
                empty_below_hw = 0
                continue
            if chunk.records and chunk.bounds.high_watermark > self.position:
                if max_bytes >= 1 << 30:
                    raise CorruptRecordError(
                        f"{self.tp[0]}-{self.tp[1]}@{self.position}: no complete batch in 1 GiB"
                    )
                max_bytes *= 2  # one batch larger than the fetch size
                continue
            if chunk.bounds.high_watermark > self.position and not chunk.records:
                # Kafka always returns the next batch below the high watermark (compaction
                # never removes the log's last batch), so an empty answer here is transient:
                # Tansu 0.6.0 sometimes answers a 1 ms fetch with no records although they
                # exist. Ask again (waiting) until the deadline; never skip offsets.
                empty_below_hw += 1
                wait_ms = min(wait_ms * 2, MAX_BELOW_HW_WAIT_MS)  # slow storage: more time
            now = time.monotonic()
            waited_since = waited_since or now
            if now - waited_since > self.deadline_s:
                hw = chunk.bounds.high_watermark
                what = (f"no records returned at offset {self.position} (high watermark {hw})"
                        if hw > self.position else f"the log ends at {hw}")
                raise TimeoutError_(
                    f"{self.tp[0]}-{self.tp[1]}: {what} but offsets up to {self.stop} were "
                    f"planned; gave up after {self.deadline_s:.0f}s (kafkaConsumer.pollTimeoutMs)"
                )


#: "No stop": a scan-ahead cursor reads until it finds what it looks for.
NO_STOP = 1 << 62


class LogCursors:
    """The cursors one range's read opens on its partition's log: the range's own and, under
    read_committed, those scanning ahead for a transaction's marker. The visibility filter
    opens them and collects the aborted transactions their Fetch responses listed, here in
    the wire layer, without calling back into the reader that started it."""

    def __init__(self, wire: KafkaWire, leader: int, tp: TopicPartition, *,
                 max_bytes: int, deadline_s: float, check_crc: bool) -> None:
        self.wire, self.leader, self.tp = wire, leader, tp
        self.max_bytes, self.deadline_s, self.check_crc = max_bytes, deadline_s, check_crc
        self._opened: list[LogCursor] = []

    def open(self, offset: int, stop: int | None) -> LogCursor:
        """A cursor from ``offset`` to ``stop`` (None: until the reader stops asking)."""
        cursor = LogCursor(self.wire, self.leader, self.tp, offset,
                           NO_STOP if stop is None else stop, max_bytes=self.max_bytes,
                           deadline_s=self.deadline_s, check_crc=self.check_crc)
        self._opened.append(cursor)
        return cursor

    def abort_hints(self) -> list[tuple[int, int]]:
        """The (producer id, first offset) aborted-transaction entries the cursors' Fetch
        responses listed since the last call."""
        hints: list[tuple[int, int]] = []
        for cursor in self._opened:
            hints.extend(cursor.aborted_hints)
            cursor.aborted_hints.clear()
        return hints
