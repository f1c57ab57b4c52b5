"""Produce-to-visible latency, eoskafka against Spark's connector: ``make bench-latency``.

One Apache Kafka broker (started here, KRaft, one node), one ``local[2]`` SparkSession with
the connector's jars. The same job, Kafka -> Spark (``selectExpr("key", "value")``) ->
Kafka, runs with Spark's connector (source and at-least-once sink), with eoskafka
exactly-once and with eoskafka at-least-once, at each trigger (default, 1 s, 100 ms);
the variants take turns (their order alternates per trigger), each query on fresh topics.
Inside a query the feeder steps through the rates (1k, 20k, 100k records/s); each step's
first ``--settle`` seconds are not counted (the backlog of the step before drains).

Beside them, the floor of Spark's Python data source at the same rates, triggers and
partitions, no Kafka (:mod:`.floor`): Spark's ``rate`` -> ``noop``, and a Python source into a
Python Arrow sink with 4 input partitions (two waves of tasks on ``local[2]``) and with 2
(one wave); their batch times are the floor rows of the tables.

A read_committed watcher times every record from the feeder's Produce to the Fetch that
returned it (:mod:`.probe`). Spark's StreamingQueryProgress gives each batch's
phases (durationMs); eoskafka's driver steps time themselves when ``EOSKAFKA_TIMINGS``
names a file (:mod:`eos_kafka_source.timings`). Writes ``bench-results/latency.md``,
``.json`` and CDF charts ``latency-cdf-*.png`` (:mod:`.report`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.client.config import ClientConfig

from ..common import KAFKA_LABEL, KAFKA_VERSION, load, ready_topic, unique
from ..common.spark_home import installed_pyspark_home
from . import floor
from .probe import BUCKET_NS, Feeder, Watcher
from .report import save

DEFAULT_OUT = Path("bench-results/latency.md")
PARTITIONS = 4
#: name -> (source format, sink format, the sink's delivery.guarantee or None)
PROBE = "probe only (no Spark)"
VARIANTS: dict[str, tuple[str, str, str | None]] = {
    PROBE: ("", "", None),  # the feeder's topic watched directly: the probe's own floor
    "built-in at-least-once": ("kafka", "kafka", None),
    "eoskafka exactly-once": ("eoskafka", "eoskafka", None),
    "eoskafka at-least-once": ("eoskafka", "eoskafka", "at_least_once"),
    floor.JVM: ("", "", None),
    floor.PYTHON: ("", "", None),
    floor.PYTHON_ONE_WAVE: ("", "", None),
}
#: Run on request (--variants): one side eoskafka, the other Spark's connector, to say
#: which side of a task the time is spent on.
SPLIT_VARIANTS: dict[str, tuple[str, str, str | None]] = {
    "eoskafka source + built-in sink": ("eoskafka", "kafka", None),
    "built-in source + eoskafka exactly-once sink": ("kafka", "eoskafka", None),
    floor.SIMPLE: ("", "", None),
}
TRIGGERS: dict[str, str | None] = {"default": None, "1 s": "1 second", "100 ms": "100 milliseconds"}


def triggers_named(names: str) -> list[str]:
    """The triggers of ``--triggers`` by their names in :data:`TRIGGERS` (``1s`` is ``1 s``);
    an unknown name is refused, never run as another trigger."""
    by_key = {name.replace(" ", ""): name for name in TRIGGERS}
    picked = []
    for name in (n.strip() for n in names.split(",")):
        if name.replace(" ", "") not in by_key:
            raise SystemExit(f"--triggers: unknown trigger {name!r}; choose from "
                             f"{', '.join(repr(t) for t in TRIGGERS)} (spaces optional)")
        picked.append(by_key[name.replace(" ", "")])
    return picked


def variants_named(names: str) -> list[str]:
    """The variants of ``--variants``; an unknown name is refused before anything starts."""
    known = {**VARIANTS, **SPLIT_VARIANTS}
    picked = [n.strip() for n in names.split(",")]
    unknown = [n for n in picked if n not in known]
    if unknown:
        raise SystemExit(f"--variants: unknown variant(s) {unknown}; choose from "
                         + ", ".join(repr(v) for v in known))
    return picked


def start_spark(timings: Path, spark_home: Path | None = None,
                conf: dict[str, str] | None = None) -> Any:
    from eos_kafka_source.apache_kafka.spark_connector import spark_jars

    if spark_home is not None:
        os.environ["SPARK_HOME"] = str(spark_home)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["EOSKAFKA_TIMINGS"] = str(timings)  # inherited by the JVM and its workers
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-latency")
             .config("spark.jars", spark_jars())
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
             # A loaded machine starts Python workers slowly (default 15 s: failed a query)
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config(map=conf or {})
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _wait(until: Any, deadline_s: float, what: str, query: Any, *probes: Any) -> bool:
    deadline = time.monotonic() + deadline_s
    while not until():
        for p in probes:
            if p.error is not None:
                raise RuntimeError(f"{p.name}: {p.error!r}") from p.error
        if not query.isActive:
            raise RuntimeError(f"the query stopped: {query.exception()}")
        if time.monotonic() > deadline:
            print(f"  gave up waiting for {what} after {deadline_s:.0f} s", flush=True)
            return False
        time.sleep(0.05)  # polling the probes' counters; nothing to synchronise on
    return True


def run_query(spark: Any, cfg: ClientConfig, bootstrap: str, scratch: Path, variant: str,
              trigger: str, rates: list[int], step_s: float, settle_s: float,
              max_partitions: int | None = None) -> dict[str, Any]:
    """One query of ``variant`` at ``trigger`` through every rate; its raw measurements."""
    if variant in floor.FLOORS:
        return run_floor(spark, scratch, variant, trigger, rates, step_s, settle_s)
    source_fmt, sink_fmt, delivery = {**VARIANTS, **SPLIT_VARIANTS}[variant]
    source = ready_topic(cfg, "lat-in", PARTITIONS)
    sink = ready_topic(cfg, "lat-out", PARTITIONS) if source_fmt else source
    feeder, watcher = Feeder(cfg, source, PARTITIONS), Watcher(cfg, sink, PARTITIONS)
    feeder.start()
    watcher.start()
    query = _start(spark, bootstrap, scratch, (source_fmt, sink_fmt), delivery, trigger,
                   source, sink, max_partitions)
    steps: list[dict[str, Any]] = []
    try:
        # Warm-up: the first batches start Python workers and JVM code paths; measured
        # steps begin once a trickle has come through.
        feeder.rate = 200
        _wait(lambda: feeder.sent >= 200, 60, "the warm-up records", query, feeder, watcher)
        feeder.rate = 0
        _wait(lambda: watcher.received >= feeder.sent, 600, "the warm-up", query, feeder,
              watcher)
        for rate in rates:
            feeder.rate = rate
            begun, wall = time.monotonic_ns(), time.time()
            loads = [load()]
            _wait(lambda b=begun: time.monotonic_ns() - b > step_s * 1e9, step_s + 60,
                  "the step", query, feeder, watcher)  # the feeder runs at this rate
            loads.append(load())
            steps.append({"rate": rate, "from_ns": begun + int(settle_s * 1e9),
                          "to_ns": time.monotonic_ns(), "from_wall": wall + settle_s,
                          "to_wall": time.time(), "load": loads})
            print(f"  {variant} @ {trigger}, {rate:,}/s: sent {feeder.sent:,}, "
                  f"visible {watcher.received:,}, load {loads[-1]:.1f}", flush=True)
        feeder.rate = 0
        drained = _wait(lambda: watcher.received >= feeder.sent, 180, "the last records",
                        query, feeder, watcher)
    finally:
        query.stop()
        feeder.stop()
        watcher.stop()
    progress = [json.loads(p.json) for p in query.recentProgress]
    for step in steps:
        lo, hi = step["from_ns"] // BUCKET_NS, step["to_ns"] // BUCKET_NS
        hist: Counter[int] = Counter()
        for (bucket, ms), n in watcher.hist.items():
            if lo <= bucket < hi:
                hist[ms] += n
        step["hist"] = dict(hist)
        step["batches"] = [_batch(p) for p in progress if _overlaps(p, step)]
        step["visible_at"] = [t for t in watcher.visible_at
                              if step["from_wall"] <= t < step["to_wall"] + 30]
    return {"variant": variant, "trigger": trigger, "steps": steps, "sent": feeder.sent,
            "received": watcher.received, "aborted": watcher.aborted, "drained": drained,
            "feeder_behind_max_s": feeder.behind_max_s}


def run_floor(spark: Any, scratch: Path, variant: str, trigger: str, rates: list[int],
              step_s: float, settle_s: float) -> dict[str, Any]:
    """A floor query (no Kafka) per rate, measured as a step of the Kafka variants is."""
    steps: list[dict[str, Any]] = []
    for rate in rates:
        query = floor.start(spark, variant, rate, TRIGGERS[trigger],
                            scratch / unique("chk-floor"))
        try:
            floor.warm(query)
            begun, wall = time.monotonic_ns(), time.time()
            loads = [load()]
            _wait(lambda b=begun: time.monotonic_ns() - b > step_s * 1e9, step_s + 60,
                  "the step", query)
            loads.append(load())
            step = {"rate": rate, "from_ns": begun + int(settle_s * 1e9),
                    "to_ns": time.monotonic_ns(), "from_wall": wall + settle_s,
                    "to_wall": time.time(), "load": loads, "hist": {}, "visible_at": []}
        finally:
            query.stop()
        progress = [json.loads(p.json) for p in query.recentProgress]
        step["batches"] = [_batch(p) for p in progress if _overlaps(p, step)]
        steps.append(step)
        print(f"  {variant} @ {trigger}, {rate:,}/s: {len(step['batches'])} batches, "
              f"load {loads[-1]:.1f}", flush=True)
    return {"variant": variant, "trigger": trigger, "steps": steps, "sent": 0, "received": 0,
            "aborted": 0, "drained": True, "feeder_behind_max_s": 0.0, "floor": True}


def _start(spark: Any, bootstrap: str, scratch: Path, formats: tuple[str, str],
           delivery: str | None, trigger: str, source: str, sink: str,
           max_partitions: int | None = None) -> Any:
    source_fmt, sink_fmt = formats
    if not source_fmt:
        return _NoQuery()
    reader = (spark.readStream.format(source_fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    if source_fmt == "eoskafka" and max_partitions is not None:
        reader = reader.option("maxPartitions", max_partitions)  # else the source's default
    frame = reader.load()
    writer = (frame.selectExpr("key", "value").writeStream.format(sink_fmt)
              .option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
              .option("checkpointLocation", str(scratch / unique("chk"))))
    if delivery is not None:
        writer = writer.option("delivery.guarantee", delivery)
    if TRIGGERS[trigger] is not None:
        writer = writer.trigger(processingTime=TRIGGERS[trigger])
    return writer.start()


class _NoQuery:
    """The probe-only variant's stand-in for a StreamingQuery."""

    isActive = True
    recentProgress: list[Any] = []

    def stop(self) -> None:
        pass


