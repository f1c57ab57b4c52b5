"""Did a transaction commit or abort in a partition? Asked of Kafka without reading its records.

A ``read_committed`` Fetch from a transaction's first offset ``F`` answers with the
partition's last stable offset (LSO) and the aborted transactions overlapping the fetched
range (Kafka's ``LocalLog.read`` / ``addAbortedTransactions``: those whose last offset is
at or past ``F`` and whose first offset is below an upper bound found in the offset index
at or past the end of the returned bytes, so past every batch that starts in them). So:

- LSO past ``F`` and records returned: the transaction's marker is written (an open one
  holds the LSO at or below its first offset). Its producer listed with first offset ``F``
  is ABORT; not listed is COMMIT (Kafka lists each aborted transaction by its own first
  offset: an earlier aborted one of the same producer id is another transaction). The
  answer must hold the whole batch at ``F`` (Kafka answers a first batch cut short with no
  records and no list): that makes the range cover ``F``, and every transaction of ours
  starting in the complete batches returned, so one answer usually settles all of a
  batch's in that partition.
- LSO at ``F``, or at another of the transactions asked about: no marker yet. Kafka
  parks such a Fetch until the LSO moves (``max_wait_ms``), so waiting costs no polling.
- LSO below ``F`` at an offset none of them starts at: another producer's transaction,
  open before ours, holds it (a zombie, another writer's long or hanging transaction). It
  may stay open for as long as its timeout, so the place is left out: the caller reads its
  markers, which lie past the LSO.

Several transactions can start in one partition at other offsets; a Fetch carries a
partition once, so a partition is asked for as many bytes as its pending transactions' first
batches may take (:data:`PARTITION_BYTES` each, up to :data:`PARTITION_CAP`): one answer then
settles every transaction a batch started there, and the cost of confirming grows with the
partitions a batch wrote, not with its transactions times its partitions. Those an answer
did not reach are asked in the next pass. Markers land a while after EndTxn answers (Kafka
writes them after, partition by partition); a partition whose log has not moved for
``stall_s`` while some of ours are still open there is given up on (its places answer
None): its markers are read instead, which also looks for a hanging transaction. A partition
that answers with an error (a moved leader, records deleted past ``F``) is left out: the
caller reads its markers instead. Tansu never fills the aborted list
(docs/compatibility.md): :func:`lists_aborted_transactions` tells a broker that does.
Runs on: the driver (commit worker, roll-forward).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from kafka.protocol.admin.transactions import DescribeProducersRequest

from ..errors import KafkaProtocolError
from ..records import last_offset
from .cluster import TopicPartition
from .connection import KafkaWire
from .fetch import READ_COMMITTED, Bounds, SentFetch, receive_fetch, send_fetch

#: How long one Fetch is parked at most while a marker is still being written.
WAIT_MS = 500
#: Bytes read per partition and request for each transaction pending there: enough for the
#: first batch of a transaction (Kafka answers a partition whose first batch does not fit
#: with no records at all, unless it is the first partition of the response), and for the
#: batches of the same batch's other transactions after it, which the same answer settles.
PARTITION_BYTES = 64 << 10
#: The most read per partition and request (a batch of 1,000 tasks writing 2 records of
#: 100 B to a partition holds about 400 KB there, markers included).
PARTITION_CAP = 1 << 20
#: What one request's partitions share (Kafka's own default response cap is 55 MiB).
_SHARED_BYTES = 32 << 20
#: The response's cap (the first partition of a response returns its first batch whole).
_TOTAL_BYTES = 64 << 20


class Place(NamedTuple):
    """Where one transaction starts in one partition, and whose it is (a tuple: a commit of
    1,000 tasks over 8 partitions makes, hashes and compares 8,000 of them)."""

    topic: str
    partition: int
    first: int
    producer_id: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


def lists_aborted_transactions(wire: KafkaWire) -> bool:
    """Whether the broker keeps Kafka's aborted-transaction index. Kafka serves it with
    every read_committed Fetch (v4+) and has done since 0.11; a broker implementing Kafka's
    transaction admin (DescribeProducers, KIP-664, Kafka 2.8) is taken to; Tansu 0.6.0,
    which advertises neither that nor a filled aborted list, is not."""
    try:
        wire.version(DescribeProducersRequest)
    except KafkaProtocolError:
        return False
    return True


def txn_outcomes(wire: KafkaWire, leaders: Mapping[TopicPartition, int], places: list[Place],
                 *, deadline: float, stall_s: float | None = None) -> dict[Place, bool | None]:
    """Each place's outcome: True COMMIT, False ABORT, None no marker by ``deadline``
    (``time.monotonic()``), or none while its partition's log stood still for ``stall_s``.
    A place whose partition answered with an error is absent."""
    queues: dict[TopicPartition, _Queue] = {}
    for place in sorted(places, key=attrgetter("first")):
        tp = (place.topic, place.partition)
        queue = queues.get(tp)
        if queue is None:
            queue = queues[tp] = _Queue(leaders[tp])
        queue.places.append(place)
    for queue in queues.values():
        queue.ours = {p.first for p in queue.places}
    out: dict[Place, bool | None] = {}
    alone: set[TopicPartition] = set()
    wait_ms = 1
    while True:
        asking = {tp: q for tp, q in queues.items() if q.head < len(q.places)}
        if not asking:
            break
        alone = _ask(wire, asking, alone, wait_ms, out)
        now = time.monotonic()
        for queue in asking.values():
            if queue.bounds is not None and queue.bounds != queue.seen:
                queue.seen, queue.since = queue.bounds, now
            if (stall_s is not None and queue.head < len(queue.places)
                    and now - (queue.since or now) >= stall_s):
                out.update(dict.fromkeys(queue.rest()))  # nothing moved: the caller reads markers
                queue.head = len(queue.places)
        left_ms = int((deadline - now) * 1000)
        if left_ms <= 0:
            break
        # Park one Fetch per leader (min_bytes=1): Kafka answers at once where records lie
        # below the last stable offset, else as soon as a marker moves it.
        wait_ms = max(1, min(WAIT_MS, left_ms))
    for queue in queues.values():
        out.update(dict.fromkeys(queue.rest()))
    return out


@dataclass
class _Queue:
    """One partition's places, by first offset; those before ``head`` are settled."""

    leader: int
    places: list[Place] = field(default_factory=list)
    ours: set[int] = field(default_factory=set)
    head: int = 0
    bounds: Bounds | None = None  # as last answered
    seen: Bounds | None = None
    since: float | None = None  # when the bounds last changed

    def rest(self) -> list[Place]:
        return self.places[self.head:]


