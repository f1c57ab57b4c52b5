"""eoskafka against Spark's own Kafka connector: ``python -m benchmarks.throughput connector``.

One run, one Apache Kafka broker (started here, KRaft, one node), one
``local[2]`` SparkSession with the connector's jars; the same data for both, and
every measure interleaved (kafka, eoskafka, kafka, eoskafka, ...) so load that
comes and goes on a shared machine hits both alike. 100-byte values, 8
partitions, uncompressed and lz4. The machine's load average is recorded with
every run. Writes ``bench-results/versus.md`` + ``.json``; docs/performance.md's table is
``benchmarks/throughput/current.json`` (:mod:`benchmarks.published`): copy a new run's
figures there and move the old table to ``benchmarks/throughput/RESULTS.md``.

Measures: source read -> ``noop`` (batch), sink write (Spark's at-least-once vs
eoskafka exactly-once and at-least-once), end to end Kafka -> Spark -> Kafka
(streaming, ``Trigger.AvailableNow``), and the driver's commit time for 1, 8 and
64 tasks on Kafka.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.apache_kafka.spark_connector import connector_version, spark_jars
from eos_kafka_source.client.config import ClientConfig

from ..common import KAFKA_LABEL, KAFKA_VERSION, load, ready_topic, unique
from .sink import COMMIT_TASK_RECORDS, OUTPUT_PARTITIONS, EosSink, task_records

DEFAULT_OUT = Path("bench-results/versus.md")
PARTITIONS = 8
VALUE = "CAST(lpad(CAST(id AS STRING), 100, 'v') AS BINARY)"
TARGET_COMMIT_S = 0.1


@dataclass
class Measure:
    """One line of the table: the same work done by ``kafka`` and by ``eoskafka``."""

    name: str
    records: int
    times: dict[str, list[float]] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    target: str = ""

    def median(self, fmt: str) -> float:
        return statistics.median(self.times[fmt])

    def rate(self, fmt: str) -> float:
        return self.records / self.median(fmt)


def interleaved(measure: Measure, runs: int, work: dict[str, Callable[[], None]],
                warmup: bool = True) -> Measure:
    """Each run times every variant once, alternating which goes first."""
    names = list(work)
    if warmup:
        for name in names:
            _with_retries(work[name])
    for r in range(runs):
        for name in (names if r % 2 == 0 else names[::-1]):
            measure.loads.append(load())
            started = time.perf_counter()
            work[name]()
            measure.times.setdefault(name, []).append(time.perf_counter() - started)
    return measure


def _with_retries(fn: Callable[[], None], attempts: int = 5) -> None:
    """A warm-up, tried again on failure: right after a broker starts, Kafka answers
    NOT_COORDINATOR while it loads __consumer_offsets, which eoskafka's sink does not
    retry yet; timed runs come after the warm-up has succeeded."""
    for attempt in range(attempts):
        try:
            fn()
            return
        except Exception as exc:  # noqa: BLE001 - reported, then retried or raised
            print(f"warm-up failed ({type(exc).__name__}); retrying", flush=True)
            if attempt == attempts - 1:
                raise
            time.sleep(2)


def start_spark() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-versus")
             .config("spark.jars", spark_jars())
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Bench:
    """The broker, the session and the input topics of one comparison run."""

    def __init__(self, spark: Any, bootstrap: str, records: int, runs: int) -> None:
        self.spark = spark
        self.bootstrap = bootstrap
        self.cfg = ClientConfig.from_options({"kafka.bootstrap.servers": bootstrap})
        self.records = records
        self.runs = runs
        self.scratch = Path(tempfile.mkdtemp(prefix="eoskafka-versus-"))
        self.frame = (spark.range(0, records, 1, 2).selectExpr(f"{VALUE} AS value").cache())
        self.frame.count()

    def topic(self, name: str) -> str:
        return ready_topic(self.cfg, name)

    def write(self, fmt: str, topic: str, codec: str, delivery: str | None = None,
              df: Any = None) -> None:
        w = (self.frame if df is None else df).write.format(fmt).mode("append")
        w = w.option("kafka.bootstrap.servers", self.bootstrap).option("topic", topic)
        if codec != "none":
            w = w.option("kafka.compression.type", codec)
        if delivery is not None:
            w = w.option("delivery.guarantee", delivery)
        w.save()

    def read_noop(self, fmt: str, topic: str) -> None:
        (self.spark.read.format(fmt).option("kafka.bootstrap.servers", self.bootstrap)
         .option("subscribe", topic).load().write.format("noop").mode("overwrite").save())

    def pipeline(self, fmt: str, source: str, codec: str) -> None:
        """Kafka -> Spark -> Kafka, streaming, AvailableNow over the whole input topic."""
        out = self.topic(f"e2e-out-{fmt}")
        # One batch for both: eoskafka caps a streaming read at 1,000,000 offsets a trigger by
        # default, Spark's connector does not.
        r = (self.spark.readStream.format(fmt).option("kafka.bootstrap.servers", self.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(self.records)).load())
        w = (r.selectExpr("key", "value").writeStream.format(fmt)
             .option("kafka.bootstrap.servers", self.bootstrap).option("topic", out)
             .option("checkpointLocation", str(self.scratch / unique("chk")))
             .trigger(availableNow=True))
        if codec != "none":
            w = w.option("kafka.compression.type", codec)
        w.start().awaitTermination()


def bench_spark(b: Bench, out: list[Measure], codecs: tuple[str, ...] = ("none", "lz4")
                ) -> None:
    """Append each measure to ``out`` as it completes (a failure keeps the earlier ones)."""
    for codec in codecs:
        source = b.topic(f"input-{codec}")
        b.write("kafka", source, codec)  # the same input for both readers
        out.append(interleaved(
            Measure(f"source: batch read -> noop, {codec}", b.records,
                    target="eoskafka ≥ 1.0× built-in"),
            b.runs, {fmt: (lambda f=fmt, t=source: b.read_noop(f, t))
                     for fmt in ("kafka", "eoskafka")}))
        out.append(interleaved(
            Measure(f"sink: batch write, {codec}", b.records,
                    target="eoskafka exactly-once ≥ 1.0× built-in at-least-once"),
            b.runs, {
                "kafka": lambda c=codec: b.write("kafka", b.topic("sink-k"), c),
                "eoskafka": lambda c=codec: b.write("eoskafka", b.topic("sink-e"), c),
                "eoskafka at-least-once": lambda c=codec: b.write(
                    "eoskafka", b.topic("sink-a"), c, "at_least_once"),
            }))
        out.append(interleaved(
            Measure(f"end to end: Kafka -> Spark -> Kafka (AvailableNow), {codec}", b.records),
            b.runs, {fmt: (lambda f=fmt, c=codec, t=source: b.pipeline(f, t, c))
                     for fmt in ("kafka", "eoskafka")}))


def bench_commit(cfg: ClientConfig, batches: int, profile_to: Path | None = None
                 ) -> list[Measure]:
    """``DriverProtocol.commit`` of N tasks × 8 partitions each, on this Kafka broker; with
    ``profile_to``, one more 64-task commit under cProfile (wall clock) written there."""
    out = []
    for tasks in (1, 8, 64):
        topic = ready_topic(cfg, f"commit{tasks}", OUTPUT_PARTITIONS)
        sink = EosSink(cfg, f"commit{tasks}")
        m = Measure(f"driver commit, {tasks} task(s) × {OUTPUT_PARTITIONS} partitions",
                    tasks * COMMIT_TASK_RECORDS,
                    target=f"≤ {TARGET_COMMIT_S * 1000:.0f} ms" if tasks == 64 else "")
        try:
            inputs = [task_records(p, OUTPUT_PARTITIONS) for p in range(tasks)]
            with sink.wire() as wire:
                for i in range(batches + 1):  # the first is a warm-up
                    handoffs = [sink.task(wire, topic, p, inputs[p]) for p in range(tasks)]
                    m.loads.append(load())
                    seconds = sink.commit(handoffs, tasks)
                    if i:
                        m.times.setdefault("eoskafka", []).append(seconds)
                if profile_to is not None and tasks == 64:
                    handoffs = [sink.task(wire, topic, p, inputs[p]) for p in range(tasks)]
                    _profiled(functools.partial(sink.commit, handoffs, tasks), profile_to)
        finally:
            sink.close()
        out.append(m)
    return out


def _profiled(fn: Callable[[], object], path: Path) -> None:
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"load {load():.1f}\n" + text.getvalue())


def table(measures: list[Measure]) -> list[str]:
    lines = ["| measure | built-in `kafka` | eoskafka | eoskafka / built-in | target | met | "
             "load (1 min) |", "|---|---|---|---|---|---|---|"]
    for m in measures:
        loads = f"{min(m.loads):.1f}–{max(m.loads):.1f}" if m.loads else ""
        if "kafka" not in m.times:  # driver commit: eoskafka only
            ms = m.median("eoskafka") * 1000
            met = "yes" if ms <= TARGET_COMMIT_S * 1000 else "no" if m.target else ""
            lines.append(f"| {m.name} | (no commit step: at-least-once) | {ms:.1f} ms | | "
                         f"{m.target} | {met} | {loads} |")
            continue
        base = m.rate("kafka")
        for name in [n for n in m.times if n != "kafka"]:
            ratio = m.rate(name) / base
            label = m.name if name == "eoskafka" else f"{m.name}: {name}"
            target = m.target if name == "eoskafka" else ""
            met = ("yes" if ratio >= 1.0 else "no") if target else ""
            lines.append(f"| {label} | {base / 1e3:,.0f}k rec/s | {m.rate(name) / 1e3:,.0f}k "
                         f"rec/s | {ratio:.2f}× | {target} | {met} | {loads} |")
    return lines


#: The page whose marked sections the benchmarks rewrite.
README = Path(__file__).parents[2] / "docs" / "performance.md"


def into_readme(name: str, lines: list[str], readme: Path = README) -> None:
    """Replace what lies between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = readme.read_text()
    if begin not in text or end not in text:
        return
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + tail)


