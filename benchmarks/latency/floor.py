"""The per-batch floor of Spark's Python data source, with no Kafka at all.

The latency benchmark finds eoskafka's micro-batches longer than Spark's connector's, with
the driver commit a few % of it. How much of a batch does Spark spend on a Python data
source, whatever it does? Queries on the latency benchmark's own ``local[2]`` session, at
its rates and triggers, with no broker (:data:`FLOORS`):

- **JVM floor**: Spark's ``rate`` source -> ``noop`` sink (no Python anywhere);
- **Python floor**: a Python streaming source that yields one Arrow batch of 100-byte values
  per input partition -> a Python Arrow sink (``DataSourceStreamArrowWriter``, as
  eoskafka's sink) that counts them, with empty commits: the Python workers, the pickled
  reader and writer, the Arrow hand-over, nothing else. With 4 input partitions (one per
  Kafka partition of the latency job) ``local[2]`` runs every batch's tasks in two waves;
  the **one wave** variant makes 2;
- the floor's reader and writer freeze their workers' imported modules out of pyspark's
  collection after every task, as eoskafka's hooks do (``eos_kafka_source/gcpause.py``):
  a floor that pays what eoskafka does not would be no floor;
- **simple reader**: the same rows read on the driver by a ``SimpleDataSourceStreamReader``
  (no read-side Python worker on executors), into the same sink.

``python -m benchmarks.latency`` runs them beside the Kafka variants (the floor rows of its
tables); ``python -m benchmarks.latency floor`` runs them alone and prints the median and
p90 of ``triggerExecution`` and ``addBatch`` per query.

    python -m benchmarks.latency floor [--rate 20000] [--seconds 30] [--trigger default]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)

try:  # pyspark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    _ARROW_SINK: tuple[type, ...] = (DataSourceStreamArrowWriter,)
except ImportError:  # 4.0: deriving from both gets Arrow batches too (as eoskafka's sink)
    _ARROW_SINK = (DataSourceArrowWriter, DataSourceStreamWriter)

PARTITIONS = 4  # the latency job's Kafka partitions
ONE_WAVE = 2  # local[2]: tasks Spark runs at once
VALUE = b"x" * 100
JVM = "JVM floor: rate -> noop"
PYTHON = "Python floor: 4 partitions (two waves)"
PYTHON_ONE_WAVE = "Python floor: 2 partitions (one wave)"
SIMPLE = "Python floor: simple reader (reads on the driver)"
#: variant -> (format, input partitions): the floor queries, no Kafka.
FLOORS: dict[str, tuple[str, int]] = {
    JVM: ("rate", PARTITIONS),
    PYTHON: ("eoskafka_floor", PARTITIONS),
    PYTHON_ONE_WAVE: ("eoskafka_floor", ONE_WAVE),
    SIMPLE: ("eoskafka_floor_simple", 1),
}


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


def _rows_at(started: float, rate: int) -> int:
    return int((time.time() - started) * rate)


_frozen_at_modules = 0


def _freeze_imports() -> None:
    """What eoskafka's hooks do (``eos_kafka_source.gcpause.freeze_imports``), written here
    for the same reason as :func:`_timed`: a reused worker's collection after every task
    then skips the imported modules. Without it the floor's workers pay ~7 ms of
    collection per task and call that eoskafka's do not, and it would be no floor."""
    global _frozen_at_modules
    if os.environ.get("SPARK_REUSE_WORKER") and len(sys.modules) > _frozen_at_modules:
        import gc

        gc.freeze()
        _frozen_at_modules = len(sys.modules)


def _timed(kind: str, started: float, **extra: Any) -> None:
    """A timing line as eoskafka's (``eos_kafka_source.timings``), written here: importing
    the package would put its modules in the floor's workers. Where the floor's reading
    and writing tasks start and end and its commit runs, beside eoskafka's own."""
    path = os.environ.get("EOSKAFKA_TIMINGS")
    if not path:
        return
    line = {"kind": kind, "end": time.time(), "pid": os.getpid(),
            "total": time.perf_counter() - started, "phases": {}, **extra}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _batch(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([None] * n, pa.binary()), pa.array([VALUE] * n, pa.binary())],
        names=["key", "value"])


