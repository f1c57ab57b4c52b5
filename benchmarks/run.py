"""Entry point: ``python -m benchmarks.run [--quick] [--records N] [--out PATH] [--profile]``.

Starts one embedded broker for the whole run, measures the per-task source and
sink paths without Spark (each against references measured in the same run),
the driver's commit time, then both directions through a local[2] Spark
session; prints every row and writes ``bench-results/latest.md`` + ``.json``.
Benchmarks are not tests: a missed target is reported, not failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from eos_kafka_source.broker import EmbeddedBroker

from . import sink, source
from .common import Row, Sizes, client
from .profiling import profile
from .report import environment, print_row, save

DEFAULT_OUT = Path("bench-results/latest.md")
FULL_RECORDS = 1_000_000
QUICK_RECORDS = 50_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"a small smoke run ({QUICK_RECORDS:,} records, under a minute)")
    parser.add_argument("--records", type=int, default=None,
                        help=f"base data size: the 1-partition source reads N, the 8-partition "
                             f"source N in all, the sink task writes 2N, Spark writes N "
                             f"(default {FULL_RECORDS:,})")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed runs per measure, after one warm-up (default 3; --quick 1)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="markdown report; the JSON goes beside it (default %(default)s)")
    parser.add_argument("--profile", action="store_true",
                        help="also cProfile the source read and sink write paths into "
                             "profile.txt beside the report")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark measures")
    return parser.parse_args(argv)


def sizes_of(args: argparse.Namespace) -> Sizes:
    records = args.records or (QUICK_RECORDS if args.quick else FULL_RECORDS)
    if records < 8:
        raise SystemExit("--records must be at least 8")
    runs = max(1, args.runs if args.runs is not None else (1 if args.quick else 3))
    return Sizes(records=records, runs=runs, commit_batches=2 if args.quick else 5,
                 spark_runs=runs, spark_warmup=not args.quick)


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
    rows: list[Row] = []
    started = time.perf_counter()

    def step(title: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {title}", flush=True)

    def add(new: list[Row]) -> None:
        for row in new:
            print_row(row)
        rows.extend(new)

    spark = None
    try:
        with EmbeddedBroker() as broker:
            cfg = client(broker.bootstrap_servers)
            step(f"writing source data ({sizes.source_1p:,} records in 1 partition, "
                 f"{sizes.source_8p_each * 8:,} in 8), committed transactions")
            topics = source.prepare(cfg, sizes)
            step("source per task")
            add(source.bench(cfg, topics, sizes))
            step("sink per task")
            add(sink.bench(cfg, sizes))
            step("driver commit per batch")
            add(sink.bench_commit(cfg, sizes))
            if args.profile:
                step("profiling")
                profile(cfg, topics["1 partition"], sizes, args.out.parent / "profile.txt")
            if not args.no_spark:
                step("starting Spark (local[2])")
                spark = start_spark()
                step("Spark source")
                add([source.bench_spark(spark, cfg, topics[source.EIGHT], sizes)])
                step("Spark sink")
                add([sink.bench_spark(spark, cfg, sizes)])
    finally:
        if spark is not None:
            spark.stop()
        if rows:
            save(args.out, rows, env, time.perf_counter() - started)
    missed = [r.measure for r in rows if r.ok is False]
    step(f"done; {len(missed)} target(s) missed" + (f": {'; '.join(missed)}" if missed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
