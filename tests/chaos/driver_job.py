"""The streaming query, run as its own driver process so the harness can SIGKILL it.

    python -m tests.chaos.driver_job CONFIG.json

readStream.format("eoskafka") (read_committed) -> a transformation ->
writeStream.format("eoskafka") (exactly once), checkpoint on disk, on the
standalone cluster named in the config. Reports events on stdout as
``CHAOS-EVENT {json}`` lines and takes commands on stdin, one per line:

- ``stop``: stop the query now (mid-batch if one runs) and start it again from
  the checkpoint, in the same SparkSession;
- ``drain``: stop the query, run it with Trigger.AvailableNow until one run
  finishes without an error, report ``drained`` and exit 0.

A query that fails (a killed broker, a fenced batch) is started again from the
checkpoint after ``restart_backoff_s``; that is the harness's operator.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

Event = tuple[str, Any]


def emit(kind: str, **fields: Any) -> None:
    print("CHAOS-EVENT " + json.dumps({"event": kind, "t": time.time(), **fields}), flush=True)


class _Listener(StreamingQueryListener):
    def __init__(self, inbox: queue.Queue[Event]) -> None:
        self.inbox = inbox

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's names)
        emit("query_started", run=str(event.runId))

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        p = event.progress
        emit("progress", run=str(p.runId), batch=p.batchId, rows=p.numInputRows)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        self.inbox.put(("terminated", (str(event.runId), event.exception)))


def _session(cfg: dict[str, Any]) -> SparkSession:
    builder = (
        SparkSession.builder.master(cfg["master"]).appName("eoskafka-chaos")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(cfg["executors"]))
        .config("spark.task.maxFailures", "8")
        # A Python worker connecting back to a JVM on a loaded machine can take over 15 s.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    for name in ("EOSKAFKA_TEST_FAULTS_FILE", "PYTHONPATH"):
        if os.environ.get(name):
            builder = builder.config(f"spark.executorEnv.{name}", os.environ[name])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


#: The drain reads at least this much a batch: after restart_changed_options set 500, the
#: operator round's drain took 3.5 of its 22 minutes (2026-11-26).
DRAIN_MAX_OFFSETS = 5000


def _start(spark: SparkSession, cfg: dict[str, Any], drain: bool) -> StreamingQuery:
    max_offsets = max(cfg["max_offsets"], DRAIN_MAX_OFFSETS) if drain else cfg["max_offsets"]
    df = (
        spark.readStream.format("eoskafka")
        .option("kafka.bootstrap.servers", cfg["bootstrap"])
        .option("subscribe", cfg["input"])
        # An operator who rebuilt the checkpoint starts where the old query's output ended.
        .option("startingOffsets", cfg.get("starting_offsets") or "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
    )
    if cfg.get("min_partitions"):  # changed by the operator between runs (operator chaos)
        df = df.option("minPartitions", str(cfg["min_partitions"]))
    df = df.load()
    # The transformation: re-shape each record, keeping its id and where it came from.
    out = df.selectExpr(
        "key",
        "to_json(named_struct("
        "'id', CAST(get_json_object(CAST(value AS STRING), '$.id') AS BIGINT), "
        "'feeder', CAST(get_json_object(CAST(value AS STRING), '$.feeder') AS INT), "
        "'src', concat(CAST(partition AS STRING), '@', CAST(offset AS STRING)), "
        "'len', length(value))) AS value",
    )
    writer = (
        out.writeStream.format("eoskafka")
        .option("kafka.bootstrap.servers", cfg["bootstrap"])
        .option("topic", cfg["output"])
        .option("checkpointLocation", cfg["checkpoint"])
    )
    if cfg.get("prefix"):  # changed by the operator between runs (operator chaos)
        writer = writer.option("transactionalIdPrefix", cfg["prefix"])
    if cfg.get("decision_log"):  # kept apart from the checkpoint (survives a reset)
        writer = writer.option("decisionLogLocation", cfg["decision_log"])
    if cfg.get("transaction_timeout_ms"):  # short on Kafka: a driver can be down past it
        writer = writer.option("kafka.transaction.timeout.ms", str(cfg["transaction_timeout_ms"]))
    if drain:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=cfg["trigger"])
    return writer.start()


def _first_line(exc: Any) -> str:
    text = str(getattr(exc, "desc", None) or exc)
    lines = [line for line in text.splitlines() if "EOSKAFKA" in line] or text.splitlines()
    return (lines[0] if lines else repr(exc))[:400]


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        cfg = json.load(f)
    inbox: queue.Queue[Event] = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            inbox.put(("cmd", line.strip()))
        inbox.put(("cmd", "eof"))

    threading.Thread(target=read_commands, daemon=True).start()
    emit("driver_started", pid=os.getpid())
    spark = _session(cfg)
    spark.streams.addListener(_Listener(inbox))
    drain = False
    while True:
        query = _start(spark, cfg, drain)
        run = str(query.runId)
        while True:
            kind, payload = inbox.get()
            if kind == "terminated":
                if payload[0] != run:
                    continue  # a previous run's notice
                break
            if payload in ("stop", "drain", "eof", "halt"):
                emit("stopping", run=run, why=payload)
                query.stop()
                emit("stopped", run=run)
                if payload in ("eof", "halt"):  # halt: the operator stops the query for good
                    spark.stop()
                    return 0
                drain = drain or payload == "drain"
                break
        error = query.exception()
        if error is not None:
            lost = [line for line in str(getattr(error, "desc", None) or error).splitlines()
                    if "EOSKAFKA_TRANSACTION_LOST" in line]  # whole: the verdict counts them
            emit("query_failed", run=run, error=_first_line(error), lost=lost)
            time.sleep(cfg["restart_backoff_s"])
        elif drain and kind == "terminated":
            emit("drained", run=run)
            spark.stop()
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