class FloorReader(DataSourceStreamReader):
    """Rows appear at ``rate`` per second since the query started, like a feeder's; each
    batch is cut into ``parts`` input partitions."""

    def __init__(self, rate: int, parts: int) -> None:
        self.rate, self.parts, self.started = rate, parts, time.time()

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's name
        return {"n": 0}

    def latestOffset(self) -> dict[str, int]:  # noqa: N802
        return {"n": _rows_at(self.started, self.rate)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        _timed("floor_partitions", time.perf_counter())
        lo, hi = start["n"], end["n"]
        step = max(1, -(-(hi - lo) // self.parts))
        return [_Range(a, min(a + step, hi)) for a in range(lo, hi, step)] or [_Range(lo, lo)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        _freeze_imports()
        started = time.perf_counter()
        n = partition.end - partition.start  # type: ignore[attr-defined]
        if n > 0:
            yield _batch(n)
        _timed("floor_read", started)

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorSimpleReader(SimpleDataSourceStreamReader):
    """The same rows, read on the driver's planning worker (Spark caches them for the batch's
    tasks: no executor-side Python reader)."""

    def __init__(self, rate: int) -> None:
        self.rate, self.started = rate, time.time()

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        return {"n": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        end = max(start["n"], _rows_at(self.started, self.rate))
        return self.readBetweenOffsets(start, {"n": end}), {"n": end}

    def readBetweenOffsets(self, start: dict[str, int],  # noqa: N802
                           end: dict[str, int]) -> Iterator[tuple[Any, ...]]:
        return iter([(None, VALUE)] * (end["n"] - start["n"]))

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorWriter(*_ARROW_SINK):  # type: ignore[misc]
    """Counts the Arrow batches it gets; empty commits."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        _freeze_imports()
        started = time.perf_counter()
        for _ in iterator:
            pass
        _timed("floor_task", started)
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        _timed("floor_commit", time.perf_counter(), batch=batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        pass


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "eoskafka_floor"

    def schema(self) -> str:
        return "key binary, value binary"

    def streamReader(self, schema: Any) -> FloorReader:  # noqa: N802
        return FloorReader(int(self.options.get("rate", "20000")),
                           int(self.options.get("partitions", PARTITIONS)))

    def streamWriter(self, schema: Any, overwrite: bool) -> FloorWriter:  # noqa: N802
        started = time.perf_counter()
        _freeze_imports()  # the planning and the commit worker
        frame, commit_worker = sys._getframe(1), False
        while frame is not None and not commit_worker:  # as eoskafka's sink tells them apart
            commit_worker = frame.f_globals.get("__name__", "").endswith(
                "python_streaming_sink_runner")
            frame = frame.f_back  # type: ignore[assignment]
        _timed("floor_stream_writer", started, worker="commit" if commit_worker else "planning")
        return FloorWriter()


class FloorSimpleSource(FloorSource):
    """The simple-reader variant: no ``streamReader``, so Spark takes ``simpleStreamReader``."""

    @classmethod
    def name(cls) -> str:
        return "eoskafka_floor_simple"

    def streamReader(self, schema: Any) -> FloorReader:  # noqa: N802
        from pyspark.errors import PySparkNotImplementedError

        raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED",
                                         messageParameters={"feature": "streamReader"})

    def simpleStreamReader(self, schema: Any) -> FloorSimpleReader:  # noqa: N802
        return FloorSimpleReader(int(self.options.get("rate", "20000")))


def register(spark: Any) -> None:
    spark.dataSource.register(FloorSource)
    spark.dataSource.register(FloorSimpleSource)


def frame(spark: Any, variant: str, rate: int) -> Any:
    """The floor ``variant``'s input at ``rate`` rows per second."""
    fmt, parts = FLOORS[variant]
    if fmt == "rate":
        return (spark.readStream.format("rate").option("rowsPerSecond", rate)
                .option("numPartitions", parts).load()
                .selectExpr("CAST(NULL AS BINARY) AS key",
                            "CAST(lpad(CAST(value AS STRING), 100, 'x') AS BINARY) AS value"))
    return (spark.readStream.format(fmt).option("rate", rate).option("partitions", parts)
            .load())


def start(spark: Any, variant: str, rate: int, trigger: str | None, checkpoint: Path) -> Any:
    """Start the floor ``variant`` at ``rate`` (``trigger``: a processingTime, or None)."""
    sink = "noop" if FLOORS[variant][0] == "rate" else "eoskafka_floor"
    writer = (frame(spark, variant, rate).writeStream.format(sink)
              .option("checkpointLocation", str(checkpoint)))
    if trigger is not None:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def warm(query: Any, batches: int = 3, deadline_s: float = 120) -> None:
    """Wait for the first batches (they start the Python workers: not counted)."""
    deadline = time.monotonic() + deadline_s
    while len(query.recentProgress) < batches and time.monotonic() < deadline:
        if not query.isActive:
            raise RuntimeError(f"the floor query stopped: {query.exception()}")
        time.sleep(0.2)  # polling Spark's progress list; nothing to synchronise on


def _stats(progress: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = sorted(p["durationMs"].get(key, 0) for p in progress)
    if not values:
        return {"median": 0.0, "p90": 0.0}
    return {"median": statistics.median(values),
            "p90": values[min(len(values) - 1, int(len(values) * 0.9))]}


def run(spark: Any, variant: str, rate: int, trigger: str | None, scratch: Path,
        seconds: float) -> dict[str, Any]:
    """One floor query alone: its batches' median and p90 times."""
    query = start(spark, variant, rate, trigger,
                  scratch / f"chk-{len(list(scratch.glob('chk-*')))}")
    try:
        warm(query)
        skip = len(query.recentProgress)
        time.sleep(seconds)  # the measured window: batches come as they come
    finally:
        query.stop()
    progress = [json.loads(p.json) for p in query.recentProgress][skip:]
    out = {"query": variant, "batches": len(progress),
           "rows_per_batch": statistics.mean(p["numInputRows"] for p in progress)
           if progress else 0.0,
           "batch_ms": _stats(progress, "triggerExecution"),
           "add_batch_ms": _stats(progress, "addBatch")}
    print(f"{variant}: {out['batches']} batches, {out['rows_per_batch']:,.0f} rows each, "
          f"batch median {out['batch_ms']['median']:.0f} ms (p90 {out['batch_ms']['p90']:.0f}), "
          f"addBatch median {out['add_batch_ms']['median']:.0f} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency floor",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=20_000, help="rows per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured, per query")
    parser.add_argument("--trigger", default=None,
                        help="a processingTime such as '1 second' (default: Spark's default)")
    parser.add_argument("--variants", default=",".join(FLOORS),
                        help="comma-separated, of: " + "; ".join(FLOORS))
    parser.add_argument("--out", type=Path, default=Path("bench-results/latency-floor.json"))
    parser.add_argument("--installed-pyspark", action="store_true",
                        help="Python workers import the installed pyspark (as the latency "
                             "bench's option of that name)")
    parser.add_argument("--attempts", type=int, default=3,
                        help="starts of a query whose Python worker did not connect back")
    args = parser.parse_args(argv)
    import tempfile

    from pyspark.sql import SparkSession

    from ..common.spark_home import installed_pyspark_home

    scratch = Path(tempfile.mkdtemp(prefix="eoskafka-floor-"))
    if args.installed_pyspark:
        os.environ["SPARK_HOME"] = str(installed_pyspark_home(scratch))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-latency-floor")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .getOrCreate())
    results = []
    try:
        register(spark)
        for variant in args.variants.split(","):
            for attempt in range(args.attempts):
                try:
                    results.append(run(spark, variant, args.rate, args.trigger, scratch,
                                       args.seconds))
                    break
                except RuntimeError as exc:
                    # Spark gives a new Python worker 10 s (hard-coded) to connect back: a
                    # loaded machine's first worker of a query can miss it.
                    if "connect back" not in str(exc) or attempt + 1 == args.attempts:
                        raise
                    print(f"{variant}: a Python worker did not connect back; again",
                          flush=True)
    finally:
        spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rate": args.rate, "trigger": args.trigger,
                                    "uptime": os.popen("uptime").read(), "results": results},
                                   indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
