"""``python -m benchmarks.throughput [--quick] [--records N] [--out PATH] [--profile]``.

Starts one embedded broker for the whole run, measures the per-task source and
sink paths without Spark (each against references measured in the same run),
the driver's commit time, the cost growth over partitions and value sizes, the
peak memory of one task (in subprocesses), then both directions and the
end-to-end streaming pipeline through a local[2] Spark session; prints every
row and writes ``bench-results/latest.md`` + ``.json``, led by a summary of
every target. Benchmarks are not tests: a missed target is reported, not failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eos_kafka_source.broker import EmbeddedBroker

from ..common import Row, Sizes, client
from . import growth, memory, pipeline, sink, source
from .profiling import profile
from .report import Section, environment, print_row, save, summary

DEFAULT_OUT = Path("bench-results/latest.md")
FULL_RECORDS = 1_000_000
QUICK_RECORDS = 50_000
QUICK_MEMORY = (400_000, 700_000, 1_000_000)  # all past the reader's 32 MiB queue
QUICK_GROWTH_BYTES = 3_000_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"a small smoke run ({QUICK_RECORDS:,} records, under a minute)")
    parser.add_argument("--records", type=int, default=None,
                        help=f"base data size: the 1-partition source reads N, the 8-partition "
                             f"source N in all, the sink task writes 3N, Spark writes N, the "
                             f"pipeline moves 4N (default {FULL_RECORDS:,})")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed runs per measure, after one warm-up (default 3; --quick 1)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="markdown report; the JSON goes beside it (default %(default)s)")
    parser.add_argument("--profile", action="store_true",
                        help="also cProfile the source read and sink write paths into "
                             "profile.txt beside the report")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark measures")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory measures")
    parser.add_argument("--no-growth", action="store_true", help="skip the cost-growth table")
    return parser.parse_args(argv)


def sizes_of(args: argparse.Namespace) -> Sizes:
    records = args.records or (QUICK_RECORDS if args.quick else FULL_RECORDS)
    if records < 8:
        raise SystemExit("--records must be at least 8")
    runs = max(1, args.runs if args.runs is not None else (1 if args.quick else 3))
    quick = args.quick and args.records is None
    defaults = Sizes(records=records)
    return Sizes(records=records, runs=runs, commit_batches=2 if args.quick else 5,
                 spark_runs=runs, spark_warmup=not args.quick,
                 memory_records=QUICK_MEMORY if quick else defaults.memory_records,
                 growth_bytes=QUICK_GROWTH_BYTES if quick else defaults.growth_bytes)


def start_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("eoskafka-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sizes_of(args)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    env = environment(sizes)
    if args.quick:
        env["note"] = ("--quick: small data, so fixed costs (connections, query start-up, "
                       "commits) dominate and targets are checked on the full run only")
    rows: list[Row] = []
    started = time.perf_counter()

    def step(title: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {title}", flush=True)

    def add(new: list[Row]) -> None:
        for row in new:
            print_row(row)
        rows.extend(new)

    cells: list[growth.Cell] = []
    peaks: list[memory.Measure] = []
    spark = None
    try:
        # Each section gets a fresh broker: Tansu's cost of a transactional request grows
        # with every transaction it has seen (see sink.bench_commit), so a shared broker
        # would make later measures depend on earlier ones.
        with EmbeddedBroker() as broker:
            cfg = client(broker.bootstrap_servers)
            step(f"writing source data ({sizes.source_1p:,} records in 1 partition, "
                 f"{sizes.source_8p_each * 8:,} in 8), committed transactions")
            topics = source.prepare(cfg, sizes)
            step("source per task")
            add(source.bench(cfg, topics, sizes))
            if args.profile:
                step("profiling")
                profile(cfg, topics["1 partition"], sizes, args.out.parent / "profile.txt")
        with EmbeddedBroker() as broker:
            step("sink per task")
            add(sink.bench(client(broker.bootstrap_servers), sizes))
        step("driver commit per batch (a fresh broker per case)")
        add(sink.bench_commit(sizes))
        if not args.no_growth:
            with EmbeddedBroker() as broker:
                step("cost growth: partitions and value sizes")
                cells = growth.bench(client(broker.bootstrap_servers), sizes)
        if not args.no_memory:
            with EmbeddedBroker() as broker:
                step("peak memory of one task (subprocesses)")
                peaks = memory.bench(client(broker.bootstrap_servers), sizes)
        if not args.no_spark:
            with EmbeddedBroker() as broker:
                cfg = client(broker.bootstrap_servers)
                step(f"writing Spark input ({sizes.source_8p_each * 8:,} records in 8 "
                     f"partitions; {sizes.pipeline:,} in {pipeline.PARTITIONS} for the pipeline)")
                eight = source.prepare_eight(cfg, sizes)
                e2e_input = pipeline.prepare(cfg, sizes)
                step("starting Spark (local[2])")
                spark = start_spark()
                step("Spark source")
                add([source.bench_spark(spark, cfg, eight, sizes)])
                step("Spark sink")
                add([sink.bench_spark(spark, cfg, sizes)])
                step("Spark end to end: streaming eoskafka → eoskafka, exactly-once")
                add([pipeline.bench(spark, cfg, e2e_input, sizes)])
    finally:
        if spark is not None:
            spark.stop()
        if rows:
            sections, data = _sections(rows, cells, peaks)
            save(args.out, rows, env, time.perf_counter() - started, sections, data)
    missed = [r.measure for r in rows if r.ok is False]
    step(f"done; {len(missed)} target(s) missed" + (f": {'; '.join(missed)}" if missed else ""))
    return 0


def _sections(rows: list[Row], cells: list[growth.Cell],
              peaks: list[memory.Measure]) -> tuple[list[Section], dict[str, Any]]:
    """The summary (first), the cost-growth and memory tables, and their JSON."""
    extra: list[tuple[str, str, str, bool | None]] = []
    verdicts = memory.verdicts(peaks)
    for op, v in verdicts.items():
        extra.append((f"peak memory of one task, {op} a partition of {v['records']:,} records",
                      f"≤ {memory.LIMIT_MB} MB RSS, flat (≤ +{memory.FLAT_SLACK_MB} MB from "
                      "smallest to largest)",
                      f"{v['peak_mb']:.0f} MB, {v['growth_mb']:+.0f} MB", v["ok"]))
    if cells:
        extra.append(("cost growth (1/8/32 partitions; 100 B/1 KB/10 KB)", "a table",
                      "see 'cost growth' below", None))
    sections: list[Section] = [("summary of targets", summary(rows, extra))]
    if cells:
        sections.append(("cost growth (records/s per task)", [
            "Each cell moves about the same bytes of values. Source: each partition read by "
            "its own read_partition, one after another; sink: one exactly-once task writing "
            "to a topic with that many partitions.", "", *growth.table(cells)]))
    if peaks:
        lines = ["| operation | records | peak RSS | RSS at start | records/s |",
                 "|---|---|---|---|---|"]
        for m in peaks:
            lines.append(f"| {m.op} | {m.records:,} | {m.peak_mb:.0f} MB | "
                         f"{m.baseline_mb:.0f} MB | {m.rate / 1e3:,.0f}k |")
        sections.append(("peak memory of one task", [
            "One process per measure (peak RSS: VmHWM). Write: TaskWriter + hand-off + commit, one "
            "transaction over the whole partition; read: read_partition of that partition "
            "(read_committed, its COMMIT marker at the end).", "", *lines]))
    data = {"growth": [asdict(c) for c in cells], "memory": [asdict(m) for m in peaks]}
    return sections, data


if __name__ == "__main__":
    raise SystemExit(main())
