"""Offset JSON and offset-range planning: pure functions, no network, no Spark.

Runs on the driver (in the Python worker that plans micro-batches). Every input
is a plain mapping of ``(topic, partition)`` to an offset; the broker calls that
produce them (Fetch for the log bounds, ListOffsets by time) live elsewhere.

Offsets in the Spark checkpoint are JSON objects shaped like Spark's own Kafka
source offsets, ``{"topic": {"0": 23, "1": 40}}``, so a checkpoint reads the
same way to someone who knows Spark.

>>> cap_end_offsets({("t", 0): 0, ("t", 1): 0}, {("t", 0): 90, ("t", 1): 10}, 50)
{('t', 0): 45, ('t', 1): 5}
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from eos_kafka_source.errors import ConfigError, DataLossError

TopicPartition = tuple[str, int]

#: Sentinels in ``startingOffsets``/``endingOffsets`` JSON, as in Spark and Kafka.
EARLIEST = -2
LATEST = -1

_PARTITION_KEY = re.compile(r"\d+")


def tp_name(tp: TopicPartition) -> str:
    """Kafka's usual spelling of a topic-partition, ``topic-3``."""
    return f"{tp[0]}-{tp[1]}"


# Where a read starts and ends (plain values: these travel in pickled readers).

@dataclass(frozen=True)
class StartingSpec:
    """Where a query starts reading; resolved once, when it has no checkpoint.

    ``kind`` is ``"earliest"``, ``"latest"``, ``"offsets"`` (``per_partition``
    holds offsets, -2/-1 meaning earliest/latest), ``"timestamp"`` (one
    ``timestamp`` in ms for every partition) or ``"timestamps"``
    (``per_partition`` holds ms). ``on_no_match`` says what a timestamp with no
    record at or after it means: ``"error"`` or ``"latest"``. ``option`` names
    the option it came from, for error messages.
    """

    kind: str = "latest"
    per_partition: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None
    on_no_match: str = "error"
    option: str = "startingOffsets"

    def __post_init__(self) -> None:
        if self.kind not in ("earliest", "latest", "offsets", "timestamp", "timestamps"):
            raise ValueError(f"unknown StartingSpec kind {self.kind!r}")


@dataclass(frozen=True)
class EndingSpec:
    """Where a batch read stops (exclusive): ``"latest"``, ``"offsets"`` (-1 =
    latest), ``"timestamp"`` or ``"timestamps"``. A timestamp with no record at
    or after it ends that partition at its latest offset, as in Spark.
    """

    kind: str = "latest"
    per_partition: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None
    option: str = "endingOffsets"

    def __post_init__(self) -> None:
        if self.kind not in ("latest", "offsets", "timestamp", "timestamps"):
            raise ValueError(f"unknown EndingSpec kind {self.kind!r}")


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def parse_offsets_json(text: str, option: str) -> dict[TopicPartition, int]:
    """Parse ``{"topic": {"0": 23, "1": -2}}`` into ``{("topic", 0): 23, ...}``.

    Used for offsets and for timestamps; range checks on the numbers are the
    caller's, since they differ by option. Raises :class:`ConfigError` naming
    ``option`` on anything else.
    """
    fix = 'Write it as {"topic":{"0":23,"1":-2}}.'
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{option} is not valid JSON ({exc.msg}): {_shorten(text)!r}. "
                          f"{fix}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{option} must be a non-empty JSON object of topics, got "
                          f"{_shorten(text)!r}. {fix}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not topic:
            raise ConfigError(f"{option} has an empty topic name in {_shorten(text)!r}. {fix}")
        if not isinstance(parts, dict) or not parts:
            raise ConfigError(f"{option}: topic {topic!r} must map to a non-empty object of "
                              f"partition -> number, got {json.dumps(parts)}. {fix}")
        for key, value in parts.items():
            if not _PARTITION_KEY.fullmatch(key):
                raise ConfigError(f"{option}: partition {key!r} of topic {topic!r} is not a "
                                  f'non-negative integer; write partitions like "0".')
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{option}: value {json.dumps(value)} for {topic}-{key} is "
                                  f"not an integer; use whole numbers.")
            out[(topic, int(key))] = value
    return out


def to_spark_offset(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form: topics sorted, partitions in numeric order, JSON-ready."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_spark_offset(d: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """Inverse of :func:`to_spark_offset` (Spark hands offsets back as parsed JSON)."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in d.items():
        for partition, offset in parts.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(
                    f"checkpoint offset for {topic}-{partition} is {offset!r}, not an integer"
                )
            out[(topic, int(partition))] = offset
    return out


@dataclass(frozen=True)
class PartitionBounds:
    """A partition's offsets as a Fetch response reports them.

    Planning uses Fetch, not ListOffsets "latest", because the latter is wrong
    on some brokers (docs/compatibility.md).
    """

    log_start: int
    high_watermark: int
    last_stable: int

    def latest(self, read_committed: bool) -> int:
        """The end a plan may read to: the LSO under read_committed (nothing past
        an open transaction), else the high watermark."""
        return self.last_stable if read_committed else self.high_watermark


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"OffsetRange end {self.end} < start {self.start}")

    @property
    def size(self) -> int:
        """Number of offsets (not records: markers and aborted records count)."""
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)


