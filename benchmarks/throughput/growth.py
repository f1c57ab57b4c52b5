"""Cost growth: per-task source and sink records/s as partitions and value sizes grow.

Cells: 1, 8 and 32 partitions with 100-byte values, then 1 KB and 10 KB values in one
partition. Every cell moves about ``Sizes.growth_bytes`` of values (so each takes about
the same time; the median of two timed runs, one fewer than elsewhere). The source cell
reads every partition of a topic with one ``read_partition`` after another (one Spark
task each) and divides all records by all the time, so per-task fixed costs show as
partitions get smaller; the sink cell is one exactly-once task (TaskWriter + hand-off +
driver commit) writing all records to a topic with that many partitions (one transaction
spanning all of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from eos_kafka_source.client.config import ClientConfig

from ..common import (
    SINK_BATCH_ROWS,
    Sizes,
    delete_topic,
    measure_rounds,
    new_topic,
    row_of,
    timed,
    value_batches,
)
from . import sink as sink_bench
from . import source

#: (partitions, value bytes) of each cell, in table order.
CELLS: tuple[tuple[int, int], ...] = ((1, 100), (8, 100), (32, 100), (1, 1_000), (1, 10_000))
#: Bytes of one sink input batch at most (Spark hands over 10,000 rows per Arrow batch).
_BATCH_BYTES = 10 << 20


@dataclass
class Cell:
    partitions: int
    value_bytes: int
    records: int
    source_seconds: float
    sink_seconds: float

    @property
    def label(self) -> str:
        size = f"{self.value_bytes // 1000} KB" if self.value_bytes >= 1000 else \
            f"{self.value_bytes} B"
        return f"{self.partitions} partition{'s' if self.partitions > 1 else ''}, {size} values"

    def rate(self, seconds: float) -> float:
        return self.records / seconds if seconds > 0 else 0.0


def records_of(sizes: Sizes, partitions: int, value_bytes: int) -> int:
    """Records of a cell: the byte budget, a multiple of the partitions."""
    per_record = value_bytes + 10  # + the record's framing in the log
    each = max(1, sizes.growth_bytes // per_record // partitions)
    return each * partitions


def _cell(cfg: ClientConfig, sizes: Sizes, partitions: int, value_bytes: int) -> Cell:
    records = records_of(sizes, partitions, value_bytes)
    topic = new_topic(cfg, f"growth{partitions}x{value_bytes}", partitions)
    eos = sink_bench.EosSink(cfg, "growth")
    try:
        source.write_committed(cfg, topic, partitions, records // partitions,
                               value_bytes=value_bytes)
        ranges = source.committed_ranges(cfg, topic)
        rows = max(1, min(SINK_BATCH_ROWS, _BATCH_BYTES // value_bytes))
        data = value_batches(records, rows, size=value_bytes)

        def write(topic_out: str) -> int:
            return eos.write(topic_out, data)

        variants = [
            ("source", timed(lambda: source.read_ours(cfg, ranges))),
            ("sink", sink_bench.on_fresh_topic(cfg, "growth-out", write, partitions)),
        ]
        results = measure_rounds(variants, max(1, sizes.runs - 1), warmup=[])
    finally:
        eos.close()
        delete_topic(cfg, topic)
    src = row_of("growth", "source", results["source"], expected=records)
    snk = row_of("growth", "sink", results["sink"], expected=records)
    return Cell(partitions, value_bytes, records, src.seconds, snk.seconds)


def bench(cfg: ClientConfig, sizes: Sizes) -> list[Cell]:
    cells = []
    for partitions, value_bytes in CELLS:
        cell = _cell(cfg, sizes, partitions, value_bytes)
        print(f"  {cell.label}: {cell.records:,} records; source "
              f"{cell.rate(cell.source_seconds) / 1e3:,.0f}k records/s, sink "
              f"{cell.rate(cell.sink_seconds) / 1e3:,.0f}k records/s", flush=True)
        cells.append(cell)
    return cells


def table(cells: list[Cell]) -> list[str]:
    """The markdown table: records/s and MB/s of values, source and sink."""
    lines = ["| case | records | source records/s | source MB/s | sink records/s | sink MB/s |",
             "|---|---|---|---|---|---|"]
    for c in cells:
        src, snk = c.rate(c.source_seconds), c.rate(c.sink_seconds)
        lines.append(
            f"| {c.label} | {c.records:,} | {_rate(src)} | {src * c.value_bytes / 1e6:,.0f} | "
            f"{_rate(snk)} | {snk * c.value_bytes / 1e6:,.0f} |"
        )
    return lines


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:,.0f}k"
