"""Round trips of an exactly-once micro-batch, counted and timed, without Spark.

Drives the Spark-facing sink classes as Spark drives them (``streamWriter()`` planning,
``write()`` per task, ``commit()``), all in this one process on a 1-node Apache Kafka:
each task reuses this process's kept connections, as a reused Python worker does. Every
request a step sends is counted by its API name (``KafkaWire.send``), and every step timed.
Run it from two checkouts to compare them (it uses only what both have):

    python -m benchmarks.round_trips [--batches 20] [--tasks 4] [--version 4.4]

Prints, per step, the median milliseconds and the requests of a warm batch (the first two
batches are left out: a query's first batch opens its connections and looks everything up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType

from eos_kafka_source.apache_kafka import KafkaCluster
from eos_kafka_source.client.config import ClientConfig
from eos_kafka_source.wire import KafkaWire, create_topic, fetch_metadata
from eos_kafka_source.wire.connection import KafkaWire as Wire

SCHEMA = StructType([StructField("value", BinaryType())])
WARM_FROM = 2  # batches 0 and 1 open connections and look everything up


class Counted:
    """Requests sent (by API name) and seconds spent, per step name."""

    def __init__(self) -> None:
        self.step: str | None = None
        self.requests: dict[str, Counter[str]] = {}
        self.seconds: dict[str, list[float]] = {}

    def wrap(self, owner: type, name: str, step: str) -> None:
        real = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            outer, self.step = self.step, step
            started = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.seconds.setdefault(step, []).append(time.perf_counter() - started)
                self.step = outer

        setattr(owner, name, timed)

    def count_sends(self) -> None:
        real: Callable[..., Any] = Wire.send

        def send(wire: Wire, node: int, request: Any, what: str) -> Any:
            api = type(request).__name__.removesuffix("Request").split("_v")[0]
            self.requests.setdefault(self.step or "other", Counter())[api] += 1
            return real(wire, node, request, what)

        Wire.send = send  # type: ignore[method-assign]


def run(batches: int, tasks: int, version: str) -> dict[str, Any]:
    import eos_kafka_source.sink.spark_writer as sw
    from eos_kafka_source.sink.spark_writer import EosKafkaStreamWriter, _Writer
    from eos_kafka_source.sink.task.writer import TaskWriter

    counted = Counted()
    counted.wrap(_Writer, "_refuse_if_aborted", "task: abort-mark check")
    counted.wrap(TaskWriter, "open", "task: open (InitProducerId)")
    counted.wrap(TaskWriter, "write_batches", "task: write")
    counted.wrap(TaskWriter, "handoff", "task: flush + hand-off")
    counted.wrap(_Writer, "_write", "task (whole)")
    counted.wrap(EosKafkaStreamWriter, "__init__", "planning (streamWriter)")
    counted.wrap(EosKafkaStreamWriter, "commit", "commit (hook)")
    counted.count_sends()
    per_batch: list[dict[str, Counter[str]]] = []
    with KafkaCluster(nodes=1, version=version) as kafka, \
            tempfile.TemporaryDirectory() as tmp:
        cfg = ClientConfig.from_options({"kafka.bootstrap.servers": kafka.bootstrap_servers})
        topic = f"trips-{int(time.time())}"
        with KafkaWire(cfg) as wire:
            fetch_metadata(wire, [])
            create_topic(wire, topic, 2)
        checkpoint = Path(tmp) / "ckpt"
        checkpoint.mkdir()
        lineage = "query-trips"
        (checkpoint / "metadata").write_text(json.dumps({"id": lineage}) + "\n")
        options = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic,
                   "checkpointLocation": str(checkpoint)}
        rows = pa.RecordBatch.from_pydict({"value": [b"x" * 100] * 100})
        for batch in range(batches):
            counted.requests = {}
            writer = EosKafkaStreamWriter(options, SCHEMA)  # the planning worker
            handoffs = []
            for task in range(tasks):
                sw._task_context = lambda t=task, b=batch: {  # type: ignore[misc]
                    "task_partition": t, "attempt": 0, "task_attempt_id": -1,
                    "batch_id": b, "lineage": lineage}
                handoffs.append(writer.write(iter([rows])))
            writer.commit(handoffs, batch)  # a commit worker's writer does the same
            per_batch.append(counted.requests)
    warm = per_batch[WARM_FROM:]
    out: dict[str, Any] = {}
    for step, seconds in counted.seconds.items():
        n = len(seconds) // batches
        kept = seconds[WARM_FROM * n:]
        requests: Counter[str] = Counter()
        for b in warm:
            requests.update(b.get(step, Counter()))
        per = tasks if step.startswith("task") else 1
        out[step] = {"ms": statistics.median(kept) * 1000,
                     "requests": {k: v / len(warm) / per for k, v in sorted(requests.items())}}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.round_trips",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--version", default="4.4")
    args = parser.parse_args(argv)
    load = _uptime()
    result = run(args.batches, args.tasks, args.version)
    print(f"uptime at start: {load}")
    print(f"{args.batches} batches of {args.tasks} tasks; warm batches from {WARM_FROM}")
    print("| step | median ms | requests (per task / per batch) |")
    print("|---|---|---|")
    for step, got in sorted(result.items()):
        asked = ", ".join(f"{k} {v:g}" for k, v in got["requests"].items()) or "none"
        print(f"| {step} | {got['ms']:.1f} | {asked} |")
    print(f"uptime at end: {_uptime()}")
    return 0


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