def _overlaps(progress: dict[str, Any], step: dict[str, Any]) -> bool:
    """Whether a batch ran during the counted part of a step (a loaded machine's batches
    can be longer than the step)."""
    start = _epoch(progress["timestamp"])
    end = start + progress["durationMs"].get("triggerExecution", 0) / 1000
    return start < step["to_wall"] and end > step["from_wall"]


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _batch(p: dict[str, Any]) -> dict[str, Any]:
    return {"id": p["batchId"], "start": _epoch(p["timestamp"]), "rows": p["numInputRows"],
            "ms": p["durationMs"]}


def _timings(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,20000,100000")
    parser.add_argument("--triggers", default=",".join(TRIGGERS))
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated; also: " + ", ".join(SPLIT_VARIANTS))
    parser.add_argument("--step", type=float, default=40.0, help="seconds at each rate")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds of each step not counted")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--installed-pyspark", action="store_true",
                        help="Python workers import the installed pyspark (bytecode cached), "
                             "not Spark's pyspark.zip (see installed_pyspark_home)")
    parser.add_argument("--attempts", type=int, default=3,
                        help="starts of a query whose Python worker did not connect back")
    parser.add_argument("--max-partitions", type=int, default=None,
                        help="eoskafka's maxPartitions (default: not set, so the source's "
                             f"default, the task slots: one wave of tasks; {PARTITIONS}: one "
                             "input partition per Kafka partition, as Spark's connector)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the benchmark's session (repeatable), for "
                             "every variant alike")
    parser.add_argument("--publish", action="store_true",
                        help="afterwards, make this run the published one: "
                             "benchmarks/latency/current.json and docs/performance.md's "
                             "latency table (move the old table to RESULTS.md yourself)")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="no run: tables and charts again from a run's JSON")
    return parser.parse_args(argv)


