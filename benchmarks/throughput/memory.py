"""Peak memory of one task writing, then reading, a partition of N records.

Each measure runs in its own Python process (``python -m benchmarks.throughput.memory write|read
BOOTSTRAP TOPIC N``), so its peak RSS (``VmHWM``) is the task's alone: a
:class:`TaskWriter` writes N 100-byte records to a 1-partition topic in one exactly-once
transaction (what one Spark task does in one micro-batch) and the driver protocol commits
it; then ``read_partition`` reads the partition back with read_committed and drops each
Arrow batch. One transaction over the whole partition is the reader's worst case: the
COMMIT marker is at the very end, so the reader's look-ahead queue fills to its bound and
it scans ahead for the marker. Several N show whether memory stays flat as N grows.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from eos_kafka_source.client.config import ClientConfig

from ..common import SINK_BATCH_ROWS, Sizes, client, delete_topic, new_topic, values_array

LIMIT_MB = 300
#: "Flat": the peak at the largest N at most this much above the peak at the smallest.
FLAT_SLACK_MB = 25
#: Distinct input batches the writer cycles through (its input stays ~10 MB however large N).
_DISTINCT_BATCHES = 10


@dataclass
class Measure:
    op: str
    records: int
    seconds: float
    baseline_mb: float
    peak_mb: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    """Peak RSS of this process image. VmHWM resets at exec; ru_maxrss does not (a child
    started from a large parent would report the parent's size), so it is only a fallback."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _input(records: int) -> Iterator[pa.RecordBatch]:
    distinct = [
        pa.RecordBatch.from_arrays([values_array(SINK_BATCH_ROWS, i * SINK_BATCH_ROWS)],
                                   names=["value"])
        for i in range(_DISTINCT_BATCHES)
    ]
    sent = 0
    i = 0
    while sent < records:
        batch = distinct[i % _DISTINCT_BATCHES]
        if records - sent < batch.num_rows:
            batch = batch.slice(0, records - sent)
        yield batch
        sent += batch.num_rows
        i += 1


def _child_write(cfg: ClientConfig, topic: str, records: int) -> tuple[int, float]:
    from .sink import EosSink

    sink = EosSink(cfg, "memory")
    try:
        started = time.perf_counter()
        written = sink.write(topic, _input(records))
        return written, time.perf_counter() - started
    finally:
        sink.close()


def _child_read(cfg: ClientConfig, topic: str) -> tuple[int, float]:
    from eos_kafka_source.source.partition_reader import arrow_schema_of, read_partition
    from eos_kafka_source.source.partitions import KafkaInputPartition
    from eos_kafka_source.source.schema import kafka_schema

    from .source import committed_ranges

    ((_, partition, start, end),) = committed_ranges(cfg, topic)
    schema = arrow_schema_of(kafka_schema(False))
    part = KafkaInputPartition(topic, partition, start, end, cfg, read_committed=True)
    started = time.perf_counter()
    rows = 0
    for batch in read_partition(part, schema):
        rows += batch.num_rows
    return rows, time.perf_counter() - started


def child(argv: list[str]) -> int:
    op, bootstrap, topic, records = argv[0], argv[1], argv[2], int(argv[3])
    cfg = client(bootstrap)
    from eos_kafka_source.source import partition_reader  # noqa: F401 (imported: baseline)

    from . import sink  # noqa: F401

    baseline = _rss_mb()
    if op == "write":
        done, seconds = _child_write(cfg, topic, records)
    elif op == "read":
        done, seconds = _child_read(cfg, topic)
    else:
        raise SystemExit(f"unknown operation {op!r}")
    print(json.dumps({"op": op, "records": done, "seconds": seconds,
                      "baseline_mb": baseline, "peak_mb": _peak_mb()}))
    return 0


def _run_child(op: str, bootstrap: str, topic: str, records: int) -> Measure:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.throughput.memory", op, bootstrap, topic, str(records)],
        capture_output=True, text=True, check=False, timeout=900,
    )
    if out.returncode:
        raise RuntimeError(f"memory {op} of {records:,} records failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    if data["records"] != records:
        raise RuntimeError(f"memory {op}: handled {data['records']:,} of {records:,} records")
    return Measure(op, data["records"], data["seconds"], data["baseline_mb"], data["peak_mb"])


def bench(cfg: ClientConfig, sizes: Sizes) -> list[Measure]:
    bootstrap = ",".join(cfg.bootstrap_servers)
    out: list[Measure] = []
    for records in sizes.memory_records:
        topic = new_topic(cfg, "memory", 1)
        try:
            for op in ("write", "read"):
                m = _run_child(op, bootstrap, topic, records)
                print(f"  peak memory, one task, {op} {records:,} records: {m.peak_mb:.0f} MB RSS "
                      f"(at start {m.baseline_mb:.0f} MB), {m.rate / 1e3:,.0f}k records/s",
                      flush=True)
                out.append(m)
        finally:
            delete_topic(cfg, topic)
    return out


def verdicts(measures: list[Measure]) -> dict[str, dict[str, Any]]:
    """Per operation: the largest peak, its growth over the smallest N, and pass/miss."""
    out: dict[str, dict[str, Any]] = {}
    for op in ("read", "write"):
        ms = sorted((m for m in measures if m.op == op), key=lambda m: m.records)
        if not ms:
            continue
        growth = ms[-1].peak_mb - ms[0].peak_mb
        peak = max(m.peak_mb for m in ms)
        out[op] = {"peak_mb": peak, "growth_mb": growth, "records": ms[-1].records,
                   "ok": peak <= LIMIT_MB and growth <= FLAT_SLACK_MB}
    return out


if __name__ == "__main__":
    raise SystemExit(child(sys.argv[1:]))