def _require_starts(fn: str, start: Mapping[TopicPartition, int],
                    end: Mapping[TopicPartition, int]) -> None:
    missing = sorted(tp for tp in end if tp not in start)
    if missing:
        raise ValueError(f"{fn} needs a start for every partition; missing "
                         + ", ".join(tp_name(tp) for tp in missing))


def cap_end_offsets(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_total: int | None,
) -> dict[TopicPartition, int]:
    """Apply ``maxOffsetsPerTrigger``: Spark's ``KafkaMicroBatchStream.rateLimit``.

    Each partition with a backlog gets ``max_total * backlog / total_backlog``
    offsets, floored, except that a share below 1 is rounded *up* so that no
    partition starves; so with more backlogged partitions than budget a batch
    reads one offset from each and exceeds ``max_total`` (as Spark does). No end
    passes ``latest``. The result has the partitions of ``latest``; every one of
    them must be in ``start`` (a new partition starts at its log start: pass
    that in). One deliberate difference from Spark: a partition whose latest is
    below its start keeps its start instead of moving backwards; judging that
    case is :func:`check_data_loss`'s job.
    """
    _require_starts("cap_end_offsets", start, latest)
    if max_total is not None and max_total <= 0:
        raise ValueError(f"max_total must be positive, got {max_total}")
    sizes = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = float(sum(sizes.values()))
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start[tp]
        if tp not in sizes:
            out[tp] = max(begin, end)
        elif max_total is None or total < 1:
            out[tp] = end
        else:
            prorate = max_total * (sizes[tp] / total)  # same float maths as Spark
            share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
            out[tp] = min(end, begin + share)
    return out