def save(out: Path, measures: list[Measure], env: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    head = [f"# eoskafka vs Spark's Kafka connector ({env['when']})", "",
            ", ".join(f"{k}: {v}" for k, v in env.items() if k != "when"), "",
            "Medians of the timed runs; each run does every variant once, alternating order. "
            "Spark's connector reads read_uncommitted (its default), eoskafka read_committed "
            "(its default); the input holds no transactions, so both return the same rows.", ""]
    out.write_text("\n".join(head + table(measures)) + "\n")
    if out == DEFAULT_OUT:
        into_readme("versus", head[2:] + table(measures))
    out.with_suffix(".json").write_text(json.dumps(
        {"env": env, "measures": [asdict(m) for m in measures]}, indent=1))
    chart(out.with_name(out.stem + "-throughput.png"), measures, env["when"])


def chart(path: Path, measures: list[Measure], when: str) -> Path | None:
    """Throughput of each measure, built-in beside eoskafka (needs the ``bench`` extra)."""
    from ..common import charts

    groups = {_short(m.name): {("built-in" if f == "kafka" else f): m.rate(f) / 1e3
                               for f in m.times}
              for m in measures if "kafka" in m.times}
    if not groups or not charts.available():
        return None
    return charts.bar_chart(path, f"eoskafka vs Spark's Kafka connector ({when})",
                            "thousand records/s (median)", groups)


def _short(name: str) -> str:
    return (name.replace("end to end: Kafka -> Spark -> Kafka (AvailableNow)", "end to end")
            .replace("source: batch read -> noop", "source read").replace("sink: batch write",
                                                                          "sink write"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput connector",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--commit-batches", type=int, default=9)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-commit", action="store_true")
    parser.add_argument("--codecs", default="none,lz4", help="comma-separated: none, lz4")
    parser.add_argument("--merge", type=Path, default=None,
                        help="a previous run's JSON whose measures join this table (each row "
                             "keeps its own load figures; the header says so)")
    args = parser.parse_args(argv)
    import pyspark

    env = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "records": f"{args.records:,} × 100 B in {PARTITIONS} partitions",
           "runs": args.runs, "Spark": f"pyspark {pyspark.__version__}, local[2]",
           "connector": f"spark-sql-kafka-0-10_2.13 {connector_version()}",
           "broker": f"{KAFKA_LABEL}, 1 node (KRaft)", "cores": os.cpu_count(),
           "load at start": f"{load():.1f}"}
    measures: list[Measure] = []
    spark = None
    try:
        with KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka:
            cfg = ClientConfig.from_options({"kafka.bootstrap.servers":
                                             kafka.bootstrap_servers})
            print("driver commit on Kafka", flush=True)
            if not args.no_commit:
                measures += bench_commit(cfg, args.commit_batches,
                                         args.out.with_name("commit-profile.txt"))
            if not args.no_spark:
                spark = start_spark()
                bench_spark(Bench(spark, kafka.bootstrap_servers, args.records, args.runs),
                            measures, tuple(args.codecs.split(",")))
    finally:
        if spark is not None:
            spark.stop()
        if measures:
            env["load at end"] = f"{load():.1f}"
            if args.merge is not None:
                earlier = json.loads(args.merge.read_text())
                env["merged"] = (f"rows from the run of {earlier['env']['when']} "
                                 f"({earlier['env']['records']}) come first")
                measures = [Measure(**m) for m in earlier["measures"]] + measures
            save(args.out, measures, env)
            print("\n".join(table(measures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
