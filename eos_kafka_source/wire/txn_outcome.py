"""Did a transaction commit or abort in a partition? Asked of Kafka without reading its records.

A ``read_committed`` Fetch from a transaction's first offset ``F`` answers with the
partition's last stable offset (LSO) and the aborted transactions overlapping the fetched
range (Kafka's ``LocalLog.read`` / ``addAbortedTransactions``: those whose last offset is
at or past ``F`` and whose first offset is below an upper bound found in the offset index
at or past the end of the returned bytes, so past every batch that starts in them). So:

- LSO past ``F`` and records returned: the transaction's marker is written (an open one
  holds the LSO at or below its first offset). Its producer listed with a first offset at
  or below ``F`` is ABORT; not listed is COMMIT. With the partition's max bytes at 1, the
  answer holds one byte of the batch at ``F`` (the first partition of a response gets
  that whole batch: Kafka always returns one), which is what makes the range cover ``F``.
- LSO at ``F``, or at another of the transactions asked about: no marker yet. Kafka
  parks such a Fetch until the LSO moves (``max_wait_ms``), so waiting costs no polling.
- LSO below ``F`` at an offset none of them starts at: another producer's transaction,
  open before ours, holds it (a zombie, another writer's long or hanging transaction). It
  may stay open for as long as its timeout, so the place is left out: the caller reads its
  markers, which lie past the LSO.

Several transactions can start in one partition at other offsets; a Fetch carries a
partition once, so each is asked in its own request (all pipelined). A partition that
answers with an error (a moved leader, records deleted past ``F``) is left out: the
caller reads its markers instead. Tansu never fills the aborted list (docs/compatibility.md):
:func:`lists_aborted_transactions` tells a broker that does.
Runs on: the driver (commit worker, roll-forward).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from kafka.protocol.admin.transactions import DescribeProducersRequest

from ..errors import KafkaProtocolError
from ..records import iter_batches
from .cluster import TopicPartition
from .connection import KafkaWire
from .fetch import READ_COMMITTED, SentFetch, receive_fetch, send_fetch

#: How long one Fetch is parked at most while a marker is still being written.
WAIT_MS = 500
#: The response's cap: the first partition of a response returns its whole first batch
#: whatever its max bytes; the others need room for their one byte each.
_TOTAL_BYTES = 64 << 20


@dataclass(frozen=True)
class Place:
    """Where one transaction starts in one partition, and whose it is."""

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
                 *, deadline: float) -> dict[Place, bool | None]:
    """Each place's outcome: True COMMIT, False ABORT, None no marker by ``deadline``
    (``time.monotonic()``). A place whose partition answered with an error is absent."""
    pending = {p: leaders[p.tp] for p in places}
    ours: dict[TopicPartition, set[int]] = {}
    for p in places:
        ours.setdefault(p.tp, set()).add(p.first)
    out: dict[Place, bool | None] = {}
    wait_ms = 1
    while pending:
        resolved = _ask(wire, pending, ours, wait_ms, out)
        for place in resolved:
            pending.pop(place)
        left_ms = int((deadline - time.monotonic()) * 1000)
        if not pending or left_ms <= 0:
            break
        # Nothing moved: park one Fetch per leader until a marker lands (min_bytes=1).
        wait_ms = 1 if resolved else max(1, min(WAIT_MS, left_ms))
    out.update(dict.fromkeys(pending))
    return out


def _ask(wire: KafkaWire, pending: Mapping[Place, int], ours: Mapping[TopicPartition, set[int]],
         wait_ms: int, out: dict[Place, bool | None]) -> list[Place]:
    """One pass: the places it settled (in ``out``, or errors left out)."""
    by_tp: dict[TopicPartition, list[Place]] = {}
    for place in sorted(pending, key=lambda p: p.first):
        by_tp.setdefault(place.tp, []).append(place)
    # Request k of a leader asks each of its partitions at its k-th pending first offset;
    # a parked Fetch holds the requests behind it on the connection, so a wait asks one.
    slots = 1 if wait_ms > 1 else max(len(v) for v in by_tp.values())
    sent: list[tuple[dict[TopicPartition, Place], SentFetch]] = []
    for k in range(slots):
        per_leader: dict[int, dict[TopicPartition, Place]] = {}
        for tp, ps in by_tp.items():
            if k < len(ps):
                per_leader.setdefault(pending[ps[k]], {})[tp] = ps[k]
        for leader, asked in per_leader.items():
            sent.append((asked, send_fetch(
                wire, leader, {tp: p.first for tp, p in asked.items()}, max_bytes=1,
                max_wait_ms=wait_ms, isolation=READ_COMMITTED, total_bytes=_TOTAL_BYTES)))
    settled: list[Place] = []
    for asked, request in sent:
        chunks = receive_fetch(request)
        for tp, place in asked.items():
            chunk = chunks.get(tp)
            if chunk is None or chunk.error_code:
                settled.append(place)  # left out of ``out``: the caller reads the markers
                continue
            lso = chunk.bounds.last_stable
            if lso < place.first and lso not in ours[tp]:
                settled.append(place)  # held by another producer's open transaction
                continue
            if lso <= place.first or not chunk.records:
                continue  # no marker yet, or no room left in this response: ask again
            covered = max([place.first] + [h.last_offset for h, _ in
                                            iter_batches(chunk.records)])
            for other in by_tp[tp]:
                if other in settled or other.first > covered or \
                        other.first >= chunk.bounds.last_stable:
                    continue
                out[other] = not any(pid == other.producer_id and first <= other.first
                                     for pid, first in chunk.aborted)
                settled.append(other)
    return list(dict.fromkeys(settled))