def _budget(count: int, sharing: int) -> int:
    """Bytes to ask a partition for, with ``count`` of ours pending there and ``sharing``
    partitions in the request."""
    return min(PARTITION_BYTES * count, PARTITION_CAP,
               max(PARTITION_BYTES, _SHARED_BYTES // max(sharing, 1)))


def _ask(wire: KafkaWire, queues: Mapping[TopicPartition, _Queue], alone: set[TopicPartition],
         wait_ms: int, out: dict[Place, bool | None]) -> set[TopicPartition]:
    """One pass: each partition asked at its first pending offset for :func:`_budget`
    bytes, one request per leader; a partition whose first batch did not fit (Kafka then
    answers with no records) in a request of its own, where Kafka returns that batch whole.
    Settles what the answers tell (in ``out``; a partition answering an error is left out,
    for the caller to read its markers). Returns the partitions to ask alone next."""
    shared: dict[int, dict[TopicPartition, _Queue]] = {}
    own: list[tuple[int, dict[TopicPartition, _Queue]]] = []
    for tp, queue in queues.items():
        if tp in alone:
            own.append((queue.leader, {tp: queue}))
        else:
            shared.setdefault(queue.leader, {})[tp] = queue
    sent: list[tuple[dict[TopicPartition, _Queue], SentFetch]] = []
    asks = [(leader, asked, max(_budget(len(q.places) - q.head, len(asked))
                                for q in asked.values()))
            for leader, asked in shared.items()]
    for leader, asked, max_bytes in asks + [(leader, asked, 1) for leader, asked in own]:
        sent.append((asked, send_fetch(
            wire, leader, {tp: q.places[q.head].first for tp, q in asked.items()},
            max_bytes=max_bytes, max_wait_ms=wait_ms, isolation=READ_COMMITTED,
            total_bytes=_TOTAL_BYTES)))
    again: set[TopicPartition] = set()
    for asked, request in sent:
        chunks = receive_fetch(request)
        for tp, queue in asked.items():
            chunk = chunks.get(tp)
            first = queue.places[queue.head].first
            if chunk is None or chunk.error_code:
                queue.head = len(queue.places)  # left out: the markers are read instead
                continue
            queue.bounds = chunk.bounds
            lso = chunk.bounds.last_stable
            if lso < first and lso not in queue.ours:
                queue.head = len(queue.places)  # another producer's open transaction
                continue
            if lso <= first:
                continue  # no marker yet: ask again
            if not chunk.records:
                again.add(tp)  # its first batch is larger than the budget
                continue
            last = last_offset(chunk.records)
            covered = first if last is None else max(first, last)
            aborted = set(chunk.aborted)
            i = queue.head
            while i < len(queue.places) and queue.places[i].first <= min(covered, lso - 1):
                place = queue.places[i]
                out[place] = (place.producer_id, place.first) not in aborted
                i += 1
            queue.head = i
    return again
