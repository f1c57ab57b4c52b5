"""Pack a batch's offset ranges into at most ``maxPartitions`` Spark input partitions,
by default as many as the cluster has task slots (:func:`to_input_partitions`,
:func:`bins_for`, :mod:`.slots`).

Runs on the driver (the planning worker), after :func:`~eos_kafka_source.offsets.plan_ranges`
has cut the ranges (``minPartitions``, ``maxRecordsPerPartition``). No Spark imports.

Why: Spark runs one task per input partition and at most as many tasks at once as the
cluster has task slots (``spark.default.parallelism``). Each task of a Python data source
pays two Python workers (reader and writer), so a batch whose 4 Kafka partitions make 4
tasks on 2 slots runs in two waves and takes about one wave longer than it must.
Packing the ranges into as many partitions as there are slots makes one wave (about half
the latency a user sees at 2,000 records/s, docs/latency.md), and an exactly-once sink
whose partitions follow the input's opens fewer transactions per batch.

How: a range holding more than an equal share of the batch (``ceil(total / bins)``) is first
cut into near-equal pieces of at most that share, as ``minPartitions`` cuts, when the share
is at least :data:`MIN_PIECE` offsets (a piece costs a task one more Fetch round trip).
Then the ranges go, largest first, to the bin holding the fewest offsets so far (ties: the
lowest bin); with ``maxRecordsPerPartition`` a range only goes to a bin it fits in, else to a
new bin (that option is a hard cap, this one a wish). Inside a bin the ranges are sorted by
``(topic, partition, start)``. The same ranges always give the same bins: a replayed batch
reads what the original did, task by task.

>>> r = [OffsetRange("t", p, 0, n) for p, n in enumerate((500, 300, 200, 100))]
>>> [[(x.partition, x.end) for x in b] for b in pack_ranges(r, 2)]
[[(0, 500), (3, 100)], [(1, 300), (2, 200)]]
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition

from ..formats.plans import ReadPlan
from ..offsets import OffsetRange, plan_ranges
from ..options import SourceOptions
from .partitions import KafkaInputPartition, KafkaPackedPartition
from .slots import task_slots

#: Smallest equal share (offsets) for which ranges are cut to even the bins out.
MIN_PIECE = 10_000


def to_input_partitions(options: SourceOptions, ranges: Sequence[OffsetRange],
                        payload: ReadPlan | None = None) -> list[InputPartition]:
    """Offset ranges -> picklable input partitions carrying what the executor needs: packed
    into at most ``maxPartitions``, by default the cluster's task slots; one per range when
    neither is known."""
    def one(r: OffsetRange) -> KafkaInputPartition:
        return KafkaInputPartition(
            r.topic, r.partition, r.start, r.end, options.client,
            read_committed=options.read_committed,
            # Decoded payloads need the headers: a schema id may be in one, not the prefix.
            include_headers=options.include_headers or payload is not None,
            fetch_max_bytes=options.fetch_max_bytes,
            poll_timeout_ms=options.poll_timeout_ms,
            fail_on_data_loss=options.fail_on_data_loss,
            check_crcs=options.check_crcs,
            payload=payload,
        )

    slots = task_slots() if options.max_partitions is None else None
    bins = bins_for(options.max_partitions, options.min_partitions, slots)
    groups = pack_ranges(ranges, bins, options.max_records_per_partition)
    return [one(g[0]) if len(g) == 1 else KafkaPackedPartition(tuple(one(r) for r in g))
            for g in groups]


def bins_for(max_partitions: int | None, min_partitions: int | None,
             slots: int | None) -> int | None:
    """How many input partitions a batch packs into: ``maxPartitions`` when set; else the
    task slots, never fewer than ``minPartitions`` (which keeps Spark's meaning, a least
    number of partitions); None (a task per range) when the slots are not known.

    >>> bins_for(None, None, 2), bins_for(8, None, 2), bins_for(None, 7, 2), bins_for(None, 3, None)
    (2, 8, 7, None)
    """
    if max_partitions is not None:
        return max_partitions
    if slots is None:
        return None
    return max(slots, min_partitions or 0)


def pack_ranges(ranges: Sequence[OffsetRange], max_partitions: int | None,
                max_records_per_partition: int | None = None) -> list[tuple[OffsetRange, ...]]:
    """Group ``ranges`` into at most ``max_partitions`` groups (more only when
    ``max_records_per_partition`` forbids it); None: one group per range, as today."""
    if max_partitions is not None and max_partitions <= 0:
        raise ValueError(f"max_partitions must be positive, got {max_partitions}")
    live = [r for r in ranges if r.end > r.start]
    if max_partitions is None or len(live) <= max_partitions:
        return [(r,) for r in live]
    share = -(-sum(r.end - r.start for r in live) // max_partitions)
    pieces = [piece for r in live for piece in _cut(r, share)]
    pieces.sort(key=lambda r: (-(r.end - r.start), r.topic, r.partition, r.start))
    bins: list[list[OffsetRange]] = [[] for _ in range(max_partitions)]
    loads = [0] * max_partitions
    cap = max_records_per_partition
    for piece in pieces:
        size = piece.end - piece.start
        fits = [i for i in range(len(bins)) if cap is None or loads[i] + size <= cap]
        if not fits:
            bins.append([])
            loads.append(0)
            fits = [len(bins) - 1]
        best = min(fits, key=lambda i: (loads[i], i))
        bins[best].append(piece)
        loads[best] += size
    return [tuple(sorted(b, key=lambda r: (r.topic, r.partition, r.start))) for b in bins if b]


def _cut(r: OffsetRange, share: int) -> list[OffsetRange]:
    """``r`` in near-equal pieces of at most ``share`` offsets (a share under MIN_PIECE: whole)."""
    size = r.end - r.start
    if size <= share or share < MIN_PIECE:
        return [r]
    tp = (r.topic, r.partition)
    return plan_ranges({tp: r.start}, {tp: r.end}, min_partitions=None,
                       max_records_per_partition=share)
