"""The two ends of the latency benchmark: a feeder at a fixed rate, a read_committed watcher.

Both run as threads of the benchmark's own process and share one clock,
``time.monotonic_ns()`` (CLOCK_MONOTONIC: system-wide, so it would do across processes of
the machine too). The feeder writes 100-byte values whose first 20 bytes are the send time;
the watcher Fetches the output topic with isolation_level=read_committed (the broker returns
nothing past the last stable offset; aborted batches are dropped with the response's
aborted-transactions list, as Kafka's consumer does) and counts each record's
produce-to-visible time in a histogram of whole milliseconds, keyed by 100 ms of send time,
so a run of millions of records keeps a few thousand counters.

Raw Produce and Fetch (eoskafka's wire layer and aiokafka's compiled record codec), not
kafka-python's producer and consumer: those cost ~20 µs a record in Python, and at
100k records/s on two shared cores the probe itself would be what is measured.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from aiokafka.record._crecords import DefaultRecordBatch
from kafka.protocol.consumer import FetchRequest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.records import encode_batch, iter_batches
from eos_kafka_source.records.header import control_is_commit
from eos_kafka_source.wire import KafkaWire, fetch_metadata, leader_of, produce_errors
from eos_kafka_source.wire.fetch import SentFetch, receive_fetch
from eos_kafka_source.wire.txn import produce_request

STAMP = 20  # ASCII digits of monotonic_ns at the head of every value
VALUE_SIZE = 100
BUCKET_NS = 100_000_000  # send-time resolution of the histogram
READ_COMMITTED = 1
TICK_S = 0.005


def _leaders(wire: KafkaWire, topic: str, partitions: int) -> dict[int, list[int]]:
    info = fetch_metadata(wire, [topic])
    by_node: dict[int, list[int]] = {}
    for p in range(partitions):
        by_node.setdefault(leader_of(info, (topic, p)), []).append(p)
    return by_node


class _Loop(threading.Thread):
    """A daemon thread that runs until :meth:`stop`; an exception is kept in ``error``
    for the benchmark to raise (a thread's own traceback would go unseen)."""

    def __init__(self, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)


class Feeder(_Loop):
    """Produces ``rate`` records/s (changeable while running) in 5 ms ticks, round-robin over
    the partitions; each tick's records carry the time taken just before its Produce."""

    def __init__(self, cfg: ClientConfig, topic: str, partitions: int) -> None:
        super().__init__(f"feeder-{topic}")
        self.cfg, self.topic, self.partitions = cfg, topic, partitions
        self.rate = 0.0
        self.sent = 0
        self.behind_max_s = 0.0  # the longest the feeder fell behind its schedule

    def run(self) -> None:
        try:
            with KafkaWire(self.cfg) as wire:
                leaders = _leaders(wire, self.topic, self.partitions)
                owed, last = 0.0, time.monotonic()
                pad = b"v" * (VALUE_SIZE - STAMP)
                while not self._halt.is_set():
                    now = time.monotonic()
                    owed += self.rate * (now - last)
                    last = now
                    n = int(owed)
                    if n:
                        owed -= n
                        self._send(wire, leaders, n, pad)
                    late = time.monotonic() - now
                    self.behind_max_s = max(self.behind_max_s, late - TICK_S)
                    self._halt.wait(max(TICK_S - late, 0.0))
        except BaseException as exc:  # noqa: BLE001 - read by the benchmark, which fails
            self.error = exc

    def _send(self, wire: KafkaWire, leaders: dict[int, list[int]], n: int, pad: bytes) -> None:
        value = b"%020d" % time.monotonic_ns() + pad
        ms = int(time.time() * 1000)
        first = self.sent % self.partitions
        calls = []
        for node, parts in leaders.items():
            batches = {}
            for p in parts:
                k = n // self.partitions + (1 if (p - first) % self.partitions < n %
                                            self.partitions else 0)
                if k:
                    batches[(self.topic, p)] = encode_batch([None] * k, [value] * k, ms)
            if batches:
                calls.append((node, produce_request(wire, None, batches, 30_000)))
        for response in wire.request_many(calls, f"Produce {self.topic}"):
            errors = produce_errors(response)
            if errors:
                raise RuntimeError(f"feeder: Produce failed: {errors}")
        self.sent += n


