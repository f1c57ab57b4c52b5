"""Availability under Kafka's operations, eoskafka beside Spark's connector (``make availability``).

    python -m benchmarks.availability [--kinds K,..] [--moments M,..] [--seed S] [--short]

One 3-node Apache Kafka (the reference release; KRaft, each node broker and controller,
replication 3, ``min.insync.replicas`` 2) and one SparkSession serve a schedule of (fault
kind, moment) cells (:mod:`.faults`, :mod:`.runner`). Each cell runs the same copy job
twice, with ``format("kafka")`` (Spark's connector, at-least-once) and with
``format("eoskafka")``, each on fresh topics and a fresh checkpoint, the cluster whole
(every replica in sync) before each run. Per run: query failures (a
``StreamingQueryException`` or a ``start()`` that raised: the query is started again from
its checkpoint), the longest stall, and the output judged against the input from the log's
markers (duplicates, missing records; for eoskafka also partitions whose LSO stays below
the high watermark: a transaction left open).

Writes ``bench-results/availability.md`` and ``.json``: faults by kind x moment, failures
and longest stall per connector.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the marker oracle (tests/oracle.py)

from eos_kafka_source.apache_kafka import KafkaCluster  # noqa: E402
from eos_kafka_source.apache_kafka.spark_connector import connector_version, spark_jars  # noqa: E402
from eos_kafka_source.wire.cluster import create_topic  # noqa: E402

from ..common import KAFKA_LABEL, KAFKA_VERSION  # noqa: E402
from .faults import KINDS, settled, wait_whole, wire_for  # noqa: E402
from .runner import MOMENTS, PARTITIONS, RECORDS, Run, RunResult  # noqa: E402

OUT = Path("bench-results/availability")
CONNECTORS = ("kafka", "eoskafka")
#: The moments that make sense for each kind. A roll, a reassignment and an election last
#: long or touch every partition at once: one moment each says what they do.
SCHEDULE = {
    "none": ("start", "writing"),
    "kill": MOMENTS,
    "rolling": ("writing",),
    "reassign": ("writing",),
    "election": ("planning", "writing"),
    "controller": ("start", "commit"),
    "isr": ("writing", "commit"),
    "sigstop": ("start", "planning", "writing", "commit", "fencing"),
}
SHORT = (("none", "start"), ("kill", "start"), ("kill", "commit"), ("sigstop", "writing"))


def cells(kinds: list[str], moments: list[str], seed: int, short: bool,
          only: str = "") -> list[tuple[str, str]]:
    chosen = list(SHORT) if short else [(k, m) for k in KINDS for m in SCHEDULE[k]]
    if only:  # in the order given
        return [(k, m) for k, _, m in (c.partition(":") for c in only.split(","))]
    chosen = [(k, m) for k, m in chosen if k in kinds and m in moments]
    random.Random(seed).shuffle(chosen)
    return chosen


def session(faults_file: Path) -> object:
    os.environ["EOSKAFKA_TEST_FAULTS_FILE"] = str(faults_file)
    os.environ["EOSKAFKA_TEST_FAULTS_BLOCK_S"] = "150"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2,4]").appName("eoskafka-availability")
             .config("spark.jars", spark_jars()).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.python.authenticate.socketTimeout", "120s").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def warm_up(spark: object, kafka: KafkaCluster) -> None:
    """One batch through each connector first, unmeasured: the session's first Python data
    source query pays for starting Python workers (minutes on a loaded machine)."""
    b = kafka.bootstrap_servers
    for connector in CONNECTORS:
        topic = f"warm-{connector}"
        settled(b, f"create {topic}", lambda w, t=topic: create_topic(w, t, PARTITIONS, 3,
                                                                      exist_ok=True))
        settled(b, f"create {topic}-out", lambda w, t=topic: create_topic(
            w, f"{t}-out", PARTITIONS, 3, exist_ok=True))
        write_input(b, topic, 300)
        frame = (spark.readStream.format(connector)  # type: ignore[attr-defined]
                 .option("kafka.bootstrap.servers", b).option("subscribe", topic)
                 .option("startingOffsets", "earliest").load())
        with tempfile.TemporaryDirectory(prefix="eoskafka-warm-") as ckpt:
            for attempt in range(5):  # a Python worker may miss Spark's 10 s to connect back
                try:
                    query = (frame.select("key", "value").writeStream.format(connector)
                             .option("kafka.bootstrap.servers", b)
                             .option("topic", f"{topic}-out").option("checkpointLocation", ckpt)
                             .trigger(availableNow=True).start())
                    query.awaitTermination()
                    break
                except Exception as exc:  # noqa: BLE001 - retried, then raised
                    print(f"    warm-up {connector} failed ({str(exc)[:120]})", flush=True)
                    if attempt == 4:
                        raise


def write_input(bootstrap: str, topic: str, records: int = RECORDS) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(records):
            producer.send(topic, key=str(i).encode(), value=f"{topic}-{i:05d}".encode(),
                          partition=i % PARTITIONS)
        producer.flush()
    finally:
        producer.close(timeout=10)


def open_partitions(bootstrap: str, topic: str, timeout_s: float = 60) -> int:
    """Partitions whose LSO stays below the high watermark: a transaction left open there
    (Kafka writes markers asynchronously: waits ``timeout_s``, far below the 15 min
    transaction timeout that would abort a forgotten one)."""
    from eos_kafka_source import wire as kwire

    deadline = time.monotonic() + timeout_s
    while True:
        with wire_for(bootstrap) as w:
            leaders = {(topic, p): n for p, n in kwire.require_topics(w, [topic])[topic]
                       .leaders.items()}
            bounds = kwire.fetch_bounds(w, leaders)
        lagging = sum(b.last_stable < b.high_watermark for b in bounds.values())
        if not lagging or time.monotonic() > deadline:
            return lagging
        time.sleep(0.5)


def judge(run: Run, result: RunResult) -> None:
    from oracle import committed_values  # type: ignore[import-not-found]

    bootstrap = run.kafka.bootstrap_servers
    lagging = open_partitions(bootstrap, run.output)
    got = Counter(v for v in committed_values(bootstrap, run.output) if v is not None)
    # Every record of the batches Spark committed must be there (later ones may be too).
    want = {f"{run.input}-{i:05d}".encode() for i in range(RECORDS)
            if i // PARTITIONS < run.committed.get(str(i % PARTITIONS), 0)}
    result.records_in, result.records_out = len(want), sum(got.values())
    result.duplicates = sum(n - 1 for n in got.values())
    result.missing = len(want - set(got))
    if result.connector == "eoskafka":
        result.open_txns = lagging


def one(spark: object, kafka: KafkaCluster, work: Path, kind: str, moment: str,
        connector: str, n: int, faults_file: Path) -> RunResult:
    name = f"av{n:02d}-{kind}-{moment}-{connector}"
    b = kafka.bootstrap_servers
    output_config = {"min.insync.replicas": "3"} if kind == "isr" else None
    for topic, config in ((f"{name}-in", None), (f"{name}-out", output_config)):
        settled(b, f"create {topic}", lambda w, t=topic, c=config: create_topic(
            w, t, PARTITIONS, 3, c, exist_ok=True))
    run = Run(spark, kafka, work, kind, moment, connector, name, faults_file)
    write_input(b, run.input)
    result = run.run()
    wait_whole(kafka)
    judge(run, result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.availability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--moments", default=",".join(MOMENTS))
    parser.add_argument("--connectors", default=",".join(CONNECTORS))
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--short", action="store_true", help=f"only {SHORT}")
    parser.add_argument("--report-only", action="store_true",
                        help="write the table of the --merge'd reports, run nothing")
    parser.add_argument("--cells", default="", metavar="KIND:MOMENT,...",
                        help="exactly these cells, in this order (any moment for any kind)")
    parser.add_argument("--out", default=str(OUT), help="report path, without .md/.json")
    parser.add_argument("--merge", action="append", default=[], metavar="JSON",
                        help="add the runs of an earlier report's .json to the table (cells "
                             "this run measures again replace them)")
    args = parser.parse_args(argv)
    schedule = cells(args.kinds.split(","), args.moments.split(","), args.seed, args.short,
                     args.cells)
    connectors = args.connectors.split(",")
    results: list[RunResult] = [RunResult(**r) for path in args.merge
                                for r in json.loads(Path(path).read_text())["runs"]]
    if not args.report_only:
        results = [r for r in results if (r.kind, r.moment) not in schedule]
    started, t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic()
    if args.report_only:  # the table of the --merge'd runs, nothing run
        write(results, args, started, 0, Path(args.out))
        print("\n".join(table(results)))
        return 0
    print(f"{len(schedule)} cells x {len(connectors)} connectors: {schedule}", flush=True)
    with tempfile.TemporaryDirectory(prefix="eoskafka-availability-") as tmp, \
            KafkaCluster(nodes=3, version=KAFKA_VERSION, workdir=f"{tmp}/kafka",
                         ready_timeout_s=300) as kafka:
        work = Path(tmp)
        faults_file = work / "faults.spec"
        faults_file.write_text("")
        spark = session(faults_file)
        warm_up(spark, kafka)
        n = 0
        for kind, moment in schedule:
            for connector in connectors:
                n += 1
                print(f"[{time.monotonic() - t0:6.0f}s] {kind} at {moment}, {connector}",
                      flush=True)
                result = one(spark, kafka, work, kind, moment, connector, n, faults_file)
                results.append(result)
                print(f"    {row(result)}", flush=True)
                write(results, args, started, time.monotonic() - t0, Path(args.out))
        spark.stop()  # type: ignore[attr-defined]
    print("\n".join(table(results)))
    return 0


def row(r: RunResult) -> str:
    return (f"failures {r.failures}, stall {r.stall_s} s, finished {r.finished}, "
            f"landed {r.landed}, out {r.records_out}/{r.records_in}, dup {r.duplicates}, "
            f"missing {r.missing}, open {r.open_txns}, {r.seconds} s; {r.detail}; {r.errors}")


def _cell(r: RunResult | None) -> str:
    if r is None:
        return "-"
    text = f"{r.failures} / {r.stall_s:.0f} s" if r.stall_s is not None else f"{r.failures} / -"
    if r.env_failures:
        text += f" (+{r.env_failures} machine)"
    if not r.finished:
        text += " STUCK"
    if r.duplicates or r.missing:
        text += f" (dup {r.duplicates}, missing {r.missing})"
    if r.open_txns:
        text += f" (open {r.open_txns})"
    if not r.landed:
        text += " (hold missed)"
    return text


def table(results: list[RunResult]) -> list[str]:
    by = {(r.kind, r.moment, r.connector): r for r in results}  # the last run of a cell
    lines = ["| fault | moment | Spark `kafka`: failures / longest stall | "
             "`eoskafka`: failures / longest stall | eoskafka exactly once | "
             "batch interval outside the fault, kafka / eoskafka |",
             "|---|---|---|---|---|---|"]
    seen = list(dict.fromkeys((r.kind, r.moment) for r in results))
    for kind, moment in sorted(seen, key=lambda c: (KINDS.index(c[0]), MOMENTS.index(c[1]))):
        eos = by.get((kind, moment, "eoskafka"))
        exact = "-" if eos is None else (
            "yes" if not (eos.duplicates or eos.missing or eos.open_txns) and eos.finished
            else "**NO**")
        gaps = " / ".join(f"{r.batch_s:.1f} s" if r and r.batch_s is not None else "-"
                          for r in (by.get((kind, moment, "kafka")), eos))
        lines.append(f"| {kind} | {moment} | {_cell(by.get((kind, moment, 'kafka')))} | "
                     f"{_cell(eos)} | {exact} | {gaps} |")
    return lines


def write(results: list[RunResult], args: argparse.Namespace, started: str, seconds: float,
          out: Path) -> None:
    import pyspark

    out.parent.mkdir(parents=True, exist_ok=True)
    merged = f" and the runs of {', '.join(args.merge)}" if args.merge else ""
    when = (f"Measured {started} by `make availability` (benchmarks/availability"
            f"{' --short' if args.short else ''}, seed {args.seed}), {seconds / 60:.0f} min"
            f"{merged}")
    if args.report_only:
        when = f"The runs of {', '.join(args.merge)} (benchmarks/availability)"
    header = (f"{when}: "
              f"pyspark {pyspark.__version__} local[2,4], spark-sql-kafka-0-10_2.13 "
              f"{connector_version()}, {KAFKA_LABEL}, 3 nodes (replication 3, "
              f"min.insync.replicas 2). Per run a backlog of {RECORDS:,} records in "
              f"{PARTITIONS} partitions, 100 per batch, 1 s trigger, until a batch "
              "finished after the fault was lifted. A cell reads `failures / longest stall` "
              "(a failure is a StreamingQueryException or a start() that raised, restarted "
              "from the checkpoint at once; `+N machine`: a Python worker that did not connect "
              "back to the JVM in Spark's fixed 10 s on the overloaded machine; the stall is "
              "the longest time without a finished batch from the fault's beginning to the "
              "first batch after it was lifted; "
              "STUCK: no recovery within 6 min).")
    out.with_suffix(".md").write_text("\n".join([header, "", *table(results)]) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"started": started, "seconds": round(seconds), "seed": args.seed,
         "runs": [r.json() for r in results]}, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
