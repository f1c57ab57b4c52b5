"""The per-batch floor of Spark's Python data source, with no Kafka at all.

The latency benchmark finds eoskafka's micro-batches 3× longer than Spark's connector's,
with the driver commit a few % of it. How much of a batch does Spark spend on a Python
data source, whatever it does? Two queries on the same ``local[2]`` session, the same
4 partitions and rows per second, no broker:

- **JVM floor**: Spark's ``rate`` source → ``noop`` sink (no Python anywhere);
- **Python floor**: a Python streaming source that yields one Arrow batch of 100-byte
  values per partition → a Python Arrow sink that counts them, with empty commits:
  the Python workers, the pickled reader and writer, the Arrow hand-over, nothing else.

Prints and returns the median and p90 of ``triggerExecution`` and ``addBatch`` per query.

    python -m benchmarks.latency floor [--rate 20000] [--seconds 30]
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
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)

PARTITIONS = 4
VALUE = b"x" * 100


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class FloorReader(DataSourceStreamReader):
    """Rows appear at ``rate`` per second since the query started, like a feeder's."""

    def __init__(self, rate: int) -> None:
        self.rate, self.started = rate, time.time()

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's name
        return {"n": 0}

    def latestOffset(self) -> dict[str, int]:  # noqa: N802
        return {"n": int((time.time() - self.started) * self.rate)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        lo, hi = start["n"], end["n"]
        step = max(1, -(-(hi - lo) // PARTITIONS))
        return [_Range(a, min(a + step, hi)) for a in range(lo, hi, step)] or [_Range(lo, lo)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        n = partition.end - partition.start  # type: ignore[attr-defined]
        if n > 0:
            yield pa.RecordBatch.from_arrays(
                [pa.array([None] * n, pa.binary()), pa.array([VALUE] * n, pa.binary())],
                names=["key", "value"])

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorWriter(DataSourceStreamWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        pass


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "eoskafka_floor"

    def schema(self) -> str:
        return "key binary, value binary"

    def streamReader(self, schema: Any) -> FloorReader:  # noqa: N802
        return FloorReader(int(self.options.get("rate", "20000")))

    def streamWriter(self, schema: Any, overwrite: bool) -> FloorWriter:  # noqa: N802
        return FloorWriter()


def _stats(progress: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = sorted(p["durationMs"].get(key, 0) for p in progress)
    if not values:
        return {"median": 0.0, "p90": 0.0}
    return {"median": statistics.median(values),
            "p90": values[min(len(values) - 1, int(len(values) * 0.9))]}


def run(name: str, frame: Any, sink: str, scratch: Path, seconds: float) -> dict[str, Any]:
    query = (frame.writeStream.format(sink)
             .option("checkpointLocation", str(scratch / f"chk-{name.replace(' ', '-')}"))
             .start())
    try:
        warm = time.monotonic() + 60
        while len(query.recentProgress) < 3 and time.monotonic() < warm:
            time.sleep(0.2)  # the first batches start the Python workers: not counted
        skip = len(query.recentProgress)
        time.sleep(seconds)
    finally:
        query.stop()
    progress = [json.loads(p.json) for p in query.recentProgress][skip:]
    out = {"query": name, "batches": len(progress),
           "rows_per_batch": statistics.mean(p["numInputRows"] for p in progress)
           if progress else 0.0,
           "batch_ms": _stats(progress, "triggerExecution"),
           "add_batch_ms": _stats(progress, "addBatch")}
    print(f"{name}: {out['batches']} batches, {out['rows_per_batch']:,.0f} rows each, "
          f"batch median {out['batch_ms']['median']:.0f} ms (p90 {out['batch_ms']['p90']:.0f}), "
          f"addBatch median {out['add_batch_ms']['median']:.0f} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency floor",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=20_000, help="rows per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured, per query")
    parser.add_argument("--out", type=Path, default=Path("bench-results/latency-floor.json"))
    args = parser.parse_args(argv)
    import tempfile

    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("eoskafka-latency-floor")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .getOrCreate())
    scratch = Path(tempfile.mkdtemp(prefix="eoskafka-floor-"))
    try:
        spark.dataSource.register(FloorSource)
        rate = (spark.readStream.format("rate").option("rowsPerSecond", args.rate)
                .option("numPartitions", PARTITIONS).load()
                .selectExpr("CAST(NULL AS BINARY) AS key",
                            "CAST(lpad(CAST(value AS STRING), 100, 'x') AS BINARY) AS value"))
        python = (spark.readStream.format("eoskafka_floor").option("rate", args.rate).load())
        results = [run("JVM floor: rate -> noop", rate, "noop", scratch, args.seconds),
                   run("Python floor: Python source -> Python sink", python,
                       "eoskafka_floor", scratch, args.seconds)]
    finally:
        spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rate": args.rate, "uptime": os.popen("uptime").read(),
                                    "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