class Watcher(_Loop):
    """Fetches the output topic read_committed from offset 0 and histograms latencies."""

    def __init__(self, cfg: ClientConfig, topic: str, partitions: int) -> None:
        super().__init__(f"watcher-{topic}")
        self.cfg, self.topic, self.partitions = cfg, topic, partitions
        #: (send time // BUCKET_NS, latency in ms) -> records
        self.hist: Counter[tuple[int, int]] = Counter()
        self.received = 0
        self.aborted = 0
        #: Wall-clock times (time.time()) of Fetch answers that brought new records.
        self.visible_at: list[float] = []

    def run(self) -> None:
        try:
            with KafkaWire(self.cfg) as wire:
                leaders = _leaders(wire, self.topic, self.partitions)
                offsets = {(self.topic, p): 0 for p in range(self.partitions)}
                while not self._halt.is_set():
                    pending = [self._send(wire, node, {(self.topic, p): offsets[(self.topic, p)]
                                                      for p in parts})
                               for node, parts in leaders.items()]
                    for sent in pending:
                        chunks = receive_fetch(sent)
                        now = time.monotonic_ns()
                        got = 0
                        for tp, chunk in chunks.items():
                            if chunk.error_code:
                                raise RuntimeError(f"watcher: Fetch {tp}: {chunk.error_code}")
                            got += self._count(chunk.records, chunk.aborted, now, offsets, tp)
                        if got:
                            self.received += got
                            self.visible_at.append(time.time())
        except BaseException as exc:  # noqa: BLE001 - read by the benchmark, which fails
            self.error = exc

    @staticmethod
    def _send(wire: KafkaWire, node: int, wants: dict[tuple[str, int], int]) -> SentFetch:
        by_topic: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = {}
        for (topic, partition), offset in wants.items():
            by_topic.setdefault(topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=8 << 20))
        request = FetchRequest[min(wire.version(FetchRequest), 12)](
            replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=32 << 20,
            isolation_level=READ_COMMITTED, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps)
                    for t, ps in by_topic.items()],
            forgotten_topics_data=[], rack_id="")
        what = "Fetch (read_committed watcher)"
        sent = wire.send(node, request, what)
        wire.flush()
        return SentFetch(wire, sent, what, wire.config.request_timeout_ms + 10)

    def _count(self, records: bytes, aborted: list[tuple[int, int]], now: int,
               offsets: dict[tuple[str, int], int], tp: tuple[str, int]) -> int:
        """Histogram the committed records of one partition's answer; returns how many."""
        upcoming = sorted(aborted, key=lambda a: a[1])
        active: set[int] = set()
        got = 0
        stamps: Counter[bytes] = Counter()
        for header, view in iter_batches(records):
            offsets[tp] = header.next_offset
            while upcoming and upcoming[0][1] <= header.last_offset:
                active.add(upcoming.pop(0)[0])
            if header.is_control:
                if header.producer_id in active and not control_is_commit(view):
                    active.discard(header.producer_id)
                continue
            if header.producer_id in active:
                self.aborted += header.record_count
                continue
            for rec in DefaultRecordBatch(bytes(view)):
                stamps[rec.value[:STAMP]] += 1
            got += header.record_count
        for stamp, count in stamps.items():
            sent = int(stamp)
            self.hist[(sent // BUCKET_NS, (now - sent) // 1_000_000)] += count
        return got


def percentiles(hist: Counter[int], qs: tuple[float, ...] = (0.5, 0.99)) -> list[float]:
    """Values at the given quantiles of a ``{value: count}`` histogram, then the maximum."""
    total = sum(hist.values())
    if not total:
        return [float("nan")] * (len(qs) + 1)
    out, seen, keys = [], 0, sorted(hist)
    wanted = list(qs)
    for key in keys:
        seen += hist[key]
        while wanted and seen >= wanted[0] * total:
            out.append(float(key))
            wanted.pop(0)
    return out + [float(keys[-1])]
