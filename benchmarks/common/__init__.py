"""What every benchmark module shares: result rows, sizes, timing, test data and topics."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from kafka.protocol.admin import DeleteTopicsRequest

from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.errors import KafkaProtocolError, TopicNotFoundError
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_bounds, fetch_metadata, leader_of

#: The Apache Kafka the benchmarks start (the reference release; docs/compatibility.md).
KAFKA_VERSION = "4.4"
KAFKA_LABEL = "Apache Kafka 4.4.0"
VALUE_SIZE = 100
#: Rows per Arrow batch handed to a sink task (Spark's arrow.maxRecordsPerBatch default).
SINK_BATCH_ROWS = 10_000


@dataclass
class Row:
    """One measurement: ``records`` handled in ``seconds`` (the median of ``runs``)."""

    section: str
    measure: str
    records: int
    seconds: float
    runs: list[float] = field(default_factory=list)
    reference: str = ""
    reference_rate: float | None = None
    target: str = ""
    ok: bool | None = None
    note: str = ""
    #: How other rows name this one when it is their reference.
    short: str = ""
    #: False where records/s means nothing (latency measures).
    show_rate: bool = True

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def ratio(self) -> float | None:
        if not self.reference_rate:
            return None
        return self.rate / self.reference_rate

    def against(self, reference: Row | None) -> Row:
        """Set ``reference`` (a row measured in the same run) and return self."""
        if reference is not None and reference.seconds > 0:
            self.reference = reference.short or reference.measure
            self.reference_rate = reference.rate
        return self

    def target_ratio(self, minimum: float) -> Row:
        self.target = f"≥ {minimum:.0%} of reference"
        self.ok = None if self.ratio is None else self.ratio >= minimum
        return self

    def target_rate(self, minimum: float) -> Row:
        self.target = f"≥ {minimum / 1000:,.0f}k records/s"
        self.ok = self.rate >= minimum
        return self

    def target_rate_and_ratio(self, minimum_rate: float, minimum_ratio: float) -> Row:
        """Both an absolute rate and a share of the reference (the issue's source and sink
        targets)."""
        self.target = f"≥ {minimum_rate / 1000:,.0f}k records/s and ≥ {minimum_ratio:.0%} of ref."
        ratio = self.ratio
        self.ok = self.rate >= minimum_rate and ratio is not None and ratio >= minimum_ratio
        return self

    def target_seconds(self, maximum: float) -> Row:
        self.target = f"≤ {maximum * 1000:.0f} ms"
        self.ok = self.seconds <= maximum
        return self


@dataclass(frozen=True)
class Sizes:
    """Data sizes of one run; ``records`` scales all of them."""

    records: int
    runs: int = 3
    commit_batches: int = 5
    commit_tasks: tuple[int, ...] = (1, 8, 64)
    #: Spark measures: timed runs, and whether a warm-up run comes first.
    spark_runs: int = 3
    spark_warmup: bool = True
    #: Peak-memory measures: records of the partition one task reads or writes.
    memory_records: tuple[int, ...] = (1_000_000, 3_000_000, 10_000_000)
    #: Cost growth: the byte budget of one cell (~1-2 s of work at the measured rates).
    growth_bytes: int = 110_000_000

    @property
    def source_1p(self) -> int:
        return self.records

    @property
    def source_8p_each(self) -> int:
        return max(1, self.records // 8)

    @property
    def sink(self) -> int:
        """Records one sink task writes: ~1 s at the measured rates (the exactly-once and
        at-least-once rows differ by ~40 ms of fixed cost; shorter runs are mostly noise)."""
        return 3 * self.records

    @property
    def sink_kafka_python(self) -> int:
        """kafka-python writes ~50k records/s: a twentieth of the data keeps the run short."""
        return max(1_000, self.sink // 20)

    @property
    def spark_sink(self) -> int:
        return self.records

    @property
    def pipeline(self) -> int:
        """Records the end-to-end streaming query moves: enough that the query's fixed
        start-up (~1.5 s of Spark planning and Python workers) is not most of it."""
        return 4 * self.records

    @property
    def warmup(self) -> int:
        return max(1_000, min(self.records // 10, 100_000))


def client(bootstrap: str) -> ClientConfig:
    return ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})


def unique(name: str) -> str:
    return f"bench-{name}-{uuid.uuid4().hex[:8]}"


def new_topic(cfg: ClientConfig, name: str, partitions: int) -> str:
    topic = unique(name)
    with KafkaWire(cfg) as wire:
        create_topic(wire, topic, partitions)
    return topic


def delete_topic(cfg: ClientConfig, topic: str) -> None:
    """Drop a topic so the in-memory broker frees its records (Tansu does on delete)."""
    with KafkaWire(cfg) as wire:
        version = wire.client.api_version(DeleteTopicsRequest, max_version=5)
        request = DeleteTopicsRequest[version](topic_names=[topic], timeout_ms=10_000)
        wire.request(wire.any_node(), request, f"DeleteTopics {topic}")


def values_array(n: int, offset: int = 0, size: int = VALUE_SIZE) -> pa.Array:
    """``n`` distinct ``size``-byte binary values (a 12-digit counter, then filler)."""
    fill = b"v" * (size - 12)
    buf = b"".join(b"%012d" % i + fill for i in range(offset, offset + n))
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(size), n, [None, pa.py_buffer(buf)]
    )
    return fixed.cast(pa.binary())


def value_batches(n: int, rows: int = SINK_BATCH_ROWS,
                  size: int = VALUE_SIZE) -> list[pa.RecordBatch]:
    """The sink's input: Arrow batches with one binary ``value`` column, keys absent."""
    values = values_array(n, size=size)
    return [
        pa.RecordBatch.from_arrays([values.slice(i, rows)], names=["value"])
        for i in range(0, n, rows)
    ]


