"""Long life: one exactly-once query for many small micro-batches, sampled over time.

``python -m benchmarks.longrun --batches 10000`` (``make bench-longrun BATCHES=N``). One
Apache Kafka node (the reference release); a feeder thread writes small committed transactions to a
2-partition input topic, keeping a small backlog ahead of the query; the query is
eoskafka (read_committed) → eoskafka exactly-once sink, ``local[2]``, trigger
``processingTime`` ``--trigger-ms`` (0: back to back), ``maxOffsetsPerTrigger``
``--max-offsets``. Every ``--sample-every`` batches it samples what a per-batch leak
would grow (:mod:`.probes`): RSS, open files and threads of the driver JVM, of the
long-lived planning worker and of the other Python workers; the JVM's heap after a full
GC; checkpoint and decision-log bytes and files; transactional ids and active producer
ids on the broker (Kafka's ``kafka-transactions``); the driver commit time (decision to
done, from the decision log) and Spark's per-batch durations, with the load average.
At the end the feeder stops, the query drains, and the output is checked against the
input with Kafka's Java read_committed consumer: every value exactly once.
Writes ``bench-results/longrun.md`` + ``.json`` + ``longrun-*.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.apache_kafka.tools import KafkaTools

from ..common import KAFKA_VERSION, client, ready_topic
from . import probes
from .report import save

PARTITIONS = 2
#: Batches before anything that is kept "for the last 100 batches" has filled: Spark's
#: offsets and commits logs (minBatchesToRetain), the decision log's finished decisions.
WARMUP_MIN = 120
FEED_TXN = 10  # records per feeder transaction (spread over the partitions)
BACKLOG = 400  # records the feeder keeps ahead of the query at most


class Feeder(threading.Thread):
    """Writes committed transactions of ``FEED_TXN`` records while the backlog is short."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="longrun-feeder", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.written = 0
        self.consumed = 0  # set by the sampler from the query's progress
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap,
                                 transactional_id=f"longrun-feeder-{os.getpid()}")
        try:
            producer.init_transactions()
            while not self.stopping.is_set():
                if self.written - self.consumed >= BACKLOG:
                    self.stopping.wait(0.05)  # the query catches up; nothing to signal on
                    continue
                producer.begin_transaction()
                for i in range(self.written, self.written + FEED_TXN):
                    producer.send(self.topic, value=b"%d" % i, partition=i % PARTITIONS)
                producer.commit_transaction()
                self.written += FEED_TXN
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            producer.close()