def _environment(args: argparse.Namespace, argv: list[str] | None,
                 conf: dict[str, str]) -> dict[str, Any]:
    """What the run's report says it ran on, and with which command."""
    import pyspark

    from eos_kafka_source.apache_kafka.spark_connector import connector_version

    env: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m benchmarks.latency " + shlex.join(
            sys.argv[1:] if argv is None else argv),
        "job": f"Kafka -> Spark -> Kafka, {PARTITIONS} partitions in and out, 100 B values",
        "steps": f"{args.step:.0f} s per rate, first {args.settle:.0f} s not counted",
        "Spark": f"pyspark {pyspark.__version__}, local[2]",
        "connector": f"spark-sql-kafka-0-10_2.13 {connector_version()}",
        "broker": f"{KAFKA_LABEL}, 1 node (KRaft)", "cores": os.cpu_count(),
        "uptime at start": os.popen("uptime").read().strip(),
        "Python workers import": "the installed pyspark" if args.installed_pyspark
        else "pyspark.zip (Spark's default)"}
    if conf:
        env["Spark settings"] = ", ".join(f"{k}={v}" for k, v in conf.items())
    return env


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.from_json is not None:
        kept = json.loads(args.from_json.read_text())
        save(args.out, kept["runs"], kept["timings"], kept["env"])
        if args.publish:
            publish(args.out.with_suffix(".json"))
        return 0
    rates = [int(r) for r in args.rates.split(",")]
    triggers = triggers_named(args.triggers)
    variants = variants_named(args.variants)
    conf = dict(kv.split("=", 1) for kv in args.spark_conf)
    env = _environment(args, argv, conf)
    scratch = Path(tempfile.mkdtemp(prefix="eoskafka-latency-"))
    timings = scratch / "timings.jsonl"
    runs: list[dict[str, Any]] = []
    failed: list[str] = []
    spark = None
    try:
        with KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka:
            cfg = ClientConfig.from_options({"kafka.bootstrap.servers": kafka.bootstrap_servers})
            spark = start_spark(timings, installed_pyspark_home(scratch)
                                if args.installed_pyspark else None, conf)
            floor.register(spark)
            slots = spark.sparkContext.defaultParallelism
            max_parts = args.max_partitions  # None: the source's default (the task slots)
            tasks = min(PARTITIONS, max_parts or slots)
            env["eoskafka maxPartitions"] = (f"not set (the default: the {slots} task slots)"
                                             if max_parts is None else max_parts)
            env["eoskafka waves"] = -(-tasks // slots)
            plan = [(v, t) for i, t in enumerate(triggers) for v in
                    (variants if i % 2 == 0 else variants[::-1]) if v != PROBE]
            if PROBE in variants:
                plan.insert(0, (PROBE, "(none)"))
            for variant, trigger in plan:
                for attempt in range(1, args.attempts + 1):
                    print(f"{variant}, trigger {trigger}", flush=True)
                    try:
                        runs.append(run_query(spark, cfg, kafka.bootstrap_servers, scratch,
                                              variant, trigger, rates, args.step, args.settle,
                                              max_parts))
                        break
                    except Exception as exc:  # noqa: BLE001 - reported; the others go on
                        print(f"  FAILED: {str(exc)[:300]}", flush=True)
                        failed.append(f"{variant} @ {trigger}, attempt {attempt}: "
                                      f"{str(exc).splitlines()[0][:200]}")
                        # Spark gives a new Python worker 10 s (hard-coded) to connect
                        # back: on a loaded machine a query's first worker can miss it.
                        if "connect back" not in str(exc):
                            break
    finally:
        if spark is not None:
            spark.stop()
        if runs:
            env["uptime at end"] = os.popen("uptime").read().strip()
            if failed:
                env["failed queries"] = "; ".join(failed)
            save(args.out, runs, _timings(timings), env)
    if args.publish and runs:
        publish(args.out.with_suffix(".json"))
    return 0


def publish(run_json: Path) -> None:
    """The run in ``run_json`` becomes benchmarks/latency/current.json and the latency table
    of docs/performance.md (benchmarks/published.py)."""
    from .. import published

    published.main(["latency", str(run_json)])
    published.main(["--write"])


if __name__ == "__main__":
    raise SystemExit(main())