#: A measured step: does its own untimed setup, times the work, returns (records, seconds).
Timed = Callable[[], tuple[int, float]]


def timed(fn: Callable[[], int]) -> Timed:
    """Time all of ``fn`` (which returns the records it handled)."""

    def run() -> tuple[int, float]:
        started = time.perf_counter()
        records = fn()
        return records, time.perf_counter() - started

    return run


#: One measure's timed runs: (records handled, seconds) each.
Runs = list[tuple[int, float]]


def measure_rounds(
    variants: Sequence[tuple[str, Timed]],
    runs: int,
    warmup: Sequence[tuple[str, Timed]] | None = None,
) -> dict[str, Runs]:
    """Warm each variant up once, then time ``runs`` rounds, interleaving the variants so
    background load hits them alike."""
    for _, fn in warmup if warmup is not None else variants:
        fn()
    out: dict[str, Runs] = {name: [] for name, _ in variants}
    for _ in range(runs):
        for name, fn in variants:
            out[name].append(fn())
    return out


def row_of(section: str, name: str, runs: Runs, *, expected: int | None = None,
           note: str = "") -> Row:
    """The median row of ``runs``. A run that handled other than ``expected`` records (a
    read that lost data) is left out of the median and named in the note."""
    want = expected if expected is not None else max(records for records, _ in runs)
    good = [seconds for records, seconds in runs if records == want]
    bad = [records for records, _ in runs if records != want]
    notes = [note] if note else []
    if bad:
        notes.append(f"WARNING: {len(bad)} of {len(runs)} runs handled {bad} records instead "
                     f"of {want:,}; left out of the median")
    times = good or [seconds for _, seconds in runs]
    return Row(section, name, want, statistics.median(times),
               [round(seconds, 4) for _, seconds in runs], note="; ".join(notes))


def load() -> float:
    return os.getloadavg()[0]


def ready_topic(cfg: ClientConfig, name: str, partitions: int = 8) -> str:
    """A new topic whose every partition answers a Fetch.

    Right after CreateTopics, Kafka can answer a first Produce with
    NOT_LEADER_OR_FOLLOWER, which eoskafka's task writer does not retry yet.
    """
    topic = new_topic(cfg, name, partitions)
    deadline = time.monotonic() + 60
    with KafkaWire(cfg) as wire:
        while True:
            try:
                info = fetch_metadata(wire, [topic])
                fetch_bounds(wire, {(topic, p): leader_of(info, (topic, p))
                                    for p in range(partitions)})
                return topic
            except (KafkaProtocolError, TopicNotFoundError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # the partitions' leadership is still being set up