def _divide(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """Spark's ``getDividedPartition``: near-equal pieces, the later ones larger."""
    remaining = end - start
    pieces = []
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        if size > 0:
            pieces.append((start, start + size))
        start += size
    return pieces


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[OffsetRange]:
    """Cut ``[start, end)`` per partition into Spark input partitions.

    Empty ranges are dropped. A range longer than ``max_records_per_partition``
    is cut into ``ceil(size / max)`` near-equal pieces. While there are fewer
    than ``min_partitions`` pieces, the partition whose pieces are largest gets
    one more (ties: lowest topic, then partition), until the minimum is reached
    or every piece holds one offset. Unlike Spark's proportional rounding this
    always reaches the minimum when there are enough offsets. The result is
    sorted by ``(topic, partition, start)``; the same input always gives the
    same plan, which a replayed batch relies on.

    >>> [(r.start, r.end) for r in plan_ranges({("t", 0): 0}, {("t", 0): 10},
    ...     min_partitions=3, max_records_per_partition=None)]
    [(0, 3), (3, 6), (6, 10)]
    """
    for name, value in (("min_partitions", min_partitions),
                        ("max_records_per_partition", max_records_per_partition)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    _require_starts("plan_ranges", start, end)
    sizes = {tp: e - start[tp] for tp, e in sorted(end.items()) if e - start[tp] > 0}
    parts = {
        tp: -(-size // max_records_per_partition) if max_records_per_partition else 1
        for tp, size in sizes.items()
    }
    short = (min_partitions or 0) - sum(parts.values())
    if short > 0:
        # Largest piece first; Fraction keeps the comparison exact and the plan stable.
        heap = [(-Fraction(sizes[tp], n), tp) for tp, n in parts.items() if n < sizes[tp]]
        heapq.heapify(heap)
        while short > 0 and heap:
            _, tp = heapq.heappop(heap)
            parts[tp] += 1
            short -= 1
            if parts[tp] < sizes[tp]:
                heapq.heappush(heap, (-Fraction(sizes[tp], parts[tp]), tp))
    return [
        OffsetRange(tp[0], tp[1], lo, hi)
        for tp in sizes
        for lo, hi in _divide(start[tp], end[tp], parts[tp])
    ]


def check_data_loss(
    start: Mapping[TopicPartition, int],
    bounds: Mapping[TopicPartition, PartitionBounds],
    *,
    fail_on_data_loss: bool,
) -> tuple[dict[TopicPartition, int], list[str]]:
    """Find start offsets the log no longer has, before planning a batch.

    Three cases lose data: ``start < log_start`` (retention or DeleteRecords
    removed offsets not yet read), ``start > high_watermark`` (the topic was
    deleted and recreated, or truncated) and a partition with no bounds (it no
    longer exists). With ``fail_on_data_loss`` this raises
    :class:`DataLossError` listing every case. Otherwise it returns the starts
    moved to the log start (a vanished partition is dropped) and one warning per
    case. Gaps inside the log (compaction, transaction markers) are not loss.
    """
    adjusted: dict[TopicPartition, int] = {}
    problems: list[str] = []
    for tp, offset in sorted(start.items()):
        b = bounds.get(tp)
        if b is None:
            problems.append(
                f"partition {tp_name(tp)} no longer exists (topic or partition deleted); "
                f"records from offset {offset} on were not read")
            continue
        adjusted[tp] = offset if b.log_start <= offset <= b.high_watermark else b.log_start
        if offset < b.log_start:
            problems.append(
                f"{tp_name(tp)}: offsets {offset} to {b.log_start - 1} were deleted before "
                f"being read (retention or DeleteRecords); the log now starts at {b.log_start}")
        elif offset > b.high_watermark:
            problems.append(
                f"{tp_name(tp)}: start offset {offset} is past the end of the log "
                f"({b.high_watermark}); the topic was probably deleted and recreated or "
                f"truncated; reading restarts at offset {b.log_start}")
    if problems and fail_on_data_loss:
        raise DataLossError(
            "Some data may have been lost: " + "; ".join(problems) + ". If you accept "
            "this, set the source option failOnDataLoss=false to skip the lost offsets "
            "(the query then continues from the earliest offset still available)."
        )
    return adjusted, [p + " (failOnDataLoss=false: skipped)" for p in problems]


#: ``{tp: ms}`` -> ``{tp: first offset with timestamp >= ms, or None/-1 if none}``.
OffsetsForTimes = Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int | None]]


def _check_covers(option: str, named: Iterable[TopicPartition],
                  partitions: list[TopicPartition]) -> None:
    named_set, have = set(named), set(partitions)
    if named_set != have:
        detail = "; ".join(f"{label}: {', '.join(tp_name(tp) for tp in sorted(tps))}"
                           for label, tps in (("not named", have - named_set),
                                              ("named but not found", named_set - have)) if tps)
        raise ConfigError(
            f"{option} must name every partition the query reads, and only those ({detail}). "
            f"Add the missing ones (use -2 for earliest, -1 for latest) or use "
            f"'earliest'/'latest' for all.")


def _resolve(spec: StartingSpec | EndingSpec, on_no_match: str,
             partitions: Iterable[TopicPartition],
             bounds: Mapping[TopicPartition, PartitionBounds], read_committed: bool,
             offsets_for_times: OffsetsForTimes | None) -> dict[TopicPartition, int]:
    parts = sorted(set(partitions))
    no_bounds = [tp_name(tp) for tp in parts if tp not in bounds]
    if no_bounds:
        raise ValueError("no bounds for " + ", ".join(no_bounds))
    earliest = {tp: bounds[tp].log_start for tp in parts}
    latest = {tp: bounds[tp].latest(read_committed) for tp in parts}
    if spec.kind in ("earliest", "latest"):
        return earliest if spec.kind == "earliest" else latest
    named = dict(spec.per_partition)
    if spec.kind in ("offsets", "timestamps"):
        _check_covers(spec.option, named, parts)
    if spec.kind == "offsets":
        return {tp: {EARLIEST: earliest[tp], LATEST: latest[tp]}.get(named[tp], named[tp])
                for tp in parts}
    if offsets_for_times is None:
        raise ValueError(f"{spec.option} needs an offsets_for_times lookup")
    times = {tp: named[tp] if spec.kind == "timestamps" else int(spec.timestamp or 0)
             for tp in parts}
    found = offsets_for_times(times)
    out = {}
    for tp in parts:
        off = found.get(tp)
        if off is not None and off >= 0:
            out[tp] = off
        elif on_no_match == "latest":
            out[tp] = latest[tp]
        else:
            raise ConfigError(
                f"{spec.option}: no record of {tp_name(tp)} has a timestamp at or after "
                f"{times[tp]} ms. Choose an earlier timestamp, or set "
                f"startingOffsetsByTimestampStrategy=latest to start such partitions at "
                f"their latest offset.")
    return out


def resolve_starting(
    spec: StartingSpec,
    partitions: Iterable[TopicPartition],
    bounds: Mapping[TopicPartition, PartitionBounds],
    *,
    read_committed: bool,
    offsets_for_times: OffsetsForTimes | None = None,
) -> dict[TopicPartition, int]:
    """Concrete start offsets for ``partitions`` (those the query reads now).

    Rules (Spark's): earliest is the log start; latest is
    :meth:`PartitionBounds.latest`; JSON offsets and per-partition timestamps
    must name exactly the partitions read now, for ``assign``, ``subscribe`` and
    ``subscribePattern`` alike (:class:`ConfigError` otherwise), with -2/-1
    meaning earliest/latest. Partitions that appear later always start at their
    log start; that is the caller's rule, not this function's. Timestamps go
    through ``offsets_for_times``; with no match ``spec.on_no_match`` decides.
    Explicit offsets are returned as given: run :func:`check_data_loss` on the
    result.
    """
    return _resolve(spec, spec.on_no_match, partitions, bounds, read_committed,
                    offsets_for_times)


def resolve_ending(
    spec: EndingSpec,
    partitions: Iterable[TopicPartition],
    bounds: Mapping[TopicPartition, PartitionBounds],
    *,
    read_committed: bool,
    offsets_for_times: OffsetsForTimes | None = None,
) -> dict[TopicPartition, int]:
    """Concrete end offsets of a batch read; same rules as :func:`resolve_starting`,
    except that a timestamp with no match ends that partition at its latest."""
    return _resolve(spec, "latest", partitions, bounds, read_committed, offsets_for_times)