def start_spark(trigger_workers: int = 2) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(f"local[{trigger_workers}]").appName("eoskafka-longrun")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(PARTITIONS))
             .config("spark.sql.streaming.numRecentProgressUpdates", "300")
             # Spark keeps the last 1,000 jobs, stages and SQL executions for its UI (even
             # with the UI off): one each per micro-batch, so the driver's heap grows for
             # 1,000 batches by design. Kept at 100 here, the plateau comes inside warm-up.
             .config("spark.ui.retainedJobs", "100")
             .config("spark.ui.retainedStages", "100")
             .config("spark.sql.ui.retainedExecutions", "100")
             # A Python worker has 15 s to connect back by default: not on a loaded machine.
             .config("spark.python.authenticate.socketTimeout", "120s")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class Run:
    """The query, its feeder and the samples taken so far."""

    def __init__(self, spark: Any, kafka: KafkaCluster, args: argparse.Namespace) -> None:
        self.spark, self.args = spark, args
        self.bootstrap = kafka.bootstrap_servers
        cfg = client(self.bootstrap)
        self.input = ready_topic(cfg, "longrun-in", PARTITIONS)
        self.output = ready_topic(cfg, "longrun-out", PARTITIONS)
        self.checkpoint = tempfile.mkdtemp(prefix="eoskafka-longrun-")
        self.feeder = Feeder(self.bootstrap, self.input)
        self.broker = probes.BrokerCounts(self.bootstrap)
        self.broker_pid = kafka.nodes[0].proc.pid if kafka.nodes[0].proc else None
        self.samples: list[dict[str, Any]] = []
        self.batches: dict[int, dict[str, float]] = {}  # batch id -> Spark's durations
        self.commits: dict[int, float] = {}  # batch id -> driver commit seconds
        self.rows = 0
        self.restarts: list[int] = []  # batch ids after which the query was restarted
        self.started = time.monotonic()

    def start(self) -> Any:
        if not self.feeder.is_alive() and self.feeder.ident is None:
            self.feeder.start()
        return (self.spark.readStream.format("eoskafka")
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribe", self.input).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(self.args.max_offsets)).load()
                .selectExpr("key", "value")
                .writeStream.format("eoskafka")
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("topic", self.output).option("checkpointLocation", self.checkpoint)
                .trigger(processingTime=f"{self.args.trigger_ms} milliseconds").start())

    def poll(self, query: Any) -> int:
        """Fold new progress into ``batches``; the newest finished batch id (-1: none)."""
        for p in query.recentProgress:
            b = p["batchId"]
            if b not in self.batches and p["numInputRows"] is not None:
                d = p["durationMs"]
                self.batches[b] = {"rows": p["numInputRows"],
                                   "trigger_s": d.get("triggerExecution", 0) / 1000,
                                   "add_batch_s": d.get("addBatch", 0) / 1000}
                self.rows += p["numInputRows"]
        self.feeder.consumed = self.rows
        return max(self.batches, default=-1)

    def read_commit_times(self) -> None:
        """Decision → done of every decision the log still holds (it keeps the newest 100)."""
        root = Path(self.checkpoint, "eoskafka", "decisions")
        for done in root.rglob("*.done"):
            batch = int(done.stem)
            if batch in self.commits:
                continue
            try:
                decided = json.loads(done.with_suffix(".json").read_text())["decided_at"]
                self.commits[batch] = json.loads(done.read_text())["done_at"] - decided
            except (OSError, ValueError, KeyError):
                continue  # pruned or being written: the next sample has its neighbours

    def sample(self, batch: int) -> dict[str, Any]:
        procs = probes.processes()
        jvm = probes.driver_jvm(procs)
        roles: dict[str, list[probes.Proc]] = {}
        for w in probes.python_workers(jvm.pid):
            roles.setdefault(probes.role_of(w), []).append(w)
        rt = self.spark._jvm.java.lang.Runtime.getRuntime()
        self.spark._jvm.java.lang.System.gc()
        heap_mb = (rt.totalMemory() - rt.freeMemory()) / 2**20
        ckpt = probes.dir_stats(self.checkpoint, exclude="eoskafka")
        log = probes.dir_stats(Path(self.checkpoint, "eoskafka"))
        self.read_commit_times()
        recent = [self.commits[b] for b in sorted(self.commits) if b > batch - self.every()]
        spark_recent = [v for b, v in self.batches.items() if b > batch - self.every()]
        s: dict[str, Any] = {
            "batch": batch, "t": round(time.monotonic() - self.started, 1),
            "load": round(os.getloadavg()[0], 2), "rows": self.rows,
            "driver_jvm_rss_mb": probes.safe(jvm.rss_mb),
            "driver_jvm_heap_after_gc_mb": heap_mb,
            "driver_jvm_fds": probes.safe(jvm.fds), "driver_jvm_threads": probes.safe(jvm.threads),
            "python_processes": sum(len(ws) for ws in roles.values()),
            "python_rss_mb": sum(probes.safe(w.rss_mb) for ws in roles.values() for w in ws),
            "user_python_rss_mb": probes.Proc(os.getpid(), 0, "").rss_mb(),
            "checkpoint_bytes": ckpt.bytes, "checkpoint_files": ckpt.files,
            "decision_log_bytes": log.bytes, "decision_log_files": log.files,
            "transactional_ids": self.broker.transactional_ids(),
            "output_producer_ids": self.broker.producers(self.output, PARTITIONS),
            "commit_s_median": statistics.median(recent) if recent else None,
            "trigger_s_median": (statistics.median(v["trigger_s"] for v in spark_recent)
                                 if spark_recent else None),
        }
        for role in (*probes.ROLES, "other"):
            ws = roles.get(role, [])
            s[f"{role}_max_rss_mb"] = max((probes.safe(w.rss_mb) for w in ws), default=0)
            s[f"{role}_max_fds"] = max((probes.safe(w.fds) for w in ws), default=0)
            s[f"{role}_processes"] = len(ws)
        if self.broker_pid:
            broker = probes.Proc(self.broker_pid, 0, "")
            s["broker_rss_mb"] = probes.safe(broker.rss_mb)
            s["broker_rss_anon_mb"] = probes.safe(lambda: broker.rss_kind_mb("RssAnon"))
            s["broker_rss_file_mb"] = probes.safe(lambda: broker.rss_kind_mb("RssFile"))
            s["broker_heap_after_gc_mb"] = probes.safe(
                lambda: probes.heap_after_gc_mb(self.broker_pid))
            s["broker_fds"] = probes.safe(broker.fds)
        self.samples.append(s)
        print(json.dumps(s), flush=True)
        return s

    def every(self) -> int:
        return self.args.sample_every or max(20, self.args.batches // 100)


#: Spark gives a new Python worker a hard-coded 10 s to connect back; on a machine loaded
#: far past its cores that fails now and then (before the first batch, mostly).
_CONNECT_BACK = "Python worker failed to connect back"
MAX_RESTARTS = 20


def drive(run: Run, query: Any) -> Any:
    """Sample every ``run.every()`` batches until ``--batches`` have finished (or the
    deadline); returns the query (a new one if Spark's worker start-up failed: the same
    checkpoint, counted in ``run.restarts``)."""
    next_sample = 0
    while True:
        if query.exception() is not None:
            if _CONNECT_BACK not in str(query.exception()) or len(run.restarts) >= MAX_RESTARTS:
                raise RuntimeError(f"the long-run query failed: {query.exception()}")
            run.restarts.append(max(run.batches, default=-1))
            print(f"long run: restarting the query after batch {run.restarts[-1]} "
                  f"({_CONNECT_BACK})", flush=True)
            query = run.start()
        if run.feeder.error is not None:
            raise RuntimeError(f"the feeder failed: {run.feeder.error!r}")
        batch = run.poll(query)
        if batch >= next_sample:
            run.sample(batch)
            next_sample = batch + run.every()
        if batch >= run.args.batches - 1:
            return query
        if run.args.deadline and time.time() >= run.args.deadline:
            print(f"long run: deadline reached after batch {batch}", flush=True)
            return query
        try:
            query.awaitTermination(1)
        except Exception:  # noqa: BLE001 - StreamingQueryException: judged at the loop's top
            continue


def drain_and_check(run: Run, query: Any) -> dict[str, Any]:
    """Stop feeding, let the query read everything, stop it; every input value once?"""
    run.feeder.stopping.set()
    run.feeder.join(60)
    deadline = time.monotonic() + 600
    while run.rows < run.feeder.written and time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the long-run query failed: {query.exception()}")
        run.poll(query)
        query.awaitTermination(1)
    query.stop()
    run.read_commit_times()
    tools = KafkaTools(run.bootstrap)
    inputs = Counter(r.value for r in tools.consume_expecting(run.input, run.feeder.written))
    outputs = Counter(r.value for r in tools.consume_expecting(run.output, run.feeder.written))
    return {"input_records": sum(inputs.values()), "output_records": sum(outputs.values()),
            "duplicates": sum(c - 1 for c in outputs.values() if c > 1),
            "missing": sum(1 for v in inputs if v not in outputs),
            "unexpected": sum(1 for v in outputs if v not in inputs),
            "open_transactions": len(tools.open_transactions())}


def _deadline(hhmm: str | None) -> float | None:
    """Epoch seconds of the next ``HH:MM`` UTC (None: no deadline)."""
    if not hhmm:
        return None
    hours, minutes = (int(x) for x in hhmm.split(":"))
    now = time.time()
    day = now - now % 86400
    at = day + hours * 3600 + minutes * 60
    return at if at > now else at + 86400


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.longrun",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=10_000)
    ap.add_argument("--sample-every", type=int, default=0, help="batches; 0: batches/100")
    ap.add_argument("--trigger-ms", type=int, default=0)
    ap.add_argument("--max-offsets", type=int, default=20)
    ap.add_argument("--warmup", type=float, default=0.1,
                    help="share of batches left out (at least WARMUP_MIN batches)")
    ap.add_argument("--stop-at", default=None,
                    help="HH:MM UTC: stop there even if fewer batches ran (reported as such)")
    ap.add_argument("--out", type=Path, default=Path("bench-results/longrun.md"))
    args = ap.parse_args(argv)
    args.deadline = _deadline(args.stop_at)
    # SIGTERM unwinds like an exception, so the query, Spark and the broker are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with KafkaCluster(nodes=1, version=KAFKA_VERSION) as kafka:
        spark = start_spark()
        run = Run(spark, kafka, args)
        query = run.start()
        try:
            query = drive(run, query)
            wall = time.monotonic() - run.started
            check = drain_and_check(run, query)
        finally:
            run.feeder.stopping.set()
            if query.isActive:
                query.stop()
            spark.stop()
            shutil.rmtree(run.checkpoint, ignore_errors=True)
    env = {"batches": len(run.batches), "batches_asked": args.batches,
           "wall_s": round(wall, 1),
           "trigger_ms": args.trigger_ms, "max_offsets": args.max_offsets,
           "partitions": PARTITIONS, "restarts": run.restarts, "cpus": os.cpu_count(),
           "check": check,
           "finished_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    warmup = max(args.warmup, WARMUP_MIN / max(1, len(run.batches)))
    ok = save(args.out, run.samples, run.batches, run.commits, env, warmup)
    exact = check["duplicates"] == check["missing"] == check["unexpected"] == 0
    print(f"long run: {len(run.batches)} batches in {wall:.0f} s; flat: {ok}; "
          f"exactly once: {exact} ({check})")
    return 0 if ok and exact else 1


if __name__ == "__main__":
    sys.exit(main())
